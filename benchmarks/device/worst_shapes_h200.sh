#!/usr/bin/env bash
# Issue 15: an Nsight Compute profile of each bundled kernel at its worst shape of the H200 sweep
# (experiments/sweep-h200/), with torch's version of the same work in the same profile:
#     bash benchmarks/device/worst_shapes_h200.sh [SECONDS]
# SHAPES="softmax 512x262144 bf16<newline>..." profiles those instead of the list below.
# $OUT/worst-shapes.tgz holds one ncu text report per kernel (speed of light, memory, occupancy, launch,
# warp states, the compute pipes) and index.txt. Clocks are left alone (--clock-control none).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
res=/tmp/worst; mkdir -p "$res"
budget=${1:-400}
left() { echo $((budget - SECONDS)); }
while read -r kernel shape dtype; do
  [ "$(left)" -gt 10 ] || { echo "$kernel: no time left" >> "$res/index.txt"; continue; }
  report="$res/$kernel-${shape// /_}-$dtype.txt"
  timeout "$(left)" ncu --clock-control none --nvtx --nvtx-include "profiled/" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section WarpStateStats --section ComputeWorkloadAnalysis \
    python3 benchmarks/explore/profile_shape.py skills/kernels/"$kernel"/test_*.py "${shape//_/ }" "$dtype" --torch \
    > "$report" 2>&1
  echo "$kernel ${shape//_/ } $dtype: exit $?, $(grep -c '^  [^ ]' "$report") kernels profiled" >> "$res/index.txt"
done <<< "${SHAPES:-$(cat <<'LIST'
softmax 512x262144 bf16
layernorm 512x262144 bf16
rmsnorm 512x262144 bf16
cross-entropy 131072x1024 bf16
rotary-embedding 16384x64x128 fp16
gemm 1024x1024x1024 bf16
flash-attention B4_H16_S4096_D128 bf16
fused-moe T4096_E8_top2_H4096_I14336 bf16
LIST
)}"
cat "$res/index.txt"
tar -czf "$OUT/worst-shapes.tgz" -C "$res" .
