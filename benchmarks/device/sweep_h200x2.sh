#!/usr/bin/env bash
# Every kernel's sweep beside torch and the copy bandwidth (benchmarks/sweep.py), in one device call on
# two H200s: the memory-bound kernels on GPU 1, the compute-bound ones on GPU 0, each kernel under its
# own timeout so that one slow kernel cannot cost the others. Results under $OUT/sweep/<kernel>/
# (sweep.md, sweep.json), brought back as one archive.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/sweep"
EACH=${EACH:-150}
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv \
  > "$OUT/sweep/gpus.csv" 2>&1
run_group() {  # GPU kernel...
  local gpu=$1; shift
  for k in "$@"; do
    CUDA_VISIBLE_DEVICES=$gpu timeout "$EACH" python3 benchmarks/sweep.py --kernels "$k" --out "$OUT/sweep/$k" \
      > "$OUT/sweep/$k.log" 2>&1 || echo "$k: exit $?" >> "$OUT/sweep/failures.txt"
  done
}
run_group 1 ${MEMORY:-softmax rmsnorm layernorm cross-entropy rotary-embedding} &
run_group 0 ${COMPUTE:-gemm flash-attention fused-moe}
wait
cat "$OUT/sweep/failures.txt" 2>/dev/null
tar -C "$OUT" -czf "$OUT/sweep.tgz" sweep && rm -rf "$OUT/sweep"
