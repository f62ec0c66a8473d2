#!/usr/bin/env bash
# Issue 15, session 29: the persistent attention kernel's list-scheduled tiles against its tiles dealt in
# turn (the template at FILE, default attention_before.py at the tree's root: `git show
# REV:skills/kernels/flash-attention/triton_template.py > attention_before.py`) and the default SDPA.
#     [ALSO="--also NAME=FILE ..."] bash benchmarks/device/attention_schedule_h200.sh [FILE]
# $OUT: schedule-ab.log and attention_schedule_ab.json, gpu.csv.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv > "$OUT/gpu.csv"
timeout 400 python3 benchmarks/explore/attention_schedule_ab.py --before "${1:-attention_before.py}" --out "$OUT" ${ALSO:-} \
  > "$OUT/schedule-ab.log" 2>&1
echo "exit $?" >> "$OUT/schedule-ab.log"
cat "$OUT/schedule-ab.log"
