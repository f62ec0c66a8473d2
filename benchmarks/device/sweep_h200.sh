#!/usr/bin/env bash
# The whole sweep (benchmarks/sweep.py: every kernel beside torch and the copy bandwidth) as ONE run on
# one H200, although it takes longer (~620 s) than a device call may (600 s): the first call starts it
# detached in /tmp/sweep-run and waits; a call made while the machine is still warm (it stays so for
# 30 s) finds it running and waits for its end. Each call brings back what is done so far (sweep.md,
# sweep.json, log.txt). Should the run be gone when a call comes (a fresh machine), the call starts it
# again: the records say so (started.txt holds one line per start).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
RUN=${RUN:-/tmp/sweep-run}
WAIT_S=${WAIT_S:-555}
if [ -f "$RUN/rc" ]; then
  echo "the run had ended"
elif [ -f "$RUN/pid" ] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null; then
  echo "the run is still going: waiting"
else
  rm -rf "$RUN" && mkdir -p "$RUN/tree" && cp -r . "$RUN/tree" && cd "$RUN/tree" || exit 1
  python3 -m pip install --quiet --no-deps --no-build-isolation -e . >/dev/null
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$RUN/gpu.csv" 2>&1
  date -u >> "$RUN/started.txt"
  setsid nohup bash -c "PYTHONUNBUFFERED=1 python3 benchmarks/sweep.py --out $RUN/sweep > $RUN/log.txt 2>&1; echo \$? > $RUN/rc" \
    > /dev/null 2>&1 < /dev/null &
  echo $! > "$RUN/pid"
  echo "started the run"
fi
for _ in $(seq "$WAIT_S"); do [ -f "$RUN/rc" ] && break; sleep 1; done
cp "$RUN"/log.txt "$RUN"/started.txt "$RUN"/gpu.csv "$OUT"/ 2>/dev/null
cp "$RUN"/sweep/sweep.md "$RUN"/sweep/sweep.json "$OUT"/ 2>/dev/null
if [ -f "$RUN/rc" ]; then echo "ended: exit $(cat "$RUN/rc")"; else echo "not ended yet"; fi
grep '^# ' "$RUN/log.txt"
