"""Flash attention forward on Hopper in Gluon, FlashAttention-3 style: a TMA producer warp, consumer
warpgroups on async wgmma, warp-specialized with gl.warp_specialize.

    python benchmarks/explore/gluon_attention.py --out DIR [--variants a,b] [--shapes S,S] [--budget-s N]
    python benchmarks/explore/gluon_attention.py --compile-only [--variants a,b]
    python benchmarks/explore/gluon_attention.py --out DIR --variants ws2x4_overlap,ws3x4_overlap_d64 [--d64-shapes S,S]

Written for the H200 (sm_90, triton 3.6.0) and run there in session 13 (experiments/sweep-h200-session13,
call 5); the persistent variants are not yet run on a GPU. --compile-only builds every variant for sm_90
without a GPU and prints its registers, spills and shared memory. On the device, in one call:

    python benchmarks/explore/gluon_attention.py --out DIR --budget-s 200

--compile-only under triton 3.6.0 (sm_90, ptxas 12.8), every variant at bf16/fp16, causal or not, D 128
and 64: no spills, no ptxas warning (no wgmma serialized); .maxnreg 168 at launch (384 threads), then
setmaxnreg gives each consumer warpgroup 240 registers and the loader's 24. Shared memory at D128:
164 KB with 2 K/V stages, 230 KB with 3 (of 227 KB usable, 232448 B); 82 / 115 KB at D64. A compile
takes 1-5 s a (variant, dtype, causal, D). The persistent variants (below), compiled at all 16 of bf16/fp16 x
causal or not x D 128/64: the same (168 at launch, setmaxnreg 240 / 24, no spills, no warning); shared
memory 196936 B (persist2x4_overlap: + 2 x 16 KB O staging), 229752 B (_b3) and 164152 B (_rs) at D128,
98632 / 115064 / 82232 B at D64. The older variants' PTX is unchanged by their addition.

Why: the template (skills/kernels/flash-attention/triton_template.py) reaches 476-514 TFLOP/s at B4 H16
S4096-16384 D128 bf16 non-causal on the H200; torch's default scaled_dot_product_attention (cuDNN)
609-644. cuDNN runs three warpgroups a program (one producer on TMA, two consumers on wgmma + softmax);
the template's 8 warps (128x128 tiles) load, multiply and exponentiate in turn. Triton's automatic
warp specialization is Blackwell-only, so the split is written by hand here.

Hypothesis: a producer warp feeding a K/V ring through mbarriers, consumers whose wgmma run async (with
FA3's overlap of the next S = Q K^T under this block's softmax) and the consumers' register budget
raised to 240 by setmaxnreg lift D128 non-causal from ~500 to >= 600 TFLOP/s.
Prediction: the *_overlap variants reach 580-640 TFLOP/s at D128 non-causal S >= 4096 (bf16 and fp16)
and >= 520 causal; the plain ones (no overlap) land near the template (480-530), since the exponentials
then still stall the tensor cores.

Variants (all: BLOCK_M 128 query rows a program, BLOCK_N 128 keys a step, grid (S/128, B*H), a 1-warp
TMA loader partition; K and V each in a ring of NUM_BUFFERS shared-memory stages with ready/empty
mbarriers):
  ws8            one consumer partition of 8 warps (two warpgroups, 64 rows each, in step: every
                 mbarrier arrive synchronizes the partition); S_j, softmax, P_j V_j in turn.
  ws8_overlap    the same partition, FA3's intra-warpgroup pipeline: S_j = Q K_j^T and P_{j-1} V_{j-1}
                 issued back to back, softmax of S_j under the P V wgmma.
  ws2x4          two consumer partitions of 4 warps (one warpgroup, 64 query rows each) that run
                 independently (FA3's layout: one's softmax can hide under the other's wgmma).
  ws2x4_overlap  two independent consumers, each with the intra-warpgroup pipeline.
  ws2x4_overlap_b3  the latter with 3 K/V stages instead of 2.

Persistent variants (attn_fwd_persist): ws2x4_overlap's loader and two overlapped consumers, but a grid of
min(#SMs, tiles) programs, each walking tiles pid, pid + nprog, ... of the (S/128) * B*H (odd waves right to
left, which evens out the programs' sums). Non-causal tiles go head by head; causal ones heaviest query block
first across all heads. The K/V ring's counter runs on across tiles (loader and consumers count alike), each
consumer's Q tile has its own ready/empty barrier pair and is handed back right after the tile's last
Q K^T, so the loader brings the next tile's first K, Q and first V in under the last softmax, P V and
epilogue; O leaves through its own staging tile or from registers, never through Q's.
  persist2x4_overlap     2 K/V stages; O through a staging tile per consumer and a TMA store.
  persist2x4_overlap_b3  3 K/V stages; O stored straight from registers (3 stages leave no shared memory
                         for staging at D128).
  persist2x4_overlap_rs  2 K/V stages, O from registers: the control that separates _b3's store from its
                         third stage.
Hypothesis: with one tile a program, every tile waits for its Q and first K/V before its first wgmma and
leaves the tensor cores idle through its epilogue. That is worth most where tiles are short: S1024 (8 key
blocks a tile) and causal (tiles of 1 to S/128 blocks). On the H200, bf16 B4 H16, the flash-attention
template running ws2x4_overlap (2 or 3 stages, autotuned; session 13 call 6) measured 569 TFLOP/s at D128
S1024 non-causal (0.94x torch's SDPA, cuDNN, which runs 132 persistent programs), 632-665 at S 2048-16384
(1.02-1.04x); causal 393 at S1024 (0.91x) and 509 at 2048 (0.99x); D64 0.94-0.98x non-causal, 0.88-0.94x
causal. A persistent program overlaps tile t+1's loads with tile t's tail.
Prediction (against ws2x4_overlap in the same run): persist2x4_overlap +4-7% at S1024 D128 non-causal,
+3-6% causal (S 1024-2048), +0-2% at S >= 4096 non-causal.

Head dim 64 (attn_fwd_ws3, attn_fwd_persist3; launched at D 64 only, reported unsupported at 128):
  ws3x4_overlap_d64       FA3's head-dim-64 tile: BLOCK_M 192 (three consumer warpgroups of 64 rows, each
                          with the intra-warpgroup overlap), BLOCK_N 128, 2 K/V stages, grid (ceil(S/192), B*H).
  persist3x4_overlap_d64  the same on min(#SMs, tiles) programs, head by head (causal: heaviest first), Q
                          handed back after each consumer's last Q K^T, O through a staging tile a consumer.
S (a power of two) is no multiple of 192, but it is of 64: each consumer's 64 rows lie wholly inside the
head or wholly past it, so the descriptors stay 2-D over (B*H*S, D) and a consumer past the head neither
loads Q nor stores O (the loader predicates its copy and its expect). It still waits for and releases every
K/V block of the tile, since the empty barriers count all three consumers; every release follows the wait
on that block's ready barrier, which puts it in the right phase. Causal: the tile visits key blocks up to
ceil(min(192 (start_m + 1), S) / 128); consumer c computes blocks up to its own diagonal q_row // 128 (the
only one it masks, besides block 0 always) and only releases the tile's later block (at most one). The
mask is the wgmma's initial accumulator (0 / -inf) rather than a select on the scores: the select,
applied where S_j, P_{j-1} and acc are all live, spilled 120-216 B at 160 registers. Registers: four
warpgroups (the loader's padded) share 64K: 3 x 128 x 160 + 128 x 24 = 64512; Triton gives the default
partition (consumer 0) the remaining 168.
Hypothesis: at head dim 64 an exponential costs as much as its score's matrix products, so the special-
function unit and not the tensor cores sets the pace; a third independent consumer gives it more softmax
to run under the others' wgmma. cuDNN's kernel (3 x 128 threads, tensor pipe 45.8% against the best of
ours at 40.4%, call 9) and FA3 both use 192 x 128 with three consumers here.
Prediction (bf16, x the default SDPA in the same run; ws2x4_overlap, persist2x4_overlap and the template
read 0.92-0.99 non-causal, 0.95-0.98 causal in call 7): ws3x4_overlap_d64 +3-8% over ws2x4_overlap at
S 4096-16384, i.e. 0.98-1.05x SDPA; at S1024 (B16 H32) only 0.93-1.00x, because a head's sixth tile holds
64 rows (1152 rows of consumer slots for 1024) and the one-tile grid pays each tile's fill and drain;
persist3x4_overlap_d64 +3-6% over it at S1024 and causal (short tiles), even at S16384. Causal gains
less than non-causal: each consumer's diagonal block ends its pipeline and the ragged tiles are the
heaviest ones.
--compile-only (triton 3.6.0, sm_90, bf16 and fp16, causal or not, D64): ws3x4_overlap_d64 .maxnreg 128
at launch (512 threads), setmaxnreg 160 (consumers 1, 2), 168 (consumer 0), 24 (loader), 0 spills,
90412 B shared memory; persist3x4_overlap_d64 the same, 115052 B, 0 spills non-causal but 152 B of spills
causal (38 local loads and stores around the diagonal block's mask, once a tile a consumer). The older
variants' PTX is unchanged by their addition.

Each case: fresh randn inputs, output poisoned with NaN, max abs error against torch's
scaled_dot_product_attention in fp32 (< 2e-2), then triton.testing.do_bench (warmup 25, rep 100, the
median and the min-max spread) for each variant, the template (flash_attention) and torch's default
SDPA. Rows print as they finish and DIR/gluon_attention.json is rewritten after each row; cases start
until --budget-s has passed (bf16 D128 non-causal first; with a *_d64 variant and no --shapes, only bf16 D64
at S 1024 / 4096 / 16384, B 16 / 4 / 1, H 32, the sweep's rows, non-causal then causal), and a watchdog
ends the run when no row has finished for --hang-s (a kernel waiting on a barrier that never completes would
otherwise spin).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parent))
import templates  # noqa: E402  (beside this file)

# triton 3.6 (the device) names the TMA copies async_copy_global_to_shared / async_copy_shared_to_global;
# later releases renamed them async_load / async_store (the store's old name is gone there)
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global

LOG2E = 1.4426950408889634
BLOCK_M = 128
BLOCK_N = 128

# name: (consumer partitions, warps each, intra-warpgroup overlap, K/V stages)
VARIANTS = {
    "ws8": (1, 8, False, 2),
    "ws8_overlap": (1, 8, True, 2),
    "ws2x4": (2, 4, False, 2),
    "ws2x4_overlap": (2, 4, True, 2),
    "ws2x4_overlap_b3": (2, 4, True, 3),
    "persist2x4_overlap": (2, 4, True, 2),
    "persist2x4_overlap_b3": (2, 4, True, 3),
    "persist2x4_overlap_rs": (2, 4, True, 2),
    "ws3x4_overlap_d64": (3, 4, True, 2),
    "persist3x4_overlap_d64": (3, 4, True, 2),
}
# the persistent variants (attn_fwd_persist) and how each writes O: False through a shared-memory staging
# tile per consumer and a TMA store, True straight from registers (3 stages leave no shared memory for
# staging at D128; _rs is the 2-stage control for that store)
PERSISTENT = {"persist2x4_overlap": False, "persist2x4_overlap_b3": True, "persist2x4_overlap_rs": True}
# setmaxnreg requests. The loader warp issues TMA copies and waits on barriers: 24 registers is FA3's
# producer figure. Triton pads the worker warps to whole warpgroups (padding warps get 16) and hands the
# default partition what is left of 64K; a worker consumer asks for the same 240 it would be left.
LOADER_REGS = 24
CONSUMER_REGS = 240
# head dim 64 only (attn_fwd_ws3 / attn_fwd_persist3; the value: persistent): three consumer warpgroups of 64
# rows, BLOCK_M 192. Four warpgroups (the loader padded to one) share 64K registers: 3 * 128 * R + 128 * 24
# <= 65536 gives R <= 162, so 160 (setmaxnreg takes multiples of 8; FA3's figure for this shape).
D64_VARIANTS = {"ws3x4_overlap_d64": False, "persist3x4_overlap_d64": True}
CONSUMER_REGS_3 = 160


# --------------------------------------------------------------------------------------------------
# kernel
# --------------------------------------------------------------------------------------------------
@gluon.jit
def _tile(S, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    # This program's query block, its head's first row in the (B*H*S, D) views, and how many key blocks
    # it visits: all of them, or (causal) those up to and including the diagonal, the last
    # BLOCK_M / BLOCK_N of which need a mask. Causal launches the heaviest query blocks first so the
    # grid's tail is short work.
    start_m = gl.program_id(0)
    if CAUSAL:
        start_m = gl.num_programs(0) - 1 - start_m
        n_blocks = (start_m + 1) * (BLOCK_M // BLOCK_N)
        n_unmasked = start_m * (BLOCK_M // BLOCK_N)
    else:
        n_blocks = S // BLOCK_N
        n_unmasked = n_blocks
    row0 = gl.program_id(1) * S
    return start_m, row0, n_blocks, n_unmasked


@gluon.jit
def _loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty, S,
            BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr,
            NUM_CONSUMERS: gl.constexpr, CAUSAL: gl.constexpr):
    # The producer: Q once (one tile per consumer, one barrier), then K_j and V_j in the order the
    # consumers use them, each into the next stage of its ring once the consumers have released it.
    start_m, row0, n_blocks, n_unmasked = _tile(S, BLOCK_M, BLOCK_N, CAUSAL)
    M_PER: gl.constexpr = BLOCK_M // NUM_CONSUMERS
    mbarrier.expect(q_bar, NUM_CONSUMERS * q_desc.block_type.nbytes)
    for c in gl.static_range(NUM_CONSUMERS):
        _tma_load(q_desc, [row0 + start_m * BLOCK_M + c * M_PER, 0], q_bar, q_smem.index(c))
    for j in range(n_blocks):
        buf = j % NUM_BUFFERS
        # A fresh mbarrier is in phase 0 and counts its (never run) phase "1" as complete, so waiting for
        # parity 1 passes at once: the first lap over the ring finds every stage free. Each later lap
        # waits for the consumers' release one lap earlier, whose parity alternates 0, 1, 0, ...
        free_parity = ((j // NUM_BUFFERS) & 1) ^ 1
        mbarrier.wait(k_empty.index(buf), free_parity)
        # expect = one arrive plus the byte count the copy will complete (ready barriers count 1)
        mbarrier.expect(k_ready.index(buf), k_desc.block_type.nbytes)
        _tma_load(k_desc, [row0 + j * BLOCK_N, 0], k_ready.index(buf), k_smem.index(buf))
        mbarrier.wait(v_empty.index(buf), free_parity)
        mbarrier.expect(v_ready.index(buf), v_desc.block_type.nbytes)
        _tma_load(v_desc, [row0 + j * BLOCK_N, 0], v_ready.index(buf), v_smem.index(buf))


@gluon.jit
def _qk(q, k_smem, k_ready, j, s_layout: gl.constexpr, M_PER: gl.constexpr, BLOCK_N: gl.constexpr,
        NUM_BUFFERS: gl.constexpr):
    # Issue S_j = Q K_j^T (async) once K_j has landed. K's stage is [BLOCK_N, D] with D contiguous; the
    # transposed view makes it wgmma's [D, BLOCK_N] B operand without moving data.
    buf = j % NUM_BUFFERS
    mbarrier.wait(k_ready.index(buf), (j // NUM_BUFFERS) & 1)
    zero = gl.zeros([M_PER, BLOCK_N], gl.float32, s_layout)
    return warpgroup_mma(q, k_smem.index(buf).permute((1, 0)), zero, use_acc=False, is_async=True)


@gluon.jit
def _softmax_step(s, m_i, l_i, j, q_row, qk_scale, s_layout: gl.constexpr, M_PER: gl.constexpr,
                  BLOCK_N: gl.constexpr, MASK: gl.constexpr):
    # The online-softmax update for raw scores s of key block j (fp32, log2 units: qk_scale holds
    # log2 e). Returns p = exp2(s * scale - m_new), alpha = exp2(m_old - m_new) for the accumulator,
    # and the new running max and sum.
    if MASK:
        offs_m = q_row + gl.arange(0, M_PER, layout=gl.SliceLayout(1, s_layout))
        offs_n = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        keep = gl.expand_dims(offs_m, 1) >= gl.expand_dims(offs_n, 0)
        s = gl.where(keep, s, gl.full([M_PER, BLOCK_N], float("-inf"), gl.float32, s_layout))
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, alpha, m_new, l_i


@gluon.jit
def _plain_block(acc, m_i, l_i, q, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, j, q_row, qk_scale,
                 s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr, M_PER: gl.constexpr,
                 BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, MASK: gl.constexpr):
    # One key block without overlap: S_j, wait, softmax, P_j V_j, wait. Each stage is released as soon
    # as the wgmma that read it has completed (the wait precedes the arrive; arrive synchronizes the
    # partition first, so every warpgroup of it has waited).
    buf = j % NUM_BUFFERS
    s = _qk(q, k_smem, k_ready, j, s_layout, M_PER, BLOCK_N, NUM_BUFFERS)
    s = warpgroup_mma_wait(0, deps=(s, ))
    mbarrier.arrive(k_empty.index(buf))
    p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, j, q_row, qk_scale, s_layout, M_PER, BLOCK_N, MASK)
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
    # P goes to the second wgmma from registers: the accumulator layout already holds, per thread, the
    # elements the A-operand layout (k_width 2 for 16-bit) wants, so this conversion moves nothing.
    p16 = gl.convert_layout(p.to(v_smem.dtype), p_layout)
    mbarrier.wait(v_ready.index(buf), (j // NUM_BUFFERS) & 1)
    acc = warpgroup_mma(p16, v_smem.index(buf), acc, is_async=True)
    acc, p16 = warpgroup_mma_wait(0, deps=(acc, p16))
    mbarrier.arrive(v_empty.index(buf))
    return acc, m_i, l_i


@gluon.jit
def _overlap_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, j, g, q_row,
                   qk_scale, s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr,
                   M_PER: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, MASK: gl.constexpr,
                   q_empty=None):
    # FA3's intra-warpgroup pipeline, step j >= 1. On entry p16 = P_{j-1} (made with the running max
    # m_{j-1}), acc holds blocks < j-1 under m_{j-1}, l_i blocks <= j-1. The tensor cores run S_j then
    # P_{j-1} V_{j-1} back to back while this warpgroup does softmax(S_j) under the second.
    # j is the key block (the mask's), g the K/V ring counter of block j: j itself for one tile a
    # program; the persistent kernel's counter runs on across tiles. q_empty (persistent, last block
    # only): S_j is this tile's last read of Q, so Q's tile is handed back as soon as S_j is done.
    kbuf = g % NUM_BUFFERS
    vbuf = (g - 1) % NUM_BUFFERS
    s = _qk(q, k_smem, k_ready, g, s_layout, M_PER, BLOCK_N, NUM_BUFFERS)
    mbarrier.wait(v_ready.index(vbuf), ((g - 1) // NUM_BUFFERS) & 1)
    acc = warpgroup_mma(p16, v_smem.index(vbuf), acc, is_async=True)
    # wgmma groups complete in order: with one left outstanding, the older one (S_j) is done
    s = warpgroup_mma_wait(1, deps=(s, ))
    mbarrier.arrive(k_empty.index(kbuf))
    if q_empty is not None:
        mbarrier.arrive(q_empty)
    p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, j, q_row, qk_scale, s_layout, M_PER, BLOCK_N, MASK)
    # P_j to 16 bits before waiting: 32 registers live across the wait instead of p's 64
    p16_next = gl.convert_layout(p.to(v_smem.dtype), p_layout)
    acc, p16 = warpgroup_mma_wait(0, deps=(acc, p16))
    mbarrier.arrive(v_empty.index(vbuf))
    # acc now holds blocks <= j-1 under m_{j-1}: rescale to m_j, ready for P_j V_j next step
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
    return acc, m_i, l_i, p16_next


@gluon.jit
def _consumer(q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale,
              C: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr,
              NUM_CONSUMERS: gl.constexpr, CONSUMER_WARPS: gl.constexpr, OVERLAP: gl.constexpr,
              CAUSAL: gl.constexpr):
    # Consumer C of NUM_CONSUMERS: query rows [C * M_PER, (C + 1) * M_PER) of this program's block, on
    # CONSUMER_WARPS warps (4 = one warpgroup of 64 rows, 8 = two warpgroups, 64 rows each).
    start_m, row0, n_blocks, n_unmasked = _tile(S, BLOCK_M, BLOCK_N, CAUSAL)
    M_PER: gl.constexpr = BLOCK_M // NUM_CONSUMERS
    HEAD_DIM: gl.constexpr = o_desc.block_type.shape[1]
    # wgmma accumulators: m16 per warp, the warps stacked along M (each warpgroup owns 64 whole rows, so
    # row max and sum stay inside a warp), one instruction covering the tile's whole N; k = 16 for 16-bit.
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[CONSUMER_WARPS, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[CONSUMER_WARPS, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)

    q_row = start_m * BLOCK_M + C * M_PER        # first query row of this consumer, within the head
    q = q_smem.index(C)
    mbarrier.wait(q_bar, 0)
    acc = gl.zeros([M_PER, HEAD_DIM], gl.float32, o_layout)
    if OVERLAP:
        # prologue: block 0 alone. Causal masks it always: the mask keeps every score of a block left of
        # the diagonal, so it is only wasted work there, and block 0 is the diagonal for query block 0.
        s = _qk(q, k_smem, k_ready, 0, s_layout, M_PER, BLOCK_N, NUM_BUFFERS)
        s = warpgroup_mma_wait(0, deps=(s, ))
        mbarrier.arrive(k_empty.index(0))
        m_i = gl.full([M_PER], float("-inf"), gl.float32, row_layout)
        l_i = gl.zeros([M_PER], gl.float32, row_layout)
        p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, 0, q_row, qk_scale, s_layout, M_PER, BLOCK_N, CAUSAL)
        p16 = gl.convert_layout(p.to(v_smem.dtype), p_layout)
        for j in range(1, n_unmasked):
            acc, m_i, l_i, p16 = _overlap_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                                v_empty, j, j, q_row, qk_scale, s_layout, o_layout, p_layout, M_PER,
                                                BLOCK_N, NUM_BUFFERS, False)
        for j in range(gl.maximum(n_unmasked, 1), n_blocks):
            acc, m_i, l_i, p16 = _overlap_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                                v_empty, j, j, q_row, qk_scale, s_layout, o_layout, p_layout, M_PER,
                                                BLOCK_N, NUM_BUFFERS, True)
        # epilogue: the last block's P V
        last = n_blocks - 1
        vbuf = last % NUM_BUFFERS
        mbarrier.wait(v_ready.index(vbuf), (last // NUM_BUFFERS) & 1)
        acc = warpgroup_mma(p16, v_smem.index(vbuf), acc, is_async=True)
        acc, p16 = warpgroup_mma_wait(0, deps=(acc, p16))
        mbarrier.arrive(v_empty.index(vbuf))
    else:
        m_i = gl.full([M_PER], float("-inf"), gl.float32, row_layout)
        l_i = gl.zeros([M_PER], gl.float32, row_layout)
        for j in range(0, n_unmasked):
            acc, m_i, l_i = _plain_block(acc, m_i, l_i, q, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, j,
                                         q_row, qk_scale, s_layout, o_layout, p_layout, M_PER, BLOCK_N,
                                         NUM_BUFFERS, False)
        for j in range(n_unmasked, n_blocks):
            acc, m_i, l_i = _plain_block(acc, m_i, l_i, q, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, j,
                                         q_row, qk_scale, s_layout, o_layout, p_layout, M_PER, BLOCK_N,
                                         NUM_BUFFERS, True)

    # O = acc / l, through Q's own shared-memory tile (every wgmma that read Q has been waited for) and
    # a TMA store. Every row has at least its diagonal key, so l > 0.
    l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
    out = (acc * gl.expand_dims(1.0 / l_o, 1)).to(o_desc.dtype)
    q.store(out)
    fence_async_shared()
    _tma_store(o_desc, [row0 + q_row, 0], q)
    tma.store_wait(0)


@gluon.jit
def attn_fwd_ws(q_desc, k_desc, v_desc, o_desc, S, qk_scale, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                NUM_BUFFERS: gl.constexpr, NUM_CONSUMERS: gl.constexpr, CONSUMER_WARPS: gl.constexpr,
                OVERLAP: gl.constexpr, CAUSAL: gl.constexpr, LOADER_REGS: gl.constexpr,
                CONSUMER_REGS: gl.constexpr):
    # q/o descriptors: blocks [BLOCK_M / NUM_CONSUMERS, D]; k/v: [BLOCK_N, D]; all over (B*H*S, D) views
    # (S a multiple of the tiles, so no tile crosses a head).
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS] + q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + v_desc.block_type.shape, v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    # ready: the loader's expect (one arrive) + the copy's bytes; empty: one arrive per consumer
    # partition (an arrive is one thread's, after the partition synchronizes)
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=NUM_CONSUMERS)
        mbarrier.init(v_empty.index(i), count=NUM_CONSUMERS)

    if NUM_CONSUMERS == 1:
        gl.warp_specialize([
            (_consumer, (q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale, 0,
                         BLOCK_M, BLOCK_N, NUM_BUFFERS, 1, CONSUMER_WARPS, OVERLAP, CAUSAL)),
            (_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty, S,
                       BLOCK_M, BLOCK_N, NUM_BUFFERS, 1, CAUSAL)),
        ], [1], [LOADER_REGS])
    else:
        gl.warp_specialize([
            (_consumer, (q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale, 0,
                         BLOCK_M, BLOCK_N, NUM_BUFFERS, 2, CONSUMER_WARPS, OVERLAP, CAUSAL)),
            (_consumer, (q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale, 1,
                         BLOCK_M, BLOCK_N, NUM_BUFFERS, 2, CONSUMER_WARPS, OVERLAP, CAUSAL)),
            (_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty, S,
                       BLOCK_M, BLOCK_N, NUM_BUFFERS, 2, CAUSAL)),
        ], [CONSUMER_WARPS, 1], [CONSUMER_REGS, LOADER_REGS])


# --------------------------------------------------------------------------------------------------
# persistent kernel: min(#SMs, tiles) programs, each looping over tiles
# --------------------------------------------------------------------------------------------------
@gluon.jit
def _persist_waves(S, BH, BLOCK_M: gl.constexpr):
    # Tiles go out in waves of nprog, wave w being tiles [w * nprog, (w + 1) * nprog). Odd waves run
    # right to left ("snake"): with causal's heaviest-first order the program that got a wave's longest
    # tile gets the next wave's shortest, which balances the programs' sums (a static deal, unlike the
    # hardware's dynamic one for a grid of tiles). This program's waves: the full ones, plus the last,
    # partial one if its position there is below what is left over.
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    n_tiles = (S // BLOCK_M) * BH
    n_full = n_tiles // nprog
    pos = pid + (n_full % 2) * (nprog - 1 - 2 * pid)
    return n_full + (pos < n_tiles % nprog).to(gl.int32)


@gluon.jit
def _persist_tile(w, S, BH, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    # This program's tile of wave w: its query block, its head's first row in the (B*H*S, D) views and
    # its key blocks (all, or causal: those up to the diagonal, the last one masked). Loader and both
    # consumers call this with the same w, so they walk the same tiles. Non-causal tiles run head by
    # head (as the grid of _tile does: the tiles running at once share few heads' K and V in L2), and so
    # does causal, each head's heaviest query blocks (largest start_m) first. Causal heaviest-first
    # across all heads (start_m = n_m - 1 - t // BH) read 8-10% under the one-tile grid at S 4096
    # (session 14, call 4): 132 tiles at once over as many heads, whose K and V (2 MB a head at D128)
    # overflow the L2.
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    t = w * nprog + pid + (w % 2) * (nprog - 1 - 2 * pid)
    n_m = S // BLOCK_M
    head = t // n_m
    if CAUSAL:
        start_m = n_m - 1 - t % n_m
        n_blocks = (start_m + 1) * (BLOCK_M // BLOCK_N)
    else:
        start_m = t % n_m
        n_blocks = S // BLOCK_N
    return start_m, head * S, n_blocks


@gluon.jit
def _load_stage(desc, smem, ready, empty, g, row, NUM_BUFFERS: gl.constexpr):
    # One K or V block into stage g % NUM_BUFFERS of its ring, g being the block's place in the stream
    # of all this program's blocks (tile after tile). Lap g // NUM_BUFFERS over the ring waits for the
    # consumers' release of lap - 1 (count 2: both consumers), i.e. for phase lap - 1 of the empty
    # barrier to have completed: parity ((lap - 1) & 1) = (lap & 1) ^ 1. Lap 0 waits parity 1, which a
    # fresh barrier (phase 0 pending) counts as done, so the first lap passes at once.
    buf = g % NUM_BUFFERS
    mbarrier.wait(empty.index(buf), ((g // NUM_BUFFERS) & 1) ^ 1)
    # ready barriers count 1: the expect's arrive, then the phase completes with the copy's bytes
    mbarrier.expect(ready.index(buf), desc.block_type.nbytes)
    _tma_load(desc, [row, 0], ready.index(buf), smem.index(buf))


@gluon.jit
def _persist_loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, k_empty, v_ready,
                    v_empty, S, BH, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                    NUM_CONSUMERS: gl.constexpr, CAUSAL: gl.constexpr):
    # The producer over all of this program's tiles: one stream of K/V blocks whose counter g runs on
    # across tiles (the consumers count the same way), and per tile one Q tile per consumer.
    M_PER: gl.constexpr = BLOCK_M // NUM_CONSUMERS
    n_waves = _persist_waves(S, BH, BLOCK_M)
    g = 0
    for w in range(n_waves):
        start_m, row0, n_blocks = _persist_tile(w, S, BH, BLOCK_M, BLOCK_N, CAUSAL)
        # K_0 before Q: its stage was released by the previous tile's second-to-last S (2 stages), Q's
        # only by the last, so this order issues each copy as early as its stage allows.
        _load_stage(k_desc, k_smem, k_ready, k_empty, g, row0, NUM_BUFFERS)
        for c in gl.static_range(NUM_CONSUMERS):
            # Q of tile w into consumer c's buffer once c has released tile w - 1's (its last Q K^T has
            # completed): q_empty[c] (count 1) completes phase w - 1 then, so wait parity ((w - 1) & 1)
            # = (w & 1) ^ 1; tile 0 waits parity 1 and passes on the fresh barrier. q_ready[c] (count 1:
            # the expect, then the bytes) completes phase w when Q of tile w has landed.
            mbarrier.wait(q_empty.index(c), (w & 1) ^ 1)
            mbarrier.expect(q_ready.index(c), q_desc.block_type.nbytes)
            _tma_load(q_desc, [row0 + start_m * BLOCK_M + c * M_PER, 0], q_ready.index(c), q_smem.index(c))
        _load_stage(v_desc, v_smem, v_ready, v_empty, g, row0, NUM_BUFFERS)
        for j in range(1, n_blocks):
            _load_stage(k_desc, k_smem, k_ready, k_empty, g + j, row0 + j * BLOCK_N, NUM_BUFFERS)
            _load_stage(v_desc, v_smem, v_ready, v_empty, g + j, row0 + j * BLOCK_N, NUM_BUFFERS)
        g += n_blocks


@gluon.jit
def _persist_consumer(q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, o_desc,
                      o_ptr, S, BH, qk_scale, C: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                      NUM_BUFFERS: gl.constexpr, NUM_CONSUMERS: gl.constexpr, CONSUMER_WARPS: gl.constexpr,
                      CAUSAL: gl.constexpr, O_FROM_REGS: gl.constexpr):
    # Consumer C (one warpgroup, M_PER = 64 query rows of each tile), FA3's intra-warpgroup pipeline as
    # in _consumer, over all of this program's tiles. Block j of a tile is K/V ring counter g + j; its
    # ready barriers are waited with parity ((g + j) // NUM_BUFFERS) & 1 and released as in _consumer.
    # With BLOCK_M == BLOCK_N the only masked block of a causal tile is its last, the diagonal.
    gl.static_assert(BLOCK_M == BLOCK_N)
    M_PER: gl.constexpr = BLOCK_M // NUM_CONSUMERS
    HEAD_DIM: gl.constexpr = o_desc.block_type.shape[1]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[CONSUMER_WARPS, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[CONSUMER_WARPS, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    q = q_smem.index(C)
    q_rdy = q_ready.index(C)
    q_emp = q_empty.index(C)

    n_waves = _persist_waves(S, BH, BLOCK_M)
    g = 0
    for w in range(n_waves):
        start_m, row0, n_blocks = _persist_tile(w, S, BH, BLOCK_M, BLOCK_N, CAUSAL)
        q_row = start_m * BLOCK_M + C * M_PER
        # Q of tile w: phase w of q_ready (see _persist_loader)
        mbarrier.wait(q_rdy, w & 1)
        acc = gl.zeros([M_PER, HEAD_DIM], gl.float32, o_layout)
        # prologue: block 0 alone (masked if causal, as in _consumer). A tile of one key block (causal's
        # query block 0) has just done its last Q K^T: Q goes back here.
        s = _qk(q, k_smem, k_ready, g, s_layout, M_PER, BLOCK_N, NUM_BUFFERS)
        s = warpgroup_mma_wait(0, deps=(s, ))
        mbarrier.arrive(k_empty.index(g % NUM_BUFFERS))
        mbarrier.arrive(q_emp, pred=n_blocks == 1)
        m_i = gl.full([M_PER], float("-inf"), gl.float32, row_layout)
        l_i = gl.zeros([M_PER], gl.float32, row_layout)
        p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, 0, q_row, qk_scale, s_layout, M_PER, BLOCK_N, CAUSAL)
        p16 = gl.convert_layout(p.to(v_smem.dtype), p_layout)
        for j in range(1, n_blocks - 1):
            acc, m_i, l_i, p16 = _overlap_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                                v_empty, j, g + j, q_row, qk_scale, s_layout, o_layout, p_layout,
                                                M_PER, BLOCK_N, NUM_BUFFERS, False)
        # the last block out of the loop: it hands Q back right after its S (the next tile's Q then
        # loads under this block's softmax, the last P V and the epilogue), with no extra arrive (and
        # the partition barrier it takes) in every step of the loop
        if n_blocks > 1:
            acc, m_i, l_i, p16 = _overlap_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                                v_empty, n_blocks - 1, g + n_blocks - 1, q_row, qk_scale, s_layout,
                                                o_layout, p_layout, M_PER, BLOCK_N, NUM_BUFFERS, CAUSAL, q_emp)
        # the last block's P V
        g_last = g + n_blocks - 1
        vbuf = g_last % NUM_BUFFERS
        mbarrier.wait(v_ready.index(vbuf), (g_last // NUM_BUFFERS) & 1)
        acc = warpgroup_mma(p16, v_smem.index(vbuf), acc, is_async=True)
        acc, p16 = warpgroup_mma_wait(0, deps=(acc, p16))
        mbarrier.arrive(v_empty.index(vbuf))

        # O = acc / l (every row has its diagonal key, so l > 0); not through Q's tile, which by now may
        # hold the next tile's Q.
        l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
        out = (acc * gl.expand_dims(1.0 / l_o, 1)).to(o_desc.dtype)
        if O_FROM_REGS:
            # straight from the accumulator layout: each thread stores 2 adjacent elements (4 B) of a
            # row, a warp's store 16 B of each of 8 rows; no shared memory (none left with 3 stages)
            offs_m = gl.arange(0, M_PER, layout=gl.SliceLayout(1, o_layout))
            offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
            o_tile_ptr = o_ptr + (row0 + q_row).to(gl.int64) * HEAD_DIM
            gl.store(o_tile_ptr + gl.expand_dims(offs_m, 1) * HEAD_DIM + gl.expand_dims(offs_d, 0), out)
        else:
            # through this consumer's own staging tile and a TMA store. The store issued from it one tile
            # ago must have finished reading it: store_wait(0) waits for the issuing thread's bulk groups
            # and is followed by a barrier of the partition (Triton's lowering), so no thread writes early.
            # That store had a whole tile to drain, so the wait costs nothing in practice.
            o_tile = o_smem.index(C)
            tma.store_wait(0)
            o_tile.store(out)
            fence_async_shared()
            _tma_store(o_desc, [row0 + q_row, 0], o_tile)
        g += n_blocks
    if not O_FROM_REGS:
        tma.store_wait(0)


@gluon.jit
def attn_fwd_persist(q_desc, k_desc, v_desc, o_desc, o_ptr, S, BH, qk_scale, BLOCK_M: gl.constexpr,
                     BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, NUM_CONSUMERS: gl.constexpr,
                     CONSUMER_WARPS: gl.constexpr, CAUSAL: gl.constexpr, O_FROM_REGS: gl.constexpr,
                     LOADER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr):
    # Descriptors as attn_fwd_ws's; o_ptr is O's base (the stores from registers); BH = B * H. Grid
    # (min(#SMs, tiles), ): each program walks the tiles of _persist_tile. Two consumers of one
    # warpgroup each, with the intra-warpgroup overlap.
    gl.static_assert(NUM_CONSUMERS == 2)
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS] + q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + v_desc.block_type.shape, v_desc.layout)
    if O_FROM_REGS:
        o_smem = q_smem  # unused: a stand-in for the argument
    else:
        o_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS] + o_desc.block_type.shape, o_desc.layout)
    # per consumer: q_ready (the loader's expect + Q's bytes) and q_empty (the consumer's one arrive,
    # one thread's after the partition synchronizes); K/V rings as in attn_fwd_ws
    q_ready = gl.allocate_shared_memory(gl.int64, [NUM_CONSUMERS, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [NUM_CONSUMERS, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(NUM_CONSUMERS):
        mbarrier.init(q_ready.index(c), count=1)
        mbarrier.init(q_empty.index(c), count=1)
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=NUM_CONSUMERS)
        mbarrier.init(v_empty.index(i), count=NUM_CONSUMERS)

    gl.warp_specialize([
        (_persist_consumer, (q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                             o_desc, o_ptr, S, BH, qk_scale, 0, BLOCK_M, BLOCK_N, NUM_BUFFERS, NUM_CONSUMERS,
                             CONSUMER_WARPS, CAUSAL, O_FROM_REGS)),
        (_persist_consumer, (q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                             o_desc, o_ptr, S, BH, qk_scale, 1, BLOCK_M, BLOCK_N, NUM_BUFFERS, NUM_CONSUMERS,
                             CONSUMER_WARPS, CAUSAL, O_FROM_REGS)),
        (_persist_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, k_empty,
                           v_ready, v_empty, S, BH, BLOCK_M, BLOCK_N, NUM_BUFFERS, NUM_CONSUMERS, CAUSAL)),
    ], [CONSUMER_WARPS, 1], [CONSUMER_REGS, LOADER_REGS])


# --------------------------------------------------------------------------------------------------
# head dim 64: three consumer warpgroups, 192-row tiles (ws3x4_overlap_d64, persist3x4_overlap_d64)
# --------------------------------------------------------------------------------------------------
@gluon.jit
def _r3_span(start_m, S, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, M_PER: gl.constexpr, CAUSAL: gl.constexpr):
    # A 192-row tile of a head whose S (a multiple of 128, never of 192 at powers of two) may end inside
    # the tile. S % 64 == 0, so each consumer's 64 rows lie wholly inside the head or wholly past it:
    # n_live consumers have rows, the rest none. The tile's key blocks: all, or (causal) up to the one
    # holding its last live row's diagonal, which is ceil(min((start_m + 1) * 192, S) / 128).
    rows = gl.minimum(S - start_m * BLOCK_M, BLOCK_M)
    n_live = rows // M_PER
    if CAUSAL:
        n_tile = (start_m * BLOCK_M + rows - 1) // BLOCK_N + 1
    else:
        n_tile = S // BLOCK_N
    return n_live, n_tile


@gluon.jit
def _r3_own_blocks(q_row, live, n_tile, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    # How many of the tile's key blocks this consumer computes: none past the head; causal, those up to
    # the block holding its own diagonal, q_row // 128 (its 64 rows, q_row a multiple of 64, sit inside
    # one key block). That block is the consumer's only one to mask: every earlier block's keys are
    # below q_row. The tile's later blocks (at most one: a causal tile's first consumer when start_m is
    # odd, its first two when even) hold only keys above this consumer's rows.
    if CAUSAL:
        n_c = q_row // BLOCK_N + 1
    else:
        n_c = n_tile
    return gl.where(live, n_c, 0)


@gluon.jit
def _r3_skip(k_ready, k_empty, v_ready, v_empty, g, NUM_BUFFERS: gl.constexpr):
    # A ring block this consumer does not compute (its rows past the head, or keys all above its rows):
    # it still releases the stage, since the empty barriers count all three consumers. It waits for
    # the block to land first: the loader issued that copy only after the stage's previous phase had
    # completed, so this arrive counts toward the phase of block g and not of g - NUM_BUFFERS.
    buf = g % NUM_BUFFERS
    phase = (g // NUM_BUFFERS) & 1
    mbarrier.wait(k_ready.index(buf), phase)
    mbarrier.arrive(k_empty.index(buf))
    mbarrier.wait(v_ready.index(buf), phase)
    mbarrier.arrive(v_empty.index(buf))


@gluon.jit
def _r3_qk(q, k_smem, k_ready, g, j, q_row, s_layout: gl.constexpr, M_PER: gl.constexpr, BLOCK_N: gl.constexpr,
           NUM_BUFFERS: gl.constexpr, MASK: gl.constexpr):
    # _qk; a masked block (causal) starts the wgmma from 0 / -inf (key column above the row's limit)
    # instead of zeros, so the mask costs no registers or instructions after the wgmma, where S_j (64
    # a thread), P_{j-1} (32) and acc (32) are live. Applying it to the scores afterwards (_softmax_step)
    # spilled 120-216 B at 160 registers.
    buf = g % NUM_BUFFERS
    if MASK:
        lim = (q_row - j * BLOCK_N) + gl.arange(0, M_PER, layout=gl.SliceLayout(1, s_layout))
        cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        keep = gl.expand_dims(cols, 0) <= gl.expand_dims(lim, 1)
        init = gl.where(keep, gl.zeros([M_PER, BLOCK_N], gl.float32, s_layout),
                        gl.full([M_PER, BLOCK_N], float("-inf"), gl.float32, s_layout))
        mbarrier.wait(k_ready.index(buf), (g // NUM_BUFFERS) & 1)
        return warpgroup_mma(q, k_smem.index(buf).permute((1, 0)), init, use_acc=True, is_async=True)
    else:
        return _qk(q, k_smem, k_ready, g, s_layout, M_PER, BLOCK_N, NUM_BUFFERS)


@gluon.jit
def _r3_overlap_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, j, g, q_row,
                      qk_scale, q_empty, s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr,
                      M_PER: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, MASK: gl.constexpr):
    # _overlap_block (S_j and P_{j-1} V_{j-1} back to back, softmax(S_j) under the latter) with the mask
    # of _r3_qk
    kbuf = g % NUM_BUFFERS
    vbuf = (g - 1) % NUM_BUFFERS
    s = _r3_qk(q, k_smem, k_ready, g, j, q_row, s_layout, M_PER, BLOCK_N, NUM_BUFFERS, MASK)
    mbarrier.wait(v_ready.index(vbuf), ((g - 1) // NUM_BUFFERS) & 1)
    acc = warpgroup_mma(p16, v_smem.index(vbuf), acc, is_async=True)
    s = warpgroup_mma_wait(1, deps=(s, ))
    mbarrier.arrive(k_empty.index(kbuf))
    if q_empty is not None:
        mbarrier.arrive(q_empty)
    p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, j, q_row, qk_scale, s_layout, M_PER, BLOCK_N, False)
    p16_next = gl.convert_layout(p.to(v_smem.dtype), p_layout)
    acc, p16 = warpgroup_mma_wait(0, deps=(acc, p16))
    mbarrier.arrive(v_empty.index(vbuf))
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
    return acc, m_i, l_i, p16_next


@gluon.jit
def _r3_run(q, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, g, n_c, q_row, qk_scale, q_emp,
            s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr, M_PER: gl.constexpr,
            BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, NUM_BUFFERS: gl.constexpr, CAUSAL: gl.constexpr):
    # A consumer's n_c >= 1 key blocks, ring counters g .. g + n_c - 1, with the intra-warpgroup overlap
    # of _consumer (block 0 alone, then S_j under P_{j-1} V_{j-1}, then the last P V). Causal masks block
    # 0 (as _consumer does) and the last, its diagonal. q_emp (persistent) gets the consumer's arrive
    # right after its last Q K^T; None for one tile a program.
    acc = gl.zeros([M_PER, HEAD_DIM], gl.float32, o_layout)
    s = _r3_qk(q, k_smem, k_ready, g, 0, q_row, s_layout, M_PER, BLOCK_N, NUM_BUFFERS, CAUSAL)
    s = warpgroup_mma_wait(0, deps=(s, ))
    mbarrier.arrive(k_empty.index(g % NUM_BUFFERS))
    if q_emp is not None:
        mbarrier.arrive(q_emp, pred=n_c == 1)
    m_i = gl.full([M_PER], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([M_PER], gl.float32, gl.SliceLayout(1, s_layout))
    p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, 0, q_row, qk_scale, s_layout, M_PER, BLOCK_N, False)
    p16 = gl.convert_layout(p.to(v_smem.dtype), p_layout)
    for j in range(1, n_c - 1):
        acc, m_i, l_i, p16 = _r3_overlap_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                               v_empty, j, g + j, q_row, qk_scale, None, s_layout, o_layout,
                                               p_layout, M_PER, BLOCK_N, NUM_BUFFERS, False)
    if n_c > 1:
        acc, m_i, l_i, p16 = _r3_overlap_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                               v_empty, n_c - 1, g + n_c - 1, q_row, qk_scale, q_emp, s_layout,
                                               o_layout, p_layout, M_PER, BLOCK_N, NUM_BUFFERS, CAUSAL)
    g_last = g + n_c - 1
    vbuf = g_last % NUM_BUFFERS
    mbarrier.wait(v_ready.index(vbuf), (g_last // NUM_BUFFERS) & 1)
    acc = warpgroup_mma(p16, v_smem.index(vbuf), acc, is_async=True)
    acc, p16 = warpgroup_mma_wait(0, deps=(acc, p16))
    mbarrier.arrive(v_empty.index(vbuf))
    # every computed row has its diagonal key, so l > 0
    l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
    return acc * gl.expand_dims(1.0 / l_o, 1)


@gluon.jit
def _r3_loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, S,
               BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr,
               NUM_CONSUMERS: gl.constexpr, CAUSAL: gl.constexpr):
    # One tile a program. Q per live consumer into its own buffer and barrier (a consumer past the head
    # gets no copy and waits on nothing), then the tile's K/V blocks through the ring as _loader does.
    M_PER: gl.constexpr = BLOCK_M // NUM_CONSUMERS
    start_m = gl.program_id(0)
    if CAUSAL:
        start_m = gl.num_programs(0) - 1 - start_m
    row0 = gl.program_id(1) * S
    n_live, n_tile = _r3_span(start_m, S, BLOCK_M, BLOCK_N, M_PER, CAUSAL)
    _load_stage(k_desc, k_smem, k_ready, k_empty, 0, row0, NUM_BUFFERS)
    for c in gl.static_range(NUM_CONSUMERS):
        live = c < n_live
        mbarrier.expect(q_ready.index(c), q_desc.block_type.nbytes, pred=live)
        _tma_load(q_desc, [row0 + start_m * BLOCK_M + c * M_PER, 0], q_ready.index(c), q_smem.index(c), pred=live)
    _load_stage(v_desc, v_smem, v_ready, v_empty, 0, row0, NUM_BUFFERS)
    for j in range(1, n_tile):
        _load_stage(k_desc, k_smem, k_ready, k_empty, j, row0 + j * BLOCK_N, NUM_BUFFERS)
        _load_stage(v_desc, v_smem, v_ready, v_empty, j, row0 + j * BLOCK_N, NUM_BUFFERS)


@gluon.jit
def _r3_consumer(q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale,
                 C: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                 NUM_CONSUMERS: gl.constexpr, CAUSAL: gl.constexpr):
    M_PER: gl.constexpr = BLOCK_M // NUM_CONSUMERS
    HEAD_DIM: gl.constexpr = o_desc.block_type.shape[1]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    start_m = gl.program_id(0)
    if CAUSAL:
        start_m = gl.num_programs(0) - 1 - start_m
    row0 = gl.program_id(1) * S
    n_live, n_tile = _r3_span(start_m, S, BLOCK_M, BLOCK_N, M_PER, CAUSAL)
    q_row = start_m * BLOCK_M + C * M_PER
    n_c = _r3_own_blocks(q_row, C < n_live, n_tile, BLOCK_N, CAUSAL)
    if n_c > 0:
        q = q_smem.index(C)
        mbarrier.wait(q_ready.index(C), 0)
        out = _r3_run(q, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, 0, n_c, q_row, qk_scale, None,
                      s_layout, o_layout, p_layout, M_PER, BLOCK_N, HEAD_DIM, NUM_BUFFERS, CAUSAL)
        # through Q's own tile (every wgmma that read it has been waited for); only live rows are stored
        q.store(out.to(o_desc.dtype))
        fence_async_shared()
        _tma_store(o_desc, [row0 + q_row, 0], q)
        tma.store_wait(0)
    for j in range(n_c, n_tile):
        _r3_skip(k_ready, k_empty, v_ready, v_empty, j, NUM_BUFFERS)


@gluon.jit
def attn_fwd_ws3(q_desc, k_desc, v_desc, o_desc, S, qk_scale, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                 NUM_BUFFERS: gl.constexpr, NUM_CONSUMERS: gl.constexpr, CAUSAL: gl.constexpr,
                 LOADER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr):
    # Grid (ceil(S / 192), B*H); descriptors over (B*H*S, D) views, q/o blocks [64, D], k/v [128, D].
    # Rows past a head are neither loaded nor stored (see _r3_span), so the 2-D views never reach into
    # the next head.
    gl.static_assert(NUM_CONSUMERS == 3)
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS] + q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + v_desc.block_type.shape, v_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [NUM_CONSUMERS, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(NUM_CONSUMERS):
        mbarrier.init(q_ready.index(c), count=1)
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=NUM_CONSUMERS)
        mbarrier.init(v_empty.index(i), count=NUM_CONSUMERS)
    gl.warp_specialize([
        (_r3_consumer, (q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale, 0,
                        BLOCK_M, BLOCK_N, NUM_BUFFERS, NUM_CONSUMERS, CAUSAL)),
        (_r3_consumer, (q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale, 1,
                        BLOCK_M, BLOCK_N, NUM_BUFFERS, NUM_CONSUMERS, CAUSAL)),
        (_r3_consumer, (q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale, 2,
                        BLOCK_M, BLOCK_N, NUM_BUFFERS, NUM_CONSUMERS, CAUSAL)),
        (_r3_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, S,
                      BLOCK_M, BLOCK_N, NUM_BUFFERS, NUM_CONSUMERS, CAUSAL)),
    ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, LOADER_REGS])


@gluon.jit
def _r3_persist_tile(w, n_m, S, CAUSAL: gl.constexpr):
    # Wave w's tile of this program (the snake of _persist_waves / _persist_tile), n_m = ceil(S / 192)
    # tiles a head, head by head; causal takes each head's heaviest query blocks first.
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    t = w * nprog + pid + (w % 2) * (nprog - 1 - 2 * pid)
    if CAUSAL:
        start_m = n_m - 1 - t % n_m
    else:
        start_m = t % n_m
    return start_m, (t // n_m) * S


@gluon.jit
def _r3_persist_waves(n_tiles):
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    n_full = n_tiles // nprog
    pos = pid + (n_full % 2) * (nprog - 1 - 2 * pid)
    return n_full + (pos < n_tiles % nprog).to(gl.int32)


@gluon.jit
def _r3_persist_loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, k_empty, v_ready,
                       v_empty, S, BH, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                       NUM_CONSUMERS: gl.constexpr, CAUSAL: gl.constexpr):
    # As _persist_loader, with ragged tiles. Every consumer's q_ready and q_empty go through one phase a
    # tile, live or not, so both sides count phases by the wave w: for a consumer past the head the
    # loader completes q_ready's phase with a plain arrive (count 1, no bytes) instead of a copy.
    M_PER: gl.constexpr = BLOCK_M // NUM_CONSUMERS
    n_m = (S + BLOCK_M - 1) // BLOCK_M
    n_waves = _r3_persist_waves(n_m * BH)
    g = 0
    for w in range(n_waves):
        start_m, row0 = _r3_persist_tile(w, n_m, S, CAUSAL)
        n_live, n_tile = _r3_span(start_m, S, BLOCK_M, BLOCK_N, M_PER, CAUSAL)
        _load_stage(k_desc, k_smem, k_ready, k_empty, g, row0, NUM_BUFFERS)
        for c in gl.static_range(NUM_CONSUMERS):
            live = c < n_live
            mbarrier.wait(q_empty.index(c), (w & 1) ^ 1)
            mbarrier.expect(q_ready.index(c), q_desc.block_type.nbytes, pred=live)
            _tma_load(q_desc, [row0 + start_m * BLOCK_M + c * M_PER, 0], q_ready.index(c), q_smem.index(c),
                      pred=live)
            mbarrier.arrive(q_ready.index(c), pred=c >= n_live)
        _load_stage(v_desc, v_smem, v_ready, v_empty, g, row0, NUM_BUFFERS)
        for j in range(1, n_tile):
            _load_stage(k_desc, k_smem, k_ready, k_empty, g + j, row0 + j * BLOCK_N, NUM_BUFFERS)
            _load_stage(v_desc, v_smem, v_ready, v_empty, g + j, row0 + j * BLOCK_N, NUM_BUFFERS)
        g += n_tile


@gluon.jit
def _r3_persist_consumer(q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, o_desc,
                         S, BH, qk_scale, C: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                         NUM_BUFFERS: gl.constexpr, NUM_CONSUMERS: gl.constexpr, CAUSAL: gl.constexpr):
    M_PER: gl.constexpr = BLOCK_M // NUM_CONSUMERS
    HEAD_DIM: gl.constexpr = o_desc.block_type.shape[1]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    q = q_smem.index(C)
    q_rdy = q_ready.index(C)
    q_emp = q_empty.index(C)
    o_tile = o_smem.index(C)
    n_m = (S + BLOCK_M - 1) // BLOCK_M
    n_waves = _r3_persist_waves(n_m * BH)
    g = 0
    for w in range(n_waves):
        start_m, row0 = _r3_persist_tile(w, n_m, S, CAUSAL)
        n_live, n_tile = _r3_span(start_m, S, BLOCK_M, BLOCK_N, M_PER, CAUSAL)
        q_row = start_m * BLOCK_M + C * M_PER
        n_c = _r3_own_blocks(q_row, C < n_live, n_tile, BLOCK_N, CAUSAL)
        # phase w of q_ready, live or not: a consumer that handed back its Q without waiting could run
        # two phases of q_empty ahead of the loader, whose parity wait would then read as not done
        mbarrier.wait(q_rdy, w & 1)
        if n_c > 0:
            out = _r3_run(q, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, g, n_c, q_row, qk_scale, q_emp,
                          s_layout, o_layout, p_layout, M_PER, BLOCK_N, HEAD_DIM, NUM_BUFFERS, CAUSAL)
            # O through this consumer's staging tile (Q's may hold the next tile's Q by now); the store
            # issued from it a tile ago must have finished reading it
            tma.store_wait(0)
            o_tile.store(out.to(o_desc.dtype))
            fence_async_shared()
            _tma_store(o_desc, [row0 + q_row, 0], o_tile)
        else:
            mbarrier.arrive(q_emp)
        for j in range(n_c, n_tile):
            _r3_skip(k_ready, k_empty, v_ready, v_empty, g + j, NUM_BUFFERS)
        g += n_tile
    tma.store_wait(0)


@gluon.jit
def attn_fwd_persist3(q_desc, k_desc, v_desc, o_desc, S, BH, qk_scale, BLOCK_M: gl.constexpr,
                      BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, NUM_CONSUMERS: gl.constexpr,
                      CAUSAL: gl.constexpr, LOADER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr):
    # Grid (min(#SMs, ceil(S / 192) * B*H), ); descriptors as attn_fwd_ws3's.
    gl.static_assert(NUM_CONSUMERS == 3)
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS] + q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + v_desc.block_type.shape, v_desc.layout)
    o_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS] + o_desc.block_type.shape, o_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [NUM_CONSUMERS, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [NUM_CONSUMERS, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(NUM_CONSUMERS):
        mbarrier.init(q_ready.index(c), count=1)
        mbarrier.init(q_empty.index(c), count=1)
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=NUM_CONSUMERS)
        mbarrier.init(v_empty.index(i), count=NUM_CONSUMERS)
    gl.warp_specialize([
        (_r3_persist_consumer, (q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                                o_desc, S, BH, qk_scale, 0, BLOCK_M, BLOCK_N, NUM_BUFFERS, NUM_CONSUMERS, CAUSAL)),
        (_r3_persist_consumer, (q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                                o_desc, S, BH, qk_scale, 1, BLOCK_M, BLOCK_N, NUM_BUFFERS, NUM_CONSUMERS, CAUSAL)),
        (_r3_persist_consumer, (q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                                o_desc, S, BH, qk_scale, 2, BLOCK_M, BLOCK_N, NUM_BUFFERS, NUM_CONSUMERS, CAUSAL)),
        (_r3_persist_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, k_empty,
                              v_ready, v_empty, S, BH, BLOCK_M, BLOCK_N, NUM_BUFFERS, NUM_CONSUMERS, CAUSAL)),
    ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, LOADER_REGS])


# --------------------------------------------------------------------------------------------------
# launcher
# --------------------------------------------------------------------------------------------------
GL_DTYPE = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


def _block_m(variant):
    return 64 * VARIANTS[variant][0] if variant in D64_VARIANTS else BLOCK_M


def _launch_args(q, k, v, o, causal, variant):
    """The kernel, its arguments, constexprs and num_warps for one variant (host descriptors included)."""
    consumers, warps, overlap, buffers = VARIANTS[variant]
    B, H, S, D = q.shape
    gdt = GL_DTYPE.get(q.dtype)

    def desc(t, rows):
        layout = gl.NVMMASharedLayout.get_default_for([rows, D], gdt)
        return TensorDescriptor(t.view(B * H * S, D), [B * H * S, D], [D, 1], [rows, D], layout)

    if variant in D64_VARIANTS:
        # S a multiple of 128 (K/V blocks never cross a head) but not of 192: the kernel's last tile of
        # a head has one or two consumers with rows, which load and store only those (S % 64 == 0)
        if S % BLOCK_N or D != 64 or gdt is None:
            raise ValueError(f"unsupported: {variant} takes head dim 64 only, S a multiple of {BLOCK_N}, 16-bit; "
                             f"got S={S}, D={D}, {q.dtype}")
        descs = [desc(q, 64), desc(k, BLOCK_N), desc(v, BLOCK_N), desc(o, 64)]
        consts = dict(BLOCK_M=_block_m(variant), BLOCK_N=BLOCK_N, NUM_BUFFERS=buffers, NUM_CONSUMERS=consumers,
                      CAUSAL=causal, LOADER_REGS=LOADER_REGS, CONSUMER_REGS=CONSUMER_REGS_3)
        if D64_VARIANTS[variant]:
            return attn_fwd_persist3, descs + [S, B * H, LOG2E / math.sqrt(D)], consts, warps
        return attn_fwd_ws3, descs + [S, LOG2E / math.sqrt(D)], consts, warps
    if S % BLOCK_M or S % BLOCK_N or D not in (64, 128) or q.dtype not in GL_DTYPE:
        raise ValueError(f"unsupported: S={S} (a multiple of {BLOCK_M}), D={D} (64 or 128), {q.dtype}")
    m_per = BLOCK_M // consumers
    descs = [desc(q, m_per), desc(k, BLOCK_N), desc(v, BLOCK_N), desc(o, m_per)]
    if variant in PERSISTENT:
        args = descs + [o, S, B * H, LOG2E / math.sqrt(D)]
        consts = dict(BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, NUM_BUFFERS=buffers, NUM_CONSUMERS=consumers,
                      CONSUMER_WARPS=warps, CAUSAL=causal, O_FROM_REGS=PERSISTENT[variant], LOADER_REGS=LOADER_REGS,
                      CONSUMER_REGS=CONSUMER_REGS)
        return attn_fwd_persist, args, consts, warps
    args = descs + [S, LOG2E / math.sqrt(D)]
    consts = dict(BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, NUM_BUFFERS=buffers, NUM_CONSUMERS=consumers,
                  CONSUMER_WARPS=warps, OVERLAP=overlap, CAUSAL=causal, LOADER_REGS=LOADER_REGS,
                  CONSUMER_REGS=CONSUMER_REGS)
    # the kernel's own warps are the default partition, i.e. the first consumer
    return attn_fwd_ws, args, consts, warps


@functools.lru_cache
def _sm_count(device):
    return torch.cuda.get_device_properties(device).multi_processor_count


def gluon_attention(q, k, v, causal=False, variant="ws2x4_overlap", out=None):
    """Forward attention; q, k, v (B, H, S, D) contiguous bf16/fp16, S % 128 == 0, D in {64, 128}."""
    assert q.shape == k.shape == v.shape and q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
    o = out if out is not None else torch.empty_like(q)
    kernel, args, consts, warps = _launch_args(q, k, v, o, causal, variant)
    B, H, S, _ = q.shape
    n_m = triton.cdiv(S, _block_m(variant))
    if variant in PERSISTENT or D64_VARIANTS.get(variant):
        # one program an SM (their shared memory allows one), or one a tile when there are fewer tiles
        grid = (min(_sm_count(q.device), n_m * B * H), )
    else:
        grid = (n_m, B * H)
    kernel[grid](*args, **consts, num_warps=warps)
    return o


# --------------------------------------------------------------------------------------------------
# compile-only: sm_90 without a GPU
# --------------------------------------------------------------------------------------------------
def compile_variant(variant, dtype, causal, D):
    """Compile one variant for sm_90 from host stand-ins (CPU tensors: descriptors only need their
    shapes); returns the compiled kernel."""
    B, H, S = 1, 2, 1024
    q, k, v, o = (torch.empty(B, H, S, D, dtype=dtype) for _ in range(4))
    kernel, args, consts, warps = _launch_args(q, k, v, o, causal, variant)
    return templates.compile_sm90(kernel, args, consts, {"num_warps": warps})


def compile_only(variants):
    cases = [(torch.bfloat16, False, 128), (torch.bfloat16, True, 128), (torch.float16, False, 128),
             (torch.bfloat16, False, 64)]
    if any(name in D64_VARIANTS for name in variants):
        cases += [(torch.bfloat16, True, 64), (torch.float16, False, 64), (torch.float16, True, 64)]
    for name in variants:
        for dtype, causal, D in cases:
            tag = f"{name:22s} {str(dtype)[6:]:8s} causal={causal!s:5s} D={D:3d}"
            if name in D64_VARIANTS and D != 64:
                print(f"{tag}: unsupported (head dim 64 only)", flush=True)
                continue
            try:
                t0 = time.time()
                kernel = compile_variant(name, dtype, causal, D)
                seconds = time.time() - t0
                u = templates.resource_usage(kernel)
                print(f"{tag}: regs {u['regs']} spills {u['spill_bytes']} B smem {u['smem']} B "
                      f"setmaxnreg {u['setmaxnreg']} compile {seconds:.1f} s"
                      + (f" WARNINGS {u['ptxas_warnings']}" if u["ptxas_warnings"] else ""), flush=True)
            except Exception as e:  # one variant's failure is a result, the others go on
                print(f"{tag}: ERROR {templates.last_lines(e)}", flush=True)


# --------------------------------------------------------------------------------------------------
# GPU harness
# --------------------------------------------------------------------------------------------------
def bench(fn):
    """do_bench's every sample (warmup 25 ms, rep 100 ms): (median ms, min-max spread % of the median)."""
    times = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="all")
    med = statistics.median(times)
    return med, 100 * (max(times) - min(times)) / med


def run_case(B, H, S, D, dtype, causal, variants, template, results, out_path):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(3))
    # fp32 reference; pinned to the memory-efficient backend, which takes fp32 without materializing the
    # S x S scores (the math fallback would need 4*16*16384^2*4 B = 64 GiB at S 16384)
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
        ref = sdpa(q.float(), k.float(), v.float(), is_causal=causal)
    flops = 4 * B * H * S * S * D * (0.5 if causal else 1.0)
    case = dict(B=B, H=H, S=S, D=D, dtype=str(dtype)[6:], causal=causal)
    label = f"B{B} H{H} S{S} D{D} {case['dtype']} {'causal' if causal else 'full'}"
    base = {}

    def row_for(name, run):
        # run(o) computes into o where it can and returns the output; o starts as NaN so that rows it
        # never wrote fail the check. Each row is printed and saved as soon as it is done: a kernel that
        # hangs loses only itself (the watchdog ends the run).
        row = dict(case, variant=name)
        try:
            o = torch.full_like(q, float("nan"))
            t0 = time.time()
            res = run(o)
            torch.cuda.synchronize()
            row["first_call_s"] = round(time.time() - t0, 2)       # compile (or autotune) included
            err = (res.float() - ref).abs().max().item()
            row["max_abs_err"] = err
            if not err < 2e-2:                                      # NaN fails too
                row["error"] = f"wrong output: max abs error {err:.3g}"
            else:
                ms, spread = bench(lambda: run(o))
                row.update(ms=ms, tflops=flops / ms * 1e-9, spread_pct=spread)
                if name == "torch_sdpa" or "tflops" in base:
                    row["vs_sdpa"] = row["tflops"] / base.get("tflops", row["tflops"])
        except Exception as e:  # a variant that does not compile or launch is a result too
            row["error"] = templates.last_lines(e)
        if "error" in row:
            print(f"{label} {name:18s} ERROR {row['error']}", flush=True)
        else:
            print(f"{label} {name:18s} {row['tflops']:6.1f} TFLOP/s  {row['ms']:.3f} ms  ±{row['spread_pct']:.1f}%  "
                  f"x{row.get('vs_sdpa', float('nan')):.3f} of sdpa  err {row['max_abs_err']:.2e}  "
                  f"first call {row['first_call_s']} s", flush=True)
        results["rows"].append(row)
        out_path.write_text(json.dumps(results, indent=1))
        templates.row_done()
        return row

    # torch's default backend choice (cuDNN on the H200), timed without a copy into o
    base.update(row_for("torch_sdpa", lambda o: sdpa(q, k, v, is_causal=causal)))
    row_for("template", lambda o: template.flash_attention(q, k, v, causal=causal, out=o))
    for name in variants:
        if name in D64_VARIANTS and D != 64:
            continue
        row_for(name, lambda o, name=name: gluon_attention(q, k, v, causal=causal, variant=name, out=o))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=".")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, from: " + ", ".join(VARIANTS))
    p.add_argument("--shapes", default=None,
                   help="sequence lengths S at head dim 128 (default 4096,8192,16384; none when a *_d64 variant is "
                        "asked for); '' for none")
    p.add_argument("--batch", default="4", help="B, one for all S or one an S (comma-separated); H is 16")
    p.add_argument("--d64-shapes", default=None,
                   help="sequence lengths S at head dim 64, bf16, non-causal then causal (default 4096; "
                        "1024,4096,16384 when a *_d64 variant is asked for, the sweep's shapes)")
    p.add_argument("--d64-batch", default=None, help="B for --d64-shapes, one or one an S (default 4; 16,4,1 "
                                                      "with a *_d64 variant)")
    p.add_argument("--d64-heads", type=int, default=None, help="H at head dim 64 (default 16; 32 with a *_d64 "
                                                                "variant, as the sweep)")
    p.add_argument("--budget-s", type=float, default=200.0, help="start no new case after this many seconds")
    p.add_argument("--hang-s", type=float, default=120.0, help="exit when no row finishes for this long")
    p.add_argument("--compile-only", action="store_true")
    args = p.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}")
    if args.compile_only:
        compile_only(variants)
        return

    started = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    out_path = out / "gluon_attention.json"
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "rows": []}
    template = templates.load("flash-attention")
    templates.start_watchdog(args.hang_s)
    d64 = any(v in D64_VARIANTS for v in variants)

    def per_seq(shapes, batches):
        seqs = [int(s) for s in shapes.split(",") if s]
        bs = [int(b) for b in batches.split(",") if b]
        return list(zip(seqs, bs if len(bs) == len(seqs) else bs[:1] * len(seqs)))

    d128 = per_seq(args.shapes if args.shapes is not None else ("" if d64 else "4096,8192,16384"), args.batch)
    d64_cases = per_seq(args.d64_shapes or ("1024,4096,16384" if d64 else "4096"),
                        args.d64_batch or ("16,4,1" if d64 else "4"))
    d64_heads = args.d64_heads or (32 if d64 else 16)
    # the headline first (bf16, D128, non-causal), so a cut-short run still answers it; (B, H, S, D, ...)
    cases = [(B, 16, S, 128, torch.bfloat16, c) for c in (False, True) for S, B in d128]
    cases += [(B, 16, S, 128, torch.float16, c) for c in (False, True) for S, B in d128]
    cases += [(B, d64_heads, S, 64, torch.bfloat16, c) for c in (False, True) for S, B in d64_cases]
    for B, H, S, D, dtype, causal in cases:
        if time.time() - started > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent: skipping B{B} H{H} S{S} D{D} {dtype} causal={causal} "
                  "and later", flush=True)
            break
        run_case(B, H, S, D, dtype, causal, variants, template, results, out_path)
    print(f"done in {time.time() - started:.0f} s; rows in {out_path}", flush=True)


if __name__ == "__main__":
    main()
