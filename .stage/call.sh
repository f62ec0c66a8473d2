#!/bin/bash
# gemm56's device call (issue 52), one H100, from the repository root: bash .stage/call.sh (about 4-5 minutes).
# 1. held_out_bench: main's gemm.py (OLD) against this tree's, autotuned, checked first, kgit's median with the L2
#    cleared clean, two rounds in opposite order; the whole pick in the JSON's path.
# 2. .stage/gemm56_probe.py: every candidate forced beside the autotune's pick; five fresh autotunes' picks and
#    their timing cost; cuBLAS's kernel names; 3000x5000x2000's alignment and K sweep.
set -o pipefail
OUT=${OUT:-/tmp/gemm56-out}; mkdir -p "$OUT"; export OUT
git show main:skills/kernels/gemm/gemm.py > /tmp/gemm_main.py || exit 1
start=$(date +%s)
HELD_OUT_DEADLINE=$((start + 170)) python benchmarks/held_out_bench.py gemm /tmp/gemm_main.py --shapes \
  384x4096x4096:bf16 384x4096x4096:fp16 320x4096x4096:bf16 448x4096x4096:bf16 512x4096x4096:fp16 \
  2048x4608x3584:bf16 2048x4608x3584:fp16 3000x5000x2000:bf16 2048x3584x18944:bf16 4096x4096x4096:bf16 \
  128x4096x4096:bf16 --json "$OUT/gemm.jsonl" 2>&1 | tee "$OUT/gemm.txt"
echo "held_out_bench: exit $? at $(( $(date +%s) - start )) s" | tee -a "$OUT/gemm.txt"
timeout 170 python .stage/gemm56_probe.py 2>&1 | tail -n 400 > "$OUT/gemm56_probe.log"
echo "probe: exit $? at $(( $(date +%s) - start )) s" | tee -a "$OUT/gemm56_probe.log"
tail -n 60 "$OUT/gemm56_probe.log"
