#!/usr/bin/env bash
# The noise issue's H200 runs, on a machine with two H200s: on GPU 0, 20 steps that change nothing
# measurable; on GPU 1, 20 real 3% traffic cuts (benchmarks/noise/decisions.py); both at once, each
# series on its own GPU. Results in $OUT/noise/.
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install --quiet --no-deps --no-build-isolation -e . >/dev/null
git config --global user.email >/dev/null || git config --global user.email bench@example.com
git config --global user.name >/dev/null || git config --global user.name bench
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpus.csv"
mkdir -p "$OUT/noise"
CUDA_VISIBLE_DEVICES=0 python3 benchmarks/noise/decisions.py noop --steps "${STEPS:-20}" --out "$OUT/noise" \
    > "$OUT/noise/noop.out" 2>&1 &
CUDA_VISIBLE_DEVICES=1 python3 benchmarks/noise/decisions.py cut --steps "${STEPS:-20}" --out "$OUT/noise" \
    > "$OUT/noise/cut.out" 2>&1 &
wait
