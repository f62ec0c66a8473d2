#!/usr/bin/env bash
# kgit's decisions on a collection's own softmax test, unchanged (perf_counter around 200 launches):
# benchmarks/noise/decisions.py --peer on the folder PEER (the collection's triton_template.py and
# test_softmax.py; carried to the device, never committed). SERIES: probe, noop, gain, in that order;
# each stops after LIMIT_S seconds (keeping what it measured), and none runs after a probe in which
# kgit's device time did not decide. Writes <series>.jsonl and logs.tar.gz (logs, gpu.csv) to $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PEER=${PEER:-.peer/softmax}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
(cd / && python3 -c "import kgit" 2>/dev/null) || python3 -m pip install --quiet --no-deps --no-build-isolation -e "$ROOT" >/dev/null
cd "$ROOT" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.csv"
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/gpu.csv"
# one run of the test under kgit's device timing, as recorded
KGIT_DEVICE_TIMES="$OUT/recording.jsonl" PYTHONPATH="$ROOT/kgit/harness/device_timing" \
  python3 "$PEER/test_softmax.py" --json > "$OUT/one-run.txt" 2>&1
for series in ${SERIES:-probe noop gain}; do
  timeout "${LIMIT_S:-560}" python3 benchmarks/noise/decisions.py "$series" --steps "${STEPS:-20}" --peer "$PEER" \
    --out "$OUT" > "$OUT/$series.out" 2>&1
  echo "$series: exit $?" >> "$OUT/exits.txt"
  if [ "$series" = probe ] && ! grep -q '"decides_on": "device"' "$OUT/probe.jsonl"; then
    echo "probe: kgit's device time does not decide; the series would measure nothing new" >> "$OUT/exits.txt"
    break
  fi
done
tail -n 3 "$OUT"/*.out; cat "$OUT/exits.txt"; head -c 1500 "$OUT/recording.jsonl"
# the device returns at most 8 files: the series' records stay plain, the rest travels as one archive
(cd "$OUT" && tar czf logs.tar.gz --exclude='*.jsonl' --exclude=logs.tar.gz . && find . -type f ! -name '*.jsonl' ! -name logs.tar.gz -delete)
