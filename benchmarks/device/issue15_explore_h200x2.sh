#!/usr/bin/env bash
# Issue 15's exploration, one device call on two H200s: the streamed two-pass kernel against today's
# long-row paths (benchmarks/explore/long_rows.py) on GPU 1, GEMM tiles and descriptor kinds per size
# (benchmarks/explore/gemm_sizes.py) on GPU 0, side by side. Each under its own timeout, its log kept
# line by line, so a slow half still brings back what it measured.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/explore"
LIMIT=${LIMIT:-480}
nvidia-smi -L > "$OUT/explore/gpus.txt" 2>&1
CUDA_VISIBLE_DEVICES=1 timeout "$LIMIT" python3 benchmarks/explore/long_rows.py --out "$OUT/explore" \
  > "$OUT/explore/long_rows.log" 2>&1 &
CUDA_VISIBLE_DEVICES=0 timeout "$LIMIT" python3 benchmarks/explore/gemm_sizes.py --out "$OUT/explore" \
  > "$OUT/explore/gemm_sizes.log" 2>&1
wait
tail -n 3 "$OUT/explore/long_rows.log" "$OUT/explore/gemm_sizes.log"
tar -C "$OUT" -czf "$OUT/explore.tgz" explore && rm -rf "$OUT/explore"
