#!/usr/bin/env bash
# The noise rule on a real GPU: an unchanged kernel measured again must never count as a gain, and a
# real ~3% gain must (benchmarks/kernels/padded-copy/padded_copy.py: PAD_PCT 3 -> 0 removes 3% of the traffic).
# Runs in a scratch repository; writes JSON outputs, the rendered log and a bundle of the records to $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source "$(dirname "$0")/scratch.sh"
KERNEL=benchmarks/kernels/padded-copy/padded_copy.py
scratch_repo /tmp/n "$(printf 'padded-copy:\n  kernel_path: %s\n  test_path: benchmarks/kernels/padded-copy/test_padded_copy.py\n  max_iterations: 10\n' "$KERNEL")"
kgit() { python3 -m kgit "$@"; }
kgit start padded-copy --json > "$OUT/noise.json" 2> "$OUT/noise.log"
for i in 1 2 3 4 5; do
  echo "# remeasure $i: the kernel is unchanged" >> "$KERNEL"
  kgit step -m "unchanged kernel, measured again ($i)" --json >> "$OUT/noise.json" 2>> "$OUT/noise.log"
done
sed -i 's/"PAD_PCT": 3/"PAD_PCT": 0/' "$KERNEL"
kgit step -m "PAD_PCT 3->0: 3% less traffic" --tier 2 --json >> "$OUT/noise.json" 2>> "$OUT/noise.log"
kgit log > "$OUT/noise-summary.txt" 2>&1
cp experiments/README.md "$OUT/noise-README.md"
git bundle create "$OUT/noise.bundle" opt/padded-copy best/padded-copy refs/notes/kgit \
  $(git for-each-ref --format='%(refname)' refs/kgit/attempts) 2>> "$OUT/noise.log"
cat "$OUT/noise-summary.txt"
