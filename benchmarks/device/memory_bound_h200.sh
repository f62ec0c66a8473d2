#!/bin/bash
# One device call: precompile + check every kernel in parallel (fills Triton's
# cache), then the timed sweep in one process, then an optional CONFIG
# exploration. Usage (on the GPU machine, repo root): bash benchmarks/device/memory_bound_h200.sh OUTDIR [explore]
set -u
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/smi.txt"
t0=$(date +%s)
for t in softmax/test_softmax layernorm/test_layernorm rmsnorm/test_rmsnorm cross-entropy/test_cross_entropy rotary-embedding/test_rotary_embedding; do
  timeout 150 python3 skills/kernels/$t.py --json --check-only > "$OUT/check_$(basename $t).log" 2>&1 &
done
if [ "${2:-}" = "explore" ]; then
  for k in softmax rmsnorm cross-entropy; do
    timeout 150 python3 benchmarks/explore/memory_configs.py --warm --kernels $k > /dev/null 2>&1 &
  done
fi
wait
echo "checks done in $(( $(date +%s) - t0 )) s"; tail -qn1 "$OUT"/check_*.log | cut -c1-400
cat "$OUT"/check_*.log > "$OUT/checks.log"; rm -f "$OUT"/check_*.log
if [ "${2:-}" = "explore" ]; then
  timeout 150 python3 benchmarks/explore/memory_configs.py --json "$OUT/explore.json" 2>&1 | tee "$OUT/explore.log"
fi
timeout 240 python3 benchmarks/sweep.py --kernels softmax,layernorm,rmsnorm,cross-entropy,rotary-embedding \
  ${SWEEP_ARGS:-} --out "$OUT" 2>&1 | tee "$OUT/sweep.log"
echo "total $(( $(date +%s) - t0 )) s"
