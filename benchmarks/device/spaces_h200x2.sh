#!/usr/bin/env bash
# Two templates' whole CONFIG_SPACE at once on an nvidia-h200-x2 machine, one per GPU, resumed from
# experiments/tune/h200/spaces/space-KERNEL.json where an earlier call left it (benchmarks/tune/space.py):
#     bash benchmarks/device/spaces_h200x2.sh KERNEL_ON_GPU0 KERNEL_ON_GPU1 [SECONDS]
# The tests get --quick --no-torch (as kgit.yaml test_args would). $OUT gets spaces.tgz (JSONs and logs).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
res=/tmp/res; mkdir -p "$res"
kernels=("$1" "$2"); seconds=${3:-500}
for gpu in 0 1; do
  kernel=${kernels[$gpu]}
  saved=experiments/tune/h200/spaces/space-$kernel.json
  [ -f "$saved" ] && cp "$saved" "$res/"
  CUDA_VISIBLE_DEVICES=$gpu timeout "$seconds" python3 benchmarks/tune/space.py skills/kernels/"$kernel"/test_*.py \
    --json "$res/space-$kernel.json" --jobs 14 -- --quick --no-torch >> "$res/space-$kernel.log" 2>&1 &
done
wait
tail -n 2 "$res"/*.log
tar -czf "$OUT/spaces.tgz" -C "$res" .
