"""GEMM on Hopper in Gluon, warp-specialized as cuBLAS's sm90 kernels are: a TMA producer warp feeding a
ring of shared-memory stages, consumer warpgroups on async wgmma, a persistent grid.

    python benchmarks/explore/gluon_gemm.py --out DIR [--variants a,b] [--sizes 1024,2048,MxNxK] [--dtypes bf16,fp16]
                                            [--budget-s 200] [--hang-s 90]
    python benchmarks/explore/gluon_gemm.py --compile-only [--variants a,b]

Run on the H200 in sessions 13, 25 and 29 (experiments/sweep-h200-session13/call11-gemm/,
sweep-h200-session25/, sweep-h200-session29/call1-gemm-pingpong/; its 64x128 kernel is the gemm template's
GLUON path now). Session 29's ping-pong consumers were correct and 2-4% slower than the cooperative
128x256 kernel at 4096^3 and 8192^3. --compile-only builds every variant
for sm_90 without a GPU and prints its registers, spills and shared memory. On the device, in one call:

    python benchmarks/explore/gluon_gemm.py --out DIR --budget-s 200

(the default sizes and variants: 90 rows, about 100-150 s by estimate; --budget-s stops starting cases.)

C = A @ B, A (M, K) and B (K, N) row-major, bf16/fp16 in, fp32 accumulation, C in the input dtype.

--compile-only under triton 3.6.0 (sm_90, its own ptxas), every variant in bf16 and fp16 at 4096^3 and
bf16 at 3000x2000x1000: no spills, no ptxas warning (no wgmma serialized). The 12-warp kernels (two
consumer warpgroups + the loader's) launch at .maxnreg 168, then setmaxnreg gives each consumer
warpgroup 240 and the loader 24 (ws2x4's PTX also holds 120 and 256: the waiting workers' and the
default warpgroup's figures outside the specialized region); the 8-warp one (ws4_64x128_s6) launches
at 128 and gives its consumer 232. Shared memory: 213 KB (128x256, 3 stages), 229.6 KB (128x256, 4 stages, split
epilogue; of 232448 B usable), 197 KB (128x128, 5 stages), 164 KB (64x128, 6 stages). The wgmma are
m64n256k16 (m64n128k16) with B read N-major (the transpose bit); a compile takes 0.4-1.4 s.

Why: the template (skills/kernels/gemm/triton_template.py) reaches 0.87-0.89x cuBLAS at 1024^3, 0.99x
at 2048^3 and 0.98-1.00x at 4096^3 and 8192^3 on the H200 (bar: 0.95x at 1024^3 and 2048^3, 1.00x from
4096^3). Its Hopper kernel is one partition of 8 warps that issues the TMA loads and the wgmma in
turn (Triton's automatic warp specialization gained nothing on sm_90). cuBLAS runs a TMA producer and
consumer warpgroups whose register budgets are rebalanced by setmaxnreg; the fused-MoE kernels are
GEMMs that trail it the same way. The Gluon attention kernel written that way
(benchmarks/explore/gluon_attention.py) went from 0.80x to 1.0x of cuDNN.

Hypothesis: a one-warp TMA producer, consumer warpgroups that keep one async wgmma group in flight and
release each stage the moment its wgmma retires, and a persistent grid in which the producer runs into
the next tile while the consumers store this one, reach cuBLAS from 1024^3 to 8192^3.
Prediction (bf16 and fp16 alike): the 128x256 variants 0.97-1.03x cuBLAS at 4096^3 and 8192^3
(~740-800 TFLOP/s), 2048^3 0.95-1.00x; at 1024^3 (32 tiles of 128x256, 64 of 128x128) only the
64x128 variant (128 tiles) reaches 0.92-1.00x, the 128x128 ones 0.6-0.8x. Two independent 4-warp
consumers (ws2x4) beat one 8-warp partition (ws8) by a few percent, as in attention, since neither
waits for the other's wgmma before it releases a stage or stores its rows. The host's launch path
(~20-40 us of Python and argument packing a call) is kept out of the timings by launching a cached
compiled kernel; it can still bound 1024^3 (a ~6 us kernel) if do_bench's L2 clear does not hide it.

Variants (VARIANTS below; all: BLOCK_K 64, GROUP_M 8, a 1-warp TMA loader partition, A and B tiles in
a ring of NUM_STAGES stages with ready/empty mbarriers, min(#SMs, #tiles) programs each looping over
tiles in grouped order, the epilogue through shared memory and a TMA store):
  ws8_*     one consumer partition of 8 warps (two warpgroups of 64 rows, in step: each mbarrier arrive
            synchronizes the partition) on a 128-row tile; cuBLAS's "cooperative" kernel at 128x256.
  ws2x4_*   two consumer partitions of 4 warps (one warpgroup, 64 rows each) that run independently;
            each has its own A half-tile in a stage and its own epilogue buffer, B is shared.
  ws4_*     one 4-warp consumer on 64-row tiles (1024^3: 128 tiles for 132 SMs).
  pp2x4_*   ping-pong (session 29): two 4-warp consumers that take whole tiles in turn, each holding its
            own tile's accumulator (a 128x128 or 64x256 fp32 tile is 128 registers a thread). The ring
            is filled tile after tile, so a consumer's next tile can only start once the other's stages
            have come back: their mainloops alternate by themselves, and each consumer's epilogue (the
            conversion, the shared-memory write, the store) runs under the other's mainloop instead of
            leaving the tensor cores idle. Cooperative kernels (ws*) stop every wgmma for it once a tile.
  *_s4e     4 stages of 128x256x64 fit only with the C tile stored in two halves (EPILOGUE_SPLIT).
Shared memory: a 128x256x64 stage is 48 KB (A 16 + B 32), the C staging tile 64 KB whole or 32 KB
split: 3 + whole = 208 KB, 4 + split = 224 KB of 227 KB.

Cases: the squares M=N=K in bf16, then in fp16, then a ragged shape (3000x2000x1000: no dimension a
multiple of the tiles, M != N != K) in both, whose edges TMA clips (out-of-range loads read zeros and
still count their whole box in the expect-tx bytes, stores are cut; with two consumers the second's A
box of the last tile-row lies wholly outside A). Each: fresh randn inputs scaled so that C ~ N(0, 1),
the output poisoned with NaN, max |C - ref| / max |ref| < 1e-2 against the fp32 product of the same
inputs (TF32 off), then triton.testing.do_bench(warmup 25, rep 100, median) three times: the median
of the three and their min-max spread, for each variant, the template's gemm and torch.matmul
(cuBLAS). Rows print as they finish and DIR/gluon_gemm.json is rewritten after each; a summary line a
case ends the run. Cases start until --budget-s has passed, and a watchdog ends the run when no row
has finished for --hang-s (a kernel whose barriers never complete would otherwise spin forever).
"""

from __future__ import annotations

import argparse
import json
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

GROUP_M = 8
# name: (BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, consumer partitions, warps each, EPILOGUE_SPLIT, PINGPONG)
VARIANTS = {
    "ws8_128x256_s3": (128, 256, 64, 3, 1, 8, 0, 0),
    "ws8_128x256_s4e": (128, 256, 64, 4, 1, 8, 1, 0),
    "ws2x4_128x256_s3": (128, 256, 64, 3, 2, 4, 0, 0),
    "ws2x4_128x256_s4e": (128, 256, 64, 4, 2, 4, 1, 0),
    "ws8_128x128_s5": (128, 128, 64, 5, 1, 8, 0, 0),
    "ws2x4_128x128_s5": (128, 128, 64, 5, 2, 4, 0, 0),
    "ws4_64x128_s6": (64, 128, 64, 6, 1, 4, 0, 0),
    # session 25, 1024^3 (gemm_small_gluon.py): deeper rings, and cuBLAS's 128x64 tile there
    "ws4_64x128_s8": (64, 128, 64, 8, 1, 4, 0, 0),
    "ws8_128x64_s8": (128, 64, 64, 8, 1, 8, 0, 0),
    "ws2x4_128x64_s8": (128, 64, 64, 8, 2, 4, 0, 0),
    # session 29, 4096^3: cuBLAS's own tile (256x128, two 128-row consumers), and ping-pong consumers
    "ws2x4_256x128_s4e": (256, 128, 64, 4, 2, 4, 1, 0),
    "pp2x4_128x128_s5": (128, 128, 64, 5, 2, 4, 0, 1),
    "pp2x4_128x128_s6e": (128, 128, 64, 6, 2, 4, 1, 1),
    "pp2x4_64x256_s4e": (64, 256, 64, 4, 2, 4, 1, 1),
}
# setmaxnreg requests, as in the attention kernel. The loader only issues copies and waits on barriers:
# 24 registers (the minimum). Triton pads the workers to whole warpgroups and leaves the default
# partition (the first consumer) what remains of 64K; a worker consumer asks for the 240 that leaves it.
# A 64x256 fp32 accumulator is 128 registers a thread, so 240 has room for the epilogue's conversion.
LOADER_REGS = 24
CONSUMER_REGS = 240


# --------------------------------------------------------------------------------------------------
# kernel
# --------------------------------------------------------------------------------------------------
@gluon.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    # The template's grouped order: consecutive tile ids walk GROUP_M tile-rows down one tile-column,
    # then the next column, so the programs running together share a few A row-panels and B
    # column-panels in L2. Every partition calls this on the same tile ids, so they agree.
    in_group = GROUP_M * num_pid_n
    group = tile_id // in_group
    first_m = group * GROUP_M
    group_m = gl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % in_group) % group_m
    pid_n = (tile_id % in_group) // group_m
    return pid_m, pid_n


@gluon.jit
def _loader(a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
            BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, NUM_STAGES: gl.constexpr, A_BOXES: gl.constexpr):
    # The producer: for each of this program's tiles, each k-step's A tile (A_BOXES [M_PER, BLOCK_K]
    # boxes: one per cooperative consumer, one whole for ping-pong) and B tile ([BLOCK_K, BLOCK_N]) into
    # the next stage of the ring, once the stage has been released. It never waits for an epilogue, so
    # it runs into the next tile (up to NUM_STAGES k-steps ahead) while the consumers store this one.
    M_PER: gl.constexpr = BLOCK_M // A_BOXES
    # expect-tx: every byte the stage's copies will complete. A box that sticks out of the matrix still
    # counts whole (TMA fills the out-of-range part with zeros), so ragged edges need no other count.
    STAGE_BYTES: gl.constexpr = A_BOXES * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    it = 0  # k-steps issued by this program over all its tiles: the ring position, as the consumers count
    for tile_id in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        for ki in range(k_tiles):
            s = it % NUM_STAGES
            # A fresh mbarrier is in phase 0 and counts its (never run) phase "1" as complete, so the
            # first lap's wait for parity 1 passes at once; lap L waits for the consumers' releases of
            # lap L-1, which complete phase L-1 of the empty barrier: parity ((L - 1) & 1) = (L & 1) ^ 1.
            mbarrier.wait(empty.index(s), ((it // NUM_STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), STAGE_BYTES)
            for c in gl.static_range(A_BOXES):
                _tma_load(a_desc, [off_m + c * M_PER, ki * BLOCK_K], ready.index(s), a_smem.index(s * A_BOXES + c))
            _tma_load(b_desc, [ki * BLOCK_K, off_n], ready.index(s), b_smem.index(s))
            it += 1


@gluon.jit
def _store_tile(acc, c_desc, c_smem, row, col, BLOCK_N: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr):
    # acc -> C's dtype -> shared memory -> TMA store. c_smem is reused tile after tile: wait until the
    # previous store has finished reading it (store_wait(0); the compiler's barrier after it holds the
    # partition's other warps, which issued no store, until the issuing thread is through), write it,
    # fence so the async proxy (TMA) sees the generic-proxy writes, then store. The last store is left
    # in flight: the next tile's mainloop runs under it.
    if EPILOGUE_SPLIT:
        # two [rows, BLOCK_N / 2] halves through a half-size buffer: what lets 4 stages of 128x256x64 fit
        halves = acc.reshape([acc.shape[0], 2, BLOCK_N // 2]).permute((0, 2, 1)).split()
        for h in gl.static_range(2):
            out = halves[h].to(c_desc.dtype)
            tma.store_wait(0)
            c_smem.store(out)
            fence_async_shared()
            _tma_store(c_desc, [row, col + h * (BLOCK_N // 2)], c_smem)
    else:
        out = acc.to(c_desc.dtype)
        tma.store_wait(0)
        c_smem.store(out)
        fence_async_shared()
        _tma_store(c_desc, [row, col], c_smem)


@gluon.jit
def _consumer(a_smem, b_smem, c_smem, ready, empty, turn, c_desc, M, N, K, C: gl.constexpr, BLOCK_M: gl.constexpr,
              BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, NUM_STAGES: gl.constexpr,
              NUM_CONSUMERS: gl.constexpr, CONSUMER_WARPS: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr,
              PINGPONG: gl.constexpr):
    # Consumer C of NUM_CONSUMERS, on CONSUMER_WARPS warps (4: one warpgroup; 8: two warpgroups of M_PER / 2
    # rows each). Cooperative: rows [C * M_PER, (C + 1) * M_PER) of each of this program's tiles.
    # Ping-pong: the whole of every NUM_CONSUMERS-th tile of this program, from its C-th; NUM_CONSUMERS 2.
    A_BOXES: gl.constexpr = 1 if PINGPONG else NUM_CONSUMERS
    M_PER: gl.constexpr = BLOCK_M // A_BOXES
    A_BOX: gl.constexpr = 0 if PINGPONG else C
    TILE_TURN: gl.constexpr = NUM_CONSUMERS if PINGPONG else 1
    # wgmma accumulator: m16 per warp, the warps stacked along M (a warpgroup owns 64 whole rows), one
    # instruction across the tile's whole N (n256 at most, the widest wgmma); k16 for 16-bit inputs.
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[CONSUMER_WARPS, 1],
                                                         instr_shape=[16, BLOCK_N, 16])
    c_buf = c_smem.index(C)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    # k-steps over all this program's tiles, in step with the loader's count; a ping-pong consumer starts
    # after the tiles of the consumers before it and skips the others' tiles' k-steps
    it = (C * k_tiles) if PINGPONG else 0
    first_tile = gl.program_id(0) + (C * gl.num_programs(0) if PINGPONG else 0)
    done = 0  # this consumer's tiles so far
    for tile_id in range(first_tile, num_pid_m * num_pid_n, TILE_TURN * gl.num_programs(0)):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = gl.zeros([M_PER, BLOCK_N], gl.float32, acc_layout)
        if PINGPONG:
            # Ping-pong's turn: a ready barrier's wait is by parity, so it is only sound within one lap of
            # the ring; this tile's first k-step is k_tiles positions past this consumer's last. Wait until
            # the other consumer has reached the last k-step of the tile before this one (all positions
            # before this tile's are then filled), as its (done - 1 + C)-th arrival on turn[C]; consumer 0's
            # first tile has no tile before it.
            phase = done - 1 + C
            mbarrier.wait(turn.index(C), phase & 1, pred=phase >= 0)
        for ki in range(k_tiles):
            s = it % NUM_STAGES
            mbarrier.wait(ready.index(s), (it // NUM_STAGES) & 1)
            if PINGPONG:
                mbarrier.arrive(turn.index(1 - C), pred=ki == k_tiles - 1)
            # B row-major: its [BLOCK_K, BLOCK_N] box (N contiguous) is wgmma's B operand as it lies
            # (an "N-major" B, which 16-bit wgmma reads with its transpose bit; the attention kernel's
            # P V reads V's [keys, D] stage the same way). A's [M_PER, BLOCK_K] box is K-major.
            a = a_smem.index(s * A_BOXES + A_BOX)
            b = b_smem.index(s)
            acc = warpgroup_mma(a, b, acc, is_async=True)
            # One group in flight: wgmma groups retire in order, so with <= 1 outstanding the previous
            # k-step's group is done reading its stage, which goes back to the loader while this one
            # runs. (Gluon's arrive synchronizes the partition first, then one thread arrives, so in
            # the 8-warp partition both warpgroups have passed their wait.)
            acc, a, b = warpgroup_mma_wait(1, deps=(acc, a, b))
            mbarrier.arrive(empty.index((it + NUM_STAGES - 1) % NUM_STAGES), pred=ki > 0)
            it += 1
        # the tile's last group, then its stage (the previous tile's last stage was released the same
        # way, hence no release at ki == 0 above)
        acc = warpgroup_mma_wait(0, deps=(acc, ))
        mbarrier.arrive(empty.index((it + NUM_STAGES - 1) % NUM_STAGES))
        _store_tile(acc, c_desc, c_buf, pid_m * BLOCK_M + A_BOX * M_PER, pid_n * BLOCK_N, BLOCK_N, EPILOGUE_SPLIT)
        it += (TILE_TURN - 1) * k_tiles
        done += 1
    tma.store_wait(0)  # the program's last store, before its shared memory goes away


@gluon.jit
def gemm_ws_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                   BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, NUM_STAGES: gl.constexpr,
                   NUM_CONSUMERS: gl.constexpr, CONSUMER_WARPS: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr,
                   PINGPONG: gl.constexpr, LOADER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr):
    # Descriptors: a in [M_PER, BLOCK_K] boxes, b in [BLOCK_K, BLOCK_N], c in [M_PER, BLOCK_N (/ 2 when
    # EPILOGUE_SPLIT)], where M_PER is BLOCK_M / NUM_CONSUMERS (cooperative) or BLOCK_M (ping-pong).
    A_BOXES: gl.constexpr = 1 if PINGPONG else NUM_CONSUMERS
    dtype: gl.constexpr = a_desc.dtype
    a_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES * A_BOXES] + a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # ping-pong's only
    # ready: the loader's expect (one arrive) and the copies' bytes; empty: one arrive per consumer that
    # reads the stage (every cooperative one; the one whose tile it is, in ping-pong)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=A_BOXES)
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)

    # the kernel's own CONSUMER_WARPS warps are consumer 0 (the default partition); workers: the other
    # consumer, if any, and the loader's one warp
    if NUM_CONSUMERS == 1:
        gl.warp_specialize([
            (_consumer, (a_smem, b_smem, c_smem, ready, empty, turn, c_desc, M, N, K, 0, BLOCK_M, BLOCK_N, BLOCK_K,
                         GROUP_M, NUM_STAGES, 1, CONSUMER_WARPS, EPILOGUE_SPLIT, 0)),
            (_loader, (a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
                       NUM_STAGES, 1)),
        ], [1], [LOADER_REGS])
    else:
        gl.warp_specialize([
            (_consumer, (a_smem, b_smem, c_smem, ready, empty, turn, c_desc, M, N, K, 0, BLOCK_M, BLOCK_N, BLOCK_K,
                         GROUP_M, NUM_STAGES, 2, CONSUMER_WARPS, EPILOGUE_SPLIT, PINGPONG)),
            (_consumer, (a_smem, b_smem, c_smem, ready, empty, turn, c_desc, M, N, K, 1, BLOCK_M, BLOCK_N, BLOCK_K,
                         GROUP_M, NUM_STAGES, 2, CONSUMER_WARPS, EPILOGUE_SPLIT, PINGPONG)),
            (_loader, (a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
                       NUM_STAGES, 1 if PINGPONG else 2)),
        ], [CONSUMER_WARPS, 1], [CONSUMER_REGS, LOADER_REGS])


# --------------------------------------------------------------------------------------------------
# launcher
# --------------------------------------------------------------------------------------------------
GL_DTYPE = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}
NUM_SMS_OFFLINE = 132  # the H200's, for --compile-only (the grid does not change what is compiled)


def _launch_args(a, b, c, variant, num_sms):
    """The kernel's arguments by name (host descriptors included), its grid and compile options."""
    BM, BN, BK, stages, consumers, warps, split, pingpong = VARIANTS[variant]
    M, K = a.shape
    N = b.shape[1]
    if a.dtype not in GL_DTYPE or not (a.dtype == b.dtype == c.dtype):
        raise ValueError(f"unsupported dtypes {a.dtype}, {b.dtype}, {c.dtype}")
    for t in (a, b, c):  # TMA: unit inner stride, 16-byte aligned base and row stride
        if t.stride(1) != 1 or (t.stride(0) * t.element_size()) % 16 or t.data_ptr() % 16:
            raise ValueError("unsupported layout: TMA needs row-major, 16-byte aligned rows")
    gdt = GL_DTYPE[a.dtype]
    m_per = BM if pingpong else BM // consumers

    def desc(t, block):
        return TensorDescriptor(t, list(t.shape), list(t.stride()), block,
                                gl.NVMMASharedLayout.get_default_for(block, gdt))

    args = dict(a_desc=desc(a, [m_per, BK]), b_desc=desc(b, [BK, BN]), c_desc=desc(c, [m_per, BN // (1 + split)]),
                M=M, N=N, K=K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=GROUP_M, NUM_STAGES=stages,
                NUM_CONSUMERS=consumers, CONSUMER_WARPS=warps, EPILOGUE_SPLIT=split, PINGPONG=pingpong,
                LOADER_REGS=LOADER_REGS,
                CONSUMER_REGS=CONSUMER_REGS)
    tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    # The launch's register budget a thread, before setmaxnreg moves registers between partitions.
    # Triton's default assumes 256 and divides 64K among the warps: 168 for the 12-warp kernels (two
    # consumer warpgroups + the loader's, padded), but an invalid .maxnreg 256 for the 8-warp one (ptxas
    # ignores it, and setmaxnreg needs a valid one). 128 there: the loader warpgroup's 24 leave the
    # consumer warpgroup 232, far more than its 64x128 accumulator's 64.
    options = dict(num_warps=warps)
    if consumers * warps == 4:
        options["maxnreg"] = 128
    return args, (min(num_sms, tiles), ), options


_PLANS = {}  # (variant, the tensors' shapes, dtype and addresses) -> (compiled kernel, grid, positional args)


def gluon_gemm(a, b, variant, out=None):
    """C = A @ B with one variant. The first call of a (variant, tensors) goes through the JIT (compiles
    and launches); later calls launch the compiled kernel with the arguments kept from the first, so the
    timings hold the kernel rather than ~20-40 us of Python argument binding a call."""
    c = out if out is not None else torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    key = (variant, a.shape, b.shape, a.dtype, a.data_ptr(), b.data_ptr(), c.data_ptr())
    plan = _PLANS.get(key)
    if plan is None:
        num_sms = torch.cuda.get_device_properties(a.device).multi_processor_count
        args, grid, options = _launch_args(a, b, c, variant, num_sms)
        kernel = gemm_ws_kernel[grid](**args, **options)
        # a compiled kernel's launcher reads grid[0..2]: a 1-tuple raised IndexError on every variant
        # (experiments/sweep-h200-session13/call11-gemm/first-try.log)
        _PLANS[key] = (kernel, (grid[0], 1, 1), [args[name] for name in gemm_ws_kernel.arg_names])
    else:
        kernel, grid, positional = plan
        kernel[grid](*positional)
    return c


# --------------------------------------------------------------------------------------------------
# compile-only: sm_90 without a GPU
# --------------------------------------------------------------------------------------------------
def compile_variant(variant, dtype, shape=(4096, 4096, 4096)):
    """Compile one variant for sm_90 from host stand-ins (CPU tensors: descriptors only need their
    shapes and strides) of an (M, N, K) problem; returns the compiled kernel."""
    M, N, K = shape
    a, b, c = torch.empty(M, K, dtype=dtype), torch.empty(K, N, dtype=dtype), torch.empty(M, N, dtype=dtype)
    args, _, options = _launch_args(a, b, c, variant, NUM_SMS_OFFLINE)
    constexpr = {name for name, param in zip(gemm_ws_kernel.arg_names, gemm_ws_kernel.params) if param.is_constexpr}
    return templates.compile_sm90(gemm_ws_kernel, [value for name, value in args.items() if name not in constexpr],
                                  {name: value for name, value in args.items() if name in constexpr}, options)


def compile_only(variants):
    # the ragged shape specializes M, N, K differently (not multiples of 16)
    cases = [(torch.bfloat16, (4096, 4096, 4096)), (torch.float16, (4096, 4096, 4096)),
             (torch.bfloat16, (3000, 2000, 1000))]
    for name in variants:
        for dtype, shape in cases:
            tag = f"{name:18s} {str(dtype)[6:]:8s} {'x'.join(map(str, shape)):14s}"
            try:
                t0 = time.time()
                kernel = compile_variant(name, dtype, shape)
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
def bench(fn, repeats=3):
    """do_bench's median (warmup 25 ms, rep 100 ms), `repeats` times: (median ms, min-max spread % of it)."""
    meds = [triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") for _ in range(repeats)]
    med = statistics.median(meds)
    return med, 100 * (max(meds) - min(meds)) / med


def run_case(M, N, K, dtype, variants, template, results, out_path):
    torch.manual_seed(0)
    # each operand scaled by K^-1/4: C's entries are then ~N(0, 1) whatever K (never zeros: this GPU
    # multiplies zeros faster than random data)
    scale = K ** -0.25
    a = torch.randn(M, K, device="cuda", dtype=torch.float32).mul_(scale).to(dtype)
    b = torch.randn(K, N, device="cuda", dtype=torch.float32).mul_(scale).to(dtype)
    ref = template.reference(a, b)  # fp32, TF32 off
    ref_max = ref.abs().max().item()
    c = torch.empty(M, N, device="cuda", dtype=dtype)
    flops = 2 * M * N * K
    case = dict(M=M, N=N, K=K, dtype=str(dtype)[6:])
    label = f"{M}x{N}x{K} {case['dtype']}"
    base = {}

    def row_for(name, run):
        # run(c) computes into c where it can and returns the output; c is poisoned with NaN before the
        # check so that tiles it never wrote fail. The first call (compile, autotune) is untimed and
        # unchecked; the check is on the second, the path the timing takes.
        row = dict(case, variant=name)
        try:
            t0 = time.time()
            run(c)
            torch.cuda.synchronize()
            row["first_call_s"] = round(time.time() - t0, 2)
            c.fill_(float("nan"))
            res = run(c)
            torch.cuda.synchronize()
            err = (res.float() - ref).abs().max().item() / ref_max
            row["max_rel_err"] = err
            if not err < 1e-2:  # NaN fails too
                row["error"] = f"wrong output: max relative error {err:.3g}"
            else:
                ms, spread = bench(lambda: run(c))
                row.update(ms=ms, tflops=flops / ms * 1e-9, spread_pct=spread)
                if name == "cublas" or "tflops" in base:
                    row["vs_cublas"] = row["tflops"] / base.get("tflops", row["tflops"])
        except Exception as e:  # a variant that does not compile or launch is a result too
            row["error"] = templates.last_lines(e)
        if "error" in row:
            print(f"{label:22s} {name:18s} ERROR {row['error']}", flush=True)
        else:
            print(f"{label:22s} {name:18s} {row['tflops']:6.1f} TFLOP/s  {row['ms'] * 1e3:8.1f} us  "
                  f"±{row['spread_pct']:.1f}%  x{row.get('vs_cublas', float('nan')):.3f} of cuBLAS  "
                  f"err {row['max_rel_err']:.1e}  first call {row['first_call_s']} s", flush=True)
        results["rows"].append(row)
        out_path.write_text(json.dumps(results, indent=1))
        templates.row_done()
        return row

    base.update(row_for("cublas", lambda c: torch.matmul(a, b, out=c)))
    # the template's gemm: its first call above runs its per-shape autotune and keeps the plan
    row_for("template", lambda c: template.gemm(a, b, out=c))
    # variants: names of VARIANTS, or name -> run(a, b, c) for kernels of other scripts (gemm_multicast.py)
    runners = variants if isinstance(variants, dict) else {
        name: (lambda a, b, c, name=name: gluon_gemm(a, b, name, out=c)) for name in variants}
    for name, run in runners.items():
        row_for(name, lambda c, run=run: run(a, b, c))
    _PLANS.clear()  # the plans hold this case's tensors (their descriptors) and addresses


def summarize(results, names=VARIANTS):
    """One line a case: cuBLAS, the template and the fastest correct Gluon variant (of names), x cuBLAS."""
    cases = {}
    for row in results["rows"]:
        cases.setdefault((row["M"], row["N"], row["K"], row["dtype"]), []).append(row)
    print("summary (x cuBLAS):", flush=True)
    for (M, N, K, dtype), rows in cases.items():
        timed = {r["variant"]: r for r in rows if "tflops" in r}
        ours = [r for name, r in timed.items() if name in names]
        best = max(ours, key=lambda r: r["tflops"], default=None)
        parts = [f"{M}x{N}x{K} {dtype}:"]
        if "cublas" in timed:
            parts.append(f"cuBLAS {timed['cublas']['tflops']:.0f} TFLOP/s")
        if "template" in timed:
            parts.append(f"template x{timed['template'].get('vs_cublas', float('nan')):.3f}")
        if best is not None:
            parts.append(f"best Gluon {best['variant']} x{best.get('vs_cublas', float('nan')):.3f}")
        print("  " + "  ".join(parts), flush=True)


def _shape(text):
    """"S" (a square) or "MxNxK"."""
    dims = [int(d) for d in text.lower().split("x")]
    return tuple(dims * 3) if len(dims) == 1 else tuple(dims)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=".")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, from: " + ", ".join(VARIANTS))
    p.add_argument("--sizes", default="1024,2048,4096,8192,3000x2000x1000",
                   help="S (M=N=K) or MxNxK; the last default is ragged (no dimension a multiple of the tiles)")
    p.add_argument("--dtypes", default="bf16,fp16")
    p.add_argument("--budget-s", type=float, default=200.0, help="start no new case after this many seconds")
    p.add_argument("--hang-s", type=float, default=90.0, help="exit when no row finishes for this long")
    p.add_argument("--compile-only", action="store_true")
    args = p.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}")
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    if not set(args.dtypes.split(",")) <= set(dtypes):
        p.error(f"--dtypes: comma-separated, from {', '.join(dtypes)}")
    if args.compile_only:
        compile_only(variants)
        return

    started = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    out_path = out / "gluon_gemm.json"
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "variants": {v: VARIANTS[v] for v in variants}, "rows": []}
    template = templates.load("gemm")
    templates.start_watchdog(args.hang_s)
    # every square in bf16 first, so a run cut short still answers bf16; shapes that are not squares
    # (the ragged one) after all squares: a consumer's A box wholly outside the matrix is a path only
    # they take, and if it hung the watchdog would end the run there
    cases = [(dname, _shape(size)) for dname in args.dtypes.split(",") for size in args.sizes.split(",")]
    cases.sort(key=lambda case: len(set(case[1])) > 1)
    for dname, (M, N, K) in cases:
        if time.time() - started > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent: skipping {M}x{N}x{K} {dname} and later", flush=True)
            break
        run_case(M, N, K, dtypes[dname], variants, template, results, out_path)
    summarize(results)
    print(f"done in {time.time() - started:.0f} s; rows in {out_path}", flush=True)


if __name__ == "__main__":
    main()
