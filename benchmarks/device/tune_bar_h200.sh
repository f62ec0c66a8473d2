#!/usr/bin/env bash
# The tune bar for one kernel, in one call of the device tool:
#     bash benchmarks/device/tune_bar_h200.sh KERNEL SPACE_SECONDS [TEST_ARGS...]
#   1. every configuration of the template's CONFIG_SPACE, measured with the test's own objective
#      (benchmarks/tune/space.py, 14 processes compile first); it resumes from
#      experiments/tune/h200/space-KERNEL.json when that is committed, and stops after SPACE_SECONDS;
#   2. when the space is complete: kgit tune KERNEL from the shipped CONFIG, at most 8 iterations, with
#      the same test arguments (kgit.yaml test_args), then the bar (>= 97% of the space's best) and the
#      search replayed from every configuration (benchmarks/tune/replay.py).
# $OUT gets space-KERNEL.json and .log, and KERNEL.tgz (the tune's JSON and log, kgit log, the bar, the
# replay and a git bundle of the records).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
kernel=$1; seconds=$2; shift 2
test_args=("$@")
saved=experiments/tune/h200/space-$kernel.json
[ -f "$saved" ] && cp "$saved" "$OUT/space-$kernel.json"
source "$(dirname "$0")/scratch.sh"
yaml_args=$(IFS=,; echo "${test_args[*]}")
scratch_repo /tmp/t "$(printf '%s:\n  max_iterations: 8\n  test_args: [%s]\n' "$kernel" "$yaml_args")"
test_path=$(ls skills/kernels/"$kernel"/test_*.py)

timeout "$seconds" python3 benchmarks/tune/space.py "$test_path" --json "$OUT/space-$kernel.json" --jobs 14 \
  -- "${test_args[@]}" >> "$OUT/space-$kernel.log" 2>&1
tail -3 "$OUT/space-$kernel.log"
python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); sys.exit(t["configurations"] < t["space_size"])' \
  "$OUT/space-$kernel.json" || { echo "space not complete: run again to resume"; exit 0; }

res=/tmp/res; mkdir -p "$res"
python3 -m kgit tune "$kernel" --json > "$res/tune.json" 2> "$res/tune.log"
python3 -m kgit log > "$res/log.txt" 2>&1
python3 - "$OUT/space-$kernel.json" "$res/tune.json" "skills/kernels/$kernel/${kernel//-/_}.py" <<'PY' | tee "$res/bar.txt"
import json, sys
from kgit import tune
space, run = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
path = sys.argv[3]
best = space["best"]
final = tune.read_tunables(open(path).read(), path).config
row = next((r for r in space["rows"] if r["config"] == final), None)
steps = len(run["iterations"]) - 1
print(f"space: {space['correct']} of {space['configurations']} configurations correct; best {best['value']:.5g} "
      f"at {tune.describe_change(space['shipped']['config'], best['config'])} from the shipped CONFIG, "
      f"which measured {space['shipped']['value']}")
print(f"kgit tune: {run['best']['value']:.5g} after {steps} iterations ({run['stop_reason']}): "
      f"{100 * run['best']['value'] / best['value']:.1f}% of the space's best (bar: >= 97% in <= 8 iterations)")
if row:
    print(f"its configuration in the space's table: {row['value']:.5g}, {100 * row['value'] / best['value']:.1f}% of the best")
PY
python3 benchmarks/tune/replay.py "$OUT/space-$kernel.json" | tee "$res/replay.txt"
git bundle create "$res/records.bundle" "opt/$kernel" "best/$kernel" refs/notes/kgit \
  $(git for-each-ref --format='%(refname)' refs/kgit/attempts) 2>> "$res/tune.log"
tar czf "$OUT/$kernel.tgz" -C "$res" .
