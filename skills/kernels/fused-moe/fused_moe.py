"""Fused mixture-of-experts layer (Mixtral-style SwiGLU experts, top-k routing), forward.

Inputs: x (T, Hd) tokens; router_logits (T, E) fp32; w13 (E, 2I, Hd) = [gate; up] weights per expert
(nn.Linear layout, rows 0..I-1 gate, I..2I-1 up); w2 (E, Hd, I) down weights. fp16/bf16.

The math, per token t:
    p        = softmax(router_logits[t])                    (fp32)
    ids, wts = top_k(p); wts = wts / sum(wts)                 (Mixtral renormalizes the k kept weights)
    out[t]   = sum_{j<k} wts[j] * W2[e] @ (silu(W1[e] x_t) * (W3[e] x_t)),   e = ids[j]
    silu(g)  = g * sigmoid(g) = g / (1 + exp(-g))
FLOPs: 2*T*k*Hd*2I (gate+up) + 2*T*k*I*Hd (down) = 6*T*k*Hd*I.

How it runs (three steps, no per-expert Python loop, no host synchronization):
  1. route + align (a memset and two small kernels, no host sync): top-k per token, then the T*k
     (token, slot) pairs are placed grouped by expert, each expert's run padded to a multiple of BLOCK_M
     with a sentinel id (T*k): a counting sort whose per-expert counters are advanced by atomics (each
     program of a few tokens reserves its run of each expert it chose), then every pair's row = its
     expert's padded start + its rank. block_expert[b] says which expert owns row-block b (-1: past the
     end; those programs exit at once). Done with ~15 torch ops this step cost 0.4 ms of CPU launch time
     on the H200 machine, more than the small shape's GEMMs.
  2. gate_up kernel: program (b, n) takes BLOCK_M token rows of x, multiplies them by the gate rows
     and the up rows of expert block_expert[b], and writes h = silu(gate) * up for its BLOCK_N
     columns, in the padded sorted order (one rounding to the input dtype, as every implementation
     does between the two GEMMs). On Hopper the rows come by TMA from x_sorted, x gathered once into
     that order by moe_gather_kernel (the rows are scattered in x), and the weights by TMA through a
     descriptor made on the host; elsewhere each program gathers its rows by pointer loads.
  3. down kernel: h (contiguous rows) @ W2[e]^T, scaled by the pair's routing weight, stored to
     y[pair] (T*k, Hd); then moe_sum_kernel adds each token's k rows of y in fp32.
  On Hopper with GLUON 1, steps 2 and 3 are one warp-specialized, persistent Gluon kernel
  (moe_gemm_gluon_kernel) launched twice, its tiles grouped by expert; the down GEMM writes y in
  expert-sorted order, unweighted, and moe_sum_kernel weights each pair's row as it adds.
Grouped ordering (GROUP_M row-blocks of one expert per column of weight tiles) keeps a weight tile in
L2 while the expert's row-blocks use it: each weight byte is read from DRAM about once.
"""

import functools
import math
import os
import warnings

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

try:  # griddepcontrol (programmatic dependent launch) from Triton 3.3
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:
    gdc_launch_dependents = gdc_wait = None

try:  # Gluon is experimental: absent from older Tritons, renamed between releases
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                                  warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

    tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared  # async_load from 3.9
    tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
except (ImportError, AttributeError):
    gluon = None

CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 4,
          "DOWN_BLOCK_N": 256, "DOWN_num_stages": 4, "GLUON": 1, "AUTOTUNE": 1}
CONFIG_SPACE = {"BLOCK_M": [64, 128], "BLOCK_N": [64, 128, 256], "BLOCK_K": [32, 64, 128], "GROUP_M": [1, 4, 8, 16],
                "num_warps": [4, 8], "num_stages": [2, 3, 4, 5], "DOWN_BLOCK_N": [64, 128, 256],
                "DOWN_num_stages": [2, 3, 4, 5], "GLUON": [0, 1], "AUTOTUNE": [0, 1]}
# Extra candidates for AUTOTUNE (keys missing here come from CONFIG), timed once per shape. Few rows
# per expert favour smaller row blocks (less padding); the down GEMM's N tile trades reuse for programs.
AUTOTUNE_CONFIGS = [
    {"DOWN_BLOCK_N": 128},
    {"BLOCK_M": 64, "num_warps": 4},
    {"BLOCK_M": 64, "num_warps": 4, "DOWN_BLOCK_N": 128},
]
# Where each expert gets few rows the layer is bound by reading its weights once (issue 52). r = T*k/E rows
# an expert make r flops a weight byte (16-bit); at r <= STREAM_MAX_ROWS that is under half of Hopper's
# ridge (the H100: 989 TFLOP/s over 3.35 TB/s, ~295 flop a byte), and there streaming_config's layout takes
# the layer (AUTOTUNE 1 times it first among the candidates).
STREAM_MAX_ROWS = 128
SHARED_MEMORY = 232448  # bytes of shared memory a block may use on the H100 / H200
# moe_gather_kernel's columns a program: BLOCK_M rows of 128 16-bit elements, 32 KB copied at BLOCK_M 128
GATHER_BLOCK_D = 128
SUM_BLOCK_D = 1024  # hidden columns a program of moe_sum_kernel adds
ROUTE_TILE = 256  # logits a program (one warp) of moe_route_kernel: route_block_t
ALIGN_BLOCK_P = 1024  # pairs a program (8 warps) of moe_align_kernel places
# On the Gluon path (Hopper) the route, align, gather, both GEMMs and the sum are launched as programmatic
# dependents (PDL: each may start before the kernel before it ends, and waits for it in the kernel,
# griddepcontrol.wait): a GEMM's programs fill their rings with weights under the previous kernel's tail, and
# no kernel's launch leaves the GPU idle between two (issue 52: do_bench read 6.6 us more than the profiler's
# kernels at 512 tokens on 64 experts). Where: pdl_pays (the layer streams its weights, an expert's rows in one
# row block). None: that rule;
# True / False: forced (an A/B switch; True needs Triton's griddepcontrol, from 3.3).
PDL_LAUNCH = None
# The Gluon GEMMs store only the rows of h and y that hold a (token, expert) pair, not each expert's padding
# rows (moe_gemm_gluon_kernel's PAIRS_ONLY): at 64 tokens on 64 experts, top 6, 384 of 4096 rows; at 1024
# tokens (128-row blocks) 6144 of 8192. Where: pairs_only_pays (the layer streams its weights). None: that
# rule; True / False: forced (an A/B switch: False stores whole blocks, as before).
PAIRS_ONLY = None
# The Gluon GEMMs' programs claim their tiles past the grid's first round from a counter as they go (the kernel's
# CLAIM), not every num_programs-th: where tiles differ in cost, a fixed deal's time is its unluckiest program's.
# They differ on two consumers, where an expert's last 128-row block may hold its pairs in its first half alone
# and the second is skipped (4096 tokens on 60 experts, top 4: 561 of 1881 gate/up tiles; dealt every 132nd, the
# longest program still ran 15 whole tiles, where claiming evens them out to ~12.2). Where: two consumers. None:
# that rule; True / False: forced (an A/B switch).
CLAIM_TILES = None


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # Grouped ordering: GROUP_M row-blocks share one column of weight tiles before moving right.
    in_group = GROUP_M * num_pid_n
    group = tile_id // in_group
    first_m = group * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    return first_m + (tile_id % in_group) % group_m, (tile_id % in_group) // group_m


@triton.jit
def moe_route_kernel(logits_ptr, ids_ptr, rank_ptr, weights_ptr, counts_ptr, T, E: tl.constexpr,
                     TOP_K: tl.constexpr, E_PAD: tl.constexpr, BLOCK_T: tl.constexpr, PDL: tl.constexpr = 0):
    # Routing for BLOCK_T tokens on one warp: top-k of the logits (softmax is monotonic, so the top-k of the
    # logits is the top-k of the probabilities), weights = softmax over the k kept logits (equal to softmax,
    # then renormalize), and each pair's rank among all pairs of its expert.
    # The tile stays [BLOCK_T, E_PAD] throughout: each round is two reductions over the experts and
    # elementwise updates; which slot took each expert is kept in the tile (slot, -1: none), so the pairs
    # are written once at the end by masked scatters, not by a reduction a round.
    # Ranks: the program's count of each expert is added to counts[e] by one atomic (its return value is
    # where the program's run of e starts), and a token's rank within that run is the number of the
    # program's earlier tokens that chose e (a token picks an expert at most once). The order of programs
    # within an expert's run is the order the atomics land, which varies run to run; the layer's output
    # does not (a GEMM row depends on its own token and expert only, not on its position in the run, and
    # moe_sum_kernel adds a token's k rows in slot order), so it stays bitwise reproducible.
    # PDL (the Gluon path, launched as a programmatic dependent of the counters' memset or the logits' copy):
    # wait for it before anything is read, then let moe_align_kernel launch (it waits for this kernel).
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    pid = tl.program_id(0)
    offs_t = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    tmask = offs_t < T
    ecols = tl.arange(0, E_PAD)
    logit = tl.load(logits_ptr + offs_t.to(tl.int64)[:, None] * E + ecols[None, :],
                    mask=tmask[:, None] & (ecols[None, :] < E), other=float("-inf"))
    logit = tl.where(tmask[:, None] | (ecols[None, :] >= E), logit, 0.0)   # rows past T: finite, never stored
    remaining = logit
    slot = tl.full([BLOCK_T, E_PAD], -1, dtype=tl.int32)
    for j in tl.static_range(TOP_K):
        # max, then the lowest expert holding it (torch.topk's order on ties): two reductions of one
        # value each, a quarter fewer instructions than tl.argmax's (value, index) pairs
        m = tl.max(remaining, 1)
        idx = tl.min(tl.where(remaining == m[:, None], ecols[None, :], E_PAD), 1)
        if j == 0:
            top = m
        hit = ecols[None, :] == idx[:, None]
        slot = tl.where(hit, j, slot)
        remaining = tl.where(hit, float("-inf"), remaining)
    w = tl.where(slot >= 0, tl.exp(logit - top[:, None]), 0.0)    # rows past T too: their sum is >= 1
    w = w / tl.sum(w, 1)[:, None]
    chosen = (slot >= 0) & tmask[:, None]
    chosen_i = chosen.to(tl.int32)
    count = tl.sum(chosen_i, 0)
    start = tl.atomic_add(counts_ptr + ecols, count, mask=count > 0, sem="relaxed")
    rank = start[None, :] + tl.cumsum(chosen_i, 0) - chosen_i
    pair = offs_t[:, None] * TOP_K + slot
    tl.store(ids_ptr + pair, ecols[None, :] + tl.zeros_like(slot), mask=chosen)
    tl.store(rank_ptr + pair, rank, mask=chosen)
    tl.store(weights_ptr + pair, w, mask=chosen)


@triton.jit
def moe_align_kernel(ids_ptr, rank_ptr, counts_ptr, sorted_ids_ptr, sorted_row_ptr, block_expert_ptr,
                     expert_start_ptr, n_pairs, E, num_m_blocks, E_PAD: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_P: tl.constexpr, BLOCK_B: tl.constexpr, PDL: tl.constexpr = 0):
    # Each program places BLOCK_P pairs: slot = start of the expert's padded run + the pair's rank
    # (sorted_row[pair] = slot, the inverse map), and names the owner of its share of the row blocks.
    # Program 0 also writes the padding sentinels and expert_start (E + 1 entries: each expert's first row
    # block, then the blocks in use). Writes never overlap, so no ordering between programs is needed.
    # PDL: wait for moe_route_kernel, then let the gather launch (it waits for this kernel).
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    pid = tl.program_id(0)
    ecols = tl.arange(0, E_PAD)
    total = tl.load(counts_ptr + ecols, mask=ecols < E, other=0)
    padded = (total + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    pad_end = tl.cumsum(padded, 0)
    pad_start = pad_end - padded
    offs_p = pid * BLOCK_P + tl.arange(0, BLOCK_P)
    pmask = offs_p < n_pairs
    e = tl.load(ids_ptr + offs_p, mask=pmask, other=0)
    dest = tl.gather(pad_start, e, 0) + tl.load(rank_ptr + offs_p, mask=pmask, other=0)
    tl.store(sorted_ids_ptr + dest, offs_p, mask=pmask)
    tl.store(sorted_row_ptr + offs_p, dest, mask=pmask)
    # owner of each row block: the number of experts whose run ends at or before its first row
    end_e = tl.where(ecols < E, pad_end, 2147483647)
    for b0 in range(pid * BLOCK_B, num_m_blocks, tl.num_programs(0) * BLOCK_B):
        blk = b0 + tl.arange(0, BLOCK_B)
        owner = tl.sum((end_e[None, :] <= (blk * BLOCK_M)[:, None]).to(tl.int32), 1)
        tl.store(block_expert_ptr + blk, tl.where(owner < E, owner, -1), mask=blk < num_m_blocks)
    if pid == 0:
        # padding slots of each expert's run: [pad_start + total, pad_end)
        jcols = tl.arange(0, BLOCK_M)
        pad_slot = (pad_start + total)[:, None] + jcols[None, :]
        tl.store(sorted_ids_ptr + pad_slot, tl.zeros([E_PAD, BLOCK_M], dtype=tl.int32) + n_pairs,
                 mask=jcols[None, :] < (padded - total)[:, None])
        tl.store(expert_start_ptr + 1 + ecols, pad_end // BLOCK_M, mask=ecols < E)
        tl.store(expert_start_ptr, 0)


@triton.jit
def moe_gather_kernel(x_ptr, xs_ptr, sorted_ids_ptr, block_expert_ptr, n_pairs, HD, stride_x,
                      TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, PAD_ZEROS: tl.constexpr,
                      PDL: tl.constexpr = 0):
    # x_sorted[r] = x[pair_r // TOP_K] for the pairs' rows of the blocks in use; padding rows zeros if
    # PAD_ZEROS, else left as they are (the Gluon GEMMs): a GEMM row depends on its own row of A only, and no
    # padding row of h or y is read as a pair's (the down kernels store, moe_sum_kernel reads, pairs' rows
    # alone). Zeroing them wrote 16.8 MB at 64 tokens on 64 experts (64 blocks of 64 rows for 384 pairs),
    # 1.6 MB of it needed. The Triton GEMMs keep the zeros: they run in the interpreter, where SwiGLU's exp
    # of whatever a padding row holds may overflow, and numpy says so.
    # program (b, d) copies columns [d * BLOCK_D, (d + 1) * BLOCK_D) of row block b
    # PDL (the Gluon path: a programmatic dependent launch after moe_align_kernel): wait for the alignment's
    # outputs, then let the gate/up GEMM launch: its programs fill their rings with w13 (the first tile's
    # boxes) while this kernel copies, and read x_sorted only after their own wait for its completion.
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    pid_m = tl.program_id(0)
    if tl.load(block_expert_ptr + pid_m) < 0:
        return
    offs_r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pair = tl.load(sorted_ids_ptr + offs_r)
    valid = pair < n_pairs
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_ok = offs_d < HD
    rows = tl.load(x_ptr + (pair // TOP_K).to(tl.int64)[:, None] * stride_x + offs_d[None, :],
                   mask=valid[:, None] & d_ok[None, :], other=0.0)
    written = d_ok[None, :]
    if not PAD_ZEROS:
        written = written & valid[:, None]
    tl.store(xs_ptr + offs_r.to(tl.int64)[:, None] * HD + offs_d[None, :], rows, mask=written)


@triton.jit
def moe_gate_up_kernel(x_src, w_src, h_ptr, sorted_ids_ptr, block_expert_ptr, n_pairs, HD, I, num_m_blocks,
                       stride_x, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, USE_TMA: tl.constexpr):
    # USE_TMA: x_src, w_src are host-made descriptors of x_sorted (num_m_blocks * BLOCK_M, HD) and of
    # w13's (E * 2, I, HD) view (gate and up of each expert), whose boxes read zeros past I. Made in
    # the kernel instead, a descriptor a program (each written and fenced) cost 9% of this GEMM at the
    # Mixtral shape (the gate/up A/B, df8b865:experiments/sweep-h200-session13/call6-moe-gate-up/). Else x_src,
    # w_src are x and w13, and each program gathers its rows.
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_m_blocks, tl.cdiv(I, BLOCK_N), GROUP_M)
    e = tl.load(block_expert_ptr + pid_m)
    if e < 0:
        return
    offs_r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_k = tl.arange(0, BLOCK_K)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if USE_TMA:
        # one [2, BLOCK_N, BLOCK_K] box of w13's (E * 2, I, HD) view holds the tile's gate rows and its up
        # rows: one wgmma 2 * BLOCK_N wide instead of two BLOCK_N wide that each read A again
        acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
        for k0 in range(0, HD, BLOCK_K):
            a = x_src.load([pid_m * BLOCK_M, k0])
            w = w_src.load([2 * e, pid_n * BLOCK_N, k0]).reshape(2 * BLOCK_N, BLOCK_K)
            acc = tl.dot(a, tl.trans(w), acc)
        acc_g, acc_u = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N)), (0, 2, 1)))
    else:
        pair = tl.load(sorted_ids_ptr + offs_r)
        valid = pair < n_pairs
        x_ptrs = x_src + (pair // TOP_K).to(tl.int64)[:, None] * stride_x + offs_k[None, :]
        gate_row = e * 2 * I + pid_n * BLOCK_N                       # first gate row of this tile in (E*2I, HD)
        wg_ptrs = w_src + (gate_row.to(tl.int64) + tl.arange(0, BLOCK_N))[:, None] * HD + offs_k[None, :]
        acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, HD, BLOCK_K):
            a = tl.load(x_ptrs, mask=valid[:, None] & (offs_k[None, :] + k0 < HD), other=0.0)
            wmask = (offs_n[:, None] < I) & (offs_k[None, :] + k0 < HD)
            wg = tl.load(wg_ptrs, mask=wmask, other=0.0)
            wu = tl.load(wg_ptrs + I * HD, mask=wmask, other=0.0)
            wg_ptrs += BLOCK_K
            x_ptrs += BLOCK_K
            acc_g = tl.dot(a, tl.trans(wg), acc_g)
            acc_u = tl.dot(a, tl.trans(wu), acc_u)
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u                        # silu(gate) * up, fp32
    h_ptrs = h_ptr + offs_r.to(tl.int64)[:, None] * I + offs_n[None, :]
    tl.store(h_ptrs, h.to(h_ptr.dtype.element_ty), mask=offs_n[None, :] < I)


@triton.jit
def moe_down_kernel(h_src, w_src, y_ptr, sorted_ids_ptr, block_expert_ptr, topk_w_ptr, n_pairs, HD, I,
                    num_m_blocks, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    GROUP_M: tl.constexpr, USE_TMA: tl.constexpr):
    # USE_TMA: h_src, w_src are host-made descriptors of h and of w2's (E * HD, I) view (a tile past the
    # expert's HD rows reads the next expert's: those columns are never stored); else h and w2.
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_m_blocks, tl.cdiv(HD, BLOCK_N), GROUP_M)
    e = tl.load(block_expert_ptr + pid_m)
    if e < 0:
        return
    offs_r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    w_row = e * HD + pid_n * BLOCK_N                                  # first row of this tile in (E*HD, I)
    if not USE_TMA:
        h_ptrs = h_src + offs_r.to(tl.int64)[:, None] * I + offs_k[None, :]
        w_ptrs = w_src + (w_row.to(tl.int64) + tl.arange(0, BLOCK_N))[:, None] * I + offs_k[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, I, BLOCK_K):
        if USE_TMA:
            a = h_src.load([pid_m * BLOCK_M, k0])
            w = w_src.load([w_row, k0])
        else:
            kmask = offs_k[None, :] + k0 < I
            a = tl.load(h_ptrs, mask=kmask, other=0.0)
            w = tl.load(w_ptrs, mask=(offs_n[:, None] < HD) & kmask, other=0.0)
            h_ptrs += BLOCK_K
            w_ptrs += BLOCK_K
        acc = tl.dot(a, tl.trans(w), acc)
    pair = tl.load(sorted_ids_ptr + offs_r)
    valid = pair < n_pairs
    wt = tl.load(topk_w_ptr + pair, mask=valid, other=0.0)
    acc = acc * wt[:, None]
    y_ptrs = y_ptr + pair.to(tl.int64)[:, None] * HD + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < HD))


@triton.jit
def moe_sum_kernel(y_ptr, out_ptr, sorted_row_ptr, topk_w_ptr, HD, stride_out, TOP_K: tl.constexpr,
                   K_PAD: tl.constexpr, BLOCK_D: tl.constexpr, SORTED: tl.constexpr, PDL: tl.constexpr = 0):
    # out[t] = sum_j y[t * TOP_K + j], a token's k expert outputs (already weighted), added in fp32. A
    # token's k rows are adjacent in y, so every load is contiguous: torch.sum over the k axis of y's
    # (T, k, HD) view took 72 us at the Mixtral shape for 96 MB of traffic (25 us at the copy rate).
    # SORTED (the Gluon path): y is the down GEMM's output in expert-sorted order, unweighted, so
    # out[t] = sum_j w[pair] * y[sorted_row[pair]], pair = t * TOP_K + j.
    # PDL (after the Gluon down GEMM, launched as a programmatic dependent): wait for it to complete (y written)
    # before anything is read or written
    if PDL:
        gdc_wait()
    t = tl.program_id(0)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    j = tl.arange(0, K_PAD)
    pairs = t * TOP_K + j
    rows = pairs.to(tl.int64)
    if SORTED:
        rows = tl.load(sorted_row_ptr + pairs, mask=j < TOP_K, other=0).to(tl.int64)
    y = tl.load(y_ptr + rows[:, None] * HD + offs_d[None, :], mask=(j[:, None] < TOP_K) & (offs_d[None, :] < HD),
                other=0.0).to(tl.float32)
    if SORTED:
        y = y * tl.load(topk_w_ptr + pairs, mask=j < TOP_K, other=0.0)[:, None]
    total = tl.sum(y, axis=0)
    tl.store(out_ptr + t.to(tl.int64) * stride_out + offs_d, total.to(out_ptr.dtype.element_ty), mask=offs_d < HD)


# The Gluon GEMMs' register budgets (setmaxnreg): the loader only issues copies and waits on barriers (24,
# the minimum); each consumer warpgroup asks for the 240 that leaves of 64K, room beside its 64x256 fp32
# accumulator (128 a thread) for the SwiGLU epilogue.
GLUON_LOADER_REGS = 24
GLUON_CONSUMER_REGS = 240

if gluon is not None:
    @gluon.jit
    def _gluon_tile(tile_id, block_expert_ptr, expert_start_ptr, n_tiles):
        # Each expert's row blocks are one group: consecutive tile ids walk down the expert's blocks in
        # one column of weight tiles, then the next column, so the programs running at once share each
        # weight tile through L2 and every weight byte comes from DRAM about once (_tile_coords's GROUP_M
        # groups straddle experts, and the Triton gate/up GEMM read w13 twice: 4.0 GB for 1.9).
        # An expert's tiles are ids [first * n_tiles, end * n_tiles), so tile_id // n_tiles is one of
        # its blocks. Returns the tile's row block, column tile and expert (-1: past the blocks in use).
        # Every partition calls this on the same tile ids, so they agree on what runs.
        e = gl.load(block_expert_ptr + tile_id // n_tiles)
        first = gl.load(expert_start_ptr + gl.maximum(e, 0))
        group_m = gl.maximum(gl.load(expert_start_ptr + gl.maximum(e, 0) + 1) - first, 1)
        local = tile_id - first * n_tiles
        return first + local % group_m, local // group_m, e

    @gluon.jit
    def _grid_dependency_wait():
        # griddepcontrol.wait: returns once the kernel launched before this one on the stream has completed and
        # its writes are visible (at once where the launch was not a programmatic dependent one)
        gl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _grid_dependency_launch_dependents():
        # griddepcontrol.launch_dependents: the next kernel on the stream, launched as a programmatic dependent,
        # may start once every program of this one has said so or exited (its programs still take an SM only
        # where one has room: beside a GEMM program's ~220 KB of shared memory, none)
        gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=gl.int32, is_pure=False,
                                  pack=1)

    @gluon.jit
    def _claim_tile(counter_ptr):
        # A claim of the launch's counter's next value (0, 1, ...: the tiles past the grid's first round, in order):
        # a tensor atomic on lane 0 of the loader's warp (Triton 3.6's atomics take no scalar operand), its result
        # left in lane 0's register. Reading it waits out the atomic's round trip (~1 us): _claimed reads it once
        # the tile's copies are issued.
        lane = gl.arange(0, 32, gl.BlockedLayout([1], [32], [1], [0]))
        return gl.atomic_add(counter_ptr + lane, lane * 0 + 1, mask=lane == 0, sem="relaxed")

    @gluon.jit
    def _claimed(got):
        # _claim_tile's value, to every lane
        lane = gl.arange(0, 32, gl.BlockedLayout([1], [32], [1], [0]))
        return gl.max(gl.where(lane == 0, got, 0), 0)

    @gluon.jit
    def _post_tile(tile_ring, tile_ready, tile_free, j, tile_id):
        # The loader's j-th tile id (past the tiles: the end) into the ring's slot j % 2 once both consumers have
        # read what the lap before left there. The arrive releases the store to the consumers' wait (it acquires).
        slot = j % tile_ring.shape[0]
        mbarrier.wait(tile_free.index(slot), ((j // tile_ring.shape[0]) & 1) ^ 1)
        tile_ring.index(slot).store(gl.zeros([1], gl.int32, gl.BlockedLayout([1], [32], [1], [0])) + tile_id)
        mbarrier.arrive(tile_ready.index(slot))

    @gluon.jit
    def _take_tile(tile_ring, tile_ready, tile_free, j):
        # a consumer's j-th tile id, from the loader's ring; the slot goes back once read
        slot = j % tile_ring.shape[0]
        mbarrier.wait(tile_ready.index(slot), (j // tile_ring.shape[0]) & 1)
        tile_id = gl.max(tile_ring.index(slot).load(gl.BlockedLayout([1], [32], [4], [0])), 0)
        mbarrier.arrive(tile_free.index(slot))
        return tile_id

    @gluon.jit
    def _half_pairs(e, pid_m, C: gl.constexpr, expert_start_ptr, expert_rows_ptr, CONSUMERS: gl.constexpr,
                    M_HALF: gl.constexpr):
        # the pairs in half C (64 rows) of row block pid_m: expert e's pairs less the rows of its run before the
        # half (64 or more: a full half; 0 or fewer: padding alone). Two scalar loads that depend on e alone, as
        # _gluon_tile's do, so they add no step to the chain of dependent loads before a tile's first copy.
        return gl.load(expert_rows_ptr + e) - (CONSUMERS * (pid_m - gl.load(expert_start_ptr + e)) + C) * M_HALF

    @gluon.jit
    def _last_half_pairs(e, pid_m, expert_start_ptr, expert_rows_ptr, CONSUMERS: gl.constexpr, M_HALF: gl.constexpr):
        # The pairs in the tile's last 64-row half, the only one that may hold none: an expert's run is padded at
        # its end, and a row block is in use only where its first row holds a pair (so on one consumer, always).
        # Where it holds none (an expert's last 128-row block with 64 pairs or fewer: 257-320 of 273 +- 16 at
        # 4096 tokens on 60 experts, top 4), the loader leaves its A box out and its consumer runs no wgmma.
        if CONSUMERS == 1:
            return M_HALF
        else:
            return _half_pairs(e, pid_m, CONSUMERS - 1, expert_start_ptr, expert_rows_ptr, CONSUMERS, M_HALF)

    @gluon.jit
    def _expect_stage(bar, last_rows, A_BYTES: gl.constexpr, STAGE_BYTES: gl.constexpr, CONSUMERS: gl.constexpr):
        # the stage's bytes: the weight box and each half's A box, less the last half's where it holds no pair
        # (its copy is not issued). expect's byte count is a constant: two expects, one predicated off.
        if CONSUMERS == 1:
            mbarrier.expect(bar, STAGE_BYTES)
        else:
            mbarrier.expect(bar, STAGE_BYTES, pred=last_rows > 0)
            mbarrier.expect(bar, STAGE_BYTES - A_BYTES, pred=last_rows <= 0)

    @gluon.jit
    def _moe_gluon_loader(a_desc, w_desc, a_smem, w_smem, ready, empty, tile_ring, tile_ready, tile_free,
                          block_expert_ptr, expert_start_ptr, expert_rows_ptr, tile_counter_ptr, num_m_blocks, n_tiles,
                          K, NUM_STAGES: gl.constexpr, CONSUMERS: gl.constexpr, PDL: gl.constexpr,
                          CLAIM: gl.constexpr):
        # The producer warp: for each tile of this program, each k-step's A tiles of 64 rows (one a consumer)
        # and the expert's weight box into the next stage of the ring once both consumers have released it.
        # It never waits for an epilogue: it runs on into the next tile while the consumers store this one.
        # It picks the program's tiles and posts each to the consumers (_post_tile): its first is the program's
        # id; then every num_programs-th (CLAIM 0), or (CLAIM 1) the next in the launch's order not yet taken,
        # claimed from tile_counter as it starts loading the one before. Where tiles differ in cost (a tile with a
        # half of padding alone takes about half the time), a fixed deal leaves the programs that drew few of
        # them to set the launch's time; claiming, each program takes the next tile when it has room for it.
        # PDL (a programmatic dependent launch): this program may start while the kernel before it (the gather,
        # or the gate/up GEMM) still runs. Its first tile's weight boxes, one a stage, are loaded at once: they
        # depend on no earlier kernel of the layer but the routing's (block_expert, expert_start: written by
        # moe_align_kernel, which had completed before the kernel before this one let it launch). A (x_sorted,
        # h: the kernel before's output) is loaded only after the grid dependency wait, so the ring fills
        # from DRAM under the previous kernel's tail, where the weight stream would otherwise stop.
        M_HALF: gl.constexpr = a_desc.block_type.shape[0]
        W_BOX0: gl.constexpr = w_desc.block_type.shape[0]
        W_BOX1: gl.constexpr = w_desc.block_type.shape[1]
        BLOCK_K: gl.constexpr = w_desc.block_type.shape[2]
        # every byte the stage's copies complete; a box that sticks out still counts whole (zeros outside)
        A_BYTES: gl.constexpr = a_desc.block_type.nbytes
        STAGE_BYTES: gl.constexpr = CONSUMERS * A_BYTES + w_desc.block_type.nbytes
        k_tiles = gl.cdiv(K, BLOCK_K)
        early = k_tiles * 0  # k-steps of the first tile whose weights went ahead of the wait
        if PDL:
            pid_m, pid_n, e = _gluon_tile(gl.program_id(0), block_expert_ptr, expert_start_ptr, n_tiles)
            if e >= 0:
                last_rows = _last_half_pairs(e, pid_m, expert_start_ptr, expert_rows_ptr, CONSUMERS, M_HALF)
                early = gl.minimum(k_tiles, NUM_STAGES)
                for ki in range(early):  # lap 0 of stages 0 .. early - 1: free, no wait
                    _expect_stage(ready.index(ki), last_rows, A_BYTES, STAGE_BYTES, CONSUMERS)
                    tma_load(w_desc, [e * W_BOX0, pid_n * W_BOX1, ki * BLOCK_K], ready.index(ki), w_smem.index(ki))
            _grid_dependency_wait()
        it = 0  # k-steps issued over all tiles: the ring position, as the consumers count it
        j = 0  # tiles posted
        tile_id = gl.program_id(0)
        while tile_id < num_m_blocks * n_tiles:
            _post_tile(tile_ring, tile_ready, tile_free, j, tile_id)
            next_tile = tile_id + gl.num_programs(0)
            if CLAIM:  # read after this tile's copies: its round trip runs under them
                got = _claim_tile(tile_counter_ptr)
            pid_m, pid_n, e = _gluon_tile(tile_id, block_expert_ptr, expert_start_ptr, n_tiles)
            if e >= 0:
                last_rows = _last_half_pairs(e, pid_m, expert_start_ptr, expert_rows_ptr, CONSUMERS, M_HALF)
                for ki in range(k_tiles):
                    s = it % NUM_STAGES
                    if it >= early:
                        # a fresh mbarrier counts its (never run) phase before 0 as complete, so lap 0's wait for
                        # parity 1 passes at once; lap L waits for the consumers' releases of lap L - 1
                        mbarrier.wait(empty.index(s), ((it // NUM_STAGES) & 1) ^ 1)
                        _expect_stage(ready.index(s), last_rows, A_BYTES, STAGE_BYTES, CONSUMERS)
                    # A's boxes, then the weights' (main's order: PDL 0 issues what main issued, in its order)
                    for c in gl.static_range(CONSUMERS):
                        tma_load(a_desc, [(CONSUMERS * pid_m + c) * M_HALF, ki * BLOCK_K], ready.index(s),
                                 a_smem.index(CONSUMERS * s + c), pred=c + 1 < CONSUMERS or last_rows > 0)
                    if it >= early:
                        tma_load(w_desc, [e * W_BOX0, pid_n * W_BOX1, ki * BLOCK_K], ready.index(s), w_smem.index(s))
                    it += 1
            if CLAIM:
                next_tile = gl.num_programs(0) + _claimed(got)
            tile_id = next_tile
            j += 1
        _post_tile(tile_ring, tile_ready, tile_free, j, tile_id)  # the end

    @gluon.jit
    def _store_rows(c_desc, c_rows_desc, c_buf, row, col, n_rows, PAIRS_ONLY: gl.constexpr):
        # c_buf to C at [row, col]: every row, or (PAIRS_ONLY) the first n_rows (the half's pairs: 64 or more
        # for a full half, 0 or fewer for one of padding alone), rounded up to a box of c_rows_desc's (8 rows;
        # same shared layout: its swizzle repeats every 8 rows)
        M_HALF: gl.constexpr = c_buf.shape[0]
        ROWS: gl.constexpr = c_rows_desc.block_type.shape[0]
        if PAIRS_ONLY:
            if n_rows >= M_HALF:
                tma_store(c_desc, [row, col], c_buf)
            else:
                for r in gl.static_range(0, M_HALF, ROWS):
                    if r < n_rows:
                        tma_store(c_rows_desc, [row + r, col], c_buf.slice(r, ROWS))
        else:
            tma_store(c_desc, [row, col], c_buf)

    @gluon.jit
    def _moe_gluon_consumer(a_smem, w_smem, c_smem, ready, empty, tile_ring, tile_ready, tile_free, c_desc,
                            c_rows_desc, block_expert_ptr, expert_start_ptr, expert_rows_ptr, num_m_blocks, n_tiles, K,
                            C: gl.constexpr,
                            NUM_STAGES: gl.constexpr, SWIGLU: gl.constexpr, CONSUMERS: gl.constexpr,
                            PAIRS_ONLY: gl.constexpr):
        # Consumer C (one warpgroup): rows [C * 64, C * 64 + 64) of each tile, acc += A @ W^T with one async
        # wgmma group in flight (groups retire in order, so once at most one is outstanding the previous
        # k-step's stage is read and goes back to the loader). The weight box [W_BOX0, W_BOX1, BLOCK_K]
        # (K contiguous) is W_ROWS rows of W as one K-major B operand: for gate/up the tile's gate rows then
        # its up rows, one m64n256k16 where two m64n128k16 would each read A again.
        # PAIRS_ONLY: only the rows that hold a pair are stored (each expert's run is padded at its end, so
        # they are a prefix of the 64): no padding row of h or y is read as a pair's (the down GEMM's rows are
        # independent; moe_sum_kernel reads pairs' rows alone), and at 64 experts, 64-row blocks of 6-96 rows
        # an expert, padding was 25-90% of the h and y rows written. The half's pairs come from the expert's
        # count (expert_rows, the routing's counters) less the rows of its run before the half (_half_pairs).
        # (Branch moe56 counted the half's sorted_ids below the sentinel instead: a third dependent load, on
        # pid_m, and a cross-warp sum, two barriers, before every tile's first wgmma.)
        # A half of padding alone (the last of a tile whose expert's pairs end in its first half) runs no wgmma
        # and stores nothing: its A box was not loaded (_last_half_pairs), and its rows of h and y are read as
        # no pair's. Its consumer still waits for each of the tile's stages before handing it back: a release
        # counts toward the stage's current lap, so a consumer that ran ahead of its lap would free a stage the
        # other consumer still reads.
        M_HALF: gl.constexpr = a_smem.shape[1]
        BLOCK_K: gl.constexpr = a_smem.shape[2]
        W_ROWS: gl.constexpr = w_smem.shape[1] * w_smem.shape[2]
        OUT_N: gl.constexpr = W_ROWS // 2  # the columns of one store: h's tile, or half the down GEMM's
        acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                             instr_shape=[16, W_ROWS, 16])
        c_buf = c_smem.index(C)
        k_tiles = gl.cdiv(K, BLOCK_K)
        it = 0
        j = 0  # tiles taken from the loader's ring
        tile_id = _take_tile(tile_ring, tile_ready, tile_free, j)
        while tile_id < num_m_blocks * n_tiles:
            pid_m, pid_n, e = _gluon_tile(tile_id, block_expert_ptr, expert_start_ptr, n_tiles)
            if e >= 0:
                row = (CONSUMERS * pid_m + C) * M_HALF
                n_rows = M_HALF  # the first half of a block in use holds a pair: its count is for PAIRS_ONLY alone
                if PAIRS_ONLY or C > 0:
                    n_rows = _half_pairs(e, pid_m, C, expert_start_ptr, expert_rows_ptr, CONSUMERS, M_HALF)
                if n_rows > 0:
                    acc = gl.zeros([M_HALF, W_ROWS], gl.float32, acc_layout)
                    for ki in range(k_tiles):
                        s = it % NUM_STAGES
                        mbarrier.wait(ready.index(s), (it // NUM_STAGES) & 1)
                        a = a_smem.index(CONSUMERS * s + C)
                        w = w_smem.index(s).reshape([W_ROWS, BLOCK_K]).permute((1, 0))
                        acc = warpgroup_mma(a, w, acc, is_async=True)
                        acc, a, w = warpgroup_mma_wait(1, deps=(acc, a, w))
                        # (Gluon's arrive synchronizes the warpgroup, then one thread arrives)
                        mbarrier.arrive(empty.index((it + NUM_STAGES - 1) % NUM_STAGES), pred=ki > 0)
                        it += 1
                    # the tile's last group, then its stage (hence no release at ki == 0 of the next tile)
                    acc = warpgroup_mma_wait(0, deps=(acc, ))
                    mbarrier.arrive(empty.index((it + NUM_STAGES - 1) % NUM_STAGES))
                    # The epilogue through c_buf and a TMA store, which is left in flight under the next tile's
                    # mainloop: wait for the previous store to finish reading c_buf before writing it again, and
                    # fence the generic-proxy writes before the async proxy (TMA) reads them.
                    halves = acc.reshape([M_HALF, 2, OUT_N]).permute((0, 2, 1)).split()
                    if SWIGLU:
                        g = halves[0]
                        h = g / (1.0 + gl.exp(-g)) * halves[1]  # silu(gate) * up, fp32
                        tma.store_wait(0)
                        c_buf.store(h.to(c_desc.dtype))
                        fence_async_shared()
                        _store_rows(c_desc, c_rows_desc, c_buf, row, pid_n * OUT_N, n_rows, PAIRS_ONLY)
                    else:
                        for i in gl.static_range(2):
                            tma.store_wait(0)
                            c_buf.store(halves[i].to(c_desc.dtype))
                            fence_async_shared()
                            _store_rows(c_desc, c_rows_desc, c_buf, row, pid_n * W_ROWS + i * OUT_N, n_rows, PAIRS_ONLY)
                else:  # a half of padding alone: each stage back as it lands
                    for ki in range(k_tiles):
                        s = it % NUM_STAGES
                        mbarrier.wait(ready.index(s), (it // NUM_STAGES) & 1)
                        mbarrier.arrive(empty.index(s))
                        it += 1
            j += 1
            tile_id = _take_tile(tile_ring, tile_ready, tile_free, j)
        tma.store_wait(0)  # the last store, before the program's shared memory goes away

    @gluon.jit
    def moe_gemm_gluon_kernel(a_desc, w_desc, c_desc, c_rows_desc, block_expert_ptr, expert_start_ptr, expert_rows_ptr,
                              tile_counter_ptr, num_m_blocks, n_tiles, K, NUM_STAGES: gl.constexpr,
                              SWIGLU: gl.constexpr, CONSUMERS: gl.constexpr, LOADER_REGS: gl.constexpr,
                              CONSUMER_REGS: gl.constexpr, PDL: gl.constexpr, PAIRS_ONLY: gl.constexpr,
                              CLAIM: gl.constexpr):
        # One expert-grouped GEMM, persistent (min(SMs, tiles) programs over the (row block, column tile)
        # tiles), warp-specialized as cuBLAS's sm90 kernels are: a TMA loader warp and CONSUMERS warpgroups
        # of 64 rows each (row blocks of 64 * CONSUMERS: 2 where rows are many, 1 where each expert has few
        # and the layer streams its weights). SWIGLU: the gate/up GEMM (A x_sorted, W w13's (E * 2, I, HD)
        # view in [2, BLOCK_N, BLOCK_K] boxes at [2e, n, k], C h in [64, BLOCK_N] boxes); else the down GEMM
        # (A h, W w2 (E, HD, I) in [1, DOWN_BLOCK_N, BLOCK_K] boxes at [e, n, k], C y_sorted in [64,
        # DOWN_BLOCK_N / 2] boxes). A's boxes are [64, BLOCK_K]. PDL: launched as a programmatic dependent of
        # the kernel before it (the loader says what that changes), and lets the next kernel launch at once.
        # PAIRS_ONLY: C's rows that hold no pair (past expert_rows[e], the expert's pairs, in its run) are not
        # stored; c_rows_desc is C's descriptor in 8-row boxes, for the part of a 64-row half that holds pairs.
        # CLAIM: the programs claim their tiles past the first round from tile_counter (zeroed before the launch)
        # as they go, not every num_programs-th (the loader says why).
        dtype: gl.constexpr = a_desc.dtype
        a_smem = gl.allocate_shared_memory(dtype, [CONSUMERS * NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
        w_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES] + w_desc.block_type.shape, w_desc.layout)
        c_smem = gl.allocate_shared_memory(dtype, [CONSUMERS] + c_desc.block_type.shape, c_desc.layout)
        # ready: the loader's expect (one arrive) and the copies' bytes; empty: one arrive a consumer
        ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NUM_STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=CONSUMERS)
        # the tile ids the loader posts to the consumers, two deep: the loader runs at most a tile ahead (a ring of
        # stages shorter than a tile's k-steps), so it seldom waits for a slot
        tile_ring = gl.allocate_shared_memory(gl.int32, [2, 1], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        tile_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        tile_free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(2):
            mbarrier.init(tile_ready.index(i), count=1)
            mbarrier.init(tile_free.index(i), count=CONSUMERS)
        if PDL:
            # the next kernel (the down GEMM, or moe_sum_kernel) may launch now: its programs take the SMs this
            # kernel's programs leave (a GEMM's cannot sit beside one of these) and fill their rings there,
            # or wait beside them (moe_sum_kernel's, which need no shared memory) until this kernel completes
            _grid_dependency_launch_dependents()
        # the kernel's own 4 warps are consumer 0; the workers: consumer 1 (if two) and the loader's one warp
        if CONSUMERS == 2:
            gl.warp_specialize([
                (_moe_gluon_consumer, (a_smem, w_smem, c_smem, ready, empty, tile_ring, tile_ready, tile_free,
                                       c_desc, c_rows_desc, block_expert_ptr, expert_start_ptr, expert_rows_ptr,
                                       num_m_blocks, n_tiles, K, 0,
                                       NUM_STAGES, SWIGLU, CONSUMERS, PAIRS_ONLY)),
                (_moe_gluon_consumer, (a_smem, w_smem, c_smem, ready, empty, tile_ring, tile_ready, tile_free,
                                       c_desc, c_rows_desc, block_expert_ptr, expert_start_ptr, expert_rows_ptr,
                                       num_m_blocks, n_tiles, K, 1,
                                       NUM_STAGES, SWIGLU, CONSUMERS, PAIRS_ONLY)),
                (_moe_gluon_loader, (a_desc, w_desc, a_smem, w_smem, ready, empty, tile_ring, tile_ready, tile_free,
                                     block_expert_ptr, expert_start_ptr, expert_rows_ptr, tile_counter_ptr,
                                     num_m_blocks, n_tiles, K, NUM_STAGES, CONSUMERS, PDL, CLAIM)),
            ], [4, 1], [CONSUMER_REGS, LOADER_REGS])
        else:
            gl.warp_specialize([
                (_moe_gluon_consumer, (a_smem, w_smem, c_smem, ready, empty, tile_ring, tile_ready, tile_free,
                                       c_desc, c_rows_desc, block_expert_ptr, expert_start_ptr, expert_rows_ptr,
                                       num_m_blocks, n_tiles, K, 0,
                                       NUM_STAGES, SWIGLU, CONSUMERS, PAIRS_ONLY)),
                (_moe_gluon_loader, (a_desc, w_desc, a_smem, w_smem, ready, empty, tile_ring, tile_ready, tile_free,
                                     block_expert_ptr, expert_start_ptr, expert_rows_ptr, tile_counter_ptr,
                                     num_m_blocks, n_tiles, K, NUM_STAGES, CONSUMERS, PDL, CLAIM)),
            ], [1], [LOADER_REGS])


# --------------------------------------------------------------------------------------------------
# launcher
# --------------------------------------------------------------------------------------------------
last_config = {}  # the config of the latest launch (the benchmark reports it)
_TUNED = {}
_GLUON_FAILED = {}  # device -> why the Gluon GEMMs did not compile or launch there


def route_block_t(experts):
    """moe_route_kernel's tokens a program: a [BLOCK_T, E_PAD] tile of ROUTE_TILE logits on one warp, 8 a
    thread. A program's time is TOP_K rounds of reductions over its tile, so a small tile is a short
    program and many run side by side (64 tokens on 64 experts: 16 programs of 4 tokens, each ~870 sm_90
    instructions, where the 64-token program before it ran ~8700). 256 / E_PAD: 32 tokens at 8 experts,
    4 at 64, 1 at 256. An expert's counter takes one atomic from each program that chose it: at most
    T / BLOCK_T, T*k/E on average at 256 experts."""
    return max(1, ROUTE_TILE // triton.next_power_of_2(experts))


def route_and_align(router_logits, top_k, block_m, pdl=False, counts=None):
    """A memset and two small kernels (no host sync): routing weights (T*k,) fp32 and the expert-sorted layout.

    sorted_ids (num_m_blocks*block_m,) int32: pair ids (token*k + slot) grouped by expert, each
    expert's run padded to a multiple of block_m with the sentinel T*k; sorted_row (T*k,) int32: the
    inverse, each pair's row in that order; block_expert (num_m_blocks,) int32: the expert of each row
    block, -1 past the end; expert_start (E + 1,) int32: each expert's first row block, then the number
    of blocks in use. num_m_blocks is an upper bound known on the host (sum_e ceil(c_e / BM) <=
    ceil(T*k / BM) + E), so nothing is read back; expert_rows (E,) int32: each expert's pairs (the route's
    counters; its run's first expert_rows[e] rows hold them). Within an expert's run the pairs come in an order
    that may change from run to run (moe_route_kernel says why the layer's output does not). pdl: both kernels
    launched as programmatic dependents, each waiting for the kernel before it (the Gluon path's launches).
    counts: the experts' counters, (E,) int32 zeros (a view of a buffer zeroed with others in one memset), or None:
    made here."""
    T, E = router_logits.shape
    assert 1 <= top_k <= E, f"top_k must be in 1..{E} (the experts), got {top_k}"
    dev = router_logits.device
    n_pairs = T * top_k
    e_pad = triton.next_power_of_2(E)
    block_t = route_block_t(E)
    num_m_blocks = triton.cdiv(n_pairs, block_m) + E
    ids = torch.empty(n_pairs, dtype=torch.int32, device=dev)
    rank = torch.empty(n_pairs, dtype=torch.int32, device=dev)
    weights = torch.empty(n_pairs, dtype=torch.float32, device=dev)
    if counts is None:
        counts = torch.zeros(E, dtype=torch.int32, device=dev)
    sorted_ids = torch.empty(num_m_blocks * block_m, dtype=torch.int32, device=dev)
    sorted_row = torch.empty(n_pairs, dtype=torch.int32, device=dev)
    block_expert = torch.empty(num_m_blocks, dtype=torch.int32, device=dev)
    expert_start = torch.empty(E + 1, dtype=torch.int32, device=dev)
    logits = router_logits.float().contiguous()
    moe_route_kernel[(triton.cdiv(T, block_t),)](logits, ids, rank, weights, counts, T, E, TOP_K=top_k,
                                                E_PAD=e_pad, BLOCK_T=block_t, PDL=_pdl_flag(pdl), num_warps=1,
                                                **_pdl_launch(pdl))
    moe_align_kernel[(triton.cdiv(n_pairs, ALIGN_BLOCK_P),)](
        ids, rank, counts, sorted_ids, sorted_row, block_expert, expert_start, n_pairs, E, num_m_blocks,
        E_PAD=e_pad, BLOCK_M=block_m, BLOCK_P=ALIGN_BLOCK_P, BLOCK_B=max(1, 2048 // e_pad), PDL=_pdl_flag(pdl),
        num_warps=8, **_pdl_launch(pdl))
    return weights, sorted_ids, sorted_row, block_expert, expert_start, num_m_blocks, counts


@functools.lru_cache(maxsize=None)
def _has_tma(device) -> bool:
    if device.type == "cuda":
        return (not torch.version.hip) and torch.cuda.get_device_capability(device)[0] >= 9
    return True  # interpreter: descriptors are emulated


@functools.lru_cache(maxsize=None)
def _num_sms(device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # interpreter: a small machine


def _tma_ok(*tensors):
    if not _has_tma(tensors[0].device):
        return False
    return all(t.is_contiguous() and (t.shape[-1] * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0
               for t in tensors)


def _gluon_runs(x, w13, w2, cfg) -> bool:
    """Whether moe_gemm_gluon_kernel can take both GEMMs: Gluon present, a Hopper GPU (wgmma is sm_90's
    alone), not the interpreter (Gluon has none), 16-bit, TMA-aligned weights, 64- or 128-row blocks (one
    or two warpgroups of 64 rows), weight tiles one wgmma wide (2 * BLOCK_N and DOWN_BLOCK_N at most 256),
    and it has not failed to compile or launch on this device before."""
    if gluon is None or x.device.type != "cuda" or torch.version.hip or x.device in _GLUON_FAILED:
        return False
    if os.environ.get("TRITON_INTERPRET", "") not in ("", "0") or torch.cuda.get_device_capability(x.device)[0] != 9:
        return False
    return (x.dtype in (torch.float16, torch.bfloat16) and cfg["BLOCK_M"] in (64, 128) and 2 * cfg["BLOCK_N"] <= 256
            and cfg["DOWN_BLOCK_N"] <= 256 and _tma_ok(w13, w2))


def _gluon_gemms(x_sorted, w13, w2, h, block_expert, expert_start, expert_rows, tile_counters, num_m_blocks, cfg,
                 pdl=False, pairs_only=False, claim=False):
    """Both GEMMs by moe_gemm_gluon_kernel: returns y_sorted (h's rows, HD), the down GEMM's output in
    expert-sorted order and unweighted (moe_sum_kernel's SORTED reads it), or None, and a warning once a
    device, when the kernel does not compile or launch. pdl: each GEMM launched as a programmatic dependent of
    the kernel before it (the gather launched with PDL, then the gate/up GEMM). pairs_only: the rows of h and
    y_sorted that hold no pair (past expert_rows[e] in expert e's run) are left as they were. tile_counters: (2,)
    int32 zeros, each GEMM's for its programs' claims where claim (the kernel's CLAIM)."""
    E, I2, HD = w13.shape
    I = I2 // 2
    bn, dbn, bk = cfg["BLOCK_N"], cfg["DOWN_BLOCK_N"], cfg["BLOCK_K"]
    consumers = cfg["BLOCK_M"] // 64
    y_sorted = torch.empty((h.shape[0], HD), device=h.device, dtype=h.dtype)
    dtype = gl.bfloat16 if h.dtype == torch.bfloat16 else gl.float16

    def desc(t, box):
        return GluonDescriptor(t, list(t.shape), list(t.stride()), box, gl.NVMMASharedLayout.get_default_for(box, dtype))

    gemms = [  # A, W (3-D), W's box, C, C's box, column tiles, K, stages, SWIGLU
        (x_sorted, w13.view(E * 2, I, HD), [2, bn, bk], h, [64, bn], triton.cdiv(I, bn), HD, cfg["num_stages"], 1),
        (h, w2, [1, dbn, bk], y_sorted, [64, dbn // 2], triton.cdiv(HD, dbn), I, cfg["DOWN_num_stages"], 0),
    ]
    try:
        for (a, w, w_box, c, c_box, n_tiles, K, stages, swiglu), counter in zip(gemms, tile_counters.split(1)):
            grid = (min(_num_sms(h.device), num_m_blocks * n_tiles), )
            moe_gemm_gluon_kernel[grid](desc(a, [64, bk]), desc(w, w_box), desc(c, c_box), desc(c, [8, c_box[1]]),
                                        block_expert, expert_start, expert_rows, counter, num_m_blocks, n_tiles, K,
                                        NUM_STAGES=stages, SWIGLU=swiglu, CONSUMERS=consumers,
                                        LOADER_REGS=GLUON_LOADER_REGS, CONSUMER_REGS=GLUON_CONSUMER_REGS,
                                        PDL=int(pdl), PAIRS_ONLY=int(pairs_only), CLAIM=int(claim), num_warps=4,
                                        **_pdl_launch(pdl))
    except Exception as e:  # Gluon changes between Triton releases: fall back, and say so once
        lines = str(e).strip().splitlines()
        _GLUON_FAILED[h.device] = f"{type(e).__name__}: {lines[-1] if lines else ''}"
        warnings.warn(f"fused-moe: the Gluon GEMMs do not run with Triton {triton.__version__} here "
                      f"({_GLUON_FAILED[h.device]}); the Triton kernels take the layer")
        return None
    return y_sorted


def streams_weights(tokens, experts, top_k) -> bool:
    """Whether the layer is bound by its weight read: STREAM_MAX_ROWS rows an expert or fewer, on average."""
    return tokens * top_k <= STREAM_MAX_ROWS * experts


def pdl_pays(tokens, experts, top_k, block_m) -> bool:
    """Whether the Gluon path's kernels go as programmatic dependents (PDL_LAUNCH None): where the layer streams
    its weights and each expert's rows fit one row block of block_m rows (the launch's: 64 on one consumer, 128
    on two, streaming_consumers). What PDL saves is DRAM time: at each kernel boundary the weight stream stops while
    the next GEMM's programs start and fill their rings (and the gaps between launches, 6.6 us at 512 tokens on
    64 experts), a fixed ~12-15 us a layer. Measured on an H100 (experiments/held-out-shapes/moe-memory-bound/,
    moe57): it gained 3-4% where every expert takes one block (64-512 tokens on 64 experts, top 6) and 3.3% at
    1024 tokens on two consumers, and lost where experts span several blocks: Mixtral at 512 tokens (128 rows
    an expert on 64-row blocks) 1036 -> 1442 us, 4096 tokens on 64 experts 11% on the same tiles. Why it loses
    there is not known (the sum kernel's span grew 5 -> 107 us at Mixtral): the rule keeps PDL where it was
    measured to pay. The dtype plays no part."""
    return (streams_weights(tokens, experts, top_k)
            and expected_row_blocks(tokens, experts, top_k, block_m) <= ONE_BLOCK_AN_EXPERT * experts)


def pairs_only_pays(tokens, experts, top_k) -> bool:
    """Whether the Gluon GEMMs store only the pairs' rows of h and y (PAIRS_ONLY None): where the layer streams
    its weights, every byte written shares the DRAM with the weight read (the padding rows skipped: 25.7 MB at
    64 tokens on 64 experts, top 6, 4% of the layer measured). Where the tensor cores set the time, the epilogue's
    stores run under the next tile's MMAs and skipping rows saves nothing. The dtype plays no part."""
    return streams_weights(tokens, experts, top_k)


def streaming_config(tokens, experts, top_k, hidden, inter, sms):
    """CONFIG's overrides where the layer streams its weights. Each expert's rows go to 64-row blocks on one
    consumer warpgroup of the Gluon GEMM, not 128 on two: at r rows an expert the padding computed falls
    from 128 * ceil(r / 128) - r rows to 64 * ceil(r / 64) - r (DeepSeek-V2-Lite decode, r = 6: 122 -> 58;
    Mixtral at 512 tokens, r = 128 +- 11: half the experts take a second block of 128, or of 64), compute that
    competes with the weight stream once r nears 128. Where most experts would fill two blocks of 64 and one
    of 128 (streaming_consumers), 128-row blocks on two consumers instead. Every ring gets the most stages that
    fit (5 or 8 where CONFIG has 4): bytes in flight, not tensor cores, decide a weight stream. Each GEMM's N
    tile is _n_tile_by_rounds's, on the row blocks expected in use: a tile is a fixed share of the weights, and
    a last round of the persistent grid run by a few SMs leaves the others' share of the bandwidth idle."""
    consumers = streaming_consumers(tokens, experts, top_k)
    block_m = 64 * consumers
    blocks = expected_row_blocks(tokens, experts, top_k, block_m)
    up_n = _n_tile_by_rounds((128, 64), inter, blocks, sms)
    down_n = _n_tile_by_rounds((256, 128), hidden, blocks, sms)
    return {"BLOCK_M": block_m, "BLOCK_N": up_n, "BLOCK_K": 64, "GLUON": 1, "DOWN_BLOCK_N": down_n,
            "num_stages": _stages_that_fit(block_m + 2 * up_n, up_n, 64, consumers),
            "DOWN_num_stages": _stages_that_fit(block_m + down_n, down_n // 2, 64, consumers)}


# streaming_consumers' bounds: 64-row blocks at least this many times the 128-row ones (a quarter of the
# experts or more would read their weight tiles twice), and the 128-row ones at most this many an expert
# (almost none takes a second: no expert computes more than 128 rows, under half of Hopper's ridge)
SHARED_TILE_BLOCKS = 1.25
ONE_BLOCK_AN_EXPERT = 1.05


def streaming_consumers(tokens, experts, top_k):
    """1 or 2: the consumer warpgroups (64 rows each) of the streaming layout's row blocks. Two 64-row blocks of
    one expert each read the expert's weight tiles from L2 into their own SM: at 1024 tokens on 64 experts, top
    6 (96 +- 9 rows an expert: 128 blocks of 64, two an expert) the gate/up GEMM moved ~1.76 GB from L2 into
    shared memory for 0.74 GB of w13 (its 64-row x 128-wide tiles: 0.25 MB of x_sorted and 1 MB of weights
    each), ~6 TB/s over its ~290 us, where the 64-expert shapes of one block an expert moved ~4. One 128-row
    block on two consumers reads each tile once for both halves: 1.41 GB (64-wide tiles) or 1.06 (128-wide),
    the same rows computed (128 an expert either way). Where an expert's rows fit one 64-row block (512 tokens:
    48 +- 7), or many experts take a second 128-row one (Mixtral at 512 tokens, 128 +- 10 rows an expert:
    1536 rows computed against 1267 on 64-row blocks, compute near the weight stream's time), one consumer."""
    blocks_64 = expected_row_blocks(tokens, experts, top_k, 64)
    blocks_128 = expected_row_blocks(tokens, experts, top_k, 128)
    return 2 if blocks_64 >= SHARED_TILE_BLOCKS * blocks_128 and blocks_128 <= ONE_BLOCK_AN_EXPERT * experts else 1


@functools.lru_cache(maxsize=None)  # fused_moe asks on every call; a sum of up to T terms
def expected_row_blocks(tokens, experts, top_k, block_m):
    """The row blocks in use on average where the routing spreads the pairs evenly over the experts: an
    expert's rows c ~ Binomial(tokens, top_k / experts) fill ceil(c / block_m) blocks. route_and_align's
    bound, ceil(T*k / block_m) + E, counts a part-filled block for every expert: 112 at 512 tokens on 64
    experts, top 6, where 64.5 are in use (48 +- 7 rows an expert: one block, two for 0.7% of them)."""
    p = top_k / experts
    if p >= 1:
        return experts * triton.cdiv(tokens, block_m)
    log_t = math.lgamma(tokens + 1)
    log_pmf = lambda c: (log_t - math.lgamma(c + 1) - math.lgamma(tokens - c + 1)
                         + c * math.log(p) + (tokens - c) * math.log1p(-p))
    # rounded: the float sum's ~1e-12 would push a whole multiple of the SMs' tiles into one more round
    return round(experts * sum(math.exp(log_pmf(c)) * triton.cdiv(c, block_m) for c in range(1, tokens + 1)), 6)


def round_fill(tiles, sms):
    """The share of a persistent grid's SM-rounds that its tiles keep busy: tiles / (sms * ceil(tiles / sms)).
    Each program takes every sms-th tile, so the grid runs ceil(tiles / sms) rounds of tiles."""
    return tiles / (sms * math.ceil(tiles / sms))


# Round fills within this of the best are taken as equal, and the fewest tiles of them kept: each tile
# re-reads its 64 rows of A (x_sorted or h, from L2) and runs an epilogue.
ROUND_FILL_SLACK = 0.05


def _n_tile_by_rounds(widths, columns, blocks, sms):
    """The N tile of widths whose tiles (blocks x ceil(columns / width)) fill the persistent grid's rounds
    within ROUND_FILL_SLACK of the best width's, and of those the one with the fewest tiles (the narrowest
    where widths tie: a tile wider than the columns only pads). 512 tokens on 64 experts, top 6, gate/up
    (I 1408): 64.5 blocks x 11 tiles of 128 = 710, 5.4 rounds run as 6 (fill 0.90: the sixth by 50 of 132
    SMs); of 64, 1419 in 11 rounds (0.98): 64."""
    tiles = {width: blocks * triton.cdiv(columns, width) for width in widths}
    fills = {width: round_fill(n, sms) for width, n in tiles.items()}
    best = max(fills.values())
    return min((width for width in widths if fills[width] >= best - ROUND_FILL_SLACK), key=lambda w: (tiles[w], w))


def _stages_that_fit(rows_a_stage, store_cols, block_k, consumers=1):
    """The Gluon GEMM's ring depth, 8 at most: stages of rows_a_stage rows (A's 64 a consumer and the weight
    box's) of block_k 16-bit elements, beside each consumer's [64, store_cols] store buffer and 1 KB for the
    barriers, within a block's shared memory."""
    return min(8, (SHARED_MEMORY - 1024 - consumers * 64 * store_cols * 2) // (rows_a_stage * block_k * 2))


def _pdl_flag(pdl) -> int:
    """A Triton kernel's PDL constexpr: its griddepcontrol instructions are inline PTX, which Triton's interpreter
    cannot run (there the Gluon GEMMs are the tests' torch contract, and the programs run one after another)."""
    return int(pdl and os.environ.get("TRITON_INTERPRET", "") in ("", "0"))


def _pdl_launch(pdl):
    """The launch option of a programmatic dependent launch, where asked: absent otherwise (AMD's backend has no
    such option, and Triton refuses an option it does not know)."""
    return {"launch_pdl": True} if pdl else {}


def _launch(x, w13, w2, router_logits, top_k, out, cfg, use_tma):
    T, HD = x.shape
    E, I2, _ = w13.shape
    I = I2 // 2
    block_m, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    dbn = cfg["DOWN_BLOCK_N"]
    n_pairs = T * top_k
    num_m_blocks = triton.cdiv(n_pairs, block_m) + E  # route_and_align's bound on the row blocks
    h = torch.empty((num_m_blocks * block_m, I), device=x.device, dtype=x.dtype)
    tma = _tma_ok(w13, w2, h) if use_tma is None else use_tma
    gluon = cfg["GLUON"] and tma and _gluon_runs(x, w13, w2, cfg)
    # the Gluon path's kernels as programmatic dependents, each of the one before (pdl_pays, or PDL_LAUNCH forced):
    # all but the counters' memset (and the logits' copy to fp32, where they come in 16-bit), which start after
    # the caller's kernels as any launch does
    pdl = bool(gluon and gdc_wait is not None
               and (pdl_pays(T, E, top_k, block_m) if PDL_LAUNCH is None else PDL_LAUNCH))
    pairs_only = bool(gluon and (pairs_only_pays(T, E, top_k) if PAIRS_ONLY is None else PAIRS_ONLY))
    claim = bool(gluon and (block_m == 128 if CLAIM_TILES is None else CLAIM_TILES))
    # the experts' counters and the two Gluon GEMMs' tile counters (CLAIM), zeroed by one memset
    counters = torch.zeros(E + 2, dtype=torch.int32, device=x.device)
    weights, sorted_ids, sorted_row, block_expert, expert_start, num_m_blocks, expert_rows = route_and_align(
        router_logits, top_k, block_m, pdl=pdl, counts=counters[:E])

    def gather(pad_zeros, pdl):
        moe_gather_kernel[(num_m_blocks, triton.cdiv(HD, GATHER_BLOCK_D))](
            x, x_sorted, sorted_ids, block_expert, n_pairs, HD, x.stride(0), TOP_K=top_k, BLOCK_M=block_m,
            BLOCK_D=GATHER_BLOCK_D, PAD_ZEROS=pad_zeros, PDL=_pdl_flag(pdl), num_warps=4, **_pdl_launch(pdl))

    if tma:
        x_sorted = torch.empty((num_m_blocks * block_m, HD), device=x.device, dtype=x.dtype)
        gather(pad_zeros=not gluon, pdl=pdl)
    y = None
    if gluon:
        y = _gluon_gemms(x_sorted, w13, w2, h, block_expert, expert_start, expert_rows, counters[E:], num_m_blocks, cfg,
                         pdl=pdl, pairs_only=pairs_only, claim=claim)
    if y is None:
        pdl = pairs_only = claim = False
        if gluon:  # the Gluon GEMMs failed after a gather that left the padding rows as they were
            gather(pad_zeros=True, pdl=False)
        cfg = {**cfg, "GLUON": 0}
        y = torch.empty((n_pairs, HD), device=x.device, dtype=x.dtype)
        if tma:
            x_src = TensorDescriptor.from_tensor(x_sorted, [block_m, bk])
            w13_src = TensorDescriptor.from_tensor(w13.view(E * 2, I, HD), [2, bn, bk])
            h_src = TensorDescriptor.from_tensor(h, [block_m, bk])
            w2_src = TensorDescriptor.from_tensor(w2.view(E * HD, I), [dbn, bk])
        else:
            x_src, w13_src, h_src, w2_src = x, w13, h, w2
        moe_gate_up_kernel[(num_m_blocks * triton.cdiv(I, bn),)](
            x_src, w13_src, h, sorted_ids, block_expert, n_pairs, HD, I, num_m_blocks, x.stride(0),
            TOP_K=top_k, BLOCK_M=block_m, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg["GROUP_M"], USE_TMA=tma,
            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
        moe_down_kernel[(num_m_blocks * triton.cdiv(HD, dbn),)](
            h_src, w2_src, y, sorted_ids, block_expert, weights, n_pairs, HD, I, num_m_blocks,
            BLOCK_M=block_m, BLOCK_N=dbn, BLOCK_K=bk, GROUP_M=cfg["GROUP_M"], USE_TMA=tma,
            num_warps=cfg["num_warps"], num_stages=cfg["DOWN_num_stages"])
    moe_sum_kernel[(T, triton.cdiv(HD, SUM_BLOCK_D))](y, out, sorted_row, weights, HD, out.stride(0), TOP_K=top_k,
                                                      K_PAD=triton.next_power_of_2(top_k), BLOCK_D=SUM_BLOCK_D,
                                                      SORTED=cfg["GLUON"], PDL=_pdl_flag(pdl), num_warps=4,
                                                      **_pdl_launch(pdl))
    last_config.clear()
    last_config.update(cfg, USE_TMA=tma, PDL=int(pdl), PAIRS_ONLY=int(pairs_only), CLAIM=int(claim))
    return out


def _autotune(args, out, use_tma, firsts):
    """The fastest of firsts (the shape's rule's configs, its pick first) and CONFIG's candidates, timed once a
    shape."""
    x, w13, w2, logits, top_k = args
    key = (tuple(x.shape), tuple(w13.shape), top_k, x.dtype)
    if key not in _TUNED:
        others = [dict(CONFIG)] + [{**CONFIG, **c} for c in AUTOTUNE_CONFIGS]
        candidates = firsts + [c for c in others if c not in firsts]
        _TUNED[key] = _fastest(lambda cfg: _launch(*args, out, cfg, use_tma), candidates)
    return _TUNED[key]


def _fastest(run, candidates):
    """The candidate config whose run(cfg) takes least time. Every candidate runs once before any is
    timed (it compiles there, and one that does not fit is dropped), then all are timed in two rounds,
    each keeping its better median. Timed once each in turn, the first candidate ran before the GPU's
    clocks had risen: at the Mixtral shape CONFIG lost to a tile 3-7% slower
    (the GEMM-by-GEMM runs, df8b865:experiments/sweep-h200-session14/call2-moe/). Each call follows a clean clear of the L2 (_median_ms),
    as kgit times it (do_bench's clear leaves dirty lines for the timed kernel to write back)."""
    runnable = []
    for cfg in candidates:
        try:
            run(cfg)
        except Exception:  # does not fit (shared memory): skip
            continue
        runnable.append(cfg)
    if not runnable:
        return dict(CONFIG)
    best_ms = [float("inf")] * len(runnable)
    clear = _l2_clear()
    for _ in range(2):
        for i, cfg in enumerate(runnable):
            best_ms[i] = min(best_ms[i], _median_ms(lambda: run(cfg), clear))
    return runnable[best_ms.index(min(best_ms))]


def _l2_clear():
    """A function that reads 256 MB (five H200 L2s) into a sum: the L2 is cleared, and left clean. The buffer
    lives as long as the function (one autotune pass), not the process. The gemm template's, repeated: each
    template stands alone, to be copied into another repository by itself."""
    buffer = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device="cuda")
    total = torch.empty((), dtype=torch.int64, device="cuda")
    return lambda: torch.sum(buffer, dim=0, out=total)


def _median_ms(fn, clear, warmup_calls=5, calls=20):
    """fn's median time in ms over `calls` calls, each after clear() (warm-up calls too)."""
    times = []
    for i in range(warmup_calls + calls):
        clear()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        if i >= warmup_calls:
            times.append((start, end))
    torch.cuda.synchronize()
    return sorted(s.elapsed_time(e) for s, e in times)[calls // 2]


def rule_configs(x, w13, w2, top_k):
    """The shape's configs by rule, the one to run without AUTOTUNE first: CONFIG; or where the layer streams
    its weights and the Gluon kernel runs, streaming_config's, then the same with the other gate/up N tile.
    The rule's tile hinges on what the SMs of a part-filled last round can pull (the whole bandwidth, or only
    their share of it), which the host cannot see, so AUTOTUNE times both."""
    T, HD = x.shape
    E, I2, _ = w13.shape
    if not streams_weights(T, E, top_k):
        return [dict(CONFIG)]
    streaming = {**CONFIG, **streaming_config(T, E, top_k, HD, I2 // 2, _num_sms(x.device))}
    # its rings are sized to the Gluon kernel's shared memory on Hopper: not a Triton fallback's
    if not _gluon_runs(x, w13, w2, streaming):
        return [dict(CONFIG)]
    other_n = 192 - streaming["BLOCK_N"]  # 128 <-> 64
    block_m = streaming["BLOCK_M"]
    return [streaming, {**streaming, "BLOCK_N": other_n,
                        "num_stages": _stages_that_fit(block_m + 2 * other_n, other_n, 64, block_m // 64)}]


def fused_moe(x, w13, w2, router_logits, top_k, out=None, config=None, use_tma=None):
    """out (T, Hd) = the MoE layer of the module docstring."""
    T, HD = x.shape
    E, I2, _ = w13.shape
    assert w2.shape == (E, HD, I2 // 2) and x.is_contiguous() and w13.is_contiguous() and w2.is_contiguous()
    if out is None:
        out = torch.empty((T, HD), device=x.device, dtype=x.dtype)
    assert out.shape == (T, HD) and out.stride(1) == 1, "out: (T, Hd) with unit column stride"
    if config is None:
        rules = rule_configs(x, w13, w2, top_k)
        config = rules[0]
        if CONFIG["AUTOTUNE"] and x.device.type == "cuda":
            config = _autotune((x, w13, w2, router_logits, top_k), out, use_tma, rules)
    return _launch(x, w13, w2, router_logits, top_k, out, {**CONFIG, **config}, use_tma)


def route(router_logits, top_k):
    """torch routing for the references: top-k of the logits, softmax over the k kept (fp32).
    Equal to softmax over all experts, top-k, renormalize (Mixtral), with one rounding fewer."""
    vals, ids = torch.topk(router_logits.float(), top_k, dim=-1)
    return torch.softmax(vals, dim=-1), ids


# --------------------------------------------------------------------------------------------------
# references
# --------------------------------------------------------------------------------------------------
def _expert_loop(x, w13, w2, router_logits, top_k, dtype):
    """Per-expert loop (the Hugging Face Mixtral way): gather the expert's tokens, three matmuls, scatter."""
    T, HD = x.shape
    E, I2, _ = w13.shape
    I = I2 // 2
    weights, ids = route(router_logits, top_k)
    xs = x.to(dtype)
    out = torch.zeros((T, HD), device=x.device, dtype=dtype)
    for e in range(E):
        tok, slot = torch.where(ids == e)
        if tok.numel() == 0:
            continue
        xe = xs[tok]
        w = w13[e].to(dtype)
        g = xe @ w[:I].T
        u = xe @ w[I:].T
        h = torch.nn.functional.silu(g) * u
        out.index_add_(0, tok, (h @ w2[e].to(dtype).T) * weights[tok, slot, None].to(dtype))
    return out


def reference(x, w13, w2, router_logits, top_k):
    """fp32 reference from the same rounded inputs (TF32 off)."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return _expert_loop(x, w13, w2, router_logits, top_k, torch.float32)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def torch_expert_loop(x, w13, w2, router_logits, top_k):
    """The baseline the bar is set against: the per-expert loop in the input dtype."""
    return _expert_loop(x, w13, w2, router_logits, top_k, x.dtype)


def dense_equivalent(x_rep, w13_0, h_rep, w2_0):
    """One dense GEMM pair of the same work (T*k rows through one expert): the ceiling to compare to."""
    torch.matmul(x_rep, w13_0.T)
    return torch.matmul(h_rep, w2_0.T)
