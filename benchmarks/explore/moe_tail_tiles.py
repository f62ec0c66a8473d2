"""Issue 15: the fused MoE's two GEMMs with less padding: each expert's last partial row block on a 64-row
tile when it has at most 64 rows.

    PYTHONPATH=$PWD python benchmarks/explore/moe_tail_tiles.py --out DIR      (GPU, about 2 minutes on an H200)
    TRITON_INTERPRET=1 python benchmarks/explore/moe_tail_tiles.py --check-cpu  (every variant, small shapes)
    python benchmarks/explore/moe_tail_tiles.py --compile-only                  (sm_90 offline: regs, spills, smem)
    python benchmarks/explore/moe_tail_tiles.py --padding                       (CPU: padding of each layout)

Offline, before any GPU run: --padding (torch's top-2 of CPU random logits, T 4096, E 8): the template
pads 6.09% of the rows on average over 200 seeds, the tail tiles 3.00% (seeds 0-9: 3.1-7.8% against
1.6-3.9%, 2-6 of the 8 experts' tails on a 64-row tile); the align kernels under the interpreter at that
shape give the same figures. --check-cpu (Triton 3.9 interpreter, fp16): every variant's h and y equal the
template's exactly on both routings (the template's h agrees with torch to 3e-4); a copy with one tail
block dropped from the block lists fails the layout check (124 / 119 of 128 pairs held), a copy whose tail
launch (split) or tail branch (mixed) is skipped fails the h and y checks (NaN). --compile-only (Triton 3.6,
sm_90, bf16 and fp16 alike): no spills; registers / shared memory: 128-row gate/up and down 174 / 196640 B,
64-row tail gate/up 90 (8 warps) or 168 (4 warps) / 163872, down 91 / 179 / 163872, mixed gate/up and
down 174 / 196640 (the two branches' rings share the space; both loops are pipelined, 4 stages).

Why: at the Mixtral shape (T 4096, E 8, top 2, hidden 4096, intermediate 14336) on the H200 the layer reads
0.847 of a dense GEMM pair of the same work (experiments/sweep-h200-session14, call 8; the bar is 0.90).
Each expert's run of rows is padded to a multiple of BLOCK_M = 128 (route_and_align): 6.2% more rows at
this shape (bf16 seed, call 2; 4.7% with fp16's). Per row actually computed, the gate/up and down kernels
run at 0.90-0.93 of the dense GEMM, and persistent kernels gained only 2-3% (call 6): the padding is the
larger lever.

Hypothesis: an expert's run of c rows is floor(c / 128) full blocks and a tail of r = c % 128 rows. With
r spread evenly, the template pads 128 - r rows (64 on average an expert). Putting a tail of r <= 64 on a
64-row tile (and r > 64 on a 128-row tile, as now) pads 64 - r or 128 - r: 32 on average, so the padding
halves (6.2% -> about 3%) and the GEMMs do about 3% less work (both layouts below pad alike).

Prediction (reasoning): the saving is ~3% of the rows; a 64-row tile runs its rows a little slower than a
128-row one (half the A reuse of each weight tile in shared memory), but only ~half the experts' tails
(~4 x 64 rows of ~8700) take one. Where the tail tiles run matters more:
- split (two launches of the template's kernels: 128-row blocks, then the 64-row tails, or tails first):
  the tail launch covers ~4 experts, each with its own weights, and nothing else runs beside it. It
  reads those experts' whole weights again from DRAM (w13: 4 x 235 MB = 0.94 GB, ~0.2 ms at ~4.5 TB/s)
  for ~60 GFLOP (~0.09 ms of tensor work): 64 rows per weight tile is 64 FLOP/B, a third of the H200's
  ridge. The 128-row blocks it replaces cost about 4 / 68 of the template's 3.3 ms = 0.19 ms. So split
  should gain nothing on gate/up (-1% to +1%), likewise on down (w2 0.47 GB for 4 tails, ~0.1 ms, against
  ~0.1 ms saved). Tails first or last: no difference beyond the spread; 4 or 8 warps on the tail tile:
  4 warps a little better for a memory-bound tile (more programs an SM), within 1% of the whole.
- mixed (one launch; each program picks its tile height from its block: the 128-row and the 64-row tile
  are two branches of one kernel, each with its own constexpr BLOCK_M and TMA descriptor): an expert's
  tail block sits right after its full blocks in the block list, so grouped ordering (GROUP_M blocks
  down one column of weight tiles) runs it beside them and its weight tiles come from L2, as the
  template's tails do. Predicted +2-3% on each GEMM (the padding saved, less the 64-row tile's lower
  per-row speed), the layer 0.847 -> ~0.87 of the dense pair: better, still short of 0.90.
The alignment (one kernel after the template's routing kernel, like moe_align_kernel) and the gather cost
about what the template's do (tens of microseconds, <1% of the layer).

Design:
- Routing: the template's moe_route_kernel (top-k, weights, per-chunk counts and ranks). Then
  moe_align_tails_kernel places the pairs, writes the sentinels (n_pairs) and the block lists, with the
  counts' upper bounds known on the host as in route_and_align (no host synchronization):
    split: sorted_ids = [128-row section: NB = cdiv(T*k, 128) + E blocks][64-row section: E blocks];
      expert e has floor(c/128) (+1 when r > 64) blocks in the first section and, when 0 < r <= 64, one
      block in the second. block_expert_big (NB,), block_expert_tail (E,): expert or -1. x_sorted and h
      are one buffer each in that order, so the tail launch takes views from row NB * 128 on (sorted_ids,
      x_sorted, h sliced there) with descriptors of 64-row blocks, and the template's kernels run unchanged.
    mixed: sorted_ids = each expert's run padded to 128 * floor(c/128) + (64 if r <= 64 else 128) (0 if
      c = 0), runs back to back; block lists block_expert / block_row / block_tail (NB entries, -1 past
      the last): a block's expert, first row and whether it is a 64-row tile. The 128-row blocks start at
      multiples of 64, which TMA takes (a box's origin need not be a multiple of its size).
- Gather: split, the template's moe_gather_kernel twice (128-row blocks; 64-row tails on the views);
  mixed, moe_gather_rows_kernel over 64-row chunks up to the rows in use (a count the align kernel
  writes on the device).
- gate/up and down, split: moe_gate_up_kernel / moe_down_kernel (TMA, host descriptors, as in
  moe_down.py) at BLOCK_M 128 over the first section and at BLOCK_M 64 over the tails, on one stream;
  mixed: moe_gate_up_mixed / moe_down_mixed, the template's math in two branches (128 and 64 rows).

Variants (gate/up: BLOCK_N 128, BLOCK_K 64, GROUP_M 8, 4 stages; down: BLOCK_N 256, 4 stages; 128-row
tiles on 8 warps, as the template's CONFIG):
  split_w8_last / split_w8_first   tail tiles on 8 warps, their launch after / before the 128-row one
  split_w4_last / split_w4_first   tail tiles on 4 warps
  mixed                            one launch, 8 warps (one kernel has one warp count)
Rows, per dtype (bf16 then fp16), each GEMM timed alone after routing, alignment and the gather: the
alignment + gather of each layout; dense torch.matmul of the T * k rows by one expert's weights; the
template's kernel (CONFIG); the variants. Each variant's h (per sorted row, matched by pair id) and y (per
pair) are checked against the template kernels' (rows in use, max relative error < 1e-2) before timing:
three do_bench medians (warmup 25 ms, rep 200 ms), their median and spread. The down variants are fed the
template's h moved into their layout, so they are checked alone. Rows print as they finish;
DIR/moe_tail_tiles.json is rewritten after each row. A summary gives each layout's best gate/up + best
down (+ its alignment and gather) as a fraction of the dense pair.

--check-cpu (fp16: Triton 3.9's interpreter multiplies bf16 tiles wrongly, see moe_persistent.py) runs the
template's kernels and every variant at T 64, E 4, top 2, HD 128, I 256 with 32-row blocks and 16-row tails,
on two routings: random logits, and one built so that the experts hold 41 / 32 / 55 / 0 pairs (a short
tail, none, a long tail, an empty expert). It checks that each layout holds every pair exactly once and
that h and y agree with the template's. --compile-only compiles the GPU variants for sm_90 (Triton 3.6
venv) and prints registers, spills and shared memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

if "--check-cpu" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"  # read when triton is imported

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import templates  # noqa: E402  (beside this file)

MIXTRAL = (4096, 8, 2, 4096, 14336)  # tokens, experts, top k, hidden, intermediate
SMALL = (64, 4, 2, 128, 256)         # the interpreter's shape
SMALL_COUNTS = (41, 32, 55, 0)       # pairs per expert of the built routing (sum T * k = 128)
MOE = templates.load("fused-moe")
_tile_coords = MOE._tile_coords      # the template's grouped order

# name -> (layout, tail tile's num_warps, tails launched first)
VARIANTS = {
    "split_w8_last": ("split", 8, False),
    "split_w8_first": ("split", 8, True),
    "split_w4_last": ("split", 4, False),
    "split_w4_first": ("split", 4, True),
    "mixed": ("mixed", 8, False),
}
GPU_TILES = dict(BLOCK_M=128, TAIL_M=64, BLOCK_N=128, BLOCK_K=64, DOWN_BLOCK_N=256, GROUP_M=8, num_warps=8,
                 num_stages=4, down_stages=4, route_block_t=64)
CPU_TILES = dict(BLOCK_M=32, TAIL_M=16, BLOCK_N=32, BLOCK_K=32, DOWN_BLOCK_N=64, GROUP_M=4, num_warps=4,
                 num_stages=2, down_stages=2, route_block_t=32)


# --------------------------------------------------------------------------------------------------
# alignment and gather
# --------------------------------------------------------------------------------------------------
@triton.jit
def moe_align_tails_kernel(ids_ptr, rank_ptr, chunk_counts_ptr, sorted_ids_ptr, block_expert_ptr, block_row_ptr,
                           block_tail_ptr, tail_expert_ptr, n_rows_ptr, n_pairs, E, num_chunks, num_m_blocks,
                           tail_base, E_PAD: tl.constexpr, PAIRS_PER_CHUNK: tl.constexpr, BLOCK_M: tl.constexpr,
                           TAIL_M: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, MIXED: tl.constexpr):
    # moe_align_kernel with tails: an expert's c rows are n_big 128-row blocks (c // 128, one more when
    # the rest r > TAIL_M) and, when 0 < r <= TAIL_M, one TAIL_M-row block. Each program places its
    # chunk's pairs (position in the expert: pairs of it in earlier chunks + rank in the chunk); program 0
    # writes the sentinels and the block lists. Writes never overlap, so programs need no ordering.
    pid = tl.program_id(0)
    ecols = tl.arange(0, E_PAD)
    total = tl.zeros([E_PAD], dtype=tl.int32)
    earlier = tl.zeros([E_PAD], dtype=tl.int32)
    for c0 in range(0, num_chunks, BLOCK_C):
        rows = c0 + tl.arange(0, BLOCK_C)
        cc = tl.load(chunk_counts_ptr + rows[:, None] * E_PAD + ecols[None, :], mask=rows[:, None] < num_chunks,
                     other=0)
        total += tl.sum(cc, 0)
        earlier += tl.sum(tl.where(rows[:, None] < pid, cc, 0), 0)
    rem = total % BLOCK_M
    small = ((rem > 0) & (rem <= TAIL_M)).to(tl.int32)           # 1: the tail goes on a TAIL_M-row tile
    n_big = total // BLOCK_M + (rem > TAIL_M).to(tl.int32)
    big_rows = n_big * BLOCK_M
    if MIXED:
        run = big_rows + small * TAIL_M                             # the tail continues the expert's run
        run_end = tl.cumsum(run, 0)
        run_start = run_end - run
    else:
        big_end = tl.cumsum(big_rows, 0)
        big_start = big_end - big_rows
        tail_end = tl.cumsum(small, 0)
        tail_idx = tail_end - small
    for p0 in range(0, PAIRS_PER_CHUNK, BLOCK_P):
        in_chunk = p0 + tl.arange(0, BLOCK_P)
        offs_p = pid * PAIRS_PER_CHUNK + in_chunk
        pmask = (in_chunk < PAIRS_PER_CHUNK) & (offs_p < n_pairs)
        e = tl.load(ids_ptr + offs_p, mask=pmask, other=0)
        r = tl.load(rank_ptr + offs_p, mask=pmask, other=0)
        sel = ecols[None, :] == e[:, None]
        q = tl.sum(tl.where(sel, earlier[None, :], 0), 1) + r       # the pair's position in its expert's rows
        if MIXED:
            dest = tl.sum(tl.where(sel, run_start[None, :], 0), 1) + q
        else:
            b_start = tl.sum(tl.where(sel, big_start[None, :], 0), 1)
            b_rows = tl.sum(tl.where(sel, big_rows[None, :], 0), 1)
            t_idx = tl.sum(tl.where(sel, tail_idx[None, :], 0), 1)
            dest = tl.where(q < b_rows, b_start + q, tail_base + t_idx * TAIL_M + (q - b_rows))
        tl.store(sorted_ids_ptr + dest, offs_p, mask=pmask)
    if pid == 0:
        jcols = tl.arange(0, BLOCK_M)
        if MIXED:
            # padding slots of each expert's run: [run_start + total, run_end), fewer than BLOCK_M
            slot = (run_start + total)[:, None] + jcols[None, :]
            tl.store(sorted_ids_ptr + slot, tl.zeros([E_PAD, BLOCK_M], dtype=tl.int32) + n_pairs,
                     mask=jcols[None, :] < (run - total)[:, None])
            tl.store(n_rows_ptr, tl.sum(run, 0))                    # the gather's bound
            # block b: owner = the number of experts whose blocks end at or before b (empty ones too)
            n_blk = n_big + small
            blk_end = tl.cumsum(n_blk, 0)
            end_e = tl.where(ecols < E, blk_end, 2147483647)
            for b0 in range(0, num_m_blocks, BLOCK_P):
                blk = b0 + tl.arange(0, BLOCK_P)
                owner = tl.sum((end_e[None, :] <= blk[:, None]).to(tl.int32), 1)
                sel = ecols[None, :] == owner[:, None]
                local = blk - tl.sum(tl.where(sel, (blk_end - n_blk)[None, :], 0), 1)
                row = tl.sum(tl.where(sel, run_start[None, :], 0), 1) + local * BLOCK_M
                is_tail = local >= tl.sum(tl.where(sel, n_big[None, :], 0), 1)
                bmask = blk < num_m_blocks
                tl.store(block_expert_ptr + blk, tl.where(owner < E, owner, -1), mask=bmask)
                tl.store(block_row_ptr + blk, tl.where(owner < E, row, 0), mask=bmask)
                tl.store(block_tail_ptr + blk, (is_tail & (owner < E)).to(tl.int32), mask=bmask)
        else:
            # padding of the 128-row section: [big_start + min(total, big_rows), big_end)
            filled = tl.minimum(total, big_rows)
            slot = (big_start + filled)[:, None] + jcols[None, :]
            tl.store(sorted_ids_ptr + slot, tl.zeros([E_PAD, BLOCK_M], dtype=tl.int32) + n_pairs,
                     mask=jcols[None, :] < (big_rows - filled)[:, None])
            # padding of a tail block: the TAIL_M - (total - big_rows) rows after the expert's tail rows
            tcols = tl.arange(0, TAIL_M)
            t_used = total - big_rows
            tslot = tail_base + (tail_idx * TAIL_M + t_used)[:, None] + tcols[None, :]
            tl.store(sorted_ids_ptr + tslot, tl.zeros([E_PAD, TAIL_M], dtype=tl.int32) + n_pairs,
                     mask=(tcols[None, :] < (TAIL_M - t_used)[:, None]) & (small[:, None] > 0))
            end_e = tl.where(ecols < E, big_end, 2147483647)
            for b0 in range(0, num_m_blocks, BLOCK_P):
                blk = b0 + tl.arange(0, BLOCK_P)
                owner = tl.sum((end_e[None, :] <= (blk * BLOCK_M)[:, None]).to(tl.int32), 1)
                tl.store(block_expert_ptr + blk, tl.where(owner < E, owner, -1), mask=blk < num_m_blocks)
            # tail block j belongs to the expert with tail_idx j (the tail list has E entries)
            tend_e = tl.where(ecols < E, tail_end, 2147483647)
            towner = tl.sum((tend_e[None, :] <= ecols[:, None]).to(tl.int32), 1)
            tl.store(tail_expert_ptr + ecols, tl.where(towner < E, towner, -1), mask=ecols < E)


@triton.jit
def moe_gather_rows_kernel(x_ptr, xs_ptr, sorted_ids_ptr, n_rows_ptr, n_pairs, HD, stride_x,
                           TOP_K: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    # moe_gather_kernel for the mixed layout: the rows in use are a prefix (a multiple of BLOCK_R = TAIL_M
    # rows, counted on the device); slots past it were never written, so they are not read
    pid_r = tl.program_id(0)
    if pid_r * BLOCK_R >= tl.load(n_rows_ptr):
        return
    offs_r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    pair = tl.load(sorted_ids_ptr + offs_r)
    valid = pair < n_pairs
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_ok = offs_d < HD
    rows = tl.load(x_ptr + (pair // TOP_K).to(tl.int64)[:, None] * stride_x + offs_d[None, :],
                   mask=valid[:, None] & d_ok[None, :], other=0.0)
    tl.store(xs_ptr + offs_r.to(tl.int64)[:, None] * HD + offs_d[None, :], rows, mask=d_ok[None, :])


def align_tails(logits, top_k, tiles, mixed):
    """Routing (the template's kernel) and the tail-tile alignment, no host synchronization. Returns a
    dict: weights, sorted_ids, the block lists, num_m_blocks (NB, the host's bound on 128-row blocks, or
    on all blocks for mixed), tail_base (split: first row of the tail section), n_rows (mixed: (1,) on
    the device)."""
    T, E = logits.shape
    dev = logits.device
    bm, tm, block_t = tiles["BLOCK_M"], tiles["TAIL_M"], tiles["route_block_t"]
    assert bm % tm == 0
    n_pairs = T * top_k
    e_pad = triton.next_power_of_2(E)
    num_chunks = triton.cdiv(T, block_t)
    nb = triton.cdiv(n_pairs, bm) + E    # sum_e (floor(c_e / bm) + 1) bounds both layouts' block counts
    tail_base = nb * bm
    rows = nb * bm if mixed else tail_base + E * tm
    ids = torch.empty(n_pairs, dtype=torch.int32, device=dev)
    rank = torch.empty(n_pairs, dtype=torch.int32, device=dev)
    weights = torch.empty(n_pairs, dtype=torch.float32, device=dev)
    chunk_counts = torch.empty((num_chunks, e_pad), dtype=torch.int32, device=dev)
    sorted_ids = torch.empty(rows, dtype=torch.int32, device=dev)
    block_expert = torch.empty(nb, dtype=torch.int32, device=dev)
    block_row = torch.empty(nb if mixed else 1, dtype=torch.int32, device=dev)
    block_tail = torch.empty(nb if mixed else 1, dtype=torch.int32, device=dev)
    tail_expert = torch.empty(E, dtype=torch.int32, device=dev)
    n_rows = torch.empty(1, dtype=torch.int32, device=dev)
    MOE.moe_route_kernel[(num_chunks,)](logits.float().contiguous(), ids, rank, weights, chunk_counts, T, E,
                                        TOP_K=top_k, K_PAD=triton.next_power_of_2(top_k), E_PAD=e_pad,
                                        BLOCK_T=block_t, num_warps=4)
    moe_align_tails_kernel[(num_chunks,)](ids, rank, chunk_counts, sorted_ids, block_expert, block_row, block_tail,
                                          tail_expert, n_rows, n_pairs, E, num_chunks, nb, tail_base, E_PAD=e_pad,
                                          PAIRS_PER_CHUNK=block_t * top_k, BLOCK_M=bm, TAIL_M=tm,
                                          BLOCK_P=max(16, min(256, 8192 // e_pad)), BLOCK_C=16, MIXED=mixed,
                                          num_warps=4)
    return dict(layout="mixed" if mixed else "split", weights=weights, sorted_ids=sorted_ids,
                block_expert=block_expert, block_row=block_row, block_tail=block_tail, tail_expert=tail_expert,
                n_rows=n_rows, num_m_blocks=nb, tail_base=tail_base, rows=rows, n_pairs=n_pairs, top_k=top_k)


def gather(lay, x, tiles):
    """x_sorted in the layout's row order (zeros in padding rows)."""
    HD = x.shape[1]
    bm, tm = tiles["BLOCK_M"], tiles["TAIL_M"]
    n_pairs, top_k, nb, sid = lay["n_pairs"], lay["top_k"], lay["num_m_blocks"], lay["sorted_ids"]
    xs = torch.empty((lay["rows"], HD), device=x.device, dtype=x.dtype)
    dgrid = triton.cdiv(HD, MOE.GATHER_BLOCK_D)
    if lay["layout"] == "mixed":
        moe_gather_rows_kernel[(lay["rows"] // tm, dgrid)](x, xs, sid, lay["n_rows"], n_pairs, HD, x.stride(0),
                                                            TOP_K=top_k, BLOCK_R=tm, BLOCK_D=MOE.GATHER_BLOCK_D,
                                                            num_warps=4)
    else:
        tb = lay["tail_base"]
        MOE.moe_gather_kernel[(nb, dgrid)](x, xs, sid, lay["block_expert"], n_pairs, HD, x.stride(0), TOP_K=top_k,
                                           BLOCK_M=bm, BLOCK_D=MOE.GATHER_BLOCK_D, num_warps=4)
        MOE.moe_gather_kernel[(lay["tail_expert"].numel(), dgrid)](
            x, xs[tb:], sid[tb:], lay["tail_expert"], n_pairs, HD, x.stride(0), TOP_K=top_k, BLOCK_M=tm,
            BLOCK_D=MOE.GATHER_BLOCK_D, num_warps=4)
    return xs


# --------------------------------------------------------------------------------------------------
# mixed-height GEMM kernels (one launch)
# --------------------------------------------------------------------------------------------------
@triton.jit
def _up_tile(x_desc, w_desc, h_ptr, e, row, pid_n, HD, I, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr):
    # moe_gate_up_kernel's TMA path for ROWS rows from `row` on
    gate_row = e * 2 * I + pid_n * BLOCK_N
    acc_g = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, HD, BLOCK_K):
        a = x_desc.load([row, k0])
        wg = w_desc.load([gate_row, k0])
        wu = w_desc.load([gate_row + I, k0])
        acc_g = tl.dot(a, tl.trans(wg), acc_g)
        acc_u = tl.dot(a, tl.trans(wu), acc_u)
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    offs_r = row + tl.arange(0, ROWS)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(h_ptr + offs_r.to(tl.int64)[:, None] * I + offs_n[None, :], h.to(h_ptr.dtype.element_ty),
             mask=offs_n[None, :] < I)


@triton.jit
def moe_gate_up_mixed(x_desc, x_desc_t, w_desc, h_ptr, block_expert_ptr, block_row_ptr, block_tail_ptr, HD, I,
                      num_m_blocks, BLOCK_M: tl.constexpr, TAIL_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # x_desc / x_desc_t: x_sorted with BLOCK_M- / TAIL_M-row boxes. Tile shapes are constexpr, so the two
    # heights are two branches; a program runs one, and their shared-memory rings may share space.
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_m_blocks, tl.cdiv(I, BLOCK_N), GROUP_M)
    e = tl.load(block_expert_ptr + pid_m)
    if e < 0:
        return
    row = tl.load(block_row_ptr + pid_m)
    if tl.load(block_tail_ptr + pid_m) != 0:
        _up_tile(x_desc_t, w_desc, h_ptr, e, row, pid_n, HD, I, TAIL_M, BLOCK_N, BLOCK_K)
    else:
        _up_tile(x_desc, w_desc, h_ptr, e, row, pid_n, HD, I, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def _down_tile(h_desc, w_desc, y_ptr, sorted_ids_ptr, topk_w_ptr, e, row, pid_n, n_pairs, HD, I,
               ROWS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # moe_down_kernel's TMA path for ROWS rows from `row` on
    w_row = e * HD + pid_n * BLOCK_N
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, I, BLOCK_K):
        a = h_desc.load([row, k0])
        w = w_desc.load([w_row, k0])
        acc = tl.dot(a, tl.trans(w), acc)
    offs_r = row + tl.arange(0, ROWS)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    pair = tl.load(sorted_ids_ptr + offs_r)
    valid = pair < n_pairs
    wt = tl.load(topk_w_ptr + pair, mask=valid, other=0.0)
    acc = acc * wt[:, None]
    tl.store(y_ptr + pair.to(tl.int64)[:, None] * HD + offs_n[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=valid[:, None] & (offs_n[None, :] < HD))


@triton.jit
def moe_down_mixed(h_desc, h_desc_t, w_desc, y_ptr, sorted_ids_ptr, block_expert_ptr, block_row_ptr,
                   block_tail_ptr, topk_w_ptr, n_pairs, HD, I, num_m_blocks, BLOCK_M: tl.constexpr,
                   TAIL_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_m_blocks, tl.cdiv(HD, BLOCK_N), GROUP_M)
    e = tl.load(block_expert_ptr + pid_m)
    if e < 0:
        return
    row = tl.load(block_row_ptr + pid_m)
    if tl.load(block_tail_ptr + pid_m) != 0:
        _down_tile(h_desc_t, w_desc, y_ptr, sorted_ids_ptr, topk_w_ptr, e, row, pid_n, n_pairs, HD, I, TAIL_M,
                   BLOCK_N, BLOCK_K)
    else:
        _down_tile(h_desc, w_desc, y_ptr, sorted_ids_ptr, topk_w_ptr, e, row, pid_n, n_pairs, HD, I, BLOCK_M,
                   BLOCK_N, BLOCK_K)


# --------------------------------------------------------------------------------------------------
# launch specs: lists of (kernel, grid, args, constexprs, options), run in order on one stream
# --------------------------------------------------------------------------------------------------
def template_up_spec(xs, w13, h, sorted_ids, block_expert, n_pairs, nb, top_k, tiles, rows, warps):
    """The template's moe_gate_up_kernel, TMA path, over nb blocks of `rows` rows (descriptors made once)."""
    E, I2, HD = w13.shape
    bn, bk = tiles["BLOCK_N"], tiles["BLOCK_K"]
    x_src = TensorDescriptor.from_tensor(xs, [rows, bk])
    w_src = TensorDescriptor.from_tensor(w13.view(E * I2, HD), [bn, bk])
    args = (x_src, w_src, h, sorted_ids, block_expert, n_pairs, HD, I2 // 2, nb, HD)
    consts = dict(TOP_K=top_k, BLOCK_M=rows, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=tiles["GROUP_M"], USE_TMA=True)
    return (MOE.moe_gate_up_kernel, (nb * triton.cdiv(I2 // 2, bn),), args, consts,
            dict(num_warps=warps, num_stages=tiles["num_stages"]))


def template_down_spec(h, w2, y, sorted_ids, block_expert, weights, n_pairs, nb, tiles, rows, warps):
    """The template's moe_down_kernel, TMA path."""
    E, HD, I = w2.shape
    dbn, bk = tiles["DOWN_BLOCK_N"], tiles["BLOCK_K"]
    h_src = TensorDescriptor.from_tensor(h, [rows, bk])
    w_src = TensorDescriptor.from_tensor(w2.view(E * HD, I), [dbn, bk])
    args = (h_src, w_src, y, sorted_ids, block_expert, weights, n_pairs, HD, I, nb)
    consts = dict(BLOCK_M=rows, BLOCK_N=dbn, BLOCK_K=bk, GROUP_M=tiles["GROUP_M"], USE_TMA=True)
    return (MOE.moe_down_kernel, (nb * triton.cdiv(HD, dbn),), args, consts,
            dict(num_warps=warps, num_stages=tiles["down_stages"]))


def up_specs(variant, lay, xs, w13, h, tiles):
    layout, tail_warps, tails_first = VARIANTS[variant]
    E, I2, HD = w13.shape
    bm, tm, bn, bk = tiles["BLOCK_M"], tiles["TAIL_M"], tiles["BLOCK_N"], tiles["BLOCK_K"]
    nb, n_pairs, sid = lay["num_m_blocks"], lay["n_pairs"], lay["sorted_ids"]
    if layout == "mixed":
        args = (TensorDescriptor.from_tensor(xs, [bm, bk]), TensorDescriptor.from_tensor(xs, [tm, bk]),
                TensorDescriptor.from_tensor(w13.view(E * I2, HD), [bn, bk]), h, lay["block_expert"],
                lay["block_row"], lay["block_tail"], HD, I2 // 2, nb)
        consts = dict(BLOCK_M=bm, TAIL_M=tm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=tiles["GROUP_M"])
        return [(moe_gate_up_mixed, (nb * triton.cdiv(I2 // 2, bn),), args, consts,
                 dict(num_warps=tiles["num_warps"], num_stages=tiles["num_stages"]))]
    tb = lay["tail_base"]
    big = template_up_spec(xs, w13, h, sid, lay["block_expert"], n_pairs, nb, lay["top_k"], tiles, bm,
                           tiles["num_warps"])
    tail = template_up_spec(xs[tb:], w13, h[tb:], sid[tb:], lay["tail_expert"], n_pairs, E, lay["top_k"], tiles, tm,
                            tail_warps)
    return [tail, big] if tails_first else [big, tail]


def down_specs(variant, lay, h, w2, y, tiles):
    layout, tail_warps, tails_first = VARIANTS[variant]
    E, HD, I = w2.shape
    bm, tm, dbn, bk = tiles["BLOCK_M"], tiles["TAIL_M"], tiles["DOWN_BLOCK_N"], tiles["BLOCK_K"]
    nb, n_pairs, sid, wts = lay["num_m_blocks"], lay["n_pairs"], lay["sorted_ids"], lay["weights"]
    if layout == "mixed":
        args = (TensorDescriptor.from_tensor(h, [bm, bk]), TensorDescriptor.from_tensor(h, [tm, bk]),
                TensorDescriptor.from_tensor(w2.view(E * HD, I), [dbn, bk]), y, sid, lay["block_expert"],
                lay["block_row"], lay["block_tail"], wts, n_pairs, HD, I, nb)
        consts = dict(BLOCK_M=bm, TAIL_M=tm, BLOCK_N=dbn, BLOCK_K=bk, GROUP_M=tiles["GROUP_M"])
        return [(moe_down_mixed, (nb * triton.cdiv(HD, dbn),), args, consts,
                 dict(num_warps=tiles["num_warps"], num_stages=tiles["down_stages"]))]
    tb = lay["tail_base"]
    big = template_down_spec(h, w2, y, sid, lay["block_expert"], wts, n_pairs, nb, tiles, bm, tiles["num_warps"])
    tail = template_down_spec(h[tb:], w2, y, sid[tb:], lay["tail_expert"], wts, n_pairs, E, tiles, tm, tail_warps)
    return [tail, big] if tails_first else [big, tail]


def launch(specs):
    for kernel, grid, args, consts, options in specs:
        kernel[grid](*args, **consts, **options)


# --------------------------------------------------------------------------------------------------
# layouts on the host (checks and reports only; the timed path never reads these back)
# --------------------------------------------------------------------------------------------------
def rows_in_use(lay, tiles):
    """Row indices of the blocks in use, in the layout's order."""
    dev = lay["sorted_ids"].device
    if lay["layout"] == "template":
        return torch.arange(int((lay["block_expert"] >= 0).sum()) * tiles["BLOCK_M"], device=dev)
    if lay["layout"] == "mixed":
        return torch.arange(int(lay["n_rows"][0]), device=dev)
    big = int((lay["block_expert"] >= 0).sum()) * tiles["BLOCK_M"]
    tails = int((lay["tail_expert"] >= 0).sum()) * tiles["TAIL_M"]
    return torch.cat([torch.arange(big, device=dev), lay["tail_base"] + torch.arange(tails, device=dev)])


def row_of_pair(lay, tiles):
    """(n_pairs,) row holding each pair; raises unless the rows in use hold every pair exactly once."""
    rows = rows_in_use(lay, tiles)
    pairs = lay["sorted_ids"][rows].long()
    keep = (pairs >= 0) & (pairs < lay["n_pairs"])
    rows, pairs = rows[keep], pairs[keep]
    if pairs.numel() != lay["n_pairs"] or torch.unique(pairs).numel() != lay["n_pairs"]:
        raise AssertionError(f"{lay['layout']}: {pairs.numel()} pair slots, {torch.unique(pairs).numel()} distinct, "
                             f"of {lay['n_pairs']} pairs")
    out = torch.empty(lay["n_pairs"], dtype=torch.long, device=rows.device)
    out[pairs] = rows
    return out


def padding_pct(lay, tiles):
    return 100 * (rows_in_use(lay, tiles).numel() / lay["n_pairs"] - 1)


def template_layout(logits, top_k, tiles):
    weights, sorted_ids, block_expert, nb = MOE.route_and_align(logits, top_k, tiles["BLOCK_M"],
                                                                tiles["route_block_t"])
    return dict(layout="template", weights=weights, sorted_ids=sorted_ids, block_expert=block_expert,
                num_m_blocks=nb, rows=nb * tiles["BLOCK_M"], n_pairs=logits.shape[0] * top_k, top_k=top_k)


def template_gather(lay, x, tiles):
    HD = x.shape[1]
    xs = torch.empty((lay["rows"], HD), device=x.device, dtype=x.dtype)
    MOE.moe_gather_kernel[(lay["num_m_blocks"], triton.cdiv(HD, MOE.GATHER_BLOCK_D))](
        x, xs, lay["sorted_ids"], lay["block_expert"], lay["n_pairs"], HD, x.stride(0), TOP_K=lay["top_k"],
        BLOCK_M=tiles["BLOCK_M"], BLOCK_D=MOE.GATHER_BLOCK_D, num_warps=4)
    return xs


def rel_err(got, ref):
    return ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


def built_logits(counts, T, E, top_k, seed=0):
    """Logits whose top-2 routing puts counts[e] pairs on expert e (for --check-cpu): each token takes two
    distinct experts, the first pick's logit above the second's, the rest far below."""
    assert top_k == 2 and sum(counts) == T * top_k
    # tokens per expert pair {a, b}: solve the pair counts greedily, largest remaining counts first
    left = list(counts)
    picks = []
    for _ in range(T):
        order = sorted(range(E), key=lambda e: -left[e])
        a, b = order[0], order[1]
        left[a] -= 1
        left[b] -= 1
        picks.append((a, b))
    assert all(v == 0 for v in left), left
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(T, E, generator=g) - 10.0
    for t, (a, b) in enumerate(picks):
        first, second = (a, b) if torch.rand(1, generator=g).item() < 0.5 else (b, a)
        logits[t, first] = 2.0 + torch.rand(1, generator=g).item()
        logits[t, second] = 1.0 + torch.rand(1, generator=g).item()
    return logits


# --------------------------------------------------------------------------------------------------
# one routing: layouts, reference outputs, and each variant's check
# --------------------------------------------------------------------------------------------------
def cpu_inputs(shape, dtype, seed=0):
    """x, w13, w2 from a CPU generator (the interpreter's inputs)."""
    T, E, K, HD, I = shape
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(T, HD, generator=g).to(dtype), (torch.randn(E, 2 * I, HD, generator=g) / HD ** 0.5).to(dtype),
            (torch.randn(E, HD, I, generator=g) / I ** 0.5).to(dtype))


def prepare(tiles, x, w13, w2, logits, top_k):
    """The three layouts (template, split, mixed) of one routing, their gathered x, the template's h and
    y, and the template's h moved into each layout (the down variants' input)."""
    device, dtype = x.device, x.dtype
    K, HD, I = top_k, x.shape[1], w2.shape[2]
    tpl = template_layout(logits, K, tiles)
    lays = {"template": tpl, "split": align_tails(logits, K, tiles, False),
            "mixed": align_tails(logits, K, tiles, True)}
    xs = {"template": template_gather(tpl, x, tiles)}
    for name in ("split", "mixed"):
        xs[name] = gather(lays[name], x, tiles)
    rop = {name: row_of_pair(lay, tiles) for name, lay in lays.items()}
    # every layout routes the same pairs with the same weights (same routing kernel)
    for name in ("split", "mixed"):
        assert torch.equal(lays[name]["weights"], tpl["weights"])
    h_ref = torch.zeros((tpl["rows"], I), device=device, dtype=dtype)
    y_ref = torch.zeros((tpl["n_pairs"], HD), device=device, dtype=dtype)
    launch([template_up_spec(xs["template"], w13, h_ref, tpl["sorted_ids"], tpl["block_expert"], tpl["n_pairs"],
                             tpl["num_m_blocks"], K, tiles, tiles["BLOCK_M"], tiles["num_warps"])])
    launch([template_down_spec(h_ref, w2, y_ref, tpl["sorted_ids"], tpl["block_expert"], tpl["weights"],
                               tpl["n_pairs"], tpl["num_m_blocks"], tiles, tiles["BLOCK_M"], tiles["num_warps"])])
    h_in = {}
    for name in ("split", "mixed"):
        h = torch.zeros((lays[name]["rows"], I), device=device, dtype=dtype)
        h[rop[name]] = h_ref[rop["template"]]
        h_in[name] = h
    return dict(x=x, w13=w13, w2=w2, lays=lays, xs=xs, rop=rop, h_ref=h_ref, y_ref=y_ref, h_in=h_in)


def variant_runs(variant, s, tiles):
    """(h, run_up, check_up, y, run_down, check_down) of one variant; outputs poisoned with NaN."""
    layout = VARIANTS[variant][0]
    lay = s["lays"][layout]
    I = s["w2"].shape[2]
    h = torch.full((lay["rows"], I), float("nan"), device=s["x"].device, dtype=s["x"].dtype)
    y = torch.full_like(s["y_ref"], float("nan"))
    up = up_specs(variant, lay, s["xs"][layout], s["w13"], h, tiles)
    down = down_specs(variant, lay, s["h_in"][layout], s["w2"], y, tiles)

    def check_up():
        launch(up)
        return rel_err(h[s["rop"][layout]], s["h_ref"][s["rop"]["template"]])

    def check_down():
        launch(down)
        return rel_err(y, s["y_ref"])

    return (lambda: launch(up)), check_up, (lambda: launch(down)), check_down


# --------------------------------------------------------------------------------------------------
# --check-cpu: the interpreter at a small shape
# --------------------------------------------------------------------------------------------------
def check_cpu():
    assert os.environ.get("TRITON_INTERPRET") == "1"
    tiles = CPU_TILES
    T, E, K, HD, I = SMALL
    failures = 0
    dtype = torch.float16
    routings = {"random": torch.randn(T, E, generator=torch.Generator().manual_seed(1)),
                f"built {SMALL_COUNTS}": built_logits(SMALL_COUNTS, T, E, K)}
    for label, logits in routings.items():
        try:
            s = prepare(tiles, *cpu_inputs(SMALL, dtype), logits, K)
        except AssertionError as e:
            print(f"{label}: layout FAIL: {e}", flush=True)
            failures += 1
            continue
        lays = s["lays"]
        counts = torch.bincount(torch.topk(logits, K, dim=-1).indices.flatten(), minlength=E).tolist()
        mixed = lays["mixed"]
        blocks = list(zip(*(mixed[k].tolist() for k in ("block_expert", "block_row", "block_tail"))))
        print(f"{label}: pairs per expert {counts}; padding template {padding_pct(lays['template'], tiles):.1f}%, "
              f"tail tiles {padding_pct(lays['split'], tiles):.1f}% (split) / {padding_pct(mixed, tiles):.1f}% "
              f"(mixed); split's tail blocks (expert) {lays['split']['tail_expert'].tolist()}, mixed blocks "
              f"(expert, first row, 64-row tail) {blocks}", flush=True)
        # the template's own output against torch, so that agreeing with it means something
        tpl = lays["template"]
        rows = rows_in_use(tpl, tiles)
        be = tpl["block_expert"][: rows.numel() // tiles["BLOCK_M"]].long().repeat_interleave(tiles["BLOCK_M"])
        xs = s["xs"]["template"][rows].float()
        w13f = s["w13"].float()[be]
        g = torch.einsum("rk,rnk->rn", xs, w13f[:, :I])
        u = torch.einsum("rk,rnk->rn", xs, w13f[:, I:])
        sane = rel_err(s["h_ref"][rows], torch.nn.functional.silu(g) * u)
        ok = sane < 1e-2
        failures += not ok
        print(f"  template h vs torch {sane:.2e} {'ok' if ok else 'FAIL'}", flush=True)
        for name in VARIANTS:
            _, check_up, _, check_down = variant_runs(name, s, tiles)
            for what, check in (("h", check_up), ("y", check_down)):
                err = check()
                ok = err < 1e-2
                failures += not ok
                print(f"  {name:16s} {what} max rel err {err:.2e} {'ok' if ok else 'FAIL'}", flush=True)
    print("check-cpu:", "all ok" if not failures else f"{failures} FAILED", flush=True)
    return failures


# --------------------------------------------------------------------------------------------------
# --padding: each layout's padding at the Mixtral shape, routing emulated in torch (CPU)
# --------------------------------------------------------------------------------------------------
def padding_table(seeds=10):
    T, E, K, HD, I = MIXTRAL
    bm, tm = GPU_TILES["BLOCK_M"], GPU_TILES["TAIL_M"]
    print(f"{'seed':>4s} {'template %':>10s} {'tail tiles %':>12s} {'64-row tails':>12s}  pairs per expert")
    tot = [0.0, 0.0]
    for seed in range(seeds):
        logits = torch.randn(T, E, generator=torch.Generator().manual_seed(seed))
        c = torch.bincount(torch.topk(logits, K, dim=-1).indices.flatten(), minlength=E)
        rem = c % bm
        tpl = int(((c + bm - 1) // bm * bm).sum())
        small = (rem > 0) & (rem <= tm)
        tails = int(((c // bm + (rem > tm).long()) * bm + small.long() * tm).sum())
        a, b = 100 * (tpl / (T * K) - 1), 100 * (tails / (T * K) - 1)
        tot[0] += a
        tot[1] += b
        print(f"{seed:4d} {a:10.2f} {b:12.2f} {int(small.sum()):12d}  {c.tolist()}")
    print(f"mean {tot[0] / seeds:10.2f} {tot[1] / seeds:12.2f}")


# --------------------------------------------------------------------------------------------------
# --compile-only: sm_90 without a GPU
# --------------------------------------------------------------------------------------------------
def compile_spec(spec):
    """Compile one launch spec for sm_90 (tensors may be small CPU stand-ins: a descriptor's type is its
    dtype and block; the integer arguments, given at the Mixtral values, set the divisibility hints)."""
    kernel, _, args, consts, options = spec
    return templates.compile_sm90(kernel, args, consts, options)


def compile_only():
    T, E, K, HD, I = MIXTRAL
    tiles = GPU_TILES
    bm, tm = tiles["BLOCK_M"], tiles["TAIL_M"]
    n_pairs = T * K
    nb = triton.cdiv(n_pairs, bm) + E
    print(f"{'kernel':34s} {'dtype':8s} regs spills(B) smem(B) compile(s)", flush=True)
    for dtype in (torch.bfloat16, torch.float16):
        dt = str(dtype)[6:]
        # small stand-ins of the right dtype and row length: only dtype, block and alignment reach the
        # signature (the descriptors' shapes are runtime values)
        xs = torch.empty((4 * bm, HD), dtype=dtype)
        w13 = torch.empty((E, 2 * 256, HD), dtype=dtype)
        h = torch.empty((4 * bm, I), dtype=dtype)
        w2 = torch.empty((E, 256, I), dtype=dtype)
        y = torch.empty((2, HD), dtype=dtype)
        i32 = torch.empty(nb * bm, dtype=torch.int32)
        wts = torch.empty(n_pairs, dtype=torch.float32)
        lay_split = dict(layout="split", num_m_blocks=nb, n_pairs=n_pairs, sorted_ids=i32, block_expert=i32,
                         tail_expert=i32, tail_base=2 * bm, top_k=K, weights=wts)
        lay_mixed = dict(lay_split, layout="mixed", block_row=i32, block_tail=i32)
        specs = []
        for name, (layout, warps, first) in VARIANTS.items():
            if first:
                continue  # the same kernels as the _last variant
            lay = lay_mixed if layout == "mixed" else lay_split
            ups = up_specs(name, lay, xs, w13, h, tiles)
            downs = down_specs(name, lay, h, w2, y, tiles)
            if layout == "mixed":
                specs += [("gate/up mixed", ups[0]), ("down mixed", downs[0])]
            else:
                if not specs:
                    specs += [("gate/up template BLOCK_M 128 w8", ups[0]), ("down template BLOCK_M 128 w8", downs[0])]
                specs += [(f"gate/up template BLOCK_M {tm} w{warps}", ups[1]),
                          (f"down template BLOCK_M {tm} w{warps}", downs[1])]
        if dtype == torch.bfloat16:  # the alignment and the gather: small kernels, compiled to see they build
            e_pad, block_t = triton.next_power_of_2(E), tiles["route_block_t"]
            chunks = triton.cdiv(T, block_t)
            for mixed in (False, True):
                specs.append((f"align {'mixed' if mixed else 'split'}", (
                    moe_align_tails_kernel, None,
                    (i32, i32, i32, i32, i32, i32, i32, i32, i32, n_pairs, E, chunks, nb, nb * bm),
                    dict(E_PAD=e_pad, PAIRS_PER_CHUNK=block_t * K, BLOCK_M=bm, TAIL_M=tm,
                         BLOCK_P=max(16, min(256, 8192 // e_pad)), BLOCK_C=16, MIXED=mixed), dict(num_warps=4))))
        specs.append(("gather mixed", (moe_gather_rows_kernel, None, (xs, xs, i32, i32, n_pairs, HD, HD),
                                       dict(TOP_K=K, BLOCK_R=tm, BLOCK_D=MOE.GATHER_BLOCK_D), dict(num_warps=4))))
        for name, spec in specs:
            try:
                t0 = time.time()
                compiled = compile_spec(spec)
                seconds = time.time() - t0
                u = templates.resource_usage(compiled)
                print(f"{name:34s} {dt:8s} {u['regs']:4d} {u['spill_bytes']:9d} {u['smem']:7d} {seconds:6.1f}"
                      + (f" WARNINGS {u['ptxas_warnings']}" if u["ptxas_warnings"] else "")
                      + (" OVER 232448" if u["smem"] > 232448 else ""), flush=True)
            except Exception as e:  # one kernel's failure is a result, the others go on
                print(f"{name:34s} {dt:8s} ERROR {templates.last_lines(e)}", flush=True)


# --------------------------------------------------------------------------------------------------
# GPU run
# --------------------------------------------------------------------------------------------------
def timed(run):
    """Three do_bench medians (warmup 25 ms, rep 200 ms): their median and min-max spread % (as moe_down.py)."""
    times = [triton.testing.do_bench(run, warmup=25, rep=200, return_mode="median") for _ in range(3)]
    ms = statistics.median(times)
    return ms, 100 * (max(times) - min(times)) / ms


def main_gpu(out_dir, budget_s):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    tiles = dict(GPU_TILES)
    cfg = MOE.CONFIG
    for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "DOWN_BLOCK_N", "GROUP_M", "num_warps", "num_stages"):
        assert tiles[key] == cfg[key], key   # the template's kernels run at its CONFIG
    T, E, K, HD, I = MIXTRAL
    n_pairs = T * K
    results = dict(time=time.ctime(), device=torch.cuda.get_device_name(0), torch=torch.__version__,
                   triton=triton.__version__, shape=list(MIXTRAL), tiles=tiles, rows=[])
    rows = results["rows"]

    def save():
        (out / "moe_tail_tiles.json").write_text(json.dumps(results, indent=1))

    def record(row, flops, run, check=None):
        if time.time() - started > budget_s:
            row["error"] = f"skipped: past --budget-s {budget_s:.0f}"
        else:
            try:
                t0 = time.time()
                if check:
                    row["max_rel_err"] = check()
                    if not row["max_rel_err"] < 1e-2:          # NaN fails too
                        raise AssertionError(f"differs from the template's: max rel err {row['max_rel_err']:.3g}")
                else:
                    run()
                torch.cuda.synchronize()
                row["first_call_s"] = round(time.time() - t0, 2)  # compile included
                row["ms"], row["spread_pct"] = timed(run)
                if flops:
                    row["tflops"] = flops / row["ms"] * 1e-9
            except Exception as e:  # a variant that does not compile, fit or agree is a result too
                row["error"] = templates.last_lines(e)
        rows.append(row)
        fig = row.get("error") or (f"{row['ms']:.3f} ms" + (f" {row['tflops']:.0f} TFLOP/s" if flops else "")
                                   + f" ±{row['spread_pct']:.1f}%")
        print(f"{row['dtype']} {row['gemm']:7s} {row['variant']:26s} {fig}", flush=True)
        save()
        return row

    torch.manual_seed(0)   # once, and the inputs drawn in moe_down.py's order: the same routings as its run
    for dtype in (torch.bfloat16, torch.float16):
        dt = str(dtype)[6:]
        x = torch.randn(T, HD, device="cuda", dtype=dtype)
        w13 = torch.randn(E, 2 * I, HD, device="cuda", dtype=dtype) / HD ** 0.5
        w2 = torch.randn(E, HD, I, device="cuda", dtype=dtype) / I ** 0.5
        logits = torch.randn(T, E, device="cuda")
        s = prepare(tiles, x, w13, w2, logits, K)
        lays = s["lays"]
        pad = {name: padding_pct(lay, tiles) for name, lay in lays.items()}
        n_tails = int((lays["split"]["tail_expert"] >= 0).sum())
        counts = torch.bincount(torch.topk(logits, K, dim=-1).indices.flatten(), minlength=E).tolist()
        print(f"{dt}: {n_pairs} pairs, per expert {counts}; padding template {pad['template']:.2f}%, tail tiles "
              f"{pad['split']:.2f}% ({n_tails} experts' tails on 64-row tiles)", flush=True)
        results.setdefault("padding_pct", {})[dt] = dict(pad, pairs_per_expert=counts, tails_on_64=n_tails)
        base = dict(dtype=dt)
        up_flops, down_flops = 2.0 * n_pairs * 2 * I * HD, 2.0 * n_pairs * I * HD
        a_dense = torch.randn(n_pairs, HD, device="cuda", dtype=dtype)
        h_dense = torch.randn(n_pairs, I, device="cuda", dtype=dtype)

        # routing + alignment + gather, as each layout runs them (tensors allocated per call, as the layer does)
        record(dict(base, gemm="align", variant="template"), 0,
               lambda: template_gather(template_layout(logits, K, tiles), x, tiles))
        for name in ("split", "mixed"):
            record(dict(base, gemm="align", variant=name), 0,
                   lambda name=name: gather(align_tails(logits, K, tiles, name == "mixed"), x, tiles))

        tpl = lays["template"]
        up_ref = [template_up_spec(s["xs"]["template"], s["w13"], s["h_ref"], tpl["sorted_ids"], tpl["block_expert"],
                                   n_pairs, tpl["num_m_blocks"], K, tiles, tiles["BLOCK_M"], tiles["num_warps"])]
        down_ref = [template_down_spec(s["h_ref"], s["w2"], s["y_ref"], tpl["sorted_ids"], tpl["block_expert"],
                                       tpl["weights"], n_pairs, tpl["num_m_blocks"], tiles, tiles["BLOCK_M"],
                                       tiles["num_warps"])]
        runs = {name: variant_runs(name, s, tiles) for name in VARIANTS}
        dense_up = record(dict(base, gemm="gate/up", variant="dense torch.matmul"), up_flops,
                          lambda: torch.matmul(a_dense, s["w13"][0].T))
        record(dict(base, gemm="gate/up", variant="template (CONFIG)"), up_flops, lambda: launch(up_ref))
        for name, (run_up, check_up, _, _) in runs.items():
            record(dict(base, gemm="gate/up", variant=name), up_flops, run_up, check_up)
        dense_down = record(dict(base, gemm="down", variant="dense torch.matmul"), down_flops,
                            lambda: torch.matmul(h_dense, s["w2"][0].T))
        record(dict(base, gemm="down", variant="template (CONFIG)"), down_flops, lambda: launch(down_ref))
        for name, (_, _, run_down, check_down) in runs.items():
            record(dict(base, gemm="down", variant=name), down_flops, run_down, check_down)

        mine = [r for r in rows if r["dtype"] == dt and "ms" in r]
        for r in mine:
            ref = {"gate/up": dense_up, "down": dense_down}.get(r["gemm"])
            if ref and "tflops" in ref and "tflops" in r:
                r["of_dense"] = r["tflops"] / ref["tflops"]
        summary = {}
        if "ms" in dense_up and "ms" in dense_down:
            dense_pair = dense_up["ms"] + dense_down["ms"]
            align = {r["variant"]: r["ms"] for r in mine if r["gemm"] == "align"}
            for label, pick in (("template", lambda r: r["variant"].startswith("template")),
                                ("split", lambda r: r["variant"].startswith("split")),
                                ("mixed", lambda r: r["variant"] == "mixed")):
                best = {}
                for gemm in ("gate/up", "down"):
                    cands = [r for r in mine if r["gemm"] == gemm and pick(r)]
                    if cands:
                        best[gemm] = min(cands, key=lambda r: r["ms"])
                if len(best) == 2:
                    gemms = best["gate/up"]["ms"] + best["down"]["ms"]
                    summary[label] = dict(up=best["gate/up"]["variant"], down=best["down"]["variant"],
                                          gemms_of_dense_pair=dense_pair / gemms,
                                          with_align_of_dense_pair=dense_pair / (gemms + align.get(label, 0.0)))
            results.setdefault("summary", {})[dt] = summary
        print(f"{dt} of dense: " + ", ".join(f"{r['gemm']} {r['variant']} {r['of_dense']:.3f}" for r in mine
                                             if "of_dense" in r), flush=True)
        for label, sm in summary.items():
            print(f"{dt} pair, {label}: {sm['up']} + {sm['down']} = {sm['gemms_of_dense_pair']:.3f} of the dense "
                  f"pair ({sm['with_align_of_dense_pair']:.3f} with its alignment + gather)", flush=True)
        save()
    print(f"done in {time.time() - started:.0f} s", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=".")
    p.add_argument("--budget-s", type=float, default=140.0, help="start no new row after this many seconds")
    p.add_argument("--check-cpu", action="store_true", help="every variant under the interpreter, small shapes")
    p.add_argument("--compile-only", action="store_true", help="compile the GPU variants for sm_90, print resources")
    p.add_argument("--padding", action="store_true", help="each layout's padding at the Mixtral shape (CPU)")
    args = p.parse_args()
    if args.check_cpu:
        sys.exit(1 if check_cpu() else 0)
    if args.compile_only:
        compile_only()
        return
    if args.padding:
        padding_table()
        return
    main_gpu(args.out, args.budget_s)


if __name__ == "__main__":
    main()
