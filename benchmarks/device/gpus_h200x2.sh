#!/usr/bin/env bash
# kgit tune on one GPU, on two (--gpus 0,1) and on a local Ray instance of the machine's two GPUs
# (--ray local), the same search from the same start, each in its own scratch repository: candidates
# tested per hour, and the histories side by side. RUNS="one ray" picks some of them (default: all
# three). Ray and what it needs travel as wheels in .ray-wheels (ignored; carry it), installed under
# /tmp/site.
# Kernel: benchmarks/kernels/padded-copy/padded_copy.py (a short test, so the comparison fits in one device call),
# with a target no copy reaches, so that each run measures its ITERATIONS candidates rather than stop at
# the target kgit would propose (90% of the copy bandwidth, which its baseline meets).
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SRC=$PWD
source "$(dirname "$0")/scratch.sh"
ITERATIONS=${ITERATIONS:-8}
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
if [ -d .ray-wheels ]; then
  pip install -q --no-index --no-deps --target /tmp/site .ray-wheels/*.whl >> "$OUT/log.txt" 2>&1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
for run in ${RUNS:-one two ray}; do
  cd "$SRC" && scratch_repo "/tmp/g-$run" "$(printf 'padded-copy:\n  kernel_path: benchmarks/kernels/padded-copy/padded_copy.py\n  test_path: benchmarks/kernels/padded-copy/test_padded_copy.py\n  max_iterations: %s\n  target_value: 100000\n' "$ITERATIONS")"
  python3 -m kgit start padded-copy > /dev/null 2>> "$OUT/log.txt"
  case $run in one) where=(--gpus 0);; two) where=(--gpus 0,1);; ray) where=(--ray local);; esac
  t0=$(date +%s.%N)
  timeout "${RUN_LIMIT:-400}" python3 -m kgit tune padded-copy "${where[@]}" --json > "$OUT/tune-$run.json" \
    2>> "$OUT/log.txt"
  t1=$(date +%s.%N)
  python3 -m kgit log >> "$OUT/logs.txt" 2>&1
  python3 - "$OUT/tune-$run.json" "$t0" "$t1" "${where[*]}" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
result = json.load(open(sys.argv[1]))
n = len(result["iterations"])
wall = float(sys.argv[3]) - float(sys.argv[2])
print(f"{sys.argv[4]}: {n} candidates in {wall:.1f} s = {3600 * n / wall:.0f} per hour; "
      f"stop {result['stop_reason']}; best {result['best']['value']:.0f} GB/s ({result['best']['action']})")
PY
  cd "$SRC"
done
# the Ray workers' own logs, for a worker that never answered (seen once on a single H200)
[ -d /tmp/ray/session_latest/logs ] && tar -C /tmp/ray/session_latest -czf "$OUT/ray-logs.tgz" logs 2> /dev/null
