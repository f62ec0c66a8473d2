#!/usr/bin/env bash
# Issue 15's second exploration, one device call on two H200s: today's long-row paths (the split team
# now keeping its rows in the storage dtype) against run 1's leading streamed kernels
# (benchmarks/explore/long_rows.py) on GPU 1; cross-entropy and layernorm tile configurations
# (benchmarks/explore/memory_configs.py) and GEMM per size with host descriptors
# (benchmarks/explore/gemm_sizes.py) on GPU 0.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/explore2"
LIMIT=${LIMIT:-300}
CUDA_VISIBLE_DEVICES=1 timeout "$LIMIT" python3 benchmarks/explore/long_rows.py --out "$OUT/explore2" \
  > "$OUT/explore2/long_rows.log" 2>&1 &
( CUDA_VISIBLE_DEVICES=0 timeout "$LIMIT" python3 benchmarks/explore/memory_configs.py \
    --kernels cross-entropy,layernorm --json "$OUT/explore2/memory_configs.json" > "$OUT/explore2/memory_configs.log" 2>&1
  CUDA_VISIBLE_DEVICES=0 timeout "$LIMIT" python3 benchmarks/explore/gemm_sizes.py --out "$OUT/explore2" \
    > "$OUT/explore2/gemm_sizes.log" 2>&1 )
wait
tail -n 3 "$OUT"/explore2/*.log
tar -C "$OUT" -czf "$OUT/explore2.tgz" explore2 && rm -rf "$OUT/explore2"
