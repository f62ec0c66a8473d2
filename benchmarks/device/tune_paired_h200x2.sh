#!/usr/bin/env bash
# kgit tune softmax, 8 iterations, with the decisions of today (paired re-measurement) on GPU 1 and with
# those before them (one run of the candidate against the best's recorded figure; kgit at e0a731c,
# copied into .old-kgit/ by `git archive e0a731c | tar -x -C .old-kgit` and carried) on GPU 0, both at
# once, each in its own scratch repository with its own kernels: wall time and test runs per decision.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SRC=$PWD
source "$(dirname "$0")/scratch.sh"
yaml=$'softmax:\n  max_iterations: 8\n  test_args: [--quick, --no-torch]\n'
tune() {  # tune NAME TREE GPU
  cd "$1" && scratch_repo "/tmp/tune-$2" "$yaml" >/dev/null
  export CUDA_VISIBLE_DEVICES=$3
  local t0=$SECONDS
  python3 -m kgit start softmax > /dev/null 2> "$OUT/$2.log"
  python3 -m kgit tune softmax --json > "$OUT/$2.json" 2>> "$OUT/$2.log"
  echo "$2: start and tune, $((SECONDS - t0)) s" > "$OUT/$2.wall"
  python3 -m kgit log > "$OUT/$2-log.txt" 2>&1
}
(tune "$SRC/.old-kgit" before 0) &
(tune "$SRC" paired 1) &
wait
cat "$OUT"/*.wall
