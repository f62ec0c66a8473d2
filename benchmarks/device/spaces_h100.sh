#!/usr/bin/env bash
# cross-entropy's and flash-attention's spaces on one H100 (nvidia-h100-x1), in one device call:
#     bash benchmarks/device/spaces_h100.sh [SECONDS]
# Each series resumes experiments/tune/h100/spaces/space-KERNEL.json (benchmarks/tune/space.py) and
# stops at SECONDS (default 420) overall, in this order:
#   1. cross-entropy: the 100 configurations of every BLOCK_SIZE and num_warps, CHUNK 16384 or 131072
#      (a split of 8 or none at the LM head's 128256), num_stages 1 or 3: the whole space's 400 take
#      about 2 s each, more than one call holds;
#   2. flash-attention's representatives (benchmarks/tune/attention_space.py): the Triton kernel's 36
#      configurations, every GLUON, NUM_BUFFERS and AUTOTUNE at the shipped Triton keys, and 8 others
#      measured themselves to check the rule;
#   3. the rest of cross-entropy's space, as far as the time goes.
# The tests get --quick --no-torch (as kgit.yaml test_args would). $OUT gets spaces.tgz (JSONs, logs,
# the GPU and the versions of torch and triton).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
res=experiments/tune/h100/spaces; mkdir -p "$res"
budget=${1:-420}
left() { echo $((budget - SECONDS)); }
space() {  # space KERNEL JOBS [--subspace ...]
  local kernel=$1 jobs=$2; shift 2
  [ "$(left)" -gt 10 ] || return 0
  timeout "$(left)" python3 benchmarks/tune/space.py skills/kernels/"$kernel"/test_*.py \
    --json "$res/space-$kernel.json" --jobs "$jobs" "$@" -- --quick --no-torch >> "$res/space-$kernel.log" 2>&1
  tail -n 1 "$res/space-$kernel.log"
}
python3 -c "import torch, triton; print(torch.cuda.get_device_name(), 'torch', torch.__version__, 'triton', triton.__version__)" \
  > "$res/device.txt" 2>&1
cat "$res/device.txt"
# at the LM head's shape a worker holds ~20 GB at its reference's peak: fewer workers than cores
space cross-entropy 8 --subspace CHUNK=16384,131072 num_stages=1,3
space flash-attention 14 --subspace GLUON=0 AUTOTUNE=0 NUM_BUFFERS=2
space flash-attention 14 --subspace BLOCK_M=128 BLOCK_N=128 num_warps=8 num_stages=3
space flash-attention 8 --subspace BLOCK_M=64 BLOCK_N=64,128 num_warps=4 num_stages=2 GLUON=1,2 NUM_BUFFERS=3
space cross-entropy 8
tar -czf "$OUT/spaces.tgz" "$res"
