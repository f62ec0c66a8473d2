#!/bin/bash
# gemm57's device call (issue 52), one H100, from the repository root: bash .stage/call57.sh (about 150 s).
# 1. held_out_bench: main's gemm.py (OLD) against this tree's, autotuned, checked first, kgit's median with the L2
#    cleared clean, two rounds in opposite order.
# 2. .stage/gemm57_probe.py: which side pays for rows that are not whole 128-byte lines (views), C_PTR and B_PAD
#    forced, the copy's cost, the autotune's pick, cuBLAS's kernels.
set -o pipefail
OUT=${OUT:-/tmp/gemm57-out}; mkdir -p "$OUT"; export OUT
git show main:skills/kernels/gemm/gemm.py > /tmp/gemm_main.py || exit 1
start=$(date +%s)
HELD_OUT_DEADLINE=$((start + 90)) python benchmarks/held_out_bench.py gemm /tmp/gemm_main.py --shapes \
  3000x5000x2000:bf16 3000x5000x2000:fp16 2048x5000x4096:bf16 4096x4100x4096:bf16 3000x5120x2000:bf16 \
  4096x4096x4096:bf16 384x4096x4096:bf16 --json "$OUT/gemm.jsonl" 2>&1 | tee "$OUT/gemm.txt"
echo "held_out_bench: exit $? at $(( $(date +%s) - start )) s" | tee -a "$OUT/gemm.txt"
timeout 100 python .stage/gemm57_probe.py 2>&1 | tail -n 300 > "$OUT/gemm57_probe.log"
echo "probe: exit $? at $(( $(date +%s) - start )) s" | tee -a "$OUT/gemm57_probe.log"
tail -n 80 "$OUT/gemm57_probe.log"
