# Sourced by the device scripts. The device gets a copy of the working tree, not its history: each run
# makes a fresh repository of it in a scratch folder, so the loop's branches, tags and notes stay there.
scratch_repo() {  # scratch_repo DIR [KGIT_YAML_TEXT]: run from the tree's root; leaves you in DIR
  rm -rf "$1" && mkdir -p "$1" && tar --exclude=./.git --exclude=./.stage -cf - . | tar -xf - -C "$1"
  cd "$1" || exit 1
  if [ -n "${2:-}" ]; then printf '%s' "$2" > kgit.yaml; fi
  git init -q -b main && git config user.name "kgit on $(hostname)" && git config user.email kgit@device.invalid
  git add -A && git commit -qm "snapshot of the kgit checkout"
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # and what the call installed beside (wheels under --target)
}
