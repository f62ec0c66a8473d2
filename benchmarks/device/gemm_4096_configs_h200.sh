#!/usr/bin/env bash
# Issue 15, session 29: GEMM at 4096^3, the template's CONFIG beside its neighbours (GROUP_M, stages, the
# flattened loop) and cuBLAS, alternated in one process (benchmarks/explore/gemm_4096_configs.py).
#     bash benchmarks/device/gemm_4096_configs_h200.sh [gemm_4096_configs.py options]
# $OUT: gemm-4096-configs.log and gemm_4096_configs.json, gpu.csv.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv > "$OUT/gpu.csv"
timeout 400 python3 benchmarks/explore/gemm_4096_configs.py --out "$OUT" "$@" > "$OUT/gemm-4096-configs.log" 2>&1
echo "exit $?" >> "$OUT/gemm-4096-configs.log"
cat "$OUT/gemm-4096-configs.log"
