#!/usr/bin/env bash
# An Nsight Compute profile of each bundled kernel at its worst shape of the H200 sweep
# (experiments/sweep-h200/: lowest % of copy or ratio to torch, or nearest its bar; the "ran"
# column's configuration set where an autotune picks), with torch's version of the same work in the
# same profile (the fused MoE's: experiments/fused-moe-h200/ncu/):
#     bash benchmarks/device/worst_shapes_h200.sh [SECONDS]
# SHAPES="softmax 512x262144 bf16<newline>..." profiles those instead of the list below; a line may end
# with profile_shape.py's --set options, to profile the configuration the sweep ran ("ran" column).
# $OUT/worst-shapes.tgz holds one ncu text report per kernel (speed of light, memory, occupancy, launch,
# warp states, the compute pipes) and index.txt. Clocks are left alone (--clock-control none).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
res=/tmp/worst; mkdir -p "$res"
budget=${1:-400}
left() { echo $((budget - SECONDS)); }
while read -r kernel shape dtype sets; do
  [ "$(left)" -gt 10 ] || { echo "$kernel: no time left" >> "$res/index.txt"; continue; }
  report="$res/$kernel-$shape-$dtype.txt"
  timeout "$(left)" ncu --clock-control none --nvtx --nvtx-include "profiled/" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section WarpStateStats --section ComputeWorkloadAnalysis \
    python3 benchmarks/profile_shape.py skills/kernels/"$kernel"/test_*.py "${shape//_/ }" "$dtype" --torch ${sets:-} \
    > "$report" 2>&1
  echo "$kernel ${shape//_/ } $dtype ${sets:-}: exit $?, $(grep -c '^  [^ ]' "$report") kernels profiled" >> "$res/index.txt"
done <<< "${SHAPES:-$(cat <<'LIST'
gemm 1024x1024x1024 bf16 --set AUTOTUNE=0 --set GLUON=1 --set BLOCK_M=64 --set BLOCK_N=128 --set num_warps=4 --set num_stages=8 --set PERSISTENT=0
gemm 4096x4096x4096 fp16 --set AUTOTUNE=0 --set GROUP_M=4 --set num_stages=4 --set EPILOGUE_SUBTILE=1
flash-attention B8_H32_S2048_D64 bf16 --set AUTOTUNE=0 --set BLOCK_M=192 --set GLUON=3
layernorm 512x262144 fp32
layernorm 512x262144 bf16
softmax 512x262144 fp32
rmsnorm 2048x65536 bf16
cross-entropy 2048x65536 bf16
rotary-embedding 16384x64x128 bf16
LIST
)}"
cat "$res/index.txt"
tar -czf "$OUT/worst-shapes.tgz" -C "$res" .
