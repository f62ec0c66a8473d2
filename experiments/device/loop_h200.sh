#!/usr/bin/env bash
# The core loop on a real GPU, in one call of the device tool (see ../shared/GPU.md):
#   kgit start softmax, kgit tune softmax for a few iterations (kept and reverted ones), then two steps
#   that change nothing but a comment (the same kernel measured again: must never count as a gain).
# Runs in a scratch repository so that the loop's branches, tags and notes stay out of the checkout;
# writes the rendered log, the JSON outputs and a git bundle of the records to $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# The device gets a copy of the working tree, not its history: make a fresh repository of it.
rm -rf /tmp/w && mkdir -p /tmp/w && tar --exclude=./.git --exclude=./.stage -cf - . | tar -xf - -C /tmp/w
cd /tmp/w || exit 1
git init -q -b main && git config user.name "kgit on $(hostname)" && git config user.email kgit@device.invalid
git add -A && git commit -qm "snapshot of the kgit checkout"
export PYTHONPATH=$PWD
kgit() { python3 -m kgit "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/smi.txt" 2>&1

kgit tune softmax --max-iterations "${TUNE_ITERATIONS:-3}" --json > "$OUT/tune.json" 2> "$OUT/tune.log"
echo "tune exit $?" >> "$OUT/tune.log"
for i in 1 2; do  # the same kernel again: only a comment changes
  echo "# remeasure $i: the kernel is unchanged" >> skills/kernels/softmax/triton_template.py
  kgit step -m "unchanged kernel, measured again ($i)" --max-iterations 10 --json >> "$OUT/remeasure.json" 2>> "$OUT/tune.log"
done
{ kgit log; echo; kgit best; echo; kgit status; } > "$OUT/summary.txt" 2>&1
cp experiments/README.md "$OUT/README.md"
git bundle create "$OUT/records.bundle" opt/softmax best/softmax refs/notes/kgit $(git for-each-ref --format='%(refname)' refs/kgit/attempts) 2>> "$OUT/tune.log"
cat "$OUT/summary.txt"
