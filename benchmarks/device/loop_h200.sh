#!/usr/bin/env bash
# The core loop on a real GPU, in one call of the device tool:
#   kgit start softmax, then two hand-made tier-1 steps (PERSISTENT 1->0, BLOCK_SIZE 4096->16384).
# Runs in a scratch repository so that the loop's branches, tags and notes stay out of the checkout;
# writes the rendered log, the JSON outputs and a git bundle of the records to $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source "$(dirname "$0")/scratch.sh"
scratch_repo /tmp/w
kgit() { python3 -m kgit "$@"; }

KERNEL=skills/kernels/softmax/softmax.py
kgit start softmax --json > "$OUT/steps.json" 2> "$OUT/steps.log"
sed -i 's/"PERSISTENT": 1/"PERSISTENT": 0/' "$KERNEL"         # one program per row tile
kgit step -m "PERSISTENT 1->0" --tier 1 --json >> "$OUT/steps.json" 2>> "$OUT/steps.log"
sed -i 's/"BLOCK_SIZE": 4096/"BLOCK_SIZE": 16384/' "$KERNEL"  # bigger row chunks
kgit step -m "BLOCK_SIZE 4096->16384" --tier 1 --json >> "$OUT/steps.json" 2>> "$OUT/steps.log"
{ kgit log; echo; kgit best; echo; kgit status; } > "$OUT/summary.txt" 2>&1
cp experiments/README.md "$OUT/README.md"
git bundle create "$OUT/records.bundle" opt/softmax best/softmax refs/notes/kgit \
  $(git for-each-ref --format='%(refname)' refs/kgit/attempts) 2>> "$OUT/steps.log"
cat "$OUT/summary.txt"
