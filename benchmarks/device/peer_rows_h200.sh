#!/usr/bin/env bash
# Softmax, rmsnorm and layernorm against the simplest one-program-per-row kernel at every row length
# of their sweeps up to 32768, every dtype, in one process (benchmarks/peer_rows.py).
#     bash benchmarks/device/peer_rows_h200.sh
# $OUT: peer-rows.log and peer_rows.json, gpu.csv.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv > "$OUT/gpu.csv"
timeout 300 python3 benchmarks/peer_rows.py --out "$OUT" > "$OUT/peer-rows.log" 2>&1
echo "exit $?" >> "$OUT/peer-rows.log"
cat "$OUT/peer-rows.log"
