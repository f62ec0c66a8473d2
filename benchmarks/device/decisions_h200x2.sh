#!/usr/bin/env bash
# The keep-or-revert decisions' H200 runs, on a machine with two H200s (benchmarks/noise/decisions.py), both GPUs
# at once: on GPU 0 a probe of the test's run-to-run noise, then 20 steps that change nothing
# measurable; on GPU 1, 20 real 3% traffic cuts. Each series stops after LIMIT_S seconds, keeping what
# it decided. Results in $OUT/noise/.
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install --quiet --no-deps --no-build-isolation -e . >/dev/null
git config --global user.email >/dev/null || git config --global user.email bench@example.com
git config --global user.name >/dev/null || git config --global user.name bench
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpus.csv"
mkdir -p "$OUT/noise"
export SCALE_N=${SCALE_N:-134217728} SCALE_ITERS=${SCALE_ITERS:-1000}  # 512 MB each way, ~280 us a launch
limit=${LIMIT_S:-540}
(
  export CUDA_VISIBLE_DEVICES=0
  python3 benchmarks/noise/decisions.py probe --steps "${PROBE_RUNS:-6}" --out "$OUT/noise" > "$OUT/noise/probe.out" 2>&1
  timeout $((limit - SECONDS)) python3 benchmarks/noise/decisions.py noop --steps "${STEPS:-20}" --out "$OUT/noise" \
    > "$OUT/noise/noop.out" 2>&1
) &
CUDA_VISIBLE_DEVICES=1 timeout "$limit" python3 benchmarks/noise/decisions.py gain --steps "${STEPS:-20}" \
    --out "$OUT/noise" > "$OUT/noise/cut.out" 2>&1 &
wait
