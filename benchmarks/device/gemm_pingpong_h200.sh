#!/usr/bin/env bash
# Issue 15, session 29: GEMM at 4096^3 trails cuBLAS by 0.6-0.9% (experiments/sweep-h200-session28/). Times
# gluon_gemm.py's ping-pong consumers (pp2x4_*: each consumer warpgroup a whole tile in turn, its epilogue under
# the other's mainloop) and cuBLAS's own 256x128 cooperative tile against the cooperative 128x256 Gluon kernel,
# the template and cuBLAS, twice (the second pass in another order of variants), then layernorm's fp32 split-team
# register variants (layernorm_split_registers.py, never run on a GPU before).
#     bash benchmarks/device/gemm_pingpong_h200.sh
# $OUT: pingpong-1.log/.json, pingpong-2.log/.json, layernorm-split.log/.json.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv > "$OUT/gpu.csv"
ours=ws2x4_128x256_s4e,ws2x4_256x128_s4e,pp2x4_128x128_s5,pp2x4_128x128_s6e,pp2x4_64x256_s4e
reversed=pp2x4_64x256_s4e,pp2x4_128x128_s6e,pp2x4_128x128_s5,ws2x4_256x128_s4e,ws2x4_128x256_s4e
timeout 200 python3 benchmarks/explore/gluon_gemm.py --out /tmp/pp1 --variants "$ours" \
  --sizes 4096,8192,2048,3000x2000x1000 --budget-s 150 --hang-s 40 > "$OUT/pingpong-1.log" 2>&1
cp /tmp/pp1/gluon_gemm.json "$OUT/pingpong-1.json"
timeout 100 python3 benchmarks/explore/gluon_gemm.py --out /tmp/pp2 --variants "$reversed" \
  --sizes 4096 --budget-s 60 --hang-s 40 > "$OUT/pingpong-2.log" 2>&1
cp /tmp/pp2/gluon_gemm.json "$OUT/pingpong-2.json"
timeout 170 python3 benchmarks/explore/layernorm_split_registers.py --out /tmp/ln --budget-s 140 \
  > "$OUT/layernorm-split.log" 2>&1
cp /tmp/ln/*.json "$OUT/" 2>/dev/null
tail -n 12 "$OUT/pingpong-1.log" "$OUT/pingpong-2.log"; tail -n 20 "$OUT/layernorm-split.log"
