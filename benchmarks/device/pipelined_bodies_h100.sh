#!/usr/bin/env bash
# Issue 52: softmax's 16-bit rows not in 16-element groups on the pipelined loop (PIPELINED_BODIES), one
# device call of at most 420 s on one H100 (experiments/held-out-shapes/cpu-pipelined-bodies/README.md).
# The checkout holds the candidate's softmax.py; OLD is main's (the old side of every table).
#
#   OUT=dir OLD=.stage/old/softmax.py bash benchmarks/device/pipelined_bodies_h100.sh
#
# In order of what the merge needs: the held-out half, the tune half, the sweep (no geomean may fall), then
# the exploration of the rule's choices on synthetic shapes and the compile statistics. Each step has a
# deadline its script honours (HELD_OUT_DEADLINE: the shapes left are skipped) and a hard timeout, so the
# call ends inside 420 s whatever a step takes.
set -u
export PYTHONPATH=$PWD
t0=$(date +%s)
left() {  # seconds from now until $1 s after the start, at least 1 (timeout 0 would mean no limit)
    local s=$(( $1 - ($(date +%s) - t0) ))
    echo $(( s > 1 ? s : 1 ))
}
step() {  # step NAME DEADLINE_S TIMEOUT_S command...: run, stdout and stderr to $OUT/NAME.txt
    local name=$1 deadline=$2 limit=$3
    shift 3
    HELD_OUT_DEADLINE=$((t0 + deadline)) timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
    echo "$name: exit $? at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
}
step softmax-held-out 90 110 python benchmarks/held_out_bench.py softmax "$OLD" --half held-out \
    --json "$OUT/softmax-held-out.jsonl"
step softmax-tune 170 "$(left 190)" python benchmarks/held_out_bench.py softmax "$OLD" --half tune \
    --json "$OUT/softmax-tune.jsonl"
step softmax-sweep 310 "$(left 330)" python benchmarks/held_out_bench.py softmax "$OLD" --sweep \
    --json "$OUT/softmax-sweep.jsonl"
step explore 385 "$(left 400)" python benchmarks/explore/pipelined_bodies.py "$OLD" \
    --json "$OUT/explore.jsonl"
# compiled, not interpreted (the CPU check of this script runs the others under TRITON_INTERPRET=1)
step ptx_sm90 405 "$(left 415)" env -u TRITON_INTERPRET python benchmarks/explore/pipelined_bodies_ptx.py
cat "$OUT"/softmax-*.txt | grep -E "summary|WRONG|skipped"
