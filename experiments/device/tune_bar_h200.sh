#!/usr/bin/env bash
# Issue 6's bar for softmax, in one device call (not run yet: this session's device time ran out).
#   1. every configuration of the softmax template's CONFIG_SPACE (120), measured with the test's
#      --quick objective: experiments/tune/space.py
#   2. kgit tune softmax from the shipped CONFIG, at most 8 iterations, with the same objective
#      (kgit.yaml: test_args [--quick])
# and prints kgit tune's best as a fraction of the space's best (the bar: >= 0.97).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source "$(dirname "$0")/scratch.sh"
scratch_repo /tmp/t "$(printf 'softmax:\n  max_iterations: 8\n  test_args: [--quick]\n')"
python3 experiments/tune/space.py skills/kernels/softmax/test_softmax.py --quick --json "$OUT/space.json" > "$OUT/space.log" 2>&1
python3 -m kgit tune softmax --json > "$OUT/tune.json" 2> "$OUT/tune.log"
python3 -m kgit log > "$OUT/log.txt" 2>&1
python3 - "$OUT/space.json" "$OUT/tune.json" <<'PY' | tee "$OUT/bar.txt"
import json, sys
space, tune = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
best_space, best_tune = space["best"]["gbps"], tune["best"]["value"]
steps = len(tune["iterations"]) - 1
print(f"space: {space['correct']} of {space['configurations']} configurations correct; best {best_space} GB/s "
      f"at {space['best']['config']}; shipped {space['shipped']['gbps'] if space['shipped'] else None}")
print(f"kgit tune: {best_tune} GB/s after {steps} iterations ({tune['stop_reason']}): "
      f"{100 * best_tune / best_space:.1f}% of the space's best (bar: >= 97% in <= 8 iterations)")
PY
