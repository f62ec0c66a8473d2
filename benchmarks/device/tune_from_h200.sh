#!/usr/bin/env bash
# kgit tune from a starting configuration other than the shipped one, to check what
# benchmarks/tune/replay.py predicted for it from the measured space:
#     bash benchmarks/device/tune_from_h200.sh KERNEL '{"BLOCK_SIZE": 8192}' [TEST_ARGS...]
# writes $OUT/from-KERNEL.json (kgit tune --json), $OUT/from-KERNEL.txt (the start, kgit log) and
# $OUT/log-KERNEL.json (kgit log --json).
# TARGET_VALUE=4000 sets kgit.yaml's target_value: above the space's best, so that the loop does not stop
# on the target it would propose (90% of the copy bandwidth) before the search has had its 8 iterations.
# MAX_ITERATIONS (default 8) bounds the run; TUNE_SECONDS (default none) stops kgit tune after that long,
# and kgit log still prints what was recorded (a softmax iteration takes about 50 s on the H200).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
kernel=$1; start=$2; shift 2
yaml_args=$(IFS=,; echo "$*")
source "$(dirname "$0")/scratch.sh"
scratch_repo "/tmp/from-$kernel" "$(printf '%s:\n  max_iterations: %s\n  test_args: [%s]\n%s' "$kernel" "${MAX_ITERATIONS:-8}" "$yaml_args" \
  "${TARGET_VALUE:+  target_value: $TARGET_VALUE$'\n'}")"
path=skills/kernels/$kernel/${kernel//-/_}.py
python3 - "$path" "$start" <<'PY'
import json, sys
from kgit.loop import tune
path, start = sys.argv[1], json.loads(sys.argv[2])
source = open(path).read()
config = {**tune.read_tunables(source, path).config, **start}
open(path, "w").write(tune.write_config(source, path, config))
print(f"start: {config}")
PY
git commit -qam "start from $start" && {
  echo "start: $start"
  timeout "${TUNE_SECONDS:-0}" python3 -m kgit tune "$kernel" --json > "$OUT/from-$kernel.json" 2> "/tmp/from-$kernel.log"
  tail -3 "/tmp/from-$kernel.log"
  python3 -m kgit log
} > "$OUT/from-$kernel.txt" 2>&1
python3 -m kgit log --json > "$OUT/log-$kernel.json" 2>&1  # every recorded iteration, also after TUNE_SECONDS
cat "$OUT/from-$kernel.txt"
