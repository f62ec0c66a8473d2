#!/usr/bin/env bash
# GEMM at a decode-sized M and a ragged shape against cuBLAS, with the host's time of a call, on one H100
# (benchmarks/gemm_paths.py says what it prints; experiments/gemm-h100/small-m-host/ what it found):
#     bash benchmarks/device/gemm_paths_h100.sh
# $OUT/gemm_paths.txt holds its output, $OUT/gpu.txt the GPU's clocks before it. About 30 s.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv 2>/dev/null | tee "$OUT/gpu.txt"
timeout 150 python3 benchmarks/gemm_paths.py 2>&1 | tee "$OUT/gemm_paths.txt"
