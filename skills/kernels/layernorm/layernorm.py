"""LayerNorm forward in Triton, with the torch reference beside it.

    mean_r = sum_j x[r, j] / N,   var_r = sum_j (x[r, j] - mean_r)^2 / N   (biased, as torch)
    y[r, j] = (x[r, j] - mean_r) / sqrt(var_r + eps) * w[j] + b[j]

fp32 arithmetic, one rounding on the store. The variance is taken around the
mean (two passes over the row IN REGISTERS, or Chan's combination of per-chunk
(mean, M2) pairs), never as E[x^2] - mean^2, which cancels catastrophically
when |mean| >> std (all-equal rows, offset data).

Minimal traffic: read x, write y (w and b are N elements each, read once per
program). ~8 flops per element: memory-bound everywhere.

Same structure as the softmax template:
  _layernorm_rows   whole rows <= BLOCK_SIZE, a tile of rows per program
                    (w and b after the reductions on 16-bit rows over 2048:
                    WB_PER_TILE); 16-bit rows on a persistent grid whose
                    programs load their next tile before reducing this one
                    (see SHORT_TILE).
  _layernorm_row    rows over BLOCK_SIZE, up to WHOLE_ROW_MAX (32768): one
                    program per whole row, no loop (32 warps for rows over 32 KB,
                    w kept in L1 for rows over 64 KB: WIDE_ROW_BYTES, W_IN_L1_BYTES;
                    up to 16384 the warps that keep the most rows in flight:
                    ROW_WARPS).
  _layernorm_half_rows 16-bit rows of 32768, enough of them: two programs a row,
                    each half of it in registers as loaded, two elements a 32-bit
                    word; the halves trade (mean, M2) in one 64-bit word (see
                    HALF_ROW_WARPS).
  _layernorm_smem_team 16-bit rows over SMEM_TEAM_ABOVE, fp32 rows over
                    WHOLE_ROW_MAX, on NVIDIA GPUs: the split team, each
                    program's part of two rows in shared memory (Gluon,
                    cp.async), up to six programs an SM, each part's (mean, M2)
                    one 64-bit word that carries its row's iteration, two in
                    fp32 (the softmax template's _softmax_smem_team; see
                    SMEM_TEAM and 'fp32 rows on the team' beside it).
  _layernorm_split  longer fp32 rows the team cannot take (not in 16-element
                    groups): the row over P co-resident programs that
                    exchange (mean, M2) once per row, as the softmax template's
                    _softmax_split exchanges (max, sum): one read, one write
                    (see SPLIT for the figures).
  _layernorm_streamed longer 16-bit rows the shared-memory team cannot take (and
                    every longer row in Triton's interpreter, where a team would
                    wait forever): one program
                    per row, chunks' (mean, M2) merged over pipelined chunks,
                    then a second pass that re-reads: 1.5x traffic, yet faster
                    than the team in 16 bits (see STREAMED for the figures).
"""

import os
import warnings

import torch
import triton
import triton.language as tl

try:  # Gluon is experimental: absent from older Tritons, renamed between releases
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp

    copy_to_shared = getattr(cp, "async_load", None) or cp.async_copy_global_to_shared  # async_load from 3.9
    cta_barrier = getattr(gl, "thread_barrier", None) or gl.barrier  # barrier from 3.9
except (ImportError, AttributeError):
    gluon = None

CONFIG = {"BLOCK_SIZE": 4096, "num_warps": 4, "num_stages": 1, "PERSISTENT": 0}
CONFIG_SPACE = {
    "BLOCK_SIZE": [2048, 4096, 8192, 16384, 32768],
    "num_warps": [4, 8, 16, 32],
    "num_stages": [1, 2, 3],
    "PERSISTENT": [0, 1],
}
EPS = 1e-5
# Rows over BLOCK_SIZE and up to WHOLE_ROW_MAX elements go to _layernorm_row: one program per row, the
# whole row in registers, WHOLE_ROW_WARPS warps, no loop. Measured on the H200 (the whole-row A/Bs,
# df8b865:experiments/memory-bound/whole-rows/): at rows of 8192-32768 the split team reached 55-79% of copy,
# whole rows in the row-tile kernel (a loop over tiles, 2-D tiles) 69-98%, and this plain kernel,
# as Triton's tutorial writes it, 89-98% (softmax 16-bit 32768: 70%, the one shape where the row-tile
# kernel did better, 72%).
WHOLE_ROW_MAX = 32768
WHOLE_ROW_WARPS = 16
# Whole rows of more than WIDE_ROW_BYTES take WIDE_ROW_WARPS warps. Measured on the H200 (the near-miss A/Bs,
# df8b865:experiments/sweep-h200-2026-12-01/session9-near-misses/): at 8192x16384 fp32, 16 warps hold x, w
# and b at once (94-95 registers a thread with the H200's Triton 3.6, 128 with 3.9): one program an SM,
# 84.3% of copy. On 32 warps the same row takes 32 registers a thread, two programs share an SM: 96.0%.
# At 32768 (one program an SM either way) 32 warps read 81.4 -> 86.3% in fp32 and 75.6/74.4 ->
# 77.5/76.3% in fp16/bf16. 16-bit rows of 16384 (32 KB) fall to 55-57% on 32 warps (42 registers x 1024
# threads: one program an SM), so they keep 16.
WIDE_ROW_BYTES = 32 * 1024
WIDE_ROW_WARPS = 32
# Rows up to SMEM_TEAM_ABOVE that _layernorm_row takes on an NVIDIA GPU (but fp32 rows up to BLOCK_SIZE: see
# FP32_WHOLE_ROW_ABOVE): of ROW_WARPS, the warps whose compiled program keeps the most bytes of rows in
# flight an SM, up to IN_FLIGHT_BYTES, counting no more rows an SM than the grid gives it (ceil(M / SMs));
# ties to the warps above (WHOLE_ROW_WARPS, WIDE_ROW_WARPS), else to the most. Why: a program loads its
# row at once, then reduces and writes it with nothing in flight, so an SM streams only as many rows as it
# holds programs (registers permitting, _fit); past IN_FLIGHT_BYTES more rows bought nothing (the softmax
# template's ROW_WARPS). 16 warps held three 16-bit rows of 4544-5120 an SM (40 registers a thread), 8
# warps four (64). H100, one process, % of copy, main's 16 warps -> the rule's (the A/B,
# experiments/held-out-shapes/h100-row-dispatch/explore/, the tune half's shapes): 8192x4544 bf16 76.4 ->
# 86.1 (8 warps), 8192x5120 fp16 85.2 -> 93.5 (8); ties kept: 2048x14336 bf16 (8 and 16 warps hold two),
# 4096x6000 fp32 (98.2 on 16 warps, 96.7 on 8), 32x8192 bf16 (one row an SM at most).
ROW_WARPS = (4, 8, 16, 32)
IN_FLIGHT_BYTES = 64 * 1024
# Whole rows of more than W_IN_L1_BYTES (fp32 rows over 16384): x and b skip L1 (.cg), w is kept there
# (evict_last), y is streamed (.cs). Every program re-reads w and b; at 32768 fp32 they are 256 KB, more
# than L1 holds, so both came from L2 every row. w alone (128 KB) stays in L1: 86.3 -> 89.4% of copy at
# 4096x32768 fp32 on 32 warps (w and b both kept: 88.1%; 89.2% in the confirming sweep). In 16-bit at
# 32768 (w and b 128 KB together) it read 1.5-2 points less than the plain loads, hence the limit.
W_IN_L1_BYTES = 64 * 1024
# 16-bit rows over WHOLE_ROW_MAX go to the streamed kernel. Measured on the H200 at rows of 65536-262144
# (the long-row A/Bs, df8b865:experiments/long-rows-h200/run1 and run2), against the split team on CONFIG's
# chunk and warps: in bf16 60-67% of copy against 34-48%. STREAMED is the leader of run1's 10 configurations.
STREAMED = {"BLOCK_N": 8192, "num_warps": 8, "num_stages": 3}
# fp32 rows over WHOLE_ROW_MAX go to the split team on SPLIT's chunk and warps. On the H200 (the team's A/B
# runs, df8b865:experiments/sweep-h200-2026-12-01/session10-reduce-once/team-layernorm/), 8192-element chunks on 4 warps
# read 73.7 / 73.1 / 71.9% of copy at rows of 65536 / 131072 / 262144, where the streamed kernel (which
# served them) read 65.7 / 61.3 / 60.7% and the team on CONFIG's 4096 and 4 warps (deleted for losing
# to the streamed kernel, commit 01227bd) 60.8 / 61.1 / 56.9%. In bf16 every team setting read 33-53%.
SPLIT = {"BLOCK_N": 8192, "num_warps": 4}
# 16-bit rows over SMEM_TEAM_ABOVE go to _layernorm_smem_team on NVIDIA GPUs (Gluon): parts of NCH chunks
# of CHUNK elements, num_warps warps, up to PROGRAMS_PER_SM programs an SM, each part's w and b held in
# shared memory beside two rows of x. On the H200 (the per-kernel sweep when it landed,
# df8b865:experiments/sweep-h200-2026-12-01/session11-smem/sweep-layernorm-final/) it read 81.4 / 84.3% of
# copy in bf16 / fp16 at 4096x32768 (the whole row: 77.1 / 79.0), 80.1-80.4 / 83.1-83.5% at 65536-131072 and
# 74.6 / 77.0% at 262144 (the streamed kernel: 60-66%). Measured on the way (its A/B runs beside it:
# team-norms/, layernorm-one-pass/, layernorm-w-smem/):
# - w and b read from L2 with every output chunk, 8192-element parts, four to five programs an SM:
#   76.7-77.3 / 80.6-81.5% at 65536-262144; 72.6-74.0% at 32768, under the whole row.
# - the same with each chunk's (mean, M2) merged in one pass and w and b loaded after the refill (fewer
#   registers on paper): 69.8-71.6%. The loads' latency, no longer hidden, cost more than the
#   registers saved.
# - w and b in shared memory on 8192-element parts: 64 KB a program, three an SM: 69.8-72.7%. On
#   4096-element parts: 32 KB, six an SM, as above; 2048-element parts read 57-69%.
SMEM_TEAM_ABOVE = 16384
SMEM_TEAM = {"CHUNK": 4096, "NCH": 1, "num_warps": 4, "PROGRAMS_PER_SM": 8, "maxnreg": 80}
# maxnreg: the team is compiled with at most 80 registers a thread where that fits more programs on an SM
# (shared memory lets six). Reading bf16 as int32 pairs (_bf16_pairs) took Triton 3.6 to 96 registers at
# rows of 32768-65536 and 86 at 262144 (five programs an SM); capped, six. H200, bf16, % of copy (the A/B,
# df8b865:experiments/sweep-h200-session17/call2-bf16-pairs/): 4096x32768 80.2 -> 83.3, 2048x65536 79.0 -> 82.0,
# 1024x131072 79.0 -> 82.9 (72 registers uncapped: no cap), 512x262144 74.0 -> 75.8; fp16 83.2 / 82.0 /
# 82.7 / 77.7 in the same run. Pairs uncapped lost 2 points where they cost a program an SM.
# Unmasked rows (EVEN of _layernorm_smem_team and _layernorm_row): no column masks where a row's length is a
# multiple of the team's part, or is the whole row's BLOCK_N (there only where that costs no program an SM:
# unmasked, fp32 rows of 16384 on 32 warps took 35 registers for 32, one program an SM for two, 96.7 ->
# 87.9% of copy). Compiled for sm_90 by Triton 3.6, the team at 32768 drops 2176 -> 1944 SASS instructions
# in fp16 (2104 -> 1976 in bf16) and the whole fp32 row of 32768 496 -> 336. H200, % of copy, before ->
# after, A/B in one process (its runs, df8b865:experiments/sweep-h200-session19/call1-template-ab/ and
# call2-even-or-not/ beside): fp32 4096x32768 89.4 -> 94.5; the
# team, bf16 / fp16, 4096x32768 83.8 / 84.5 -> 84.9 / 85.6, 2048x65536 82.8 / 83.5 -> 84.2 / 84.5,
# 1024x131072 85.1 / 85.1 -> 86.5 / 87.5, 512x262144 78.6 / 79.6 -> 80.0 / 81.8.
# fp32 rows on the team: fp32 rows over WHOLE_ROW_MAX (up to it the whole row in registers read 98% of copy)
# whose length, stride and start are in 16-element groups go to the team too, its chunk the same bytes
# (CHUNK counts 16-bit elements: 2048 fp32), (mean, M2) traded whole in two stamped words (EXACT): one word
# with a stamp in M2's low bits keeps 15 of its 23 mantissa bits, 3e-5 relative, past an fp32 output's
# rounding. Why: _layernorm_split, which took them, reads 83.1-84.1% of copy at 65536-262144 on the H100
# (experiments/held-out-shapes/h100-aligned-body/layernorm-sweep.txt), where the 16-bit team reads 94.2-95.9.
# Compiled for sm_90 by Triton 3.6, SPLIT's chunk of 8192 on 4 warps holds x, the next row's x, w and b, 64
# values a thread each: 255 registers and spills, two programs an SM, each with nothing in flight from its
# reduction of the next row through its wait and its stores; the team keeps row i + 2 in flight through all
# of that, six programs an SM (64-72 registers, 32 KB of shared memory), a thread's run 16 bytes as in 16
# bits (VEC). On the H100 the team read 94.4-94.9% of copy there (the split 83.4-85.0%, same process), as
# predicted: experiments/held-out-shapes/fp32-smem-team/.
UNSTAMPED = tl.constexpr(0xFF)  # the stamp of a word no partial has written (partials carry their iteration % 128)
MAX_SPIN = 1 << 20  # bounded wait (~1 s), then give up: wrong output, which the harness catches, never a hang
# A program of one tile (PERSISTENT 0) on 16-bit rows over WB_PER_TILE_ABOVE loads w and b after the
# row's reductions (WB_PER_TILE), so that they hold no registers while x is in flight: at 4096 on 4
# warps 64 registers a thread instead of 122, eight programs an SM instead of four. H200, 32768x4096: 78.6 /
# 80.9% of copy -> 95.7 / 95.4% (bf16 / fp16) in the A/B (df8b865:experiments/sweep-h200-session16/call2-late-wb/),
# 95.3 / 95.4% in the run of all eight kernels (experiments/sweep-h200/sweep.md), where the persistent grid
# that served these rows before, two rows a tile over three stages, read 89.7-90.0. The same loads
# cost 2-3 points where w and b were no burden: fp32 rows of 4096 read 95.9% against 98.0 and 16-bit
# rows of 1024 95.1-96.2 against 96.8-97.3 (the sweep after, df8b865:experiments/sweep-h200-session16/call3-sweep/,
# against the one before, df8b865:experiments/sweep-h200-session15/call4-sweep/). A persistent
# program keeps its w and b for all its tiles.
WB_PER_TILE_ABOVE = 2048
# 16-bit rows whose BLOCK_N is within SHORT_ROWS (rows of 513 to 4096 elements, up to BLOCK_SIZE), x of at most
# SHORT_MAX_BYTES_PER_SM an SM, on an NVIDIA GPU, unless a config is passed: tiles of at least SHORT_TILE
# elements (ROWS = SHORT_TILE // BLOCK_N), 16 a thread (num_warps = ROWS * BLOCK_N / 512), on a persistent grid
# (as many programs as fit the GPU at once) whose programs load their next tile into registers before they reduce
# this one (PREFETCH); w and b once a program up to WB_PER_TILE_ABOVE, after the reductions above it. Why:
# CONFIG's tile of 4096 elements on 4 warps (32 a thread) loads once, then reduces with nothing in flight, its
# SM's loads idle while its programs reduce together; a prefetching program has its next tile in flight through
# its reductions. H100, one process (the A/B, experiments/held-out-shapes/h100-row-dispatch/explore/: the tune
# half's shapes and synthetic ones), main -> the rule, % of copy: 8192x1280 bf16 76.1 -> 84.6, 8192x768 bf16 67.1
# -> 72.3, 8192x1000 fp16 63.8 -> 69.6, 16384x1536 fp16 92.2 -> 92.8, 8192x2048 bf16 95.2 -> 96.9, 8192x3072 fp16
# 95.6 -> 96.5; us: 64x1600 bf16 5.81 -> 5.18, 128x2048 fp16 5.66 -> 5.20. w and b loaded after the reductions
# took 0.4-20% longer at 768-2048 (8192x1280: 17.89 against 16.26 us; 16384x1536, 3.7% shorter, the exception)
# and 4.8% shorter at 3072. The best one-tile-a-program choice of each shape (2-16 warps, 1-8 rows) took 0.6-8.8%
# longer than the rule, but at 16384x1536 (2 rows on 4 warps, 5% shorter). The gain shrank as x grew (8192 rows
# of 768-1280: 7-12%; 16384x1536, 0.38 MB an SM: 0.7%) and turned at the kernel test's own shapes, 2 MB an SM:
# 131072x1024 bf16 / fp16 100.4 -> 95.5 / 95.4% of copy, 32768x4096 99.5 / 99.6 -> 96.3 / 96.1 (the sweep after
# the rule, experiments/held-out-shapes/h100-row-dispatch/sweep/), hence SHORT_MAX_BYTES_PER_SM between them. Our
# reading, not measured apart: a persistent grid spares a launch's ramp and ragged last wave, a fixed cost, while
# its loop streams 3-5% slower than a grid of one tile a program.
SHORT_ROWS = (1024, 4096)
SHORT_TILE = 2048
SHORT_MAX_BYTES_PER_SM = 1 << 20
# 16-bit rows of a power of two over SMEM_TEAM_ABOVE, up to WHOLE_ROW_MAX (32768), go to
# _layernorm_half_rows where four of its programs share an SM and they make at least HALF_ROW_MIN_WAVES waves
# (rows x 2 over the programs the GPU holds at once): programs 2r and 2r + 1 hold the first and second half
# of row r as it was loaded, 32-bit words of two elements, HALF_ROW_WARPS warps. Each pass unpacks its own
# fp32 values from `words ^ zero` (the softmax template's _softmax_row_pairs), so no converted half lives
# across a reduction; each half takes its mean and M2 (the sum of squares about that mean), posts them as one
# 64-bit word and takes its partner's (Chan's merge: M2 = M2a + M2b + (ma - mb)^2 N / 4); y's pairs are
# converted joined (one F2FP a pair); w and b stay in L1, x and y pass it by. Compiled for sm_90 by Triton
# 3.6: 57-59 registers on 8 warps, four programs an SM. Why halves: a whole row a program (two an SM, 121
# registers, the rows in pairs) read 98.6-98.9% of copy a row but cost 14.7-15.1 us a call besides, about 1.8
# times one program's row, whatever the last wave's fill: every program loads its first row at once and
# nothing is written, and the last rows run on an emptying GPU. Half the work a program, half that cost.
# H200, % of copy, bf16 / fp16, two rounds in one process (the A/B script
# df8b865:benchmarks/explore/layernorm_half_rows.py and its runs, df8b865:experiments/sweep-h200-session21/),
# the halves against what served the rows before (the shared-memory team up to 2048 rows, then the whole row
# in pairs): 1024x32768 75.1-75.2 / 77.0-77.6 against 75.0 / 75.9-76.1, 2048x32768 84.3 / 86.4-86.5 against
# 82.0-82.2 / 82.8-82.9, 3072x32768 88.0 / 90.0 against 85.3 / 84.7-84.8, 4096x32768 90.0-90.2 / 91.9-92.3
# against 88.6 / 88.4-88.6 (bf16 now 91.1: see below), 8192x32768 92.6-92.8 / 94.3-94.4 against 92.9 /
# 92.3-92.4, 16384x32768 94.4-94.5 / 96.2-96.3 against 95.3 / 95.1 (the one shape the whole row keeps, by 0.9
# in bf16: not worth a second kernel). At 512x32768 (1.9 waves) the team leads (63.5 / 64.5 against 61.3-61.8
# / 63.1-63.4). What did not pay: the posts and takes as release / acquire atomics (77.4-80.5 at 4096x32768:
# each fence waits out the program's traffic), 4 warps (72-73) or 16 (84-87), halves of rows of 65536
# (70.8-80.5 against the team's 79.7-84.7). bf16 trailed fp16 by 2 points: converting a bf16 takes three SASS
# instructions where fp16's takes one (1272 against 1112 for the kernel). Unpacked by a shift and a mask
# (_unpair), one instruction, in every pass but the second (there ptxas then held 86 registers: two programs
# an SM): 1136 instructions, 62 registers, four programs. H200, before -> after in one process (the A/B,
# df8b865:experiments/sweep-h200-session21/call11-ab-bf16-shifts/): bf16 4096x32768 90.0-90.1 -> 91.1-91.2,
# 2048x32768 84.3-84.4 -> 85.1-85.3, 8192x32768 92.4-92.6 -> 93.5; fp16 and fp32 level.
HALF_ROW_WARPS = 8
HALF_ROW_MIN_WAVES = 3
HALF_ROW_PROGRAMS_PER_SM = 4
# A half-row word nobody has posted. No fp32 mean has all 32 bits set, and those bits are a NaN: a half
# whose partner never came (after MAX_SPIN tries) merges NaN and writes it, wrong but never a hang.
NO_HALF = tl.constexpr(-1)


def layernorm_ref(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), w.double(), b.double(), eps)


@triton.jit
def _centred(x, ok, N, eps):
    # a tile of whole rows, loaded (0 where masked): x - mean (0 where masked) and 1 / std, row by row
    x = x.to(tl.float32)
    mean = tl.sum(x, axis=1) / N
    d = tl.where(ok, x - mean[:, None], 0.0)
    return d, 1.0 / tl.sqrt(tl.sum(d * d, axis=1) / N + eps)


@triton.jit
def _layernorm_rows(x_ptr, w_ptr, b_ptr, y_ptr, M, N, stride_x, stride_y, eps,
                    BLOCK_N: tl.constexpr, ROWS: tl.constexpr, NUM_STAGES: tl.constexpr,
                    WB_PER_TILE: tl.constexpr, PREFETCH: tl.constexpr = False):
    # PREFETCH: the program's next tile is loaded before this one is reduced, into registers, whatever
    # the rows' alignment (Triton's pipeline, NUM_STAGES, copies only 4-byte-aligned groups).
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    if not WB_PER_TILE:  # a persistent program loads w and b once for all its tiles
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    if PREFETCH:
        rows = pid * ROWS + tl.arange(0, ROWS)
        ok = (rows[:, None] < M) & col_ok[None, :]
        x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * stride_x + cols[None, :], mask=ok, other=0.0)
        for tile in tl.range(pid, tl.cdiv(M, ROWS), nprog):
            nxt = (tile + nprog) * ROWS + tl.arange(0, ROWS)
            nxt_ok = (nxt[:, None] < M) & col_ok[None, :]
            x_next = tl.load(x_ptr + nxt.to(tl.int64)[:, None] * stride_x + cols[None, :], mask=nxt_ok, other=0.0)
            d, rstd = _centred(x, ok, N, eps)
            if WB_PER_TILE:
                w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
                b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
            y = d * rstd[:, None] * w[None, :] + b[None, :]
            rows64 = (tile * ROWS + tl.arange(0, ROWS)).to(tl.int64)[:, None]
            tl.store(y_ptr + rows64 * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=ok)
            x = x_next
            ok = nxt_ok
    else:
        for tile in tl.range(pid, tl.cdiv(M, ROWS), nprog, num_stages=NUM_STAGES):
            rows = tile * ROWS + tl.arange(0, ROWS)
            ok = (rows[:, None] < M) & col_ok[None, :]
            rows64 = rows.to(tl.int64)[:, None]
            d, rstd = _centred(tl.load(x_ptr + rows64 * stride_x + cols[None, :], mask=ok, other=0.0), ok, N, eps)
            if WB_PER_TILE:  # loaded after the reductions: no registers held for them while x is in flight
                w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
                b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
            y = d * rstd[:, None] * w[None, :] + b[None, :]
            tl.store(y_ptr + rows64 * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _layernorm_row(x_ptr, w_ptr, b_ptr, y_ptr, N, stride_x, stride_y, eps, BLOCK_N: tl.constexpr,
                   W_IN_L1: tl.constexpr, EVEN: tl.constexpr):
    # EVEN: N == BLOCK_N, no column needs a mask (see 'Unmasked rows' by SMEM_TEAM)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    ok = None if EVEN else cols < N
    # W_IN_L1 (see W_IN_L1_BYTES): L1 keeps w across rows; x, b and y pass it by
    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=None if EVEN else 0.0,
                cache_modifier=".cg" if W_IN_L1 else "").to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = x - mean if EVEN else tl.where(ok, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=ok, other=None if EVEN else 0.0,
                eviction_policy="evict_last" if W_IN_L1 else "").to(tl.float32)
    b = tl.load(b_ptr + cols, mask=ok, other=None if EVEN else 0.0, cache_modifier=".cg" if W_IN_L1 else "")
    tl.store(y_ptr + row * stride_y + cols, (d * rstd * w + b.to(tl.float32)).to(y_ptr.dtype.element_ty), mask=ok,
             cache_modifier=".cs" if W_IN_L1 else "")


@triton.jit
def _unpair(words, dtype: tl.constexpr, CONVERT: tl.constexpr = False):
    # 32-bit words of two 16-bit elements of `dtype` (the lower address in the low half): both as fp32.
    # A bf16 is an fp32's high half: a shift and a mask, one instruction an element where converting takes
    # three. CONVERT: convert anyway (where the shifts cost registers: see _layernorm_half_rows).
    if dtype == tl.bfloat16 and not CONVERT:
        return (words << 16).to(tl.float32, bitcast=True), (words & -65536).to(tl.float32, bitcast=True)
    lo = words.to(tl.int16).to(dtype, bitcast=True).to(tl.float32)
    hi = (words >> 16).to(tl.int16).to(dtype, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _layernorm_half_rows(x_ptr, w_ptr, b_ptr, y_ptr, words_ptr, N, stride_x, stride_y, eps, zero,
                         HALF: tl.constexpr, SPIN: tl.constexpr):
    # Programs 2r and 2r + 1 take row r's first and second HALF elements (see HALF_ROW_WARPS). `zero` is 0,
    # an argument the compiler cannot see through: the later passes unpack `words ^ zero` and
    # `words ^ (zero >> 1)`, values it cannot prove equal to `words`, so it converts them again instead of
    # holding an fp32 half row (twice the words' registers) across the reductions.
    pid = tl.program_id(0)
    row = (pid // 2).to(tl.int64)
    start = (pid % 2) * (HALF // 2)  # in words
    offs = start + tl.arange(0, HALF // 2)
    dtype = x_ptr.dtype.element_ty
    words = tl.load(x_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + row * (stride_x // 2) + offs,
                    cache_modifier=".cg")
    lo, hi = _unpair(words, dtype)
    mean = (tl.sum(lo, axis=0) + tl.sum(hi, axis=0)) / HALF
    # the second pass converts bf16: by shifts there too, ptxas held 86 registers, two programs an SM
    lo, hi = _unpair(words ^ zero, dtype, CONVERT=True)
    lo = lo - mean
    hi = hi - mean
    m2 = tl.sum(lo * lo, axis=0) + tl.sum(hi * hi, axis=0)
    theirs = _trade_halves(words_ptr, pid, mean, m2, SPIN)
    their_mean = (theirs >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    their_m2 = theirs.to(tl.int32).to(tl.float32, bitcast=True)
    d = mean - their_mean
    rstd = 1.0 / tl.sqrt((m2 + their_m2 + d * d * (HALF * 0.5)) / N + eps)
    mean = (mean + their_mean) * 0.5
    lo, hi = _unpair(words ^ (zero >> 1), dtype)
    wl, wh = _unpair(tl.load(w_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + offs, eviction_policy="evict_last"),
                     dtype)
    bl, bh = _unpair(tl.load(b_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + offs, eviction_policy="evict_last"),
                     dtype)
    # y's pairs joined before their conversion: two convert in one instruction (F2FP on sm_90)
    y = tl.reshape(tl.join((lo - mean) * rstd * wl + bl, (hi - mean) * rstd * wh + bh), (HALF,))
    tl.store(y_ptr + row * stride_y + 2 * start + tl.arange(0, HALF), y.to(y_ptr.dtype.element_ty),
             cache_modifier=".cs")


@triton.jit
def _trade_halves(words_ptr, pid, mean, m2, SPIN: tl.constexpr):
    # Post this half's (mean, M2) as one word (mean's bits high) and take the partner's (program pid ^ 1),
    # leaving NO_HALF in its place: a launch leaves the words as it found them (CUDA graphs replay safely).
    # Each word carries its own data, so relaxed atomics do: a release would wait for this program's
    # traffic to drain (77-80% of copy at 4096x32768 against 90-92). After SPIN tries the program withdraws
    # its post, unless the partner already took it (its own post then came first: wait for that once more).
    mine = (mean.to(tl.int32, bitcast=True).to(tl.int64) << 32) | (m2.to(tl.int32, bitcast=True).to(tl.int64)
                                                                  & 0xFFFFFFFF)
    tl.atomic_xchg(words_ptr + pid, mine, sem="relaxed")
    theirs = tl.atomic_xchg(words_ptr + (pid ^ 1), NO_HALF, sem="relaxed")
    spins = 0
    while (theirs == NO_HALF) & (spins < SPIN):
        theirs = tl.atomic_xchg(words_ptr + (pid ^ 1), NO_HALF, sem="relaxed")
        spins += 1
    if theirs == NO_HALF:
        if tl.atomic_xchg(words_ptr + pid, NO_HALF, sem="relaxed") == NO_HALF:
            spins = 0
            while (theirs == NO_HALF) & (spins < SPIN):
                theirs = tl.atomic_xchg(words_ptr + (pid ^ 1), NO_HALF, sem="relaxed")
                spins += 1
    return theirs


@triton.jit
def _layernorm_split(x_ptr, w_ptr, b_ptr, y_ptr, ws_ptr, flag_ptr, M, N, stride_x, stride_y, eps,
                     BLOCK_N: tl.constexpr, P: tl.constexpr, P_POW2: tl.constexpr, MAX_SPIN: tl.constexpr):
    # The exchange protocol of the softmax template's _softmax_split: publish
    # row i+1's partial (flag = i + 2) before waiting for the siblings' row-i
    # partials (flags >= i + 1); 4 buffers of partials, indexed by iteration % 4.
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    team = pid // P
    part = pid % P
    n_teams = G // P
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = cols < N
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    n_here = tl.minimum(N - part * BLOCK_N, BLOCK_N).to(tl.float32)  # elements in this chunk
    slots = tl.arange(0, P_POW2)
    slot_ok = slots < P
    n_slot = tl.minimum(tl.maximum(N - slots * BLOCK_N, 0), BLOCK_N).to(tl.float32)
    my_flag = flag_ptr + pid
    team_flags = flag_ptr + team * P + slots
    exit_ptr = flag_ptr + G + team

    xf = tl.load(x_ptr + tl.cast(team, tl.int64) * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    cmean = tl.sum(xf, axis=0) / n_here
    cd = tl.where(ok, xf - cmean, 0.0)
    tl.store(ws_ptr + (team * 4 * P + part) * 2, cmean)
    tl.store(ws_ptr + (team * 4 * P + part) * 2 + 1, tl.sum(cd * cd, axis=0))
    tl.debug_barrier()
    tl.atomic_xchg(my_flag, 1, sem="release")
    it = 0
    for row in range(team, M, n_teams):
        nxt = row + n_teams
        xn = tl.load(x_ptr + tl.cast(nxt, tl.int64) * stride_x + cols, mask=ok & (nxt < M), other=0.0).to(tl.float32)
        nmean = tl.sum(xn, axis=0) / n_here
        nd = tl.where(ok, xn - nmean, 0.0)
        nbuf = ws_ptr + ((team * 4 + (it + 1) % 4) * P + part) * 2
        tl.store(nbuf, nmean)
        tl.store(nbuf + 1, tl.sum(nd * nd, axis=0))
        tl.debug_barrier()
        tl.atomic_xchg(my_flag, it + 2, sem="release")
        f = tl.where(slot_ok, tl.atomic_add(team_flags, 0, mask=slot_ok, sem="acquire"), it + 1)
        spins = 0
        while (tl.min(f, axis=0) < it + 1) & (spins < MAX_SPIN):
            f = tl.where(slot_ok, tl.atomic_add(team_flags, 0, mask=slot_ok, sem="acquire"), it + 1)
            spins += 1
        tl.debug_barrier()
        buf = ws_ptr + (team * 4 + it % 4) * P * 2
        pmean = tl.load(buf + slots * 2, mask=slot_ok, other=0.0, volatile=True)
        pm2 = tl.load(buf + slots * 2 + 1, mask=slot_ok, other=0.0, volatile=True)
        # Chan et al.: M2 = sum_c [M2_c + n_c (mean_c - mean)^2]
        mean = tl.sum(pmean * n_slot, axis=0) / N
        dm = pmean - mean
        rstd = 1.0 / tl.sqrt(tl.sum(pm2 + n_slot * dm * dm, axis=0) / N + eps)
        y = (xf - mean) * rstd * w + b
        tl.store(y_ptr + tl.cast(row, tl.int64) * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=ok)
        xf = xn
        it += 1
    done = tl.atomic_add(exit_ptr, 1, sem="acq_rel")
    if done == P - 1:
        tl.atomic_xchg(team_flags, tl.zeros([P_POW2], tl.int32), mask=slot_ok, sem="relaxed")
        tl.atomic_xchg(exit_ptr, 0, sem="release")


if gluon is not None:
    @gluon.jit
    def _publish(words, team, part, it, mean, m2, P: gl.constexpr, EXACT: gl.constexpr):
        # This program's (mean, M2) of the row of iteration `it` as one 64-bit word: mean's bits, then
        # M2's (>= 0) with their low 8 bits replaced by it % 128 (M2 keeps 15 of its 23 mantissa bits:
        # 3e-5 relative, under a 16-bit output's rounding). The word is its own flag: no fence orders it
        # behind this program's outstanding stores. Buffer it % 4: a program runs at most two rows ahead
        # of a sibling. EXACT (fp32 rows, whose output would carry that 3e-5): two words, mean's bits and
        # M2's whole, each stamped in its low half: a team's words are 8 P, its M2s 4 P after its means.
        if EXACT:
            at = words + (team * 8 + it % 4) * P + part
            gl.atomic_xchg(at, (mean.to(gl.int32, bitcast=True).to(gl.int64) << 32) | (it & 0x7F), sem="relaxed")
            gl.atomic_xchg(at + 4 * P, (m2.to(gl.int32, bitcast=True).to(gl.int64) << 32) | (it & 0x7F),
                           sem="relaxed")
        else:
            lo = (m2.to(gl.int32, bitcast=True) & 0x7FFFFF00) | (it & 0x7F)
            word = (mean.to(gl.int32, bitcast=True).to(gl.int64) << 32) | lo.to(gl.int64)
            gl.atomic_xchg(words + (team * 4 + it % 4) * P + part, word, sem="relaxed")

    @gluon.jit
    def _unstamped(w, it, slots, P: gl.constexpr):
        # whether a word of slots < P lacks the stamp of iteration `it`
        return gl.min((((w & 0xFF).to(gl.int32) == (it & 0x7F)) | (slots >= P)).to(gl.int32), axis=0) == 0

    @gluon.jit
    def _gather(words, team, it, slots, P: gl.constexpr, SPIN: gl.constexpr, EXACT: gl.constexpr):
        # Every sibling's (mean, M2) of the row of iteration `it`, once all words carry its stamp (EXACT:
        # both words of each, see _publish).
        ok = slots < P
        # Volatile loads, not atomic reads: an aligned 64-bit load is single-copy atomic too, and a word
        # polled by every sibling is no longer an atomic target serialized in its L2 slice (layernorm
        # 512x262144: +2-3 points of copy in its A/B, df8b865:experiments/sweep-h200-session18/call4-team-gather/).
        if EXACT:
            at = words + (team * 8 + it % 4) * P + slots
            w = gl.load(at, mask=ok, other=0, volatile=True)
            v = gl.load(at + 4 * P, mask=ok, other=0, volatile=True)
            spins = 0
            while (_unstamped(w, it, slots, P) | _unstamped(v, it, slots, P)) & (spins < SPIN):
                w = gl.load(at, mask=ok, other=0, volatile=True)
                v = gl.load(at + 4 * P, mask=ok, other=0, volatile=True)
                spins += 1
            means = gl.where(ok, (w >> 32).to(gl.int32).to(gl.float32, bitcast=True), 0.0)
            m2s = gl.where(ok, (v >> 32).to(gl.int32).to(gl.float32, bitcast=True), 0.0)
        else:
            at = words + (team * 4 + it % 4) * P + slots
            w = gl.load(at, mask=ok, other=0, volatile=True)
            spins = 0
            while _unstamped(w, it, slots, P) & (spins < SPIN):
                w = gl.load(at, mask=ok, other=0, volatile=True)
                spins += 1
            means = gl.where(ok, (w >> 32).to(gl.int32).to(gl.float32, bitcast=True), 0.0)
            m2s = gl.where(ok, (w & 0x7FFFFF00).to(gl.int32).to(gl.float32, bitcast=True), 0.0)
        return means, m2s

    if hasattr(gl.shared_memory_descriptor, "reinterpret"):  # public from Triton 3.9
        @gluon.jit
        def _as_int32(chunk, shape: gl.constexpr, layout: gl.constexpr):
            return chunk.reinterpret(gl.int32, shape, layout)
    else:
        @gluon.jit
        def _as_int32(chunk, shape: gl.constexpr, layout: gl.constexpr):
            return chunk._reinterpret(gl.int32, shape, layout)

    @gluon.jit
    def _bf16_pairs(chunk, CHUNK: gl.constexpr):
        # A bf16 chunk in shared memory read as int32 pairs, each pair as two fp32s (the low element's,
        # the high one's). A bf16 is the high half of an fp32, so each takes one instruction, where the
        # compiler's own unpack takes 1.5 a value on sm_90 (PRMT then SHF for a high half): that left the
        # bf16 team 3-4 points behind fp16 (the team compiled offline: df8b865:benchmarks/explore/team_sass.py).
        pair_layout: gl.constexpr = gl.BlockedLayout([4], [32], [gl.num_warps()], [0])
        pairs = _as_int32(chunk, [CHUNK // 2], gl.SwizzledSharedLayout(1, 1, 1, order=[0])).load(pair_layout)
        return (pairs << 16).to(gl.float32, bitcast=True), (pairs & -65536).to(gl.float32, bitcast=True)

    @gluon.jit
    def _chunk_sum(chunk, first_col, N, centre, SQUARE: gl.constexpr, CHUNK: gl.constexpr,
                   layout: gl.constexpr, PAIRS: gl.constexpr, EVEN: gl.constexpr):
        # The sum over the chunk's columns below N of x - centre, or of (x - centre)^2 if SQUARE. With
        # PAIRS (bf16) the chunk is read as int32 pairs: a row's length is a multiple of 16 here, so a
        # pair is never cut by N, and a sum does not care in which order it meets the values. EVEN: no
        # column of the chunk is past N (see 'Unmasked rows' by SMEM_TEAM).
        if PAIRS:
            lo, hi = _bf16_pairs(chunk, CHUNK)
            lo -= centre
            hi -= centre
            v = lo * lo + hi * hi if SQUARE else lo + hi
            ok = first_col // 2 + gl.arange(0, CHUNK // 2, lo.type.layout) < N // 2
        else:
            x = chunk.load(layout).to(gl.float32) - centre
            v = x * x if SQUARE else x
            ok = first_col + gl.arange(0, CHUNK, layout) < N
        if EVEN:
            return gl.sum(v, axis=0)
        return gl.sum(gl.where(ok, v, 0.0), axis=0)

    @gluon.jit
    def _part_mean_m2(buf, first: gl.constexpr, part_col, N, n_part, NCH: gl.constexpr, CHUNK: gl.constexpr,
                      layout: gl.constexpr, PAIRS: gl.constexpr, EVEN: gl.constexpr):
        # The part's mean, then its M2 around that mean: two passes over shared memory
        s = 0.0
        for c in gl.static_range(NCH):
            s += _chunk_sum(buf.index(first + c), part_col + c * CHUNK, N, 0.0, False, CHUNK, layout, PAIRS, EVEN)
        mean = s / n_part
        cta_barrier()  # read the chunks again rather than hold the first pass in registers (see SMEM_TEAM)
        m2 = s * 0.0
        for c in gl.static_range(NCH):
            m2 += _chunk_sum(buf.index(first + c), part_col + c * CHUNK, N, mean, True, CHUNK, layout, PAIRS,
                             EVEN)
        return mean, m2

    @gluon.jit
    def _layernorm_smem_team(x_ptr, w_ptr, b_ptr, y_ptr, words, exits, M, N, stride_x, stride_y, eps,
                             CHUNK: gl.constexpr, NCH: gl.constexpr, P: gl.constexpr, P_POW2: gl.constexpr,
                             SPIN: gl.constexpr, PAIRS: gl.constexpr, EVEN: gl.constexpr, EXACT: gl.constexpr,
                             VEC: gl.constexpr):
        # Program `part` of team `team` owns columns [part * NCH * CHUNK, (part + 1) * NCH * CHUNK) of
        # rows team, team + n_teams, ...; shared memory holds that part of two rows (halves 0 and 1 of
        # buf, NCH chunks each, one cp.async commit group a chunk). Row i+1's (mean, M2) goes out before
        # the wait for row i's siblings, whose P pairs combine by Chan's formula; while it writes row i,
        # each chunk it has read is refilled with row i+2. The part's w and b stay in shared memory.
        # PAIRS (bf16): every chunk of x, w and b is read as int32 pairs (_bf16_pairs). EVEN: N is a
        # multiple of the part, so no column is masked (see 'Unmasked rows' by SMEM_TEAM). EXACT (fp32):
        # (mean, M2) traded whole, in two words (see _publish). VEC: a thread's run of elements, 16 bytes:
        # one 16-byte cp.async, shared load and store each, consecutive threads' runs adjacent, so that a
        # quarter warp's shared accesses cover 128 contiguous bytes (in fp32, runs of 8 would put 32 bytes
        # between threads: two-way bank conflicts on every shared access).
        layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [gl.num_warps()], [0])
        slot_layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
        PART: gl.constexpr = NCH * CHUNK
        buf = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [2 * NCH, CHUNK],
                                        gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        pid = gl.program_id(0)
        G = gl.num_programs(0)
        team = pid // P
        part = pid % P
        n_teams = G // P
        offs = part * PART + gl.arange(0, CHUNK, layout)
        slots = gl.arange(0, P_POW2, slot_layout)
        zeros = gl.zeros([P_POW2], gl.int32, slot_layout)  # Triton 3.6's atomics take no scalar operand
        n_part = gl.minimum(N - part * PART, PART).to(gl.float32)  # the last part may be short
        n_parts = gl.minimum(gl.maximum(N - slots * PART, 0), PART).to(gl.float32)

        # this program's part of w and b, for every row: copied first, so that the rows' wait_group
        # counts below cover it
        w_part = gl.allocate_shared_memory(w_ptr.dtype.element_ty, [NCH, CHUNK],
                                           gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        b_part = gl.allocate_shared_memory(b_ptr.dtype.element_ty, [NCH, CHUNK],
                                           gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        for c in gl.static_range(NCH):
            cols = c * CHUNK + offs
            copy_to_shared(w_part.index(c), w_ptr + cols, mask=cols < N)
            copy_to_shared(b_part.index(c), b_ptr + cols, mask=cols < N)
            cp.commit_group()
        for h in gl.static_range(2):  # rows team and team + n_teams (no more teams than rows)
            r = team + h * n_teams
            src = x_ptr + r.to(gl.int64) * stride_x
            for c in gl.static_range(NCH):
                cols = c * CHUNK + offs
                copy_to_shared(buf.index(h * NCH + c), src + cols, mask=(cols < N) & (r < M))
                cp.commit_group()
        cp.wait_group(NCH)  # the first row's groups (the second row's may still be in flight)
        cta_barrier()  # every thread's copies, not only this one's
        mean, m2 = _part_mean_m2(buf, 0, part * PART, N, n_part, NCH, CHUNK, layout, PAIRS, EVEN)
        _publish(words, team, part, 0, mean, m2, P, EXACT)

        # two rows an iteration, so that each half of buf is named by a constant (Triton 3.6 does not
        # compile a runtime index here)
        it = 0
        for pair in range(team, M, 2 * n_teams):
            for half in gl.static_range(2):
                row = pair + half * n_teams
                if row < M:
                    cp.wait_group(0)  # the next row's groups are the only ones outstanding
                    cta_barrier()
                    mean, m2 = _part_mean_m2(buf, (1 - half) * NCH, part * PART, N, n_part, NCH, CHUNK, layout,
                                             PAIRS, EVEN)
                    _publish(words, team, part, it + 1, mean, m2, P, EXACT)
                    means, m2s = _gather(words, team, it, slots, P, SPIN, EXACT)
                    row_mean = gl.sum(n_parts * means, axis=0) / N
                    d = means - row_mean  # slots past P: n_parts is 0 there, so their terms vanish
                    rstd = 1.0 / gl.sqrt((gl.sum(m2s, axis=0) + gl.sum(n_parts * d * d, axis=0)) / N + eps)
                    ahead = row + 2 * n_teams
                    src = x_ptr + ahead.to(gl.int64) * stride_x
                    y_row = y_ptr + row.to(gl.int64) * stride_y
                    for c in gl.static_range(NCH):
                        cols = c * CHUNK + offs
                        ok = cols < N
                        if PAIRS:
                            x_lo, x_hi = _bf16_pairs(buf.index(half * NCH + c), CHUNK)
                        else:
                            x = buf.index(half * NCH + c).load(layout).to(gl.float32)
                        cta_barrier()  # every warp has read chunk c: refill it with row + 2 * n_teams
                        copy_to_shared(buf.index(half * NCH + c), src + cols, mask=ok & (ahead < M))
                        cp.commit_group()
                        if PAIRS:
                            w_lo, w_hi = _bf16_pairs(w_part.index(c), CHUNK)
                            b_lo, b_hi = _bf16_pairs(b_part.index(c), CHUNK)
                            y_lo = (x_lo - row_mean) * rstd * w_lo + b_lo
                            y_hi = (x_hi - row_mean) * rstd * w_hi + b_hi
                            # each thread's 4 pairs are its 8 values of `layout`, in order: no data moves
                            y = gl.convert_layout(gl.reshape(gl.join(y_lo, y_hi), [CHUNK]), layout)
                        else:
                            w = w_part.index(c).load(layout).to(gl.float32)
                            b = b_part.index(c).load(layout).to(gl.float32)
                            y = (x - row_mean) * rstd * w + b
                        gl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=None if EVEN else ok)
                    it += 1
        cp.wait_group(0)
        # unstamp the team's words for the next launch: the last program of the team to get here knows
        # that all P have left their waits
        done = gl.atomic_add(exits + team, 1, sem="acq_rel")
        if done == P - 1:
            for k in gl.static_range(4):
                if EXACT:  # the team's 8 P words (see _publish)
                    at = words + (team * 8 + k) * P + slots
                    gl.atomic_xchg(at, (zeros + UNSTAMPED).to(gl.int64), mask=slots < P, sem="relaxed")
                    gl.atomic_xchg(at + 4 * P, (zeros + UNSTAMPED).to(gl.int64), mask=slots < P, sem="relaxed")
                else:
                    gl.atomic_xchg(words + (team * 4 + k) * P + slots, (zeros + UNSTAMPED).to(gl.int64),
                                   mask=slots < P, sem="relaxed")
            gl.atomic_xchg(exits + team, 0, sem="release")


@triton.jit
def _layernorm_streamed(x_ptr, w_ptr, b_ptr, y_ptr, N, stride_x, stride_y, eps,
                        BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr):
    # One program per row, two passes in BLOCK_N chunks. Pass 1 takes each
    # chunk's mean and M2 (around the chunk's own mean, in registers) and merges
    # them into the row's by Chan et al.'s rule:
    #     n = n_a + n_b,  d = mean_b - mean_a,  mean = mean_a + d * n_b / n,
    #     M2 = M2_a + M2_b + d^2 * n_a * n_b / n
    # Pass 2 re-reads, normalizes and writes (see the softmax template's
    # _softmax_streamed).
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    n_chunks = tl.cdiv(N, BLOCK_N)
    x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
    y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
    zero = tl.sum(tl.zeros([BLOCK_N], tl.float32), axis=0)
    n, mean, m2 = zero, zero, zero
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        ok = cols < N
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        n_c = tl.minimum(N - c * BLOCK_N, BLOCK_N).to(tl.float32)
        mean_c = tl.sum(x, axis=0) / n_c
        d_c = tl.where(ok, x - mean_c, 0.0)
        n_new = n + n_c
        d = mean_c - mean
        mean = mean + d * (n_c / n_new)
        m2 = m2 + tl.sum(d_c * d_c, axis=0) + d * d * (n * n_c / n_new)
        n = n_new
    rstd = 1.0 / tl.sqrt(m2 / N + eps)
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        ok = cols < N
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok,
                 eviction_policy="evict_first")


# ---------------------------------------------------------------------------
# launcher (the occupancy helper as in the softmax template)

_OCCUPANCY = {}
_WORKSPACE = {}
_TEAM_WORDS = {}
_HALF_ROW_WORDS = {}
_TEAM_FAILED = {}  # (device, element size) -> why the shared-memory team did not compile or launch there


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") not in ("", "0")


def _on_nvidia_gpu(x) -> bool:
    """Whether x's kernels run on an NVIDIA GPU (not an AMD one, not Triton's interpreter on the CPU)."""
    return x.is_cuda and torch.version.hip is None and not _interpreting()


def _stream_key(device):
    """Where the buffers of the programs that trade partials are kept: one set a stream, since launches on
    two streams may run at once and would take each other's words from one set."""
    return device, torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None


def _sm_count(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def _programs_per_sm(kernel, args, consts, num_warps, num_stages, device) -> int:
    """Programs of this compiled kernel that fit on one SM at once (1 if unknown)."""
    return _fit(kernel, args, consts, num_warps, num_stages, device)[0]


def _spilled_bytes(kernel, args, consts, num_warps, num_stages, device) -> int:
    """What the compiled kernel spills to local memory, in bytes (0 if unknown)."""
    return _fit(kernel, args, consts, num_warps, num_stages, device)[1]


def _fit(kernel, args, consts, num_warps, num_stages, device) -> tuple[int, int]:
    """(programs an SM, spilled bytes) of this compiled kernel; (1, 0) if unknown."""
    key = (id(kernel), tuple(sorted(consts.items())), num_warps, num_stages, str(args[0].dtype), device.index)
    if key not in _OCCUPANCY:
        occ, spills = 1, 0
        if device.type == "cuda" and not _interpreting():
            try:
                k = kernel.warmup(*args, **consts, num_warps=num_warps, num_stages=num_stages, grid=(1,))
                k._init_handles()
                spills = k.n_spills
                props = torch.cuda.get_device_properties(device)
                threads = 32 * num_warps
                n_regs = max(1, -(-k.n_regs // 8) * 8)
                occ = min(getattr(props, "max_threads_per_multi_processor", 2048) // threads,
                          getattr(props, "regs_per_multiprocessor", 65536) // (n_regs * threads), 32)
                if k.metadata.shared:
                    occ = min(occ, getattr(props, "shared_memory_per_multiprocessor", 228 * 1024)
                              // (k.metadata.shared + 1024))
                occ = max(1, occ)
            except Exception:
                occ, spills = 1, 0
        _OCCUPANCY[key] = occ, spills
    return _OCCUPANCY[key]


def _row_warps(kernel, args, consts, M: int, row_bytes: int, sms: int, device, default: int) -> int:
    """Of ROW_WARPS, the warps with which a compiled one-row-a-program kernel keeps the most bytes of rows in
    flight an SM, up to IN_FLIGHT_BYTES; ties, `default`, else the most warps; never one that spills (see
    ROW_WARPS)."""
    rows_an_sm = triton.cdiv(M, sms)

    def held(warps):
        occ, spills = _fit(kernel, args, consts, warps, 1, device)
        return -1 if spills else min(min(occ, rows_an_sm) * row_bytes, IN_FLIGHT_BYTES)
    return max(ROW_WARPS, key=lambda warps: (held(warps), warps == default, warps))


def _rows_grid(M: int, rows: int, sms: int, occ: int, cfg: dict) -> int:
    """PERSISTENT: one wave of resident programs that loop over the row tiles;
    else one program per tile (the hardware schedules the waves)."""
    tiles = triton.cdiv(M, rows)
    return min(tiles, sms * occ) if int(cfg.get("PERSISTENT", 1)) else tiles


def _sync_buffers(device, n_programs: int):
    """The split team's workspace (4 buffers of (mean, M2) per program) and flags, which the kernel
    leaves at zero when it exits (see the softmax template's _sync_buffers)."""
    key = _stream_key(device)
    ws, sync = _WORKSPACE.get(key, (None, None))
    if ws is None or ws.numel() < 8 * n_programs:
        ws = torch.empty(8 * max(n_programs, 4096), device=device, dtype=torch.float32)
        sync = torch.zeros(2 * max(n_programs, 4096), device=device, dtype=torch.int32)
        _WORKSPACE[key] = (ws, sync)
    return ws, sync


# fp32 rows of at most BLOCK_SIZE on an NVIDIA GPU (unless a config is passed): one row a program, on the
# warps Triton's fused-softmax tutorial gives a row (8 elements a thread), instead of CONFIG's tile of rows
# on its warps. Measured on the H200 against the tutorial's kernel in one process (benchmarks/peer_rows.py;
# the run before the change, df8b865:experiments/sweep-h200-session29/call12-peer-rows/), % of copy, softmax / rmsnorm /
# layernorm: 131072x1024 CONFIG 97.0 / 96.7 / 96.8 against the one-row kernel's 99.6 / 99.6 / 99.5;
# 32768x4096 96.9 / 97.2 / 97.7 against 98.0 / 97.7 / 98.1. 16-bit rows keep CONFIG's tiles (there the
# one-row kernel read 79-93%); the interpreter keeps CONFIG, whose knobs a tuner moves there. With it
# (call13-peer-rows-after/): 131072x1024 99.7 / 99.6 / 99.9, 32768x4096 98.1 / 97.6 and layernorm's one row
# on 16 warps 94.5, so layernorm's rows of 4096 do not take it (below).
FP32_ROW_WARPS = [(1024, 4)]  # (longest row, num_warps); longer rows: CONFIG, or FP32_WHOLE_ROW_ABOVE's
# fp32 rows over FP32_WHOLE_ROW_ABOVE up to BLOCK_SIZE on an NVIDIA GPU (unless a config is passed) go to
# _layernorm_row, the 1-D whole-row kernel, on WHOLE_ROW_WARPS warps with its column mask: the peer's code
# (but for a 64-bit row offset). CONFIG's one row of 4096 on 4 warps takes 121 registers a thread (four
# programs, 16 warps an SM); the 1-D row on 16 warps 32 (four programs, 64 warps). H200, 32768x4096, 20
# rounds in one process, paired (experiments/sweep-h200/layernorm-fp32-rows/, by the A/B script
# df8b865:benchmarks/explore/layernorm_fp32_rows.py): CONFIG 97.9% of copy, x0.9971 the peer, under it in 20
# of 20 rounds; _layernorm_row masked 98.2%, x0.9996, x1.0024 CONFIG (ahead in 19 of 20); unmasked (EVEN)
# x0.9985 the peer, 0.16% under masked in 16 of 20 rounds (8 of 8 in call5.json there), so these rows keep the
# mask.
FP32_WHOLE_ROW_ABOVE = 2048


last_config = {}  # which kernel served the latest launch (the benchmark reports it: Spec.launched)


def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None,
              eps: float = EPS, config: dict | None = None) -> torch.Tensor:
    cfg = dict(CONFIG, **(config or {}))
    assert x.stride(-1) == 1 and w.is_contiguous() and b.is_contiguous()
    x2 = x.reshape(-1, x.shape[-1])
    y = torch.empty_like(x) if out is None else out
    y2 = y.reshape(-1, y.shape[-1])
    M, N = x2.shape
    last_config.clear()
    if M == 0 or N == 0:
        return y
    block = int(cfg["BLOCK_SIZE"])
    num_warps, num_stages = int(cfg["num_warps"]), int(cfg["num_stages"])
    dev = x.device
    sms = _sm_count(dev)
    P = triton.cdiv(N, block)
    fp32_short_row = (P == 1 and config is None and x.element_size() == 4 and N > FP32_WHOLE_ROW_ABOVE
                      and _on_nvidia_gpu(x))  # to _layernorm_row, masked (see FP32_WHOLE_ROW_ABOVE)
    if P == 1 and not fp32_short_row:
        block_n = max(16, triton.next_power_of_2(N))
        rows = max(1, block // block_n)
        persistent, prefetch = int(cfg.get("PERSISTENT", 1)), False
        one_row_warps = next((w for longest, w in FP32_ROW_WARPS if block_n <= longest), None)
        if config is None and x.element_size() == 4 and one_row_warps and _on_nvidia_gpu(x):
            rows, num_warps = 1, one_row_warps
        x_bytes = x2.numel() * x.element_size()
        short = SHORT_ROWS[0] <= block_n <= SHORT_ROWS[1] and x_bytes <= SHORT_MAX_BYTES_PER_SM * sms
        if config is None and x.element_size() == 2 and short and _on_nvidia_gpu(x):
            rows = max(1, SHORT_TILE // block_n)  # see SHORT_TILE
            num_warps, persistent, prefetch = rows * block_n // 512, 1, True
        args = (x2, w, b, y2, M, N, x2.stride(0), y2.stride(0), eps)
        wb_per_tile = (prefetch or not persistent) and x.element_size() == 2 and N > WB_PER_TILE_ABOVE
        consts = {"BLOCK_N": block_n, "ROWS": rows, "NUM_STAGES": num_stages, "WB_PER_TILE": int(wb_per_tile),
                  "PREFETCH": prefetch}
        occ = _programs_per_sm(_layernorm_rows, args, consts, num_warps, num_stages, dev)
        # BLOCK_SIZE and num_warps as launched: the sweep's "ran" column then says when fp32 rows ran one
        # a program (BLOCK_SIZE the row's) rather than CONFIG's tile.
        last_config.update(kernel="_layernorm_rows", BLOCK_SIZE=rows * block_n, num_warps=num_warps)
        _layernorm_rows[(_rows_grid(M, rows, sms, occ, {"PERSISTENT": persistent}),)](
            *args, **consts, num_warps=num_warps, num_stages=num_stages)
        return y
    half_rows = SMEM_TEAM_ABOVE < N <= WHOLE_ROW_MAX and N == triton.next_power_of_2(N)
    if half_rows and _launch_half_rows(x2, w, b, y2, eps, sms):
        return y
    team_above = SMEM_TEAM_ABOVE if x.element_size() == 2 else WHOLE_ROW_MAX  # see 'fp32 rows on the team'
    if N > team_above and _smem_team_run(x2, y2, w, b) and _launch_smem_team(x2, w, b, y2, M, N, eps, sms):
        return y
    if N <= WHOLE_ROW_MAX:
        row_bytes = N * x.element_size()
        args = (x2, w, b, y2, N, x2.stride(0), y2.stride(0), eps)
        consts = {"BLOCK_N": triton.next_power_of_2(N), "W_IN_L1": row_bytes > W_IN_L1_BYTES, "EVEN": False}
        warps = WIDE_ROW_WARPS if row_bytes > WIDE_ROW_BYTES else WHOLE_ROW_WARPS
        if N <= SMEM_TEAM_ABOVE and not fp32_short_row and _on_nvidia_gpu(x):  # see ROW_WARPS
            warps = _row_warps(_layernorm_row, args, consts, M, row_bytes, sms, dev, warps)
        # unmasked where that costs no program an SM (see 'Unmasked rows' by SMEM_TEAM)
        if N == consts["BLOCK_N"] and not fp32_short_row:
            even = {**consts, "EVEN": True}
            if _programs_per_sm(_layernorm_row, args, even, warps, 1, dev) >= \
                    _programs_per_sm(_layernorm_row, args, consts, warps, 1, dev):
                consts = even
        last_config["kernel"] = "_layernorm_row"
        _layernorm_row[(M,)](*args, **consts, num_warps=warps)
        return y
    if x.element_size() == 4 and not _interpreting():
        ws, sync = _sync_buffers(dev, sms * 32)
        args = (x2, w, b, y2, ws, sync, M, N, x2.stride(0), y2.stride(0), eps)
        P = triton.cdiv(N, SPLIT["BLOCK_N"])
        consts = {"BLOCK_N": SPLIT["BLOCK_N"], "P": P, "P_POW2": triton.next_power_of_2(P), "MAX_SPIN": MAX_SPIN}
        occ = _programs_per_sm(_layernorm_split, args, consts, SPLIT["num_warps"], 1, dev)
        teams = min(M, (sms * occ) // P)
        if teams >= 1:
            last_config["kernel"] = "_layernorm_split"
            _layernorm_split[(teams * P,)](*args, **consts, num_warps=SPLIT["num_warps"], num_stages=1)
            return y
    _launch_streamed(x2, w, b, y2, M, N, eps)
    return y


def _launch_half_rows(x2, w, b, y2, eps, sms) -> bool:
    """Launch _layernorm_half_rows on rows of 16-bit x, w, b and y alike, aligned as _rows_of_16 says, where
    HALF_ROW_PROGRAMS_PER_SM of its programs fit an SM and make HALF_ROW_MIN_WAVES waves; False otherwise,
    and in the interpreter, whose programs run one after another: a half would wait for a partner to come."""
    M, N = x2.shape
    if _interpreting() or not (x2.element_size() == 2 and x2.dtype == y2.dtype == w.dtype == b.dtype
                               and _rows_of_16(x2, y2, w, b)):
        return False
    args = (x2, w, b, y2, _half_row_words(x2.device, 2 * M), N, x2.stride(0), y2.stride(0), eps, 0)
    consts = {"HALF": N // 2, "SPIN": MAX_SPIN}
    occ = _programs_per_sm(_layernorm_half_rows, args, consts, HALF_ROW_WARPS, 1, x2.device)
    if occ < HALF_ROW_PROGRAMS_PER_SM or 2 * M < HALF_ROW_MIN_WAVES * occ * sms:
        return False
    last_config["kernel"] = "_layernorm_half_rows"
    _layernorm_half_rows[(2 * M,)](*args, **consts, num_warps=HALF_ROW_WARPS)
    return True


def _half_row_words(device, n_programs: int):
    """_layernorm_half_rows's words, one a program, NO_HALF; the kernel leaves them so. One buffer a stream
    (_stream_key)."""
    key = _stream_key(device)
    words = _HALF_ROW_WORDS.get(key)
    if words is None or words.numel() < n_programs:
        words = torch.full((n_programs,), NO_HALF.value, device=device, dtype=torch.int64)
        _HALF_ROW_WORDS[key] = words
    return words


def _rows_of_16(x2, y2, w, b) -> bool:
    """Whether Triton sees the rows' length, row stride and start as multiples of 16 elements (it
    specializes arguments on 16), and w and b starting on 16 bytes."""
    rows_aligned = all(t.shape[-1] % 16 == 0 and t.stride(0) % 16 == 0 and t.data_ptr() % 16 == 0 for t in (x2, y2))
    return rows_aligned and w.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0


def _smem_team_run(x2, y2, w, b) -> bool:
    """Whether _layernorm_smem_team can take these rows: Gluon present, an NVIDIA GPU with cp.async
    (sm_80 and newer), not the interpreter, 16-bit or fp32 rows whose length, row stride and start Triton
    sees as multiples of 16 elements (it specializes arguments on 16), so that its copies can move
    8-element groups (16 bytes): cp.async moves 4 bytes at least, and a row of 16-bit elements
    whose mask or stride Triton cannot prove 8-aligned fails to compile. w and b start on 16 bytes."""
    if gluon is None or x2.device.type != "cuda" or torch.version.hip or _interpreting():
        return False
    if x2.element_size() not in (2, 4) or torch.cuda.get_device_capability(x2.device)[0] < 8:
        return False
    return _rows_of_16(x2, y2, w, b)  # w and b are copied too


def _launch_smem_team(x2, w, b, y2, M, N, eps, sms) -> bool:
    """Launch _layernorm_smem_team with as many programs an SM as fit (up to SMEM_TEAM's); False when
    not even one team of P programs fits the GPU at once, or when it failed to compile or launch on this
    device for rows of this element size before (_TEAM_FAILED)."""
    failed = (x2.device, x2.element_size())  # the fp32 team failing leaves the 16-bit one, and the reverse
    if failed in _TEAM_FAILED:
        return False
    st = SMEM_TEAM
    chunk = st["CHUNK"] * 2 // x2.element_size()  # the same bytes in fp32 (see 'fp32 rows on the team')
    P = triton.cdiv(N, chunk * st["NCH"])
    words, exits = _team_words(x2.device, sms * 32)
    args = (x2, w, b, y2, words, exits, M, N, x2.stride(0), y2.stride(0), eps)
    consts = {"CHUNK": chunk, "NCH": st["NCH"], "P": P, "P_POW2": triton.next_power_of_2(P), "SPIN": MAX_SPIN,
              "PAIRS": x2.dtype == torch.bfloat16, "EVEN": N % (chunk * st["NCH"]) == 0,
              "EXACT": x2.element_size() == 4, "VEC": 16 // x2.element_size()}
    occ = _programs_per_sm(_layernorm_smem_team, args, consts, st["num_warps"], 1, x2.device)
    capped = {**consts, "maxnreg": st["maxnreg"]}
    occ_capped = _programs_per_sm(_layernorm_smem_team, args, capped, st["num_warps"], 1, x2.device)
    # The cap where it buys a program an SM, or where the uncapped kernel spills and the cap costs no program
    # (ptxas left bf16's 32768 and 131072 spilling uncapped once the gather read by volatile loads). Else none:
    # the cap spilled bf16's 131072 where the uncapped kernel fit more programs.
    if occ_capped > occ or (occ_capped == occ and _spilled_bytes(_layernorm_smem_team, args, consts,
                                                                 st["num_warps"], 1, x2.device)):
        consts, occ = capped, occ_capped
    occ = min(st["PROGRAMS_PER_SM"], occ)
    teams = min(M, (sms * occ) // P)
    if teams < 1:
        return False
    try:
        last_config["kernel"] = "_layernorm_smem_team"
        _layernorm_smem_team[(teams * P,)](*args, **consts, num_warps=st["num_warps"])
    except Exception as e:  # Gluon changes between Triton releases: fall back, and say so once
        lines = str(e).strip().splitlines()
        _TEAM_FAILED[failed] = f"{type(e).__name__}: {lines[-1] if lines else ''}"
        warnings.warn(f"layernorm: the shared-memory team does not run with Triton {triton.__version__} here "
                      f"({_TEAM_FAILED[failed]}); other kernels take its rows")
        return False
    return True


def _team_words(device, n_programs: int):
    """The shared-memory team's 64-bit partials (4 a program, 8 where EXACT), unstamped, and its exit counters
    (zero); the kernel leaves both as it found them, so no memset per launch."""
    key = _stream_key(device)
    words, exits = _TEAM_WORDS.get(key, (None, None))
    if words is None or exits.numel() < n_programs:
        words = torch.full((8 * n_programs,), UNSTAMPED.value, device=device, dtype=torch.int64)
        exits = torch.zeros(n_programs, device=device, dtype=torch.int32)
        _TEAM_WORDS[key] = (words, exits)
    return words, exits


def _launch_streamed(x2, w, b, y2, M, N, eps):
    st = STREAMED
    last_config["kernel"] = "_layernorm_streamed"
    _layernorm_streamed[(M,)](x2, w, b, y2, N, x2.stride(0), y2.stride(0), eps,
                              BLOCK_N=min(st["BLOCK_N"], triton.next_power_of_2(N)), NUM_STAGES=st["num_stages"],
                              num_warps=st["num_warps"], num_stages=st["num_stages"])
