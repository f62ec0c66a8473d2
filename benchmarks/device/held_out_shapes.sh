#!/usr/bin/env bash
# Softmax, layernorm, cross-entropy and rotary (or the KERNELS named: "gemm flash-attention fused-moe" for
# the compute-bound ones) on the shapes of benchmarks/shapes.py (public model configurations), tune half and
# held-out half apart, in one process per kernel: the old kernel file (from git, OLD_REV, default main)
# against this checkout's and torch, beside the measured device-copy bandwidth or in TFLOP/s beside cuBLAS,
# SDPA and a dense GEMM pair (benchmarks/held_out_bench.py says how it times and checks). On one H100, within
# BUDGET seconds (default 330: each kernel gets an equal share of what is left, and skips the shapes past it):
#     bash benchmarks/device/held_out_shapes.sh
#     KERNELS="gemm flash-attention fused-moe" bash benchmarks/device/held_out_shapes.sh
# OLD_DIR=dir takes the old kernel files from dir/<kernel>.py instead of git. $OUT/<kernel>.txt holds each
# kernel's tables, $OUT/<kernel>.jsonl its rows. On a CPU, HELD_OUT_TINY=1 TRITON_INTERPRET=1 runs the same
# code on two rows a shape (a check of the script, not a measurement).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
budget=${BUDGET:-330}
read -r -a kernels <<< "${KERNELS:-softmax layernorm cross-entropy rotary-embedding}"
old=$(mktemp -d)
for k in "${kernels[@]}"; do
  if [ -n "${OLD_DIR:-}" ]; then
    cp "$OLD_DIR/$k.py" "$old/$k.py" || exit 1
  # an OLD_REV from before kernel files were named for their kernel has it as triton_template.py
  elif ! git show "${OLD_REV:-main}:skills/kernels/$k/${k//-/_}.py" > "$old/$k.py" 2>/dev/null &&
       ! git show "${OLD_REV:-main}:skills/kernels/$k/triton_template.py" > "$old/$k.py"; then
    echo "no old $k kernel file: set OLD_REV to a commit this checkout has, or OLD_DIR" >&2; exit 1
  fi
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>/dev/null | tee "$OUT/gpu.txt"
start=$SECONDS
status=0
for i in "${!kernels[@]}"; do
  k=${kernels[$i]}
  share=$(( (budget - (SECONDS - start)) / (${#kernels[@]} - i) ))
  [ "$share" -gt 10 ] || { echo "$k: no time left" | tee "$OUT/$k.txt"; continue; }
  HELD_OUT_DEADLINE=$(( $(date +%s) + share )) timeout $((share + 60)) \
    "$PYTHON" benchmarks/held_out_bench.py "$k" "$old/$k.py" --json "$OUT/$k.jsonl" 2>&1 | tee "$OUT/$k.txt"
  rc=${PIPESTATUS[0]}
  echo "$k: exit $rc after $((SECONDS - start)) s" | tee -a "$OUT/$k.txt"
  [ "$rc" -eq 0 ] || status=1
done
rm -rf "$old"
exit $status
