#!/usr/bin/env bash
# The tuner's reference spaces on an nvidia-h200-x2 machine, one series per GPU, in one device call:
#   GPU 0: gemm's leading configurations measured again (space.py --remeasure: within 85% of the table's
#          best, 5 rounds; the replay's reference), then the rest of the softmax space of today's template
#          (it resumes experiments/tune/h200/from-bad-start-model/space-softmax-new-kernel-partial.json),
#          then rmsnorm's whole space;
#   GPU 1: kgit tune softmax from its worst start with a target above the space's best
#          (benchmarks/device/tune_from_h200.sh), then layernorm's whole space.
#     bash benchmarks/device/tune_spaces_h200x2.sh [SECONDS]
# Every series stops at SECONDS (default 540); the space tables resume where they stopped.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
res=/tmp/res; mkdir -p "$res"  # tarred into $OUT at the end: $OUT takes 8 files
if [ -d .whl ]; then  # scipy (and, at the time, scikit-learn) for the model search, carried as wheels
  pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
budget=${1:-540}
left() { echo $((budget - SECONDS)); }
space() {  # space KERNEL TEST_ARGS...: the whole space, resumed from $res/space-KERNEL.json
  local kernel=$1; shift
  timeout "$(left)" python3 benchmarks/tune/space.py skills/kernels/"$kernel"/test_*.py \
    --json "$res/space-$kernel.json" --jobs 12 -- "$@" >> "$res/space-$kernel.log" 2>&1
  tail -2 "$res/space-$kernel.log"
}
cp experiments/tune/h200/from-bad-start-model/space-softmax-new-kernel-partial.json "$res/space-softmax.json"
(
  export CUDA_VISIBLE_DEVICES=0
  timeout "$(left)" python3 benchmarks/tune/space.py skills/kernels/gemm/test_gemm.py \
    --remeasure experiments/tune/h200/space-gemm.json --within 0.85 --repeats 5 --jobs 12 \
    --json "$res/remeasured-gemm.json" -- --quick > "$res/remeasured-gemm.log" 2>&1
  tail -2 "$res/remeasured-gemm.log"
  space softmax --quick --no-torch
  space rmsnorm --quick --no-torch
) > "$res/gpu0.log" 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=1
  OUT=$res TARGET_VALUE=4000 timeout "$(left)" bash benchmarks/device/tune_from_h200.sh softmax \
    '{"BLOCK_SIZE": 32768, "num_warps": 4, "num_stages": 1, "PERSISTENT": 1}' --quick --no-torch
  space layernorm --quick --no-torch
) > "$res/gpu1.log" 2>&1 &
wait
cat "$res/gpu0.log" "$res/gpu1.log"
tar -czf "$OUT/tune-spaces.tgz" -C "$res" .
