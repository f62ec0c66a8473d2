#!/usr/bin/env bash
# kgit on a repository that is not this one: the two kernels
# of benchmarks/collection/repo, whose tests are written the way kernel-skill collections write them
# (softmax: one JSON line, perf_counter, no spread; gemm: a report, then `--- JSON ---` and an indented
# object whose figures sit in a per-size list), with their own hand-written experiments/README.md.
# start + two steps on each, then log, best and report; every kgit output, the rendered log and a git
# bundle of the records go to $OUT. Runs on the CPU too (Triton's interpreter; tiny shapes through
# SOFTMAX_SHAPE and GEMM_SIZES) as a dry run.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-/tmp/collection}
(cd / && python3 -c "import kgit" 2>/dev/null) || python3 -m pip install --quiet --no-deps --no-build-isolation -e "$ROOT" >/dev/null
rm -rf "$WORK" && cp -r "$ROOT/benchmarks/collection/repo" "$WORK" && cd "$WORK" || exit 1
git init -q -b main && git config user.name "kgit on $(hostname)" && git config user.email kgit@device.invalid
git add -A && git commit -qm "two kernels and their tests"
kgit() { echo "\$ kgit $*" >> "$OUT/transcript.txt"; python3 -m kgit -C "$WORK" "$@" >> "$OUT/transcript.txt" 2>&1; echo "(exit $?)" >> "$OUT/transcript.txt"; }

kgit start softmax                                   # no kgit.yaml: kgit cannot guess where the kernel is
cat > kgit.yaml <<'YAML'
softmax:
  kernel_path: softmax/softmax.py
  test_path: softmax/test_softmax.py
gemm:
  kernel_path: gemm/gemm.py
  test_path: gemm/test_gemm.py
YAML
git add kgit.yaml && git commit -qm "kgit.yaml"
kgit start softmax                                   # experiments/README.md is the repository's own: refused
sed -i '1i report_path: experiments/kgit.md' kgit.yaml && git commit -qam "kgit renders into experiments/kgit.md"
kgit start softmax
sed -i 's/numerator/num/g' softmax/softmax.py          # a rename: nothing measurable
kgit step -m "rename numerator -> num (no-op)" --tier 1
sed -i 's/^NUM_WARPS = 4/NUM_WARPS = 8/' softmax/softmax.py
kgit step -m "NUM_WARPS 4->8" --tier 1
git checkout -q main
kgit start gemm
sed -i 's/^BLOCK_K = 32/BLOCK_K = 64/' gemm/gemm.py
kgit step -m "BLOCK_K 32->64" --tier 1
sed -i 's/^NUM_STAGES = 3/NUM_STAGES = 4/' gemm/gemm.py
kgit step -m "NUM_STAGES 3->4" --tier 1
kgit log softmax
kgit log gemm
kgit best softmax
kgit best gemm
kgit show 1 --kernel softmax
kgit report
for k in softmax gemm; do python3 -m kgit -C "$WORK" log "$k" --json > "$OUT/log-$k.json" 2>/dev/null; done
git show opt/gemm:experiments/kgit.md > "$OUT/kgit.md" 2>/dev/null || cp experiments/kgit.md "$OUT/kgit.md"
git show HEAD:experiments/README.md > "$OUT/their-README.md"
git bundle create "$OUT/records.bundle" opt/softmax opt/gemm best/softmax best/gemm refs/notes/kgit \
  $(git for-each-ref --format='%(refname)' refs/kgit/attempts) 2>> "$OUT/transcript.txt"
cat "$OUT/transcript.txt"
