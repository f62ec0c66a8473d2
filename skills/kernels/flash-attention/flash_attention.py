"""Flash attention, forward: O = softmax(Q K^T * scale [+ causal mask]) V, one pass, no S x S matrix.

Shapes: q, k, v, o are (B, H, S, D), contiguous, fp16 or bf16 (fp32 in the interpreter); scale = 1/sqrt(D).

The math, per (batch, head) and query row i, with s_ij = scale * q_i . k_j (j <= i when causal):
    o_i = sum_j exp(s_ij - m_i) v_j / sum_j exp(s_ij - m_i),     m_i = max_j s_ij
computed over key blocks j = [n0, n0 + BLOCK_N) with the online-softmax recurrence (fp32):
    m_new = max(m, rowmax(s_block))
    p     = exp(s_block - m_new)               (rounded to the input dtype for the second tensor-core dot)
    alpha = exp(m - m_new)                     (rescales what was accumulated under the old max)
    l     = l * alpha + rowsum(p)
    acc   = acc * alpha + p @ v_block
    o_i   = acc / l
exp is computed as exp2 with log2(e) folded into the scale: exp(x) = 2^(x * log2 e), so the
scale-and-subtract is one FMA per score.

Work split: one program per (BLOCK_M query rows, batch*head); grid (S / BLOCK_M, B*H) with the query
blocks of one head next to each other so that they share that head's K and V in L2. Causal: key
blocks strictly left of the diagonal run without a mask; only the diagonal block(s) are masked; the
heaviest (last) query blocks are launched first so the tail of the grid is the short work.

Hopper: Q/K/V/O tiles come through TMA descriptors (made on the host: TensorDescriptor) when S is a
multiple of the tiles; otherwise (and on AMD) masked pointer loads do the same work.

Hopper, 16-bit, D of 64 or 128 (GLUON): _attn_fwd_ws, the same math written in Gluon as FlashAttention-3
runs it, warp-specialized, at any S (a ragged S's last key block masked in S's initial value, its last
query block stored by masked pointers; the persistent kernel below likewise). A program's 128 query rows are split between two consumer
warpgroups of 64 rows each; a one-warp loader partition streams K and V blocks by TMA into
rings of NUM_BUFFERS shared-memory stages, each stage guarded by a "ready" mbarrier (the copy's bytes
landed) and an "empty" one (both consumers are done with it). Each consumer overlaps its own work
(FA3's intra-warpgroup pipeline): it issues S_j = Q K_j^T and P_{j-1} V_{j-1} as asynchronous wgmma
back to back and computes softmax(S_j) while the second runs; P goes from registers straight into the
second wgmma. The two consumers run independently, so one's exponentials hide under the other's
matrix products too. The Triton kernel above runs one warpgroup pair that loads, multiplies and
exponentiates in turn (see SKILL.md for the figures). _attn_fwd_persist runs the same partitions on a
persistent grid (one program an SM walking the tiles persist_schedule dealt it, each tile's first block
under the last one's tail, its Q loaded a tile ahead by a partition of its own; causal tiles few, a head's
heaviest and lightest paired on one program), which
pays where tiles are short (S 1024-2048) and causal, and not at long
non-causal ones; _attn_fwd_ws3
is FlashAttention-3's head-dim-64 tile, 192 query rows on three consumers, which pays at long S. AUTOTUNE
picks per shape.
"""

import functools
import heapq
import math
import os
import warnings

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

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

CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "GLUON": 1, "NUM_BUFFERS": 2,
          "AUTOTUNE": 1}
CONFIG_SPACE = {"BLOCK_M": [64, 128], "BLOCK_N": [32, 64, 128], "num_warps": [4, 8], "num_stages": [2, 3, 4],
                "GLUON": [0, 1, 2, 3], "NUM_BUFFERS": [2, 3], "AUTOTUNE": [0, 1]}
# The Triton kernel's causal diagonal walks BLOCK_M / BLOCK_N key blocks (_launch asserts it), and every
# GLUON setting fell back to it at a ragged S when the space was measured (GLUON 1 takes any S since): on
# the H100 every configuration of BLOCK_M 64 with BLOCK_N 128 that did not autotune failed its checks
# (experiments/tune/h100/spaces/), which kgit tune now never proposes.
# Its K and V tiles take num_stages x 2 x BLOCK_N x 128 x 2 bytes of shared memory at head dim 128, beside
# Q's BLOCK_M x 128 x 2: 4 stages of 128 keys are 256 KB, over the 227 KB an SM gives a program on Hopper
# (both num_stages 4 configurations of BLOCK_N 128 ran out of resources at D128 on the H100); 3 of 128
# (224 KB with Q) fit. AUTOTUNE 1 drops a candidate that fails, its own configuration too: it takes any keys.
CONFIG_CONSTRAINTS = ["AUTOTUNE == 1 or BLOCK_M % BLOCK_N == 0", "AUTOTUNE == 1 or BLOCK_N * num_stages <= 384"]
# GLUON: 1 runs _attn_fwd_ws where it can (_gluon_runs), on NUM_BUFFERS K and V stages (its tiles are
# fixed: 128 query rows, 128 keys a step); the BLOCK_*, num_warps and num_stages keys are the Triton
# kernel's. At a ragged S, on the H100 (experiments/held-out-shapes/attention-ragged/): B4 H32 S3000 D128
# causal bf16 510-519 TFLOP/s against the Triton kernel's 372-374 and SDPA's 508-513; at D64 (S 1500, 2000)
# 0.84-0.97x SDPA alone, and GLUON 2 (below) takes a ragged S too: autotuned, 1.07-1.09x SDPA there. On the H200 (the A/B run, df8b865:experiments/sweep-h200-session13/call5-attention/), B4 H16 D128,
# bf16, S 4096 / 8192 / 16384: 662 / 604 / 633 TFLOP/s non-causal with 2 stages, 639 / 612 / 662 with 3,
# where torch's default
# SDPA read 612 / 614 / 629 and the Triton kernel 486 / 491 / 520; causal 559 / 587 / 546 and 556 / 577
# / 618 (SDPA 530 / 562 / 579). The same kernel without the intra-warpgroup overlap read 534-563
# non-causal, with one 8-warp consumer (both warpgroups in step) 488-521.
# GLUON: 2 runs the same partitions persistently (_attn_fwd_persist: one program an SM walking its tiles,
# each tile's Q loading a tile ahead by a loader of its own, its first K/V under the last tile's tail; always
# PERSISTENT_BUFFERS[D] K stages and PERSISTENT_V_BUFFERS[D] V stages). It
# wins where tiles are short and loses at long ones, so AUTOTUNE times both. On the H200
# (its A/B, df8b865:experiments/sweep-h200-session14/call5-attention-head-major/), bf16, against GLUON 1 in the
# same run:
# D128 S1024 (B16) 613 against 557 TFLOP/s (SDPA 611), causal 458 against 392 (SDPA 434), causal S2048
# 516 against 464, D64 causal S4096 418 against 366 (SDPA 415); but S8192 625 against 660, D64 S4096
# 412 against 462. Each tile's first Q K^T and softmax now run under the last P V of the tile before (the
# causal mask in S's initial value): x the default SDPA, head dim 64 S 1024 0.92 -> 1.03, causal S
# 1024-8192 0.92-0.97 -> 0.95-0.99, head dim 128 causal S 4096 0.99 -> 1.11 (the tile-turn A/Bs,
# df8b865:experiments/sweep-h200-session24/).
# GLUON: 3 runs FlashAttention-3's head-dim-64 tile (_attn_fwd_ws3: 192 query rows on three consumers, 2
# stages; other head dims run GLUON 1). On the H200 (its A/B,
# df8b865:experiments/sweep-h200-session15/call1-explore/), bf16
# B16/4/1 H32 D64, x the default SDPA in the same run, against the template of then (GLUON 0-2, autotuned):
# S16384 1.081 against 1.004, causal 1.033 against 0.960; S4096 0.988 against 0.978, causal 0.952 against
# 0.977; S1024 0.931 against 0.882, causal 0.744 against 0.952.
# Extra candidates for AUTOTUNE (keys missing here come from CONFIG); timed once per shape. The Triton
# kernel's from the H200 exploration (the config search's log, df8b865:experiments/compute-bound/explore.log):
# 128x128/8 warps led for
# D=128 non-causal at long S, 64x64/4 warps (one warpgroup) for D=128 causal and S=4096, 128x64 and
# 128x128 with 4 warps for D=64 (and D=64 causal, where it read 0.93x SDPA against the Gluon kernel's
# 0.90x). Gluon candidates are skipped where the Gluon kernel does not run.
AUTOTUNE_CONFIGS = [
    {"NUM_BUFFERS": 3},
    {"GLUON": 2},
    {"GLUON": 3},
    {"GLUON": 0},
    {"GLUON": 0, "BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
    {"GLUON": 0, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
    {"GLUON": 0, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 3},
]

LOG2E = 1.4426950408889634


@triton.jit
def _attn_block_loop(acc, l_i, m_i, q, k_src, v_src, row0, lo, hi, offs_m, S, qk_scale,
                     BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASK_DIAG: tl.constexpr,
                     MASK_SEQ: tl.constexpr, USE_TMA: tl.constexpr):
    # Key/value blocks [lo, hi) of one (batch, head). row0: that head's first row in the (B*H*S, D)
    # view (TMA path); the pointer path gets k_src/v_src already offset to the head.
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in tl.range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        if USE_TMA:
            k = k_src.load([row0 + start_n, 0])
        else:
            k = tl.load(k_src + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_n[:, None] < S, other=0.0)
        qk = tl.dot(q, tl.trans(k))                                  # raw scores, fp32 [BLOCK_M, BLOCK_N]
        if MASK_DIAG:
            qk = tl.where(offs_m[:, None] >= offs_n[None, :], qk, float("-inf"))
        if MASK_SEQ:
            qk = tl.where(offs_n[None, :] < S, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)              # running max, log2 units
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if USE_TMA:
            v = v_src.load([row0 + start_n, 0])
        else:
            v = tl.load(v_src + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_n[:, None] < S, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attn_fwd_kernel(q_src, k_src, v_src, o_src, S, BH, qk_scale,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                    CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, EVEN: tl.constexpr):
    # q_src..o_src: TMA descriptors of the (B*H*S, D) views, made on the host (USE_TMA), else pointers.
    start_m = tl.program_id(0)
    if CAUSAL:
        start_m = tl.num_programs(0) - 1 - start_m                  # longest rows first
    bh = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row0 = bh * S                                                   # first row of this head, (B*H*S, D) view
    if USE_TMA:
        # TMA path needs S % BLOCK_M == S % BLOCK_N == 0 (the launcher checks): tiles never cross heads.
        q = q_src.load([row0 + start_m * BLOCK_M, 0])
    else:
        head = row0.to(tl.int64) * HEAD_DIM
        q = tl.load(q_src + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < S, other=0.0)
        k_src = k_src + head
        v_src = v_src + head

    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # 1) key blocks entirely left of this query block: every score counts, no mask
        acc, l_i, m_i = _attn_block_loop(acc, l_i, m_i, q, k_src, v_src, row0, 0, start_m * BLOCK_M, offs_m, S,
                                         qk_scale, BLOCK_N, HEAD_DIM, False, False, USE_TMA)
        # 2) the diagonal: keys j <= i only (and j < S when S is ragged)
        acc, l_i, m_i = _attn_block_loop(acc, l_i, m_i, q, k_src, v_src, row0, start_m * BLOCK_M,
                                         (start_m + 1) * BLOCK_M, offs_m, S, qk_scale, BLOCK_N, HEAD_DIM,
                                         True, not EVEN, USE_TMA)
    else:
        acc, l_i, m_i = _attn_block_loop(acc, l_i, m_i, q, k_src, v_src, row0, 0, S, offs_m, S, qk_scale,
                                         BLOCK_N, HEAD_DIM, False, not EVEN, USE_TMA)
    out = (acc / l_i[:, None]).to(q.dtype)
    if USE_TMA:
        o_src.store([row0 + start_m * BLOCK_M, 0], out)
    else:
        o_ptrs = o_src + row0.to(tl.int64) * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
        tl.store(o_ptrs, out, mask=offs_m[:, None] < S)


# --------------------------------------------------------------------------------------------------
# Hopper: the warp-specialized kernel (Gluon)
# --------------------------------------------------------------------------------------------------
WS_BLOCK_M = 128  # query rows a program: two consumers of WS_BLOCK_M // 2
WS_BLOCK_N = 128  # keys a step
# setmaxnreg budgets a thread: the loader only issues copies and waits (FA3's producer figure); the
# consumers hold a 64 x D accumulator and a 64 x 128 score tile
WS_LOADER_REGS = 24
WS_CONSUMER_REGS = 240
# the persistent kernel's K stages a head dim (V's below): at D 64 (16 KB a block) four, 176 KB, and a program
# there runs a K or V block every ~0.7 us (the exponentials' pace), under a DRAM read's latency at short S, where
# the loader two blocks ahead left each block of a tile's first pass waiting for its copy
PERSISTENT_BUFFERS = {64: 4, 128: 2}
# V's stages a head dim, and whether O leaves through staging tiles (else by pointer stores from registers).
# At D 128 a CTA may have 227 KiB (232448 B); a K or V stage is 128 x 128 x 2 = 32 KiB, a Q or O tile 64 x 128
# x 2 = 16 KiB: main's 2 K + 2 V stages, 4 Q tiles (two a consumer) and 2 O tiles are 224 KiB, full. A third
# stage of both K and V (+64 KiB) fits only without O's tiles and with one Q tile a consumer (224 KiB), which
# gives up loading each tile's Q a tile ahead; a third V stage alone (+32 KiB) fits in O's tiles' place with Q
# as it is (2 K, 3 V, 4 Q: 224 KiB). The clock-stamped kernel (fa61, 16x16x512x128 causal on an H100) found V
# the late one: V's copies land a median ~5600 cycles after issue, ~one block step (~4300 cycles) after the
# loader gets to issue them, since V_{g+2}'s stage frees only once P V_g is done; with three V stages it frees
# once P V_{g-1} is, in the same step as K_{g+2}'s, so both go out together and V is issued a step earlier.
PERSISTENT_V_BUFFERS = {64: 4, 128: 3}
PERSISTENT_O_STAGED = {64: True, 128: False}
# the persistent kernel's Q tiles a consumer (_persist_q_slot): 2, each tile's Q loading a tile ahead; 1 is main's
# protocol (each tile's Q once the tile before handed its slot back) on the Q loader of its own, a switch for
# the device to tell the second slot from the third partition (issue 52: GLUON 2 wrong at causal shapes on the
# H100 with 2, where the CPU emulation of the partitions, tests/kernels/test_attention_persist_emulated.py, finds
# every tile, slot and phase in agreement)
PERSISTENT_Q_SLOTS = 2
# GLUON 3 (head dim 64): three consumers of 64 rows; four warpgroups (the loader's padded to one) share
# 64K registers, 3 * 128 * R + 128 * 24 <= 65536, so R = 160 (a multiple of 8, FA3's figure)
WS3_BLOCK_M = 192
WS3_CONSUMER_REGS = 160

if gluon is not None:
    @gluon.jit
    def _ws_tile(S, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
        # This program's query block, its head's first row in the (B*H*S, D) views, how many key blocks
        # it visits and how many of those need no mask (causal: the blocks left of the diagonal).
        start_m = gl.program_id(0)
        if CAUSAL:
            start_m = gl.num_programs(0) - 1 - start_m  # longest rows first
            n_blocks = (start_m + 1) * (BLOCK_M // BLOCK_N)
            n_unmasked = start_m * (BLOCK_M // BLOCK_N)
        else:
            # a ragged S's last key block holds keys past S (the next head's, or TMA's zeros past the
            # tensor): masked by key_limit (_ws_qk), the full blocks before it not at all
            n_blocks = gl.cdiv(S, BLOCK_N)
            n_unmasked = S // BLOCK_N
        return start_m, gl.program_id(1) * S, n_blocks, n_unmasked

    @gluon.jit
    def _ws_loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty, S,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, CAUSAL: gl.constexpr):
        # The producer: both consumers' Q tiles once, then K_j and V_j in the order the consumers use
        # them, each into the next stage of its ring once both consumers have released that stage.
        start_m, row0, n_blocks, n_unmasked = _ws_tile(S, BLOCK_M, BLOCK_N, CAUSAL)
        mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
        for c in gl.static_range(2):
            tma_load(q_desc, [row0 + start_m * BLOCK_M + c * (BLOCK_M // 2), 0], q_bar, q_smem.index(c))
        for j in range(n_blocks):
            buf = j % NUM_BUFFERS
            # A fresh mbarrier counts its (never run) phase before 0 as complete, so the first lap's
            # wait for parity 1 passes at once; later laps wait for the release one lap earlier.
            free = ((j // NUM_BUFFERS) & 1) ^ 1
            mbarrier.wait(k_empty.index(buf), free)
            mbarrier.expect(k_ready.index(buf), k_desc.block_type.nbytes)
            tma_load(k_desc, [row0 + j * BLOCK_N, 0], k_ready.index(buf), k_smem.index(buf))
            mbarrier.wait(v_empty.index(buf), free)
            mbarrier.expect(v_ready.index(buf), v_desc.block_type.nbytes)
            tma_load(v_desc, [row0 + j * BLOCK_N, 0], v_ready.index(buf), v_smem.index(buf))

    @gluon.jit
    def _ws_qk(q, k_smem, k_ready, g, s_layout: gl.constexpr, M: gl.constexpr, BLOCK_N: gl.constexpr,
               NUM_BUFFERS: gl.constexpr, diag=None, key_limit=None):
        # Issue S = Q K^T (asynchronous) once the K block the ring counter g names has landed (g is the key
        # block's index for one tile a program; the persistent kernel's runs on across its tiles). The
        # transposed view of K's [BLOCK_N, D] stage is wgmma's [D, BLOCK_N] operand without moving data.
        # diag (q_row - the block's first key): the causal mask as S's initial value instead, 0 where key
        # column c <= diag + row r and -inf above, which costs no registers after the wgmma (but a compare and
        # a select a score: 129 of the 553 instructions of the persistent kernel's block at head dim 64, sm_90).
        # key_limit (S - the block's first key): the same for a ragged S's last block, key column c < key_limit.
        buf = g % NUM_BUFFERS
        init = gl.zeros([M, BLOCK_N], gl.float32, s_layout)
        cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if diag is not None:
            last_key = diag + gl.arange(0, M, layout=gl.SliceLayout(1, s_layout))
            keep = gl.expand_dims(cols, 0) <= gl.expand_dims(last_key, 1)
            init = gl.where(keep, init, gl.full([M, BLOCK_N], float("-inf"), gl.float32, s_layout))
        if key_limit is not None:
            init = gl.where(gl.expand_dims(cols, 0) < key_limit, init,
                            gl.full([M, BLOCK_N], float("-inf"), gl.float32, s_layout))
        mbarrier.wait(k_ready.index(buf), (g // NUM_BUFFERS) & 1)
        return warpgroup_mma(q, k_smem.index(buf).permute((1, 0)), init,
                             use_acc=diag is not None or key_limit is not None, is_async=True)

    @gluon.jit
    def _ws_softmax(s, m_i, l_i, j, q_row, qk_scale, s_layout: gl.constexpr, M: gl.constexpr,
                    BLOCK_N: gl.constexpr, MASK: gl.constexpr):
        # The online-softmax step of the module docstring for raw scores s of key block j (log2 units:
        # qk_scale holds log2 e): p, alpha for the accumulator, the new running max and sum.
        if MASK:
            offs_m = q_row + gl.arange(0, M, layout=gl.SliceLayout(1, s_layout))
            offs_n = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
            keep = gl.expand_dims(offs_m, 1) >= gl.expand_dims(offs_n, 0)
            s = gl.where(keep, s, gl.full([M, BLOCK_N], float("-inf"), gl.float32, s_layout))
        m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
        p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
        alpha = gl.exp2(m_i - m_new)
        return p, alpha, m_new, l_i * alpha + gl.sum(p, axis=1)

    @gluon.jit
    def _diag_half_qk(q, k_smem, k_ready, g, M: gl.constexpr, NUM_BUFFERS: gl.constexpr):
        # Consumer 0's S in a causal tile's diagonal block at head dim <= 64 (persistent kernel, ring counter g;
        # the gate is _persist_consumer's HALF): its rows, the tile's first M, see no key past their own, all among
        # the block's first M; so Q K^T over those keys alone, an N = M wgmma on the first M rows of K's stage,
        # the causal mask its initial value: half of this consumer's S there, whose other half the mask would
        # throw away (issue 52, branch fa60). Its P V still
        # runs over the whole block (_diag_half_softmax pads P): a narrower P would give the P each block hands
        # to the next (through the block loop and, from a tile of one block, the next tile) two shapes.
        h_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, M, 16])
        rows = gl.arange(0, M, layout=gl.SliceLayout(1, h_layout))
        cols = gl.arange(0, M, layout=gl.SliceLayout(0, h_layout))
        keep = gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1)
        init = gl.where(keep, gl.zeros([M, M], gl.float32, h_layout),
                        gl.full([M, M], float("-inf"), gl.float32, h_layout))
        buf = g % NUM_BUFFERS
        mbarrier.wait(k_ready.index(buf), (g // NUM_BUFFERS) & 1)
        return warpgroup_mma(q, k_smem.index(buf).slice(0, M).permute((1, 0)), init, use_acc=True, is_async=True)

    @gluon.jit
    def _diag_half_softmax(s, qk_scale, s_layout: gl.constexpr, p_layout: gl.constexpr, dtype: gl.constexpr):
        # _diag_half_qk's scores: the tile's first softmax step (running max and sum from nothing), returned in
        # the full block's layouts, P padded with zeros for the masked keys M.. (the P V wgmma takes the block)
        M: gl.constexpr = s.shape[0]
        m_i = gl.max(s, axis=1) * qk_scale
        p = gl.exp2(s * qk_scale - gl.expand_dims(m_i, 1))
        l_i = gl.sum(p, axis=1)
        p = p.to(dtype)
        # [P | 0] along the keys (Gluon has no concatenation): a thread's columns of the N = M layout and of the
        # zeros are its columns of the N = 2M one, so this stays in registers (sm_90: 32 PRMT, no shared memory)
        wide = gl.reshape(gl.permute(gl.join(p, gl.zeros_like(p)), (0, 2, 1)), [M, 2 * M])
        rows: gl.constexpr = gl.SliceLayout(1, s_layout)
        return gl.convert_layout(m_i, rows), gl.convert_layout(l_i, rows), gl.convert_layout(wide, p_layout)

    @gluon.jit
    def _block_s(q, k_smem, k_ready, g, j, q_row, s_layout: gl.constexpr, M: gl.constexpr, BLOCK_N: gl.constexpr,
                 NUM_BUFFERS: gl.constexpr, MASK_INIT: gl.constexpr, HALF: gl.constexpr, key_limit):
        # Issue key block j's S (ring counter g): consumer 0's half of a causal diagonal block (HALF), the causal
        # mask in S's initial value (MASK_INIT), or a ragged S's key limit (key_limit, or None: no mask)
        if HALF:
            s = _diag_half_qk(q, k_smem, k_ready, g, M, NUM_BUFFERS)
        elif MASK_INIT:
            s = _ws_qk(q, k_smem, k_ready, g, s_layout, M, BLOCK_N, NUM_BUFFERS, q_row - j * BLOCK_N)
        else:
            s = _ws_qk(q, k_smem, k_ready, g, s_layout, M, BLOCK_N, NUM_BUFFERS, key_limit=key_limit)
        return s

    @gluon.jit
    def _tile_first_softmax(s, j, q_row, qk_scale, s_layout: gl.constexpr, p_layout: gl.constexpr, M: gl.constexpr,
                            BLOCK_N: gl.constexpr, MASK: gl.constexpr, HALF: gl.constexpr, dtype: gl.constexpr):
        # A tile's first softmax step, the running max and sum from nothing: (m, l, P in dtype)
        if HALF:
            m_i, l_i, p16 = _diag_half_softmax(s, qk_scale, s_layout, p_layout, dtype)
        else:
            m_i = gl.full([M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
            l_i = gl.zeros([M], gl.float32, gl.SliceLayout(1, s_layout))
            p, alpha, m_i, l_i = _ws_softmax(s, m_i, l_i, j, q_row, qk_scale, s_layout, M, BLOCK_N, MASK)
            p16 = gl.convert_layout(p.to(dtype), p_layout)
        return m_i, l_i, p16

    @gluon.jit
    def _ws_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, j, g, q_row, qk_scale,
                  s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr, M: gl.constexpr,
                  BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, MASK: gl.constexpr, q_empty=None, q_done=True,
                  MASK_INIT: gl.constexpr = False, NEW_TILE: gl.constexpr = False, key_limit=None,
                  HALF: gl.constexpr = False, V_BUFFERS: gl.constexpr = None):
        # Key block j >= 1, ring counter g (see _ws_qk). On entry p16 = P_{j-1} (under the running max
        # m_{j-1}), acc holds the blocks before j-1 under m_{j-1}. The tensor cores run S_j, then
        # P_{j-1} V_{j-1}, while this warpgroup does softmax(S_j) under the second. q_empty (persistent
        # kernel): Q's tile goes back once S_j, its last use, is done (if q_done). The causal mask goes on
        # the scores (MASK) or into S's initial value (MASK_INIT, _ws_qk's diag).
        # NEW_TILE (persistent): S_j is the next tile's first key block (q, q_row and j its own: block 0, or a
        # causal tile's diagonal block, which the persistent kernel runs first), run under
        # the last P V of the tile ending: the running max and sum start afresh and the returned acc is
        # the ending tile's, not rescaled. key_limit: a ragged S's last block (_ws_qk). HALF (with NEW_TILE):
        # consumer 0's diagonal block, its S over the block's first M keys (_diag_half_qk). V_BUFFERS: V's ring
        # stages where they are not K's (the persistent kernel at head dim 128), else NUM_BUFFERS.
        VB: gl.constexpr = NUM_BUFFERS if V_BUFFERS is None else V_BUFFERS
        kbuf = g % NUM_BUFFERS
        vbuf = (g - 1) % VB
        s = _block_s(q, k_smem, k_ready, g, j, q_row, s_layout, M, BLOCK_N, NUM_BUFFERS, MASK_INIT, HALF, key_limit)
        mbarrier.wait(v_ready.index(vbuf), ((g - 1) // VB) & 1)
        acc = warpgroup_mma(p16, v_smem.index(vbuf), acc, is_async=True)
        s = warpgroup_mma_wait(1, deps=(s, ))  # wgmma groups complete in order: S_j is done
        mbarrier.arrive(k_empty.index(kbuf))
        if q_empty is not None:
            mbarrier.arrive(q_empty, pred=q_done)
        if NEW_TILE:
            m_i, l_i, p16_next = _tile_first_softmax(s, j, q_row, qk_scale, s_layout, p_layout, M, BLOCK_N, MASK, HALF,
                                                     v_smem.dtype)
        else:
            p, alpha, m_i, l_i = _ws_softmax(s, m_i, l_i, j, q_row, qk_scale, s_layout, M, BLOCK_N, MASK)
            p16_next = gl.convert_layout(p.to(v_smem.dtype), p_layout)  # 16-bit before the wait: fewer registers live
        acc, p16 = warpgroup_mma_wait(0, deps=(acc, p16))
        mbarrier.arrive(v_empty.index(vbuf))
        if not NEW_TILE:
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)  # to m_j
        return acc, m_i, l_i, p16_next

    @gluon.jit
    def _ws_first_block(q, k_smem, k_ready, k_empty, g, q_row, qk_scale, s_layout: gl.constexpr,
                        p_layout: gl.constexpr, M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                        CAUSAL: gl.constexpr, q_empty=None, q_done=False, MASK_INIT: gl.constexpr = False,
                        key_limit=None, j=0, HALF: gl.constexpr = False):
        # A tile's first key block j alone (ring counter g): (m, l, P) to start the overlapped steps. Block 0,
        # or a causal tile's diagonal block in the persistent kernel (j its index). Causal
        # masks it always (the diagonal of query block 0; elsewhere the mask keeps every score): on the
        # scores, or with MASK_INIT (and CAUSAL False) in S's initial value. q_empty (persistent): Q goes back
        # here when q_done (a tile of this one block). HALF: consumer 0's diagonal block (_diag_half_qk).
        s = _block_s(q, k_smem, k_ready, g, j, q_row, s_layout, M, BLOCK_N, NUM_BUFFERS, MASK_INIT, HALF, key_limit)
        s = warpgroup_mma_wait(0, deps=(s, ))
        mbarrier.arrive(k_empty.index(g % NUM_BUFFERS))
        if q_empty is not None:
            mbarrier.arrive(q_empty, pred=q_done)
        return _tile_first_softmax(s, j, q_row, qk_scale, s_layout, p_layout, M, BLOCK_N, CAUSAL, HALF, k_smem.dtype)

    @gluon.jit
    def _ws_last_pv(acc, p16, v_smem, v_ready, v_empty, g, NUM_BUFFERS: gl.constexpr):
        # A tile's last block's P V (ring counter g; NUM_BUFFERS V's stages), waited for, its V stage released.
        vbuf = g % NUM_BUFFERS
        mbarrier.wait(v_ready.index(vbuf), (g // NUM_BUFFERS) & 1)
        acc = warpgroup_mma(p16, v_smem.index(vbuf), acc, is_async=True)
        acc, p16 = warpgroup_mma_wait(0, deps=(acc, p16))
        mbarrier.arrive(v_empty.index(vbuf))
        return acc

    @gluon.jit
    def _ws_consumer(q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty, o_desc, o_ptr, S, qk_scale,
                     C: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                     CAUSAL: gl.constexpr, RAGGED: gl.constexpr):
        # Consumer C (one warpgroup): query rows [C * M, (C + 1) * M) of this program's block. RAGGED: S is
        # not a multiple of the tiles, so the last query block's rows past S are the next head's (computed,
        # never stored) and, without causal, the last key block is masked at S.
        start_m, row0, n_blocks, n_unmasked = _ws_tile(S, BLOCK_M, BLOCK_N, CAUSAL)
        M: gl.constexpr = BLOCK_M // 2
        HEAD_DIM: gl.constexpr = o_desc.block_type.shape[1]
        # wgmma accumulators: 16 rows a warp, the 4 warps stacked along M (a row's max and sum stay in
        # one warp), one instruction across the whole N; P's registers already sit where the A operand
        # of the second wgmma wants them (k_width 2 for 16 bits), so its conversion moves nothing
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)

        q_row = start_m * BLOCK_M + C * M
        q = q_smem.index(C)
        mbarrier.wait(q_bar, 0)
        if RAGGED and not CAUSAL:  # block 0 is the last, masked, where S < BLOCK_N
            m_i, l_i, p16 = _ws_first_block(q, k_smem, k_ready, k_empty, 0, q_row, qk_scale, s_layout, p_layout, M,
                                            BLOCK_N, NUM_BUFFERS, CAUSAL, key_limit=S)
        else:
            m_i, l_i, p16 = _ws_first_block(q, k_smem, k_ready, k_empty, 0, q_row, qk_scale, s_layout, p_layout, M,
                                            BLOCK_N, NUM_BUFFERS, CAUSAL)
        acc = gl.zeros([M, HEAD_DIM], gl.float32, o_layout)
        for j in range(1, n_unmasked):
            acc, m_i, l_i, p16 = _ws_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                           v_empty, j, j, q_row, qk_scale, s_layout, o_layout, p_layout, M, BLOCK_N,
                                           NUM_BUFFERS, False)
        for j in range(gl.maximum(n_unmasked, 1), n_blocks):  # causal: the diagonal's; else a ragged S's last
            if CAUSAL:
                acc, m_i, l_i, p16 = _ws_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                               v_empty, j, j, q_row, qk_scale, s_layout, o_layout, p_layout, M,
                                               BLOCK_N, NUM_BUFFERS, True)
            else:
                acc, m_i, l_i, p16 = _ws_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                               v_empty, j, j, q_row, qk_scale, s_layout, o_layout, p_layout, M,
                                               BLOCK_N, NUM_BUFFERS, False, key_limit=S - j * BLOCK_N)
        acc = _ws_last_pv(acc, p16, v_smem, v_ready, v_empty, n_blocks - 1, NUM_BUFFERS)
        # O = acc / l (every row has its diagonal key, or a key before S, so l > 0)
        l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
        out = (acc * gl.expand_dims(1.0 / l_o, 1)).to(o_desc.dtype)
        if RAGGED and q_row + M > S:
            _store_rows_before(o_ptr, out, row0, q_row, S, o_layout)
        else:
            # through Q's own tile, which no wgmma reads any more, and a TMA store
            q.store(out)
            fence_async_shared()
            tma_store(o_desc, [row0 + q_row, 0], q)
            tma.store_wait(0)

    @gluon.jit
    def _store_rows_before(o_ptr, out, row0, q_row, S, o_layout: gl.constexpr):
        # A consumer's rows [q_row, q_row + M) of O (head's first row row0 in the (B*H*S, D) view), those
        # before S alone, by masked pointer stores: a TMA store clips at the tensor's end, not the head's, and
        # at a ragged S would overwrite the next head's first rows, which another program writes.
        M: gl.constexpr = out.shape[0]
        HEAD_DIM: gl.constexpr = out.shape[1]
        rows = q_row + gl.arange(0, M, layout=gl.SliceLayout(1, o_layout))
        cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
        offs = (row0.to(gl.int64) + gl.expand_dims(rows, 1)) * HEAD_DIM + gl.expand_dims(cols, 0)
        gl.store(o_ptr + offs, out, mask=gl.expand_dims(rows, 1) < S)

    @gluon.jit
    def _kv_barriers(NUM_BUFFERS: gl.constexpr, CONSUMERS: gl.constexpr, V_BUFFERS: gl.constexpr = None):
        # The K/V ring's barriers (k_ready, k_empty, v_ready, v_empty), one a stage. ready: the loader's
        # expect (one arrive) and the copy's bytes; empty: one arrive per consumer (Gluon's arrive
        # synchronizes the partition's warps, then one thread arrives). V_BUFFERS: V's stages where V's ring is
        # longer than K's (_attn_fwd_persist), else NUM_BUFFERS; its extra stages' barriers are made after the
        # shared ones, so that with equal rings the kernel is the one it was before V's ring had a size of its own.
        VB: gl.constexpr = NUM_BUFFERS if V_BUFFERS is None else V_BUFFERS
        gl.static_assert(VB >= NUM_BUFFERS)
        k_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
        k_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
        v_ready = gl.allocate_shared_memory(gl.int64, [VB, 1], mbarrier.MBarrierLayout())
        v_empty = gl.allocate_shared_memory(gl.int64, [VB, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NUM_BUFFERS):
            mbarrier.init(k_ready.index(i), count=1)
            mbarrier.init(v_ready.index(i), count=1)
            mbarrier.init(k_empty.index(i), count=CONSUMERS)
            mbarrier.init(v_empty.index(i), count=CONSUMERS)
        for i in gl.static_range(NUM_BUFFERS, VB):
            mbarrier.init(v_ready.index(i), count=1)
            mbarrier.init(v_empty.index(i), count=CONSUMERS)
        return k_ready, k_empty, v_ready, v_empty

    @gluon.jit
    def _attn_fwd_ws(q_desc, k_desc, v_desc, o_desc, o_ptr, S, qk_scale, BLOCK_M: gl.constexpr,
                     BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, CAUSAL: gl.constexpr, RAGGED: gl.constexpr,
                     LOADER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr):
        # Descriptors over the (B*H*S, D) views: q and o in [BLOCK_M / 2, D] blocks, k and v in [BLOCK_N, D].
        # With S a multiple of the tiles no tile crosses a head; RAGGED (any other S): the last tiles of a
        # head read into the next (or past the tensor, as TMA's zeros), which _ws_consumer masks.
        dtype: gl.constexpr = q_desc.dtype
        q_smem = gl.allocate_shared_memory(dtype, [2] + q_desc.block_type.shape, q_desc.layout)
        k_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + k_desc.block_type.shape, k_desc.layout)
        v_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + v_desc.block_type.shape, v_desc.layout)
        q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(q_bar, count=1)
        k_ready, k_empty, v_ready, v_empty = _kv_barriers(NUM_BUFFERS, 2)
        # the kernel's own 4 warps are consumer 0; the workers: consumer 1 on 4 warps, the loader on 1
        gl.warp_specialize([
            (_ws_consumer, (q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty, o_desc, o_ptr, S,
                            qk_scale, 0, BLOCK_M, BLOCK_N, NUM_BUFFERS, CAUSAL, RAGGED)),
            (_ws_consumer, (q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty, o_desc, o_ptr, S,
                            qk_scale, 1, BLOCK_M, BLOCK_N, NUM_BUFFERS, CAUSAL, RAGGED)),
            (_ws_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, k_empty, v_ready, v_empty,
                          S, BLOCK_M, BLOCK_N, NUM_BUFFERS, CAUSAL)),
        ], [4, 1], [CONSUMER_REGS, LOADER_REGS])


    @gluon.jit
    def _persist_waves(sched, sched_w):
        # How many tiles this program runs: the first entry of its row of the schedule (persist_schedule)
        return gl.load(sched + gl.program_id(0) * sched_w)

    @gluon.jit
    def _persist_tile_id(sched, sched_w, w):
        # The id of this program's tile of wave w (its row's entries after the count; one padding entry past
        # the longest row lets a consumer read a wave ahead)
        return gl.load(sched + gl.program_id(0) * sched_w + 1 + w)

    @gluon.jit
    def _persist_tile(t, S, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
        # Tile t: its query block, its head's first row in the (B*H*S, D) views and its key blocks. Tile t is
        # query block t % n_m of head t // n_m; causal counts the blocks from the head's last, so that each
        # head's heaviest tiles have its lowest ids. A ragged S's last blocks as in _ws_tile.
        n_m = gl.cdiv(S, BLOCK_M)
        if CAUSAL:
            start_m = n_m - 1 - t % n_m
            n_blocks = (start_m + 1) * (BLOCK_M // BLOCK_N)
        else:
            start_m = t % n_m
            n_blocks = gl.cdiv(S, BLOCK_N)
        return start_m, (t // n_m) * S, n_blocks

    @gluon.jit
    def _ring_load(desc, smem, ready, empty, g, row, NUM_BUFFERS: gl.constexpr):
        # K or V block number g of this program's stream into stage g % NUM_BUFFERS, once both consumers
        # released that stage's previous lap (parity as in _ws_loader, the lap g // NUM_BUFFERS).
        buf = g % NUM_BUFFERS
        mbarrier.wait(empty.index(buf), ((g // NUM_BUFFERS) & 1) ^ 1)
        mbarrier.expect(ready.index(buf), desc.block_type.nbytes)
        tma_load(desc, [row, 0], ready.index(buf), smem.index(buf))

    @gluon.jit
    def _persist_loader(k_desc, v_desc, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, S, sched, sched_w,
                        BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, CAUSAL: gl.constexpr,
                        V_BUFFERS: gl.constexpr):
        # The producer of K and V over all of this program's tiles: one stream of blocks whose counter g runs
        # on across tiles (the consumers count alike), each tile's key blocks in the order its consumers run them
        # (causal: the diagonal block first, _persist_consumer); K's ring has NUM_BUFFERS stages, V's V_BUFFERS.
        # Q has a loader of its own (_persist_q_loader).
        g = 0
        t = _persist_tile_id(sched, sched_w, 0)
        for w in range(_persist_waves(sched, sched_w)):
            # the next tile's id read a tile ahead, so that its latency does not hold back the next tile's K_0
            t_next = _persist_tile_id(sched, sched_w, w + 1)
            start_m, row0, n_blocks = _persist_tile(t, S, BLOCK_M, BLOCK_N, CAUSAL)
            for j in range(n_blocks):
                key_block = j
                if CAUSAL:  # the diagonal block (start_m = n_blocks - 1), then 0, 1, ..
                    key_block = (j + start_m) % n_blocks
                _ring_load(k_desc, k_smem, k_ready, k_empty, g + j, row0 + key_block * BLOCK_N, NUM_BUFFERS)
                _ring_load(v_desc, v_smem, v_ready, v_empty, g + j, row0 + key_block * BLOCK_N, V_BUFFERS)
            g += n_blocks
            t = t_next

    @gluon.jit
    def _persist_q_slot(w, C: gl.constexpr, Q_SLOTS: gl.constexpr):
        # Tile w's Q for consumer C: its index in the Q tiles and their barriers (Q_SLOTS tiles a consumer, tile w
        # in the (w % Q_SLOTS)-th), and the parity of that slot's use by tile w (each slot's barriers complete
        # once every Q_SLOTS tiles)
        return (w % Q_SLOTS) * 2 + C, (w // Q_SLOTS) & 1

    @gluon.jit
    def _persist_q_loader(q_desc, q_smem, q_ready, q_empty, S, sched, sched_w, BLOCK_M: gl.constexpr,
                          BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, Q_SLOTS: gl.constexpr):
        # Each tile's Q, a tile per consumer, into that tile's slot once the slot's tile before (w - 2) handed it
        # back (after its last S): a tile ahead of its first S. Q came from the K/V loader before, after the
        # tile before's last S (one slot a consumer), and a program's every tile turn waited for Q from DRAM,
        # with only the last block's softmax under it: at S 512 a program runs 4-8 tiles of 1-4 blocks.
        for w in range(_persist_waves(sched, sched_w)):
            start_m, row0, n_blocks = _persist_tile(_persist_tile_id(sched, sched_w, w), S, BLOCK_M, BLOCK_N, CAUSAL)
            for c in gl.static_range(2):
                i, lap = _persist_q_slot(w, c, Q_SLOTS)
                # tile w - Q_SLOTS's release completes the slot's phase lap - 1: parity lap ^ 1 (passes on a fresh
                # barrier for tiles 0 and 1)
                mbarrier.wait(q_empty.index(i), lap ^ 1)
                mbarrier.expect(q_ready.index(i), q_desc.block_type.nbytes)
                tma_load(q_desc, [row0 + start_m * BLOCK_M + c * (BLOCK_M // 2), 0], q_ready.index(i),
                         q_smem.index(i))

    @gluon.jit
    def _persist_consumer(q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                          o_desc, o_ptr, S, sched, sched_w, qk_scale, C: gl.constexpr, BLOCK_M: gl.constexpr,
                          BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, CAUSAL: gl.constexpr,
                          RAGGED: gl.constexpr, Q_SLOTS: gl.constexpr, V_BUFFERS: gl.constexpr,
                          O_STAGED: gl.constexpr):
        # Consumer C of _ws_consumer over all of this program's tiles; a tile's j-th block is ring
        # counter g + j. With BLOCK_M == BLOCK_N a causal tile has one block on the diagonal, its last key block,
        # which it runs first (key blocks start_m, 0, 1, .., start_m - 1; the K/V loader streams them so): the
        # mask goes into the tile's first S alone, which runs under the tile before's last P V anyway, and the
        # loop over the rest has neither mask nor branch. With the diagonal last (fa57-fa58) the mask sat in
        # every block's S, a compare and a select a score, 129 of the loop's 553 sm_90 instructions a block at
        # head dim 64 (130 of 594 at 128; 422 and 462 without); on the H100 diagonal-first ran 1.07-1.14x that
        # order at every causal shape with head dim 64 or S >= 1024, 1.008x at S 512 head dim 128 (branch fa59,
        # experiments/held-out-shapes/attention-ragged/). Without causal, a ragged S's last block is masked at S
        # (KEY_LIMIT), and a head's last query block is stored by masked pointers (as in _ws_consumer); without
        # O_STAGED every query block is stored so (_attn_fwd_persist). K's ring has NUM_BUFFERS stages, V's V_BUFFERS.
        gl.static_assert(BLOCK_M == BLOCK_N)
        M: gl.constexpr = BLOCK_M // 2
        HEAD_DIM: gl.constexpr = o_desc.block_type.shape[1]
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        if O_STAGED:
            o_tile = o_smem.index(C)
        n_waves = _persist_waves(sched, sched_w)
        KEY_LIMIT: gl.constexpr = RAGGED and not CAUSAL
        # Consumer 0's diagonal block over its first M keys (_diag_half_qk) at head dim <= 64 only. There a block's
        # exponentials (BLOCK_M x BLOCK_N at 16 a cycle on sm_90) take at least its tensor time (2 x BLOCK_M x
        # BLOCK_N x HEAD_DIM FMA at 2048 a cycle): the ratio is HEAD_DIM / 64. Halving that consumer's diagonal
        # exponentials shortens what paces a tile's first step, and the H100 ran 1.04-1.06x main (8x16x512x64,
        # 16x12x1024x64 causal). At 128 the tensor time is twice the exponentials' and the H100 ran 0.98-0.99x
        # main: the diagonal's own code was lean, but the edit moved ptxas's (3.6) block loop, unchanged in the
        # source: both consumers' softmax from after the P V wait to before it, V's stage (of two at 128) going
        # back a softmax later; gated, the kernel at 128 is main's instruction for instruction (branch fa60).
        HALF: gl.constexpr = CAUSAL and C == 0 and HEAD_DIM <= 64
        # Tile 0's first key block runs alone; every later tile's runs under the last P V of the tile before it
        # (_ws_block's NEW_TILE), so the tensor cores do not idle while a tile ends and the next begins
        start_m, row0, n_blocks = _persist_tile(_persist_tile_id(sched, sched_w, 0), S, BLOCK_M, BLOCK_N, CAUSAL)
        q_row = start_m * BLOCK_M + C * M
        qi, lap = _persist_q_slot(0, C, Q_SLOTS)  # this tile's Q slot (_persist_q_loader)
        q = q_smem.index(qi)
        mbarrier.wait(q_ready.index(qi), lap)
        if KEY_LIMIT:  # block 0 is the last where S < BLOCK_N
            m_i, l_i, p16 = _ws_first_block(q, k_smem, k_ready, k_empty, 0, q_row, qk_scale, s_layout, p_layout, M,
                                            BLOCK_N, NUM_BUFFERS, False, q_empty.index(qi), n_blocks == 1, key_limit=S)
        else:
            m_i, l_i, p16 = _ws_first_block(q, k_smem, k_ready, k_empty, 0, q_row, qk_scale, s_layout, p_layout, M,
                                            BLOCK_N, NUM_BUFFERS, False, q_empty.index(qi), n_blocks == 1,
                                            MASK_INIT=CAUSAL, j=start_m if CAUSAL else 0, HALF=HALF)
        g = 0
        for w in range(n_waves):
            # the next tile's id read now, its latency under this tile's blocks
            t_next = _persist_tile_id(sched, sched_w, w + 1)
            acc = gl.zeros([M, HEAD_DIM], gl.float32, o_layout)
            # Blocks 1 to n_blocks - 1 in one loop, one S site: Q's slot goes back after the last block's S (the
            # tile after next's Q loads into it: a predicated arrive, as the next tile's block 0 does). Causal: no
            # mask (the tile's first block was its diagonal, and the j-th is key block j - 1: only a mask would read
            # j); a ragged S's key limit goes into every block's S, keeping all keys but in the last block. Not a
            # loop over the middle blocks with the last block after it: Triton 3.6's ptxas wrote the descriptors of
            # Q's k-steps 1.. there only in that loop's preheader, which a 2-block tile (causal's) skips, and the
            # last block read them stale: another slot's Q or garbage at every causal shape with two Q slots (fa57;
            # tests/kernels/sass_defs.py). A branch in the loop between the two kept 8 bytes on the stack at head
            # dim 128 causal, and the causal mask under a branch on the last block became selects on every block.
            for j in range(1, n_blocks):
                if KEY_LIMIT:
                    acc, m_i, l_i, p16 = _ws_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                                   v_empty, j, g + j, q_row, qk_scale, s_layout, o_layout, p_layout,
                                                   M, BLOCK_N, NUM_BUFFERS, False, q_empty.index(qi),
                                                   j == n_blocks - 1, key_limit=S - j * BLOCK_N, V_BUFFERS=V_BUFFERS)
                else:
                    acc, m_i, l_i, p16 = _ws_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                                   v_empty, j, g + j, q_row, qk_scale, s_layout, o_layout, p_layout,
                                                   M, BLOCK_N, NUM_BUFFERS, False, q_empty.index(qi),
                                                   j == n_blocks - 1, V_BUFFERS=V_BUFFERS)
            l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))  # this tile's, before the next tile's
            o_row0, o_q_row = row0, q_row  # this tile's, before the next tile's
            g += n_blocks
            if w + 1 < n_waves:
                start_m, row0, n_blocks = _persist_tile(t_next, S, BLOCK_M, BLOCK_N, CAUSAL)
                q_row = start_m * BLOCK_M + C * M
                qi, lap = _persist_q_slot(w + 1, C, Q_SLOTS)
                q = q_smem.index(qi)
                mbarrier.wait(q_ready.index(qi), lap)
                if KEY_LIMIT:
                    acc, m_i, l_i, p16 = _ws_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                                   v_empty, 0, g, q_row, qk_scale, s_layout, o_layout, p_layout, M,
                                                   BLOCK_N, NUM_BUFFERS, False, q_empty.index(qi), n_blocks == 1,
                                                   NEW_TILE=True, key_limit=S, V_BUFFERS=V_BUFFERS)
                else:
                    acc, m_i, l_i, p16 = _ws_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                                   v_empty, start_m if CAUSAL else 0, g, q_row, qk_scale, s_layout,
                                                   o_layout, p_layout, M, BLOCK_N, NUM_BUFFERS, False,
                                                   q_empty.index(qi), n_blocks == 1, MASK_INIT=CAUSAL, NEW_TILE=True,
                                                   HALF=HALF, V_BUFFERS=V_BUFFERS)
            else:
                acc = _ws_last_pv(acc, p16, v_smem, v_ready, v_empty, g - 1, V_BUFFERS)
            out = (acc * gl.expand_dims(1.0 / l_o, 1)).to(o_desc.dtype)
            if O_STAGED:
                if RAGGED and o_q_row + M > S:
                    _store_rows_before(o_ptr, out, o_row0, o_q_row, S, o_layout)
                else:
                    # O through this consumer's own staging tile (Q's tiles hold the next two tiles' Q by now), once
                    # the previous tile's store from it has been read out (store_wait, then the partition's barrier)
                    tma.store_wait(0)
                    o_tile.store(out)
                    fence_async_shared()
                    tma_store(o_desc, [o_row0 + o_q_row, 0], o_tile)
            else:
                _store_rows_before(o_ptr, out, o_row0, o_q_row, S, o_layout)
        if O_STAGED:
            tma.store_wait(0)

    @gluon.jit
    def _attn_fwd_persist(q_desc, k_desc, v_desc, o_desc, o_ptr, S, sched, sched_w, qk_scale, BLOCK_M: gl.constexpr,
                          BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, CAUSAL: gl.constexpr,
                          RAGGED: gl.constexpr, LOADER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                          Q_SLOTS: gl.constexpr = 2, V_BUFFERS: gl.constexpr = None, O_STAGED: gl.constexpr = True):
        # _attn_fwd_ws's partitions on a persistent grid of min(SMs, tiles) programs, each walking its
        # row of the schedule sched (persist_schedule; sched_w entries a row). Each consumer has Q_SLOTS Q tiles
        # (_persist_q_slot), each with a ready/empty barrier pair (counts 1: the Q loader's expect and bytes;
        # the consumer's arrive). K's ring has NUM_BUFFERS stages, V's V_BUFFERS (None: as many). O_STAGED: O
        # leaves through a staging tile a consumer by TMA; else by pointer stores from registers, which frees
        # those tiles' shared memory for a third V stage at head dim 128 (PERSISTENT_V_BUFFERS has the bytes).
        VB: gl.constexpr = NUM_BUFFERS if V_BUFFERS is None else V_BUFFERS
        dtype: gl.constexpr = q_desc.dtype
        q_smem = gl.allocate_shared_memory(dtype, [2 * Q_SLOTS] + q_desc.block_type.shape, q_desc.layout)
        if O_STAGED:
            o_smem = gl.allocate_shared_memory(dtype, [2] + o_desc.block_type.shape, o_desc.layout)
        else:
            o_smem = q_smem  # unread: warp_specialize takes no None among a partition's arguments
        k_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + k_desc.block_type.shape, k_desc.layout)
        v_smem = gl.allocate_shared_memory(dtype, [VB] + v_desc.block_type.shape, v_desc.layout)
        q_ready = gl.allocate_shared_memory(gl.int64, [2 * Q_SLOTS, 1], mbarrier.MBarrierLayout())
        q_empty = gl.allocate_shared_memory(gl.int64, [2 * Q_SLOTS, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(2 * Q_SLOTS):
            mbarrier.init(q_ready.index(i), count=1)
            mbarrier.init(q_empty.index(i), count=1)
        k_ready, k_empty, v_ready, v_empty = _kv_barriers(NUM_BUFFERS, 2, VB)
        gl.warp_specialize([
            (_persist_consumer, (q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready,
                                 v_empty, o_desc, o_ptr, S, sched, sched_w, qk_scale, 0, BLOCK_M, BLOCK_N,
                                 NUM_BUFFERS, CAUSAL, RAGGED, Q_SLOTS, VB, O_STAGED)),
            (_persist_consumer, (q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready,
                                 v_empty, o_desc, o_ptr, S, sched, sched_w, qk_scale, 1, BLOCK_M, BLOCK_N,
                                 NUM_BUFFERS, CAUSAL, RAGGED, Q_SLOTS, VB, O_STAGED)),
            (_persist_loader, (k_desc, v_desc, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, S, sched, sched_w,
                               BLOCK_M, BLOCK_N, NUM_BUFFERS, CAUSAL, VB)),
            (_persist_q_loader, (q_desc, q_smem, q_ready, q_empty, S, sched, sched_w, BLOCK_M, BLOCK_N, CAUSAL,
                                 Q_SLOTS)),
        ], [4, 1, 1], [CONSUMER_REGS, LOADER_REGS, LOADER_REGS])


    # Head dim 64: FlashAttention-3's tile for it, 192 query rows on three consumer warpgroups of 64 rows
    # (GLUON 3). At head dim 64 an exponential costs about as much as its score's matrix products, so the
    # special-function unit paces the kernel; a third consumer gives it more softmax to run under the
    # others' wgmma (cuDNN's kernel, what torch's SDPA runs there, has three as well). S (a multiple of 128)
    # is a multiple of 64 but not of 192: a head's last tile may end inside the program's rows, and each
    # consumer's 64 rows lie wholly inside the head or wholly past it.
    @gluon.jit
    def _ws3_span(start_m, S, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
        # How many consumers have rows in this tile, and its key blocks: all, or (causal) up to the block
        # holding its last row's diagonal.
        rows = gl.minimum(S - start_m * BLOCK_M, BLOCK_M)
        if CAUSAL:
            n_tile = (start_m * BLOCK_M + rows - 1) // BLOCK_N + 1
        else:
            n_tile = S // BLOCK_N
        return rows // (BLOCK_M // 3), n_tile

    @gluon.jit
    def _ws3_loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, S,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, CAUSAL: gl.constexpr):
        # K_0, then each consumer's Q (none for a consumer past the head: no copy, and it waits on
        # nothing), then the tile's K and V blocks through the ring.
        start_m = gl.program_id(0)
        if CAUSAL:
            start_m = gl.num_programs(0) - 1 - start_m  # longest rows first
        row0 = gl.program_id(1) * S
        n_live, n_tile = _ws3_span(start_m, S, BLOCK_M, BLOCK_N, CAUSAL)
        _ring_load(k_desc, k_smem, k_ready, k_empty, 0, row0, NUM_BUFFERS)
        for c in gl.static_range(3):
            live = c < n_live
            mbarrier.expect(q_ready.index(c), q_desc.block_type.nbytes, pred=live)
            tma_load(q_desc, [row0 + start_m * BLOCK_M + c * (BLOCK_M // 3), 0], q_ready.index(c), q_smem.index(c),
                     pred=live)
        _ring_load(v_desc, v_smem, v_ready, v_empty, 0, row0, NUM_BUFFERS)
        for j in range(1, n_tile):
            _ring_load(k_desc, k_smem, k_ready, k_empty, j, row0 + j * BLOCK_N, NUM_BUFFERS)
            _ring_load(v_desc, v_smem, v_ready, v_empty, j, row0 + j * BLOCK_N, NUM_BUFFERS)

    @gluon.jit
    def _ws3_consumer(q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale,
                      C: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                      CAUSAL: gl.constexpr):
        # Consumer C: _ws_consumer's steps on its 64 rows, over its own key blocks: none past the head;
        # causal, those up to the block holding its diagonal (q_row // BLOCK_N, its only masked block
        # besides block 0), since its 64 rows sit inside one key block. It still releases every later
        # block of the tile (the empty barriers count three consumers), once that block has landed: the
        # loader issued it only after the stage's previous lap completed, so the arrive counts toward
        # this lap. The mask goes into S's initial value: on the scores, where S_j, P_{j-1} and acc are
        # all live, it spilled 120-216 B at these 160 registers (in the A/B script,
        # df8b865:benchmarks/explore/gluon_attention.py).
        M: gl.constexpr = BLOCK_M // 3
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
        n_live, n_tile = _ws3_span(start_m, S, BLOCK_M, BLOCK_N, CAUSAL)
        q_row = start_m * BLOCK_M + C * M
        if CAUSAL:
            n_own = q_row // BLOCK_N + 1
        else:
            n_own = n_tile
        n_own = gl.where(C < n_live, n_own, 0)
        if n_own > 0:
            q = q_smem.index(C)
            mbarrier.wait(q_ready.index(C), 0)
            m_i, l_i, p16 = _ws_first_block(q, k_smem, k_ready, k_empty, 0, q_row, qk_scale, s_layout, p_layout, M,
                                            BLOCK_N, NUM_BUFFERS, False, MASK_INIT=CAUSAL)
            acc = gl.zeros([M, HEAD_DIM], gl.float32, o_layout)
            for j in range(1, n_own - 1):
                acc, m_i, l_i, p16 = _ws_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                               v_empty, j, j, q_row, qk_scale, s_layout, o_layout, p_layout, M,
                                               BLOCK_N, NUM_BUFFERS, False)
            if n_own > 1:
                acc, m_i, l_i, p16 = _ws_block(acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                               v_empty, n_own - 1, n_own - 1, q_row, qk_scale, s_layout, o_layout,
                                               p_layout, M, BLOCK_N, NUM_BUFFERS, False, MASK_INIT=CAUSAL)
            acc = _ws_last_pv(acc, p16, v_smem, v_ready, v_empty, n_own - 1, NUM_BUFFERS)
            l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
            q.store((acc * gl.expand_dims(1.0 / l_o, 1)).to(o_desc.dtype))
            fence_async_shared()
            tma_store(o_desc, [row0 + q_row, 0], q)
            tma.store_wait(0)
        for j in range(n_own, n_tile):
            buf = j % NUM_BUFFERS
            lap = (j // NUM_BUFFERS) & 1
            mbarrier.wait(k_ready.index(buf), lap)
            mbarrier.arrive(k_empty.index(buf))
            mbarrier.wait(v_ready.index(buf), lap)
            mbarrier.arrive(v_empty.index(buf))

    @gluon.jit
    def _attn_fwd_ws3(q_desc, k_desc, v_desc, o_desc, S, qk_scale, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                      NUM_BUFFERS: gl.constexpr, CAUSAL: gl.constexpr, LOADER_REGS: gl.constexpr,
                      CONSUMER_REGS: gl.constexpr):
        # Grid (ceil(S / 192), B*H); descriptors over the (B*H*S, D) views, q and o in [64, D] blocks, k and
        # v in [BLOCK_N, D]. Rows past a head are neither loaded nor stored, so no tile reaches the next head.
        dtype: gl.constexpr = q_desc.dtype
        q_smem = gl.allocate_shared_memory(dtype, [3] + q_desc.block_type.shape, q_desc.layout)
        k_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + k_desc.block_type.shape, k_desc.layout)
        v_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + v_desc.block_type.shape, v_desc.layout)
        q_ready = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
        for c in gl.static_range(3):
            mbarrier.init(q_ready.index(c), count=1)
        k_ready, k_empty, v_ready, v_empty = _kv_barriers(NUM_BUFFERS, 3)
        gl.warp_specialize([
            (_ws3_consumer, (q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale,
                             0, BLOCK_M, BLOCK_N, NUM_BUFFERS, CAUSAL)),
            (_ws3_consumer, (q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale,
                             1, BLOCK_M, BLOCK_N, NUM_BUFFERS, CAUSAL)),
            (_ws3_consumer, (q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, o_desc, S, qk_scale,
                             2, BLOCK_M, BLOCK_N, NUM_BUFFERS, CAUSAL)),
            (_ws3_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready,
                           v_empty, S, BLOCK_M, BLOCK_N, NUM_BUFFERS, CAUSAL)),
        ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, LOADER_REGS])


# --------------------------------------------------------------------------------------------------
# launcher
# --------------------------------------------------------------------------------------------------
_TUNED = {}
_GLUON_FAILED = {}  # device -> why the Gluon kernel did not compile or launch there
_SCHEDULES = {}  # (device, n_m, heads, SMs, causal) -> the persistent kernel's schedule there
last_config = {}  # the config of the latest launch (the benchmark reports it)


@functools.lru_cache(maxsize=None)
def _has_tma(device) -> bool:
    if device.type == "cuda":
        return (not torch.version.hip) and torch.cuda.get_device_capability(device)[0] >= 9
    return True  # interpreter: descriptors are emulated


def persist_schedule(n_m: int, heads: int, sms: int, causal: bool) -> list:
    """The persistent kernel's tiles for each of its programs (at most sms), in the order each runs them: a
    list of lists of tile ids (tile t is query block t % n_m of head t // n_m; causal counts the blocks
    from a head's last, so that a head's heaviest tiles have its lowest ids).

    Dealt as a list scheduler would deal them: each unit of the order (a tile, or causal's pair of tiles)
    goes to the program that would finish first, a tile costing its key blocks and one more for its start
    and end. Without causal every tile costs the same, and head by head in turn is that. Causal tiles cost
    1 to n_m blocks; dealt to the programs in turn, wave after wave, the busiest of 132 programs had 3.1%
    more than the mean at every causal shape of the test's sweep (its end is the kernel's). Two causal
    orders, and the one whose busiest program has less (the pairs on a tie):
    - heaviest first in groups of heads (_heaviest_first_in_groups): fine-grained, the busiest within 1%
      of the mean at long S; but where there are under four waves of tiles the group is every head, and
      the heavy tiles running at once are each from another head, whose K and V overflow the L2 (all
      heads at once read 0.86x the default SDPA at head dim 128 causal S 1024, groups of four waves
      1.01x: SKILL.md's tile schedule);
    - each head's query blocks paired heaviest with lightest (_head_pairs): every pair costs n_m + 3, so
      that dealt head by head in turn the programs stay level, and the n_m / 2 programs of a head read
      its K and V blocks from the L2 as the first of them brings each in. Busiest level with the groups'
      at S 512-1024 (a unit more where units, not tiles, set the waves' quantization: S 2048 and up)."""
    if not causal:
        return _deal([([t], n_m + 1) for t in range(n_m * heads)], sms)
    by_groups = _deal(_heaviest_first_in_groups(n_m, heads, sms), sms)
    by_pairs = _deal(_head_pairs(n_m, heads), sms)
    busiest = [max(sum(n_m - t % n_m + 1 for t in row) for row in dealt) for dealt in (by_groups, by_pairs)]
    return by_pairs if busiest[1] <= busiest[0] else by_groups


def _heaviest_first_in_groups(n_m: int, heads: int, sms: int) -> list:
    """Causal units of one tile each, (tiles, cost): by groups of heads, each group's heaviest tiles first;
    enough heads in a group for two waves of tiles or more, so that light tiles fill in behind heavy ones
    within it, and not many more, so that the tiles running at once keep a few heads' K and V in L2 (all
    heads at once, heaviest first, read 10% less at S 4096 in its A/B,
    df8b865:experiments/sweep-h200-session14/call4-attention-persistent/). Groups of equal size (to a
    head), so that the order does not end on a lone group of heavy tiles."""
    groups = max(1, heads * n_m // (2 * sms))
    bounds = [g * heads // groups for g in range(groups + 1)]
    return [([head * n_m + r], n_m - r + 1) for first, end in zip(bounds, bounds[1:]) for r in range(n_m)
            for head in range(first, end)]


def _head_pairs(n_m: int, heads: int) -> list:
    """Causal units of two tiles of one head, (tiles, cost): its heaviest query block with its lightest,
    the next heaviest with the next lightest, heads in turn; the heavy tile first (the light one's key
    blocks are the first of the heavy one's, still in L2). An odd n_m's middle tile goes alone, after
    every pair (half a pair's cost: last, as a list scheduler wants its small units)."""
    pairs = [([head * n_m + r, head * n_m + n_m - 1 - r], n_m + 3) for head in range(heads) for r in range(n_m // 2)]
    middles = [([head * n_m + n_m // 2], n_m - n_m // 2 + 1) for head in range(heads)] if n_m % 2 else []
    return pairs + middles


def _deal(units: list, sms: int) -> list:
    """units ((tiles, cost) in order) dealt to min(sms, units) programs, each to the one that would finish
    first: each program's tiles."""
    programs = min(sms, len(units))
    finish = [(0, p) for p in range(programs)]  # a heap: (cost so far, program)
    dealt = [[] for _ in range(programs)]
    for tiles, cost in units:
        busy, p = heapq.heappop(finish)
        dealt[p].extend(tiles)
        heapq.heappush(finish, (busy + cost, p))
    return dealt


def _schedule_on(device, n_m: int, heads: int, sms: int, causal: bool):
    """persist_schedule as the kernel reads it, made once a shape on each device: an int32 table whose row
    p is program p's tile count, then its tile ids, then zeros, one entry past the longest row (a consumer
    reads the id of its next tile while it runs this one)."""
    key = (device, n_m, heads, sms, causal)
    if key not in _SCHEDULES:
        dealt = persist_schedule(n_m, heads, sms, causal)
        width = 2 + max(len(row) for row in dealt)
        table = [[len(row), *row] + [0] * (width - 1 - len(row)) for row in dealt]
        _SCHEDULES[key] = torch.tensor(table, dtype=torch.int32, device=device)
    return _SCHEDULES[key]


def _gluon_runs(q) -> bool:
    """Whether _attn_fwd_ws can take q's shape here: Gluon present, a Hopper GPU (wgmma is sm_90's
    alone), not the interpreter (Gluon has none), 16-bit, D of 64 or 128, and it has not failed to compile
    or launch on this device before. Any S: at a ragged one (_ragged) GLUON 3 runs GLUON 1."""
    if gluon is None or q.device.type != "cuda" or q.device in _GLUON_FAILED:
        return False
    if os.environ.get("TRITON_INTERPRET", "") not in ("", "0") or not _hopper(q.device):
        return False
    return q.dtype in (torch.float16, torch.bfloat16) and q.shape[-1] in (64, 128)


@functools.lru_cache(maxsize=None)
def _hopper(device) -> bool:
    """An NVIDIA sm_90 GPU: asked of torch once a device, as the rest of a call's host work is kept small
    (_shared_layout)."""
    return not torch.version.hip and torch.cuda.get_device_capability(device)[0] == 9


@functools.lru_cache(maxsize=None)
def _num_sms(device) -> int:
    """The device's SM count (the persistent kernel's programs at most): asked of torch once a device."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def _ragged(S: int) -> bool:
    """S not a multiple of the Gluon kernels' tiles: _attn_fwd_ws and _attn_fwd_persist mask their last blocks;
    the three-consumer kernel, whose tiles would cross heads unmasked, does not take it."""
    return S % WS_BLOCK_M != 0 or S % WS_BLOCK_N != 0


def _launch_gluon(q, k, v, o, causal, cfg) -> bool:
    """Launch _attn_fwd_ws (GLUON 1), _attn_fwd_persist (GLUON 2) or _attn_fwd_ws3 (GLUON 3, head dim 64:
    _launch gives other head dims GLUON 1); False (and a warning, once a device) when it does not compile
    or launch."""
    B, H, S, D = q.shape
    descs = _gluon_descriptors(q, k, v, o)
    ragged = _ragged(S)
    consts = dict(BLOCK_M=WS_BLOCK_M, BLOCK_N=WS_BLOCK_N, CAUSAL=causal, LOADER_REGS=WS_LOADER_REGS,
                  CONSUMER_REGS=WS_CONSUMER_REGS, num_warps=4)
    try:
        if cfg["GLUON"] == 3:
            _attn_fwd_ws3[(_cdiv(S, WS3_BLOCK_M), B * H)](*descs, S, LOG2E / math.sqrt(D), NUM_BUFFERS=2,
                                                                 **{**consts, "BLOCK_M": WS3_BLOCK_M,
                                                                    "CONSUMER_REGS": WS3_CONSUMER_REGS})
        elif cfg["GLUON"] == 2:
            sched = _schedule_on(q.device, _cdiv(S, WS_BLOCK_M), B * H, _num_sms(q.device), causal)
            _attn_fwd_persist[(sched.shape[0],)](*descs, o, S, sched, sched.shape[1], LOG2E / math.sqrt(D),
                                                 NUM_BUFFERS=PERSISTENT_BUFFERS[D], RAGGED=ragged,
                                                 Q_SLOTS=PERSISTENT_Q_SLOTS, V_BUFFERS=PERSISTENT_V_BUFFERS[D],
                                                 O_STAGED=PERSISTENT_O_STAGED[D], **consts)
        else:
            _attn_fwd_ws[(_cdiv(S, WS_BLOCK_M), B * H)](*descs, o, S, LOG2E / math.sqrt(D),
                                                              NUM_BUFFERS=cfg["NUM_BUFFERS"], RAGGED=ragged, **consts)
    except Exception as e:  # Gluon changes between Triton releases: fall back, and say so once
        lines = str(e).strip().splitlines()
        _GLUON_FAILED[q.device] = f"{type(e).__name__}: {lines[-1] if lines else ''}"
        warnings.warn(f"flash-attention: the Gluon kernel does not run with Triton {triton.__version__} here "
                      f"({_GLUON_FAILED[q.device]}); the Triton kernel takes its shapes")
        return False
    return True


def _gluon_descriptors(q, k, v, o):
    """The Gluon kernels' TMA descriptors over the (B*H*S, D) views: Q and O in [WS_BLOCK_M // 2, D] boxes
    (a consumer's rows), K and V in [WS_BLOCK_N, D] ones, each in wgmma's shared-memory layout."""
    B, H, S, D = q.shape
    rows = B * H * S
    return tuple(GluonDescriptor(t.view(rows, D), [rows, D], [D, 1], [box, D], _shared_layout(box, D, q.dtype))
                 for t, box in ((q, WS_BLOCK_M // 2), (k, WS_BLOCK_N), (v, WS_BLOCK_N), (o, WS_BLOCK_M // 2)))


@functools.lru_cache(maxsize=None)
def _shared_layout(rows, D, dtype):
    """wgmma's shared-memory layout of a [rows, D] box (a frozen value): made once. Made on every call, the
    four descriptors took 37.5 us of host time a call on the CPU machine, 13.4 us with the layouts made
    once (Triton 3.9, 2000 calls); the GEMM's host time, built the same way, outlasted do_bench's L2 clear
    and its small readings fell to 0.40x cuBLAS (experiments/gemm-h100/small-m-host/)."""
    return gl.NVMMASharedLayout.get_default_for([rows, D], gl.bfloat16 if dtype == torch.bfloat16 else gl.float16)


def _cdiv(a: int, b: int) -> int:
    """triton.cdiv without its 2 us a call on the host (Triton 3.9 wraps it as a constexpr function)."""
    return -(-a // b)


def _launch(q, k, v, o, causal, cfg):
    if cfg["GLUON"] == 3 and q.shape[-1] != 64:
        cfg = {**cfg, "GLUON": 1}  # the three-consumer tile is head dim 64's
    if cfg["GLUON"] == 3 and _ragged(q.shape[-2]):
        cfg = {**cfg, "GLUON": 1}  # the three-consumer kernel does not mask a ragged S
    if cfg["GLUON"] and _gluon_runs(q) and _launch_gluon(q, k, v, o, causal, cfg):
        last_config.clear()
        last_config.update(cfg, USE_TMA=True)
        if cfg["GLUON"] == 2:
            last_config.update(NUM_BUFFERS=PERSISTENT_BUFFERS[q.shape[-1]],
                               V_BUFFERS=PERSISTENT_V_BUFFERS[q.shape[-1]])
        if cfg["GLUON"] == 3:
            last_config.update(BLOCK_M=WS3_BLOCK_M, NUM_BUFFERS=2)
        return o
    B, H, S, D = q.shape
    BM, BN = cfg["BLOCK_M"], cfg["BLOCK_N"]
    assert BM % BN == 0, "the causal diagonal stage walks BLOCK_M / BLOCK_N key blocks"
    even = S % BM == 0 and S % BN == 0
    use_tma = even and _has_tma(q.device)
    last_config.clear()
    last_config.update(cfg, GLUON=0, USE_TMA=use_tma)
    if use_tma:
        # Made on the host and passed as parameters: made in the kernel (tl.make_tensor_descriptor), each
        # program writes and fences its own, which cost gemm 8% at 2048^3 (the gemm size sweeps,
        # df8b865:experiments/gemm-sizes-h200/).
        srcs = [TensorDescriptor.from_tensor(t.view(B * H * S, D), [BM if t is q or t is o else BN, D])
                for t in (q, k, v, o)]
    else:
        srcs = [q, k, v, o]
    qk_scale = (1.0 / math.sqrt(D)) * LOG2E
    grid = (triton.cdiv(S, BM), B * H)
    attn_fwd_kernel[grid](*srcs, S, B * H, qk_scale, BLOCK_M=BM, BLOCK_N=BN, HEAD_DIM=D, CAUSAL=causal,
                          USE_TMA=use_tma, EVEN=even, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return o


def _autotune(q, k, v, o, causal):
    key = (tuple(q.shape), q.dtype, causal)
    if key not in _TUNED:
        candidates = [dict(CONFIG)] + [{**CONFIG, **c} for c in AUTOTUNE_CONFIGS]
        if not _gluon_runs(q):  # a Gluon candidate would time the Triton kernel's CONFIG again
            candidates = [c for c in candidates if not c["GLUON"]]
        if q.shape[-1] != 64:  # GLUON 3 would time GLUON 1 again
            candidates = [c for c in candidates if c["GLUON"] != 3]
        if _ragged(q.shape[-2]):  # so would GLUON 3
            candidates = [c for c in candidates if c["GLUON"] != 3]
        _TUNED[key] = _fastest(lambda cfg: _launch(q, k, v, o, causal, cfg), candidates)
    return _TUNED[key]


def _fastest(run, candidates):
    """The candidate config whose run(cfg) takes least time. Every candidate runs once before any is
    timed (it compiles there, and one that does not fit is dropped), then the candidates take turns call
    by call (_median_ms_each). Timed one after the other, 25 calls each in two rounds, three fresh
    autotunes at 1x32x16384x128 causal on an H100 kept GLUON 1 twice (605-620 TFLOP/s) where GLUON 2 forced
    reads 658-659 (experiments/held-out-shapes/attention-ragged/): each candidate's calls met the clock
    the ones before left, which drifts under the GPU's power limit. Each call follows a clean clear of the L2, as kgit
    times it: do_bench's clear leaves dirty lines whose write-back (6-8 us a call on the H200) is 15% of a
    43 us causal S1024 tile grid, and under it the pick for head dim 128 causal S1024 flipped between runs
    (1.06-1.14x the default SDPA in experiments/gemm-h200/gluon-1024/sweep-compute/, 0.909x in
    experiments/fused-moe-h200/sweep/)."""
    runnable = []
    for cfg in candidates:
        try:
            run(cfg)
        except Exception:  # does not fit (shared memory / registers): skip
            continue
        runnable.append(cfg)
    if not runnable:
        return dict(CONFIG)
    medians = _median_ms_each([lambda cfg=cfg: run(cfg) for cfg in runnable], _l2_clear())
    return runnable[medians.index(min(medians))]


def _l2_clear():
    """A function that reads 256 MB (five H200 L2s) into a sum: the L2 is cleared, and left clean. The buffer
    lives as long as the function (one autotune pass), not the process. The gemm template's, repeated: each
    template stands alone, to be copied into another repository by itself."""
    buffer = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device="cuda")
    total = torch.empty((), dtype=torch.int64, device="cuda")
    return lambda: torch.sum(buffer, dim=0, out=total)


def _median_ms_each(fns, clear, warmup_calls=5, calls=40):
    """Each fn's median time in ms over `calls` calls, the fns taking turns call by call (so that a clock
    that drifts, as a GPU's does under its power limit, weighs on each alike), each call after clear()
    (warm-up calls too)."""
    times = [[] for _ in fns]
    for i in range(warmup_calls + calls):
        for fn, timed in zip(fns, times):
            clear()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            if i >= warmup_calls:
                timed.append((start, end))
    torch.cuda.synchronize()
    return [sorted(s.elapsed_time(e) for s, e in timed)[calls // 2] for timed in times]


def flash_attention(q, k, v, causal=False, out=None, config=None):
    """Forward attention; q, k, v (B, H, S, D) contiguous, D in {16, 32, 64, 128}."""
    assert q.shape == k.shape == v.shape and q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
    o = out if out is not None else torch.empty_like(q)
    if config is None:
        config = CONFIG
        if CONFIG["AUTOTUNE"] and q.device.type == "cuda":
            config = _autotune(q, k, v, o, causal)
    return _launch(q, k, v, o, causal, {**CONFIG, **config})


# --------------------------------------------------------------------------------------------------
# references
# --------------------------------------------------------------------------------------------------
def reference(q, k, v, causal=False):
    """fp32 attention, the textbook way (materializes S x S): only for checking. q, k, v: (..., S, D)."""
    qf, kf, vf = q.float(), k.float(), v.float()
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        s = (qf @ kf.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        if causal:
            n = q.shape[-2]
            mask = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
            s = s.masked_fill(~mask, float("-inf"))
        return torch.softmax(s, dim=-1) @ vf
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def torch_sdpa_flash(q, k, v, causal=False):
    """The baseline: torch's scaled_dot_product_attention pinned to its flash backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
