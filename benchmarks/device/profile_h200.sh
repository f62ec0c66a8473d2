#!/usr/bin/env bash
# kgit profile / diagnose / context on the H200, in one device call.
#
#   bash benchmarks/device/profile_h200.sh          (from the repository root; needs only python3 with
#                                                  torch + triton, git, ncu: nothing to install)
#
# In a scratch copy of the repository (the checkout's branches, tags and notes are not touched) it runs,
# for three kernels, each part independent of the others and bounded by a timeout:
#   softmax   skills/kernels/softmax (memory-bound)            kgit start, profile, diagnose, context
#   gemm      benchmarks/kernels/gemm-big, bf16 8192^3 (compute-bound): the same, plus
#             kgit diagnose --metrics <its raw ncu CSV>
#   tiny      benchmarks/kernels/tiny-add, one 4096-element launch (latency-bound): the same
# and writes to $OUT (8 files at most):
#   summary.txt               versions, and every command's human output
#   log.txt                   the shell trace (set -x) and stderr
#   {softmax,gemm,tiny}.json  the --json outputs of start, profile, diagnose, context, and the note
#   ncu_{softmax,gemm,tiny}_h200.csv   the raw ncu CSV of each profile (for tests/data/)
# PARTS="gemm tiny" runs a subset; BUDGET_S (default 560) bounds the whole run: each step's timeout is
# the smaller of its own cap and the time left, so the call ends before the device's 600 s limit.
set -u -o pipefail

OUT=${OUT:-$PWD/out-profile}
mkdir -p "$OUT"
exec 2> >(tee -a "$OUT/log.txt" >&2)
set -x

export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
PARTS=${PARTS:-softmax gemm tiny}
BUDGET_S=${BUDGET_S:-560}
START=$(date +%s)
SUMMARY="$OUT/summary.txt"

left() { echo $((BUDGET_S - ($(date +%s) - START))); }
cap() {  # the smaller of $1 seconds and the time left (at least 5)
    local want=$1 l
    l=$(left)
    ((l < want)) && want=$l
    ((want < 5)) && want=5
    echo "$want"
}
say() { echo "$*" | tee -a "$SUMMARY"; }

# --- a scratch repository: a copy of this tree, committed (uncommitted work included) -------------
W=$(mktemp -d /tmp/kgit-h200-XXXXXX)
tar --exclude=.git --exclude=.stage --exclude=__pycache__ --exclude=.whl --exclude=out-profile -cf - . |
    tar -C "$W" -xf -
cd "$W" || exit 1
git init -q -b main
git config user.email kgit@h200.invalid
git config user.name "kgit on the H200"
cat >>kgit.yaml <<'EOF'

# added by benchmarks/device/profile_h200.sh in its scratch copy
gemm-big:
  kernel_path: benchmarks/kernels/gemm-big/gemm_big.py
  test_path: benchmarks/kernels/gemm-big/test_gemm_big.py
  target_metric: tflops
  test_timeout_s: 240
tiny-add:
  kernel_path: benchmarks/kernels/tiny-add/tiny_add.py
  test_path: benchmarks/kernels/tiny-add/test_tiny_add.py
  target_metric: gbps
  test_timeout_s: 120
EOF
git add -A && git commit -qm "scratch copy for the H200 profile run"
export PYTHONPATH=$W
RES=$W/.results
mkdir -p "$RES"
echo "/.results/" >>.git/info/exclude

say "== $(date -u +%FT%TZ) kgit profile run in $W"
say "$(nvidia-smi -L 2>&1 | head -2)"
say "ncu: $(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1) $( (ncu --version 2>&1 || true) | tail -1)"
say "$($PY -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)' 2>&1)"

kg() {  # kg <seconds> <result file> <kgit args...>: a kgit command, bounded, its stdout kept
    local t=$1 file=$2
    shift 2
    timeout -k 10 "$(cap "$t")" $PY -m kgit "$@" >"$RES/$file"
    local rc=$?
    say "--- kgit $* (exit $rc)"
    if [[ $file != *.json ]]; then tee -a "$SUMMARY" <"$RES/$file"; fi
    return $rc
}

part() {  # part <name> <kernel> <start cap> <profile cap>
    local name=$1 kernel=$2 start_cap=$3 prof_cap=$4
    say ""
    say "=== $name ($kernel), $(left) s left"
    git checkout -q main
    kg "$start_cap" "$name.start.json" start "$kernel" --json
    kg "$prof_cap" "$name.profile.json" profile --kernel "$kernel" --json --timeout-s "$(cap "$prof_cap")"
    kg 30 "$name.diagnose.txt" diagnose --kernel "$kernel"
    kg 30 "$name.diagnose.json" diagnose --kernel "$kernel" --json
    kg 30 "$name.context.txt" context --kernel "$kernel"
    kg 30 "$name.context.json" context --kernel "$kernel" --json
    git notes --ref=refs/notes/kgit show "refs/heads/opt/$kernel" >"$RES/$name.note.json" 2>/dev/null
    local csv
    csv=$(ls -t .git/kgit/profiles/"$kernel"/*/raw.csv 2>/dev/null | head -1)
    if [[ -n $csv ]]; then
        cp "$csv" "$OUT/ncu_${name}_h200.csv"
    else
        say "no raw ncu CSV for $kernel"
        cat .git/kgit/profiles/"$kernel"/*/profiler_output.txt 2>/dev/null | tail -20 | tee -a "$SUMMARY"
    fi
    if [[ $name == gemm && -n $csv ]]; then
        kg 30 "$name.diagnose_csv.json" diagnose --metrics "$OUT/ncu_${name}_h200.csv" --json
    fi
    $PY - "$RES" "$name" >"$OUT/$name.json" <<'PYEOF'
import json, pathlib, sys
res, name = pathlib.Path(sys.argv[1]), sys.argv[2]
out = {}
for path in sorted(res.glob(f"{name}.*.json")):
    text = path.read_text().strip()
    try:
        out[path.name[len(name) + 1:-5]] = json.loads(text) if text else None
    except json.JSONDecodeError:
        out[path.name[len(name) + 1:-5]] = {"unparsed": text[-2000:]}
print(json.dumps(out, indent=1, default=str))
PYEOF
    $PY - "$RES/$name.profile.json" <<'PYEOF' | tee -a "$SUMMARY"
import json, sys
try:
    p = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"profile: no JSON ({e})")
m = p.get("metrics") or {}
keys = ("duration_us", "dram_pct", "l2_pct", "sm_pct", "tensor_pipe_pct", "achieved_occupancy_pct",
        "registers_per_thread", "local_spill_bytes", "global_ld_efficiency_pct", "l2_hit_pct", "achieved_gbps",
        "waves_per_sm")
print(f"profile: source {p.get('source')}, tool {p.get('tool')}, kernel {p.get('primary')}, why {p.get('why')}")
print("  " + ", ".join(f"{k}={m[k]:.4g}" for k in keys if isinstance(m.get(k), (int, float))))
print("  stalls: " + ", ".join(f"{s['reason']} {s['cycles_per_issue']:.2f}" for s in p.get("stalls") or []))
PYEOF
    say "$name: bound $($PY -c "import json,sys; d=json.load(open('$RES/$name.diagnose.json')); print(d.get('bound'), '-', d.get('why'))" 2>&1)"
}

for p in $PARTS; do
    case $p in
        softmax) part softmax softmax 240 200 ;;
        gemm) part gemm gemm-big 150 150 ;;
        tiny) part tiny tiny-add 90 120 ;;
        *) say "unknown part $p" ;;
    esac
    git status --porcelain | head -5 | sed 's/^/dirty after the part: /' | tee -a "$SUMMARY"
done
say ""
say "== done in $(($(date +%s) - START)) s; scratch copy left in $W"
