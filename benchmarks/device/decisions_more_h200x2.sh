#!/usr/bin/env bash
# A second call of the decisions experiment (benchmarks/device/decisions_h200x2.sh): GPU 0 runs the
# traffic-cut trials, GPU 1 more no-op steps; STEPS of each.
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install --quiet --no-deps --no-build-isolation -e . >/dev/null
git config --global user.email >/dev/null || git config --global user.email bench@example.com
git config --global user.name >/dev/null || git config --global user.name bench
mkdir -p "$OUT/noise"
CUDA_VISIBLE_DEVICES=0 python3 benchmarks/noise/decisions.py cut --steps "${STEPS:-6}" --out "$OUT/noise" \
    > "$OUT/noise/cut.out" 2>&1 &
CUDA_VISIBLE_DEVICES=1 python3 benchmarks/noise/decisions.py noop --steps "${STEPS:-6}" --out "$OUT/noise" \
    > "$OUT/noise/noop.out" 2>&1 &
wait
