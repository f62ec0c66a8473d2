"""Row softmax in Triton, with the torch reference beside it.

    y[r, j] = exp(x[r, j] - m_r) / s_r,   m_r = max_j x[r, j],   s_r = sum_j exp(x[r, j] - m_r)

Subtracting the row max keeps exp() from overflowing (x scaled by 1e4 would
overflow fp32's exp at 89); -inf entries give exactly 0. Arithmetic is fp32
whatever the storage dtype; the result is rounded once on the store.

Minimal traffic: read x once, write y once (2 * M * N * elem bytes). About 4
flops per element, so it is memory-bound on every GPU: the goal is the
device-copy bandwidth.

Six kernels, one launcher that picks between them (see `softmax`):
  _softmax_rows   rows of at most BLOCK_SIZE elements: a tile of whole rows
                  (ROWS x BLOCK_N = BLOCK_SIZE elements) lives in registers;
                  one read, one write. Persistent grid (one wave of programs
                  that loop over tiles) so loads of the next tile are
                  software-pipelined (num_stages) behind the current one.
                  Also 16-bit rows over GROUPED_ROW_MAX up to WHOLE_ROW_MAX on
                  NVIDIA GPUs that _softmax_row_pairs cannot take, in 16-element
                  groups, one row a tile, pipelined in shared memory (see
                  PIPELINED_ROWS); and so 16-bit rows over GROUPED_ROW_MAX up to
                  WHOLE_ROW_MAX not in 16-element groups, on their bodies cut at
                  16-byte boundaries (see PIPELINED_BODIES).
  _softmax_row    rows over BLOCK_SIZE, up to WHOLE_ROW_MAX (32768): one program
                  per whole row, no loop (see WHOLE_ROW_MAX for why), on the
                  warps that keep the most rows in flight (see ROW_WARPS).
  _softmax_row_pairs 16-bit rows of 32768: the whole row kept in registers
                  as loaded, two elements a 32-bit word, so that two programs
                  share an SM (see PAIRED_ROW_WARPS).
  _softmax_smem_team 16-bit rows over GROUPED_ROW_MAX on NVIDIA GPUs: the split
                  team below, but each program holds its part of two rows in
                  shared memory (Gluon: Triton's language cannot name shared
                  memory), copied by cp.async, so that five or six programs
                  share an SM; and its partial (max, sum) travels as one
                  64-bit word (see SMEM_TEAM). Rows not in 16-element groups
                  that the pipelined loop does not take, cut at their 16-byte
                  boundaries: the body by cp.async, the few elements at the
                  ends in registers (see SMEM_CUT). Rows past each team's
                  first two go to the teams as they ask (see DEAL_ROWS).
  _softmax_split  longer fp32 rows, and 16-bit rows over GROUPED_ROW_MAX whose
                  16-element groups Triton cannot prove and neither the
                  pipelined loop nor the shared-memory team takes (no Gluon,
                  or a team that does not fit or compile; see 'Rows not in
                  16-element groups' by SPLIT):
                  a row is split over P = ceil(N / SPLIT's BLOCK_N)
                  programs that are resident at the same time ("a team"). Each
                  keeps its chunk in registers, publishes its partial (max,
                  sum) to a small global workspace as stamped words (each
                  value with its row's iteration in the word's low bits, so
                  the word is its own flag and no memory fence orders it
                  behind the program's stores), waits until its P-1 siblings'
                  words carry the row's stamp, combines the P partials and
                  writes its chunk -- pipelined one row ahead, so the wait overlaps the
                  next row's load: still one read and one write, where a
                  looped online softmax must read the row twice. The grid never
                  exceeds what fits on the GPU at once, so every team's
                  programs are co-resident and the wait cannot deadlock; the
                  spin is bounded anyway (a broken invariant gives wrong
                  output, which the harness catches, never a hang).
  _softmax_streamed longer 16-bit rows where neither team runs (AMD or no
                  Gluon for the shared-memory team), and every longer
                  row in Triton's interpreter, which runs programs one after
                  the other, so a team would wait forever; or P beyond the
                  GPU's capacity: one
                  program per row, an online max/sum pass over the row in
                  pipelined chunks, then a second pass that re-reads it and
                  writes: 1.5x the minimal traffic, yet faster than the team in
                  16 bits (see STREAMED for the figures).

Tunables (a tuner rewrites CONFIG with ast: keep it a literal):
  BLOCK_SIZE  elements one program holds in registers (tile or chunk)
  num_warps   warps per program: BLOCK_SIZE / (32 * num_warps) elements per thread
  num_stages  software-pipelining depth of the persistent row loop
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

MAX_SPIN = 1 << 20  # bounded wait (~1 s), then give up: wrong output, which the harness catches, never a hang
# Rows over BLOCK_SIZE and up to WHOLE_ROW_MAX elements go to _softmax_row: one program per row, the
# whole row in registers, WHOLE_ROW_WARPS warps, no loop. Measured on the H200 (the whole-row A/Bs,
# df8b865:experiments/memory-bound/whole-rows/): at rows of 8192-32768 the split team reached 55-79% of copy,
# whole rows in the row-tile kernel (a loop over tiles, 2-D tiles) 69-98%, and this plain kernel,
# as Triton's tutorial writes it, 89-98% (softmax 16-bit 32768: 70%, the one shape where the row-tile
# kernel did better, 72%).
WHOLE_ROW_MAX = 32768
WHOLE_ROW_WARPS = 16
# Rows up to GROUPED_ROW_MAX that _softmax_row takes whole and ungrouped (fp32 rows, 16-bit rows whose 16-element
# groups Triton cannot prove) on an NVIDIA GPU: of ROW_WARPS, the warps whose compiled program keeps the most bytes
# of rows in flight an SM, up to IN_FLIGHT_BYTES; ties to WHOLE_ROW_WARPS, else to the most warps. Why: a program
# loads its row at once, then reduces and writes it with nothing in flight, so an SM streams only as many rows as
# it holds programs (registers permitting, _fit), and no more than the grid gives it (ceil(M / SMs)). Past
# IN_FLIGHT_BYTES an SM more rows bought nothing (fp32 rows of 10000, 80 KB an SM whatever the warps, read
# 98.7-99.4% of copy on 8, 16 and 32 warps). Sixteen warps held two 16-bit rows of 5000-8192 an SM (58 registers a
# thread) and one of 12289 (96), where 8 warps (79) held three of 5000-8192 and 4 warps (168) three of 12289. H100,
# one process, % of copy, main's 16 warps -> the rule's (the A/B,
# experiments/held-out-shapes/h100-row-dispatch/explore/, synthetic shapes): 2048x5000 bf16 54.2 -> 67.3 (8 warps),
# 1024x6145 fp16 50.3 -> 56.9 (8), 1024x12289 bf16 51.1 -> 64.1 (4); 1024x10000 fp32 a tie, kept on 16 warps (99.6;
# 8 and 32: 98.9, 99.4).
ROW_WARPS = (4, 8, 16, 32)
IN_FLIGHT_BYTES = 64 * 1024
# 16-bit rows up to GROUPED_ROW_MAX take _softmax_row's GROUPED path: the row as groups of GROUP
# contiguous elements, each group's (max, sum of exp(x - max)) from its own registers and a few lanes of
# one warp, then one reduction across the program (a max then a sum across 16 warps take two, each
# ending in a barrier and a round trip through shared memory). 56-58 registers a thread at 16384: two
# programs an SM. H200, 8192x16384, % of copy, in one process (the A/B runs,
# df8b865:experiments/sweep-h200-session19/call7-grouped-scheduled/; the A/B script that found it,
# df8b865:benchmarks/explore/one_reduction_rows.py, and its run call4-one-reduction/ beside): 96.4-96.6
# in bf16 and fp16 against 92.9-93.9 for the row kept in 16-bit registers (which had read 87.1 -> 92.3
# against the fp32 row, df8b865:experiments/long-rows-h200/whole-rows-16bit/); 8192x12000 +2.5. At 32768
# (one program an SM) it read 62-69% against the pipelined loop's 88, and layernorm's (mean, M2) grouped
# alike 45-76% against its team's 85.
# Rows Triton cannot see as multiples of 16 elements (_rows_of_16) stay ungrouped: masked element by
# element, the grouped row took 110 registers at 5000 (compiled for sm_90 by Triton 3.6) where the plain
# row takes 58.
GROUPED_ROW_MAX = 16384
# ALIGNED_BODY: rows whose length or stride is not a multiple of 16 elements (vocabularies of 50257,
# 30522; key lengths of 4097, 8193) start anywhere within a 16-byte group, so Triton, which sees neither
# the start's alignment nor a mask constant over 8-element groups, loads and stores them element by element
# (compiled for sm_90: 32 ld.global.b16 a thread at 8192 on 8 warps). Where x and y share the row's offsets
# from 16-byte boundaries (_aligned_body), each row is cut at those boundaries (_aligned_span): a body of
# whole groups, from the row's start rounded up to its end rounded down, loaded and stored as 16-byte
# vectors (4 ld.global.v4 there, and one ld.global.b16 for the edge), and the under 2 x 8 elements left
# at its two ends, loaded element by element beside it.
# ROW_UNIT: rows in whole 16-byte groups but not 16-element ones (3000 or 1000 16-bit elements) start on
# a group boundary, which Triton cannot see (it specializes integers on 16 only): the row-tile kernel is
# passed their length and strides in units of a group (_row_unit) and multiplies them back, so that Triton
# proves each row's groups and loads them as 16-byte vectors.
# Measured on the H100 against the kernels before them (experiments/held-out-shapes/h100-aligned-body/), %
# of copy: 2048x4097 bf16 56 -> 75, 896x8193 fp16 46 -> 57, 8192x3000 bf16 83 -> 100, 4096x1000 bf16 51 ->
# 58; the held-out half 1.112x, the tune half 1.020x, the sweep (rows of 16-element groups) 0.999x.
GROUP = 64  # 128 contiguous bytes of a 16-bit row, 8 lanes of 8 elements
# 16-bit rows over GROUPED_ROW_MAX go to _softmax_smem_team on NVIDIA GPUs (Gluon): parts of NCH chunks of
# CHUNK elements, num_warps warps, up to PROGRAMS_PER_SM programs an SM (as many as fit). On the H200 (the
# team's A/B runs, df8b865:experiments/sweep-h200-2026-12-01/session11-smem/team-stamped/, bf16) it read 86.1
# / 85.9 / 79.3% of copy at rows of 65536 / 131072 / 262144, where the streamed kernel read 62.7 / 58.9 /
# 54.9%, and 86.0% at 4096x32768 against 82.0% for a whole row in shared memory a program and 73% for one in
# registers. The same team with the split teams' old exchange (partials, then a flag released after them,
# whose fence waits for the program's outstanding stores) read 73.0-75.1% (team/); with three programs an SM
# (16384-element parts, or 8 warps) 67-78%, with one 34-39%: programs sharing an SM carry it.
# maxnreg: at most 96 registers a thread. Uncapped, Triton 3.6 gave the team 127 at rows of 262144 (P = 32:
# the gather of 32 words), four programs an SM, 79.5% of copy; capped at 96, five an SM and 85.7%, with the
# rows of 32768-131072 unchanged (85.7-86.1%); capped at 80, 86.9% there but 1.5-2.4 points less at the others
# (the register-cap A/B, df8b865:experiments/sweep-h200-session12/team-registers/).
SMEM_TEAM = {"CHUNK": 4096, "NCH": 2, "num_warps": 4, "PROGRAMS_PER_SM": 6, "maxnreg": 96}
# DEAL_ROWS: which rows each team of _softmax_smem_team takes. Each takes rows team and team + n_teams first; where
# some row is left past those (M > 2 n_teams: DEAL), each next one comes from a counter, the last of the exits buffer
# (_team_words): rows 2 n_teams, 2 n_teams + 1, ... in the order the teams ask, so a slow team takes fewer. Lane 0 of
# the team's first program claims a row at the start of each iteration (_claim: one atomic a row a team, its value
# first used ~2.6 us later, after the wait for the next row's copies and its reduce) and posts it as one more stamped
# word after the team's P partials of that next row (_post_row), which every sibling already waits for in its
# gather: it copies the row in while it writes the current one, as it did row + 2 n_teams. So a row is claimed about
# one iteration before its copies are issued, and the team has ~3.9 rows to go when it claims: a lookahead the deal
# leaves in the tail (x the teams' spread of row times: ~0.6 us at 512x50257 by the model below). A team claims
# until its first miss, so a launch makes M - n_teams claims, and the one that gets the last value sets the counter
# back to 0 for the next launch (no memset). Else (M <= 2 n_teams) rows team + k n_teams, as before.
# Why (sm60's diagnostic on an H100, experiments/held-out-shapes/few-rows-team/sm60-diagnostic-h100.txt): at
# 512x50257 bf16 (94 teams of 5-6 rows) program exits spread over ~11 us team by team and the 5-row teams (launched
# last) left later than the 6-row ones: the static deal leaves the slow teams' last rows alone at the end.
# Measured on an H100 against the static deal (experiments/held-out-shapes/few-rows-team/sm62-h100.txt): 2048x50257
# x0.973 (90.2 -> 92.7% of copy), 4096x65536 x0.959 (94.1 -> 98.1%), 512x262144 x0.993; 512x50257 x0.993-0.995 only
# (predicted x0.965): a team there takes 5-6 rows and claims ~4 ahead, so little is left to deal. 95-96 registers,
# no stack under Triton 3.6 (sm_90), as before.
# SMEM_CUT: 16-bit rows over GROUPED_ROW_MAX not in 16-element groups (vocabularies of 50257, 65537, 100277;
# _rows_of_16 false) that the pipelined loop does not take (over WHOLE_ROW_MAX, or x and y not cut alike) go to
# _softmax_smem_team too, each row cut at its 16-byte boundaries as ALIGNED_BODY cuts it (_cut): the body, from
# the row's first boundary a0 to its last b0, whole groups of 8 elements that cp.async copies 16 bytes at a time
# (a row copied from its start does not compile: cp.async moves 4 bytes at least), parts of it to the P programs
# as their columns, P = ceil(N // 8 * 8 / (NCH * CHUNK)) (_team_parts: 65537 takes 8 parts, not 9); the under 2 x 8
# elements left at its ends (its edge) loaded element by element by program P - 1 (the one with the least body),
# a row ahead of its use as its chunks are, into registers, and folded into its partial (max, sum) and its write.
# The kernel is given x at its start rounded down to 16 bytes (_aligned_base: x 2-byte aligned, that address in its
# storage) and the offset from there, so that Triton sees each body's groups; y likewise where its rows sit at x's
# offsets from 16-byte boundaries (Y_CUT: then its body's stores are 16-byte vectors), else stored element by
# element (one element a thread a store: a warp's store writes 64 contiguous bytes). Compiled for sm_90 on a CPU
# (Triton 3.6, the device's): 95-96 registers, no stack but 8 bytes at 65537 fp16, 32.8 KB of shared memory,
# as rows of 16-element groups: five programs an SM; every copy 16 bytes.
# Why (the split team took these rows; experiments/held-out-shapes/wide-unaligned-paths/): each split program holds
# one chunk in fp32 registers, the register file allows about 32 KB of them in flight an SM whatever the chunk,
# and no chunk or warp count moved it past about 70% of copy on the H100 (512x50257 bf16 59.6%, fp16 49-51%;
# 2048x50257 bf16 68.6%; 1024x65537 fp16 69.4%), where the shared-memory team keeps up to a row ahead of each of its
# five programs an SM in shared memory, about 2.5x the bytes (81% at 256x128256 bf16, 93% at 512x262144).
# Measured on the H100 (the A/B there): 512x50257 bf16 63.0 -> 78.1% of copy, fp16 62.5 -> 79.1%, 2048x50257 bf16
# 69.2 -> 89.5%, 1024x65537 fp16 70.6 -> 87.1%, 512x100277 bf16 71.5 -> 85.7%; y not cut like x 67-80%.
# 16-bit rows of a power of two over GROUPED_ROW_MAX, up to WHOLE_ROW_MAX (32768), whose start and stride
# Triton sees as multiples of 16 elements (_rows_of_16), go to _softmax_row_pairs where two of its programs
# fit an SM (the launcher asks the compiled kernel): the whole row in
# registers as it was loaded, 32-bit words of two elements, PAIRED_ROW_WARPS warps. Each pass unpacks its
# own fp32 values from the words, so no converted row stays alive between the passes: compiled for sm_90
# by Triton 3.6, 57 registers a thread at 32768 on 16 warps (the row converted once: 100-108), so two
# programs share an SM, one's loads under the other's reductions, as the fp32 row of the same 64 KB
# (8192x16384, 97.8% of copy) runs. H200, % of copy, three rounds in one process (the A/B runs,
# df8b865:experiments/sweep-h200-session20/): against the pipelined loop at 4096x32768 (call2-ab/ there),
# bf16 88.1-88.6 -> 92.2, fp16 89.1-89.2 -> 93.7-93.8 with y packed into words; with y's pairs converted
# joined (call4-joined/: 14.4 / 13.4 SASS instructions an element for 15.75 / 14.75), 95.6-95.8 /
# 95.2-95.9, and 2048x32768 91.8-92.0 against the words' 86.2-88.1. Masked rows lost: 4096x30000 bf16 (the
# row padded to 32768) 87.2-87.7 -> 85.9-86.2, so they keep the pipelined loop. The first A/B
# (call1-packed/, by the A/B script df8b865:benchmarks/explore/packed_rows.py): bf16 unpacked by a shift
# took 68 registers, one program an SM, 59%; 32 warps (32 registers) 88.2-90.0; at 8192x16384 95.5
# against the grouped row's 96.5, which keeps those rows.
PAIRED_ROW_WARPS = 16
# Other 16-bit rows over GROUPED_ROW_MAX and up to WHOLE_ROW_MAX, in 16-element groups (the others: 'Rows not
# in 16-element groups' by SPLIT), go to _softmax_rows on one row a tile, a
# persistent grid and num_stages pipeline stages, where the GPU's shared memory holds at least
# MIN_PIPELINED_STAGES of them (a stage is one row; _pipelined_stages): Triton turns the next rows' loads into
# cp.async copies into shared memory, so an SM has two or three rows in flight behind the one it reduces. On
# the H200 at 4096x32768 (the stage-count A/B, df8b865:experiments/sweep-h200-session13/call3/) 4 stages on 16
# warps read 89.1 / 88.1% of copy in bf16 / fp16, where the shared-memory team read 85.6 / 84.9% in the same
# process (eight team settings: 83-87%, call1/) and the whole row in registers 73%; 3 stages 89.1 / 87.2%, and
# 2 stages 64-68%, under the unpipelined loop's 73%: hence the minimum of 3.
PIPELINED_ROWS = {"num_warps": 16, "num_stages": 4}
MIN_PIPELINED_STAGES = 3
# PIPELINED_BODIES: 16-bit rows over GROUPED_ROW_MAX and up to WHOLE_ROW_MAX that are not in 16-element groups
# but cut at 16-byte boundaries (_aligned_body: vocabularies of 30522) take the pipelined loop on their bodies
# (ALIGNED in _softmax_rows): the body's 16-byte groups are what cp.async copies, so an SM keeps stages - 1
# rows a program in flight in shared memory, not in registers. Why: an SM streams at its share of the copy
# bandwidth (about 23 GB/s, 3 TB/s over 132 SMs on the H100) only with that rate times the memory latency
# (1-1.5 us under load) in flight, some 25-35 KB of reads; the split team, which took these rows, holds one
# 8 KB chunk a program, four programs an SM, and loads the next row's chunk only once this row's partials
# are out. On the H100 (experiments/held-out-shapes/pipelined-bodies/, one process): 2048x30522 bf16
# 68.4 -> 88.0% of copy (1.29x), as predicted (about 90%). Shorter rows keep _softmax_row: the same loop
# also took the rows of 4097-16384 in that run and lost at 2048x4097 bf16 (77.5 -> 58.5%: four programs an
# SM looping over about four rows each, the pipeline's start and drain a row's worth of its work) and gained
# nothing at 896x8193 fp16 (57.6 / 57.2%), where the one-program-a-row kernel already reads 88-89% of what a
# copy of the same bytes reads (a launch of 15-17 MB: its ramp and last wave, not the kernel). That bound
# was drawn after the held-out run, so the held-out half no longer judges it apart. Rows over WHOLE_ROW_MAX
# (50257) cannot: a body block of 65536 is 128 KB a stage, and MIN_PIPELINED_STAGES of them do not fit.
# The warps and stages: as for whole rows (ROW_WARPS), those whose compiled loop keeps the most bytes in
# flight an SM (_pipelined_choice), since registers decide the programs an SM and vary with both: compiled
# for sm_90 by Triton 3.6, bodies of 16384 take 105 registers on 16 warps and 3 stages, 128 on 4, 151 on 8
# warps and 3 (one program an SM each), and bodies of 32768 on 16 warps and 4 stages spill 124 bytes. Four
# warps and 32 (two programs an SM at most) are left out, to keep the compiles on a first call to four. Rows of 16-element groups keep PIPELINED_ROWS's launch, measured.
PIPELINED_BODY_WARPS = (8, 16)
UNSTAMPED = tl.constexpr(0xFF)  # the stamp of a word no partial has written (partials carry their iteration % 128)
LOG2E = tl.constexpr(1.4426950408889634)  # a global a @triton.jit function reads must be a constexpr
# Rows over WHOLE_ROW_MAX: fp32 ones go to the split team, 16-bit ones to the streamed kernel (and all of
# them in the interpreter, where a team would wait forever). Measured on the H200 at rows of
# 65536-262144 (the long-row A/B, df8b865:experiments/long-rows-h200/run2): in bf16 55-64% of copy against
# 44-48% for the team; in fp32 the team leads (72-77% against 63-74%). STREAMED is the leader of the 10
# configurations in df8b865:experiments/long-rows-h200/run1 (the search that came before).
STREAMED = {"BLOCK_N": 4096, "num_warps": 8, "num_stages": 3}
# The split team's chunk and warps. On the H200 (the team's A/B runs,
# df8b865:experiments/sweep-h200-2026-12-01/session10-reduce-once/team/), 4096-element chunks on 8 warps read
# 82.2 / 81.2 / 77.9% of copy at fp32 rows of 65536 / 131072 / 262144, where CONFIG's 4 warps (which the team
# used before) read 77.9 / 76.6 / 72.5% in the same process; chunks of 8192-16384 on 8-32 warps read 50-78%.
# In 16 bits every chunk and warp count stayed under the streamed kernel (35-56% against 55-63%).
# maxnreg: 64 registers a thread, so that four programs of 8 warps share an SM. With stamped words and no cap,
# Triton 3.6 gave the kernel 75 registers, three programs an SM, and at 512x262144 six teams of 64 instead of
# eight: 68.3% of copy against the flagged team's 78.4% in the same process, while at 65536 / 131072 the
# stamped words read 85.2 / 84.8% against 82.2 / 81.0% (the exchange A/B,
# df8b865:experiments/sweep-h200-session12/exchange-ab/).
SPLIT = {"BLOCK_N": 4096, "num_warps": 8, "maxnreg": 64}
# Rows not in 16-element groups: 16-bit rows over GROUPED_ROW_MAX whose 16-element groups Triton cannot
# prove (_rows_of_16: vocabularies such as 50257 or 30522), which the shared-memory team and the pipelined
# loop cannot take whole (up to WHOLE_ROW_MAX, the loop takes their bodies where x and y share their 16-byte
# boundaries: PIPELINED_BODIES; the others, the shared-memory team on their bodies: SMEM_CUT), go where neither
# runs (no Gluon, a team that does not fit or compile) to the split team on SPLIT's chunk and warps wherever it
# runs (not in the interpreter), else to the streamed kernel. Such rows load element by
# element, so neither cp.async (4 bytes at least) nor Triton's pipeline moves them: the pipelined loop then
# holds one row in flight a program, the streamed kernel one chunk a program (and reads the row twice);
# the team holds P chunks of each row in flight at once and reads it once. H100, one process, % of copy
# (the A/B, experiments/held-out-shapes/h100-row-dispatch/explore/, on synthetic shapes: no held-out
# shape chose it): 2048x20001 bf16 50.5 (pipelined loop) -> 65.4, 512x40001 fp16 47.1 (streamed) -> 58.1
# (torch 50.0), 256x100003 bf16 38.1 -> 62.0 (torch 49.7); the streamed kernel's best chunk, warps and
# grid (with or without the next chunk prefetched into registers) 50.0 / 53.6 / 43.9. 8192-element chunks
# spilled (29-50%).


def softmax_ref(x: torch.Tensor) -> torch.Tensor:
    """The reference, in float64."""
    return torch.softmax(x.double(), dim=-1)


# Every kernel takes exp(x - m) as exp2((x - m) * log2 e) (x - m is exact near the max, where it
# matters): tl.exp lowers to ex2.approx with a fix-up for results under 2^-126 (FSETP,
# FSEL and two FMULs an element on sm_90); exp2 is one MUFU.EX2 that flushes those to 0, under every
# output dtype's tolerance. The row-tile loop also drops its masks on rows of exactly BLOCK_N (EVEN).
# The pipelined loop at 16-bit rows of 32768, compiled for sm_90 by Triton 3.6: 1264 -> 776 SASS
# instructions, its issue slots 46 -> 28% busy under ncu. H200, % of copy, before -> after, A/B in one
# process (its runs, df8b865:experiments/sweep-h200-session19/call1-template-ab/ and call2-even-or-not/): 4096x32768
# fp16 87.0 -> 88.9, bf16 88.7 -> 88.1
# (exp2 without EVEN: 87.9 / 87.5), so the arithmetic was not that loop's pace (DRAM 76 -> 75% busy);
# bf16 4096x30000 (masked) 82.8 -> 86.9; fp32 split teams 1024x131072 87.3 -> 89.0, 512x262144 81.5 ->
# 83.7; elsewhere level. _softmax_row keeps its masks: unmasked it read 1.4-1.6 points less at 16-bit
# 8192x16384 on the same SASS less the predicates.
@triton.jit
def _exp(x):
    return tl.exp2(x * LOG2E)


@triton.jit
def _softmax_rows(x_ptr, y_ptr, M, N, stride_x, stride_y,
                  BLOCK_N: tl.constexpr, ROWS: tl.constexpr, NUM_STAGES: tl.constexpr, EVEN: tl.constexpr,
                  UNIT: tl.constexpr, ALIGNED: tl.constexpr, VEC: tl.constexpr):
    # EVEN: N == BLOCK_N and M a multiple of ROWS, so no element needs a mask (see _exp).
    # N and the strides come in units of UNIT elements (see ROW_UNIT).
    # ALIGNED: one row a tile, stride_x == stride_y, each row cut at 16-byte boundaries (see PIPELINED_BODIES).
    N = N * UNIT
    stride_x = stride_x * UNIT
    stride_y = stride_y * UNIT
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    if ALIGNED:
        # The body's copies are pipelined; the edge's loads of single elements are not (cp.async moves 4
        # bytes at least), so each row's edge is loaded one row ahead, by hand (the launcher's grid is at
        # most M: pid is a row).
        start = pid.to(tl.int64) * stride_x
        _, _, edge, edge_ok = _aligned_span(start, start + N, VEC)
        xe = tl.load(x_ptr + edge, mask=edge_ok, other=-float("inf"))
        for row in tl.range(pid, M, nprog, num_stages=NUM_STAGES):
            nxt = row + nprog
            start = tl.cast(nxt, tl.int64) * stride_x
            _, _, edge_n, edge_n_ok = _aligned_span(start, start + tl.where(nxt < M, N, 0), VEC)  # past M: empty
            xe_n = tl.load(x_ptr + edge_n, mask=edge_n_ok, other=-float("inf"))
            start = tl.cast(row, tl.int64) * stride_x
            a0, b0, edge, edge_ok = _aligned_span(start, start + N, VEC)
            body = a0 + cols
            body_ok = body < b0
            xb = tl.load(x_ptr + body, mask=body_ok, other=-float("inf")).to(tl.float32)
            _store_aligned_row(xb, xe.to(tl.float32), y_ptr, body, body_ok, edge, edge_ok)
            xe = xe_n
    else:
        col_ok = cols < N
        n_tiles = tl.cdiv(M, ROWS)
        for tile in tl.range(pid, n_tiles, nprog, num_stages=NUM_STAGES):
            rows = tile * ROWS + tl.arange(0, ROWS)
            ok = None if EVEN else (rows[:, None] < M) & col_ok[None, :]
            rows64 = rows.to(tl.int64)[:, None]
            x = tl.load(x_ptr + rows64 * stride_x + cols[None, :], mask=ok,
                        other=None if EVEN else -float("inf")).to(tl.float32)
            m = tl.max(x, axis=1)
            e = _exp(x - m[:, None])
            inv = 1.0 / tl.sum(e, axis=1)  # one division per row, a multiply per element
            y = (e * inv[:, None]).to(y_ptr.dtype.element_ty)
            tl.store(y_ptr + rows64 * stride_y + cols[None, :], y, mask=ok)


@triton.jit
def _max_sum(m_a, s_a, m_b, s_b):
    # two (max, sum of exp(x - max)) pairs as one
    m = tl.maximum(m_a, m_b)
    safe = tl.where(m == -float("inf"), 0.0, m)  # pairs of only -inf so far
    return m, s_a * _exp(m_a - safe) + s_b * _exp(m_b - safe)


@triton.jit
def _aligned_span(start, end, VEC: tl.constexpr):
    # Elements [start, end) of a tensor whose base is 16-byte aligned, cut at 16-byte boundaries (see
    # ALIGNED_BODY): (a0, b0), the body's whole VEC-element groups [a0, b0), and the up to 2 (VEC - 1)
    # elements left at its ends on 2 VEC lanes (head [start, a0), then tail [b0, end)) with their mask.
    a0 = tl.multiple_of((start + VEC - 1) // VEC * VEC, VEC)
    b0 = tl.multiple_of(tl.maximum(end // VEC * VEC, a0), VEC)  # a row inside one group: no body
    j = tl.arange(0, 2 * VEC)
    edge = tl.where(j < VEC, start + j, b0 + j - VEC)
    return a0, b0, edge, edge < tl.where(j < VEC, tl.minimum(a0, end), end)


@triton.jit
def _store_aligned_row(xb, xe, y_ptr, body, body_ok, edge, edge_ok):
    # A row cut by _aligned_span, its body xb and edge elements xe loaded (fp32, -inf where masked): one max
    # and one sum over both, then each part stored where it came from.
    m = tl.maximum(tl.max(xb, axis=0), tl.max(xe, axis=0))
    eb = _exp(xb - m)
    ee = _exp(xe - m)
    inv = 1.0 / (tl.sum(eb, axis=0) + tl.sum(ee, axis=0))
    tl.store(y_ptr + body, (eb * inv).to(y_ptr.dtype.element_ty), mask=body_ok)
    tl.store(y_ptr + edge, (ee * inv).to(y_ptr.dtype.element_ty), mask=edge_ok)


@triton.jit
def _softmax_row(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr, GROUPED: tl.constexpr,
                 GROUP: tl.constexpr, ALIGNED: tl.constexpr, VEC: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if GROUPED:  # see GROUPED_ROW_MAX
        offs = tl.arange(0, BLOCK_N // GROUP)[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
        ok = offs < N
        x = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=-float("inf")).to(tl.float32)
        m_g = tl.max(x, axis=1)
        safe_g = tl.where(m_g == -float("inf"), 0.0, m_g)  # a group of only -inf: its e are 0
        e = _exp(x - safe_g[:, None])
        m, s = tl.reduce((m_g, tl.sum(e, axis=1)), 0, _max_sum)
        # each group's scale exp(m_g - m) / s, written from safe_g (clamped: a group of only -inf gets
        # 1 / s, not exp(-m) = inf times its zeros) because Triton 3.6 then issues all the row's loads
        # before the first reduction; written from m_g, it held the last quarter's load back until after
        # the groups' sums (53 registers for 58): 82% of copy at 8192x16384 bf16 against 96.5
        y = e * (_exp(tl.minimum(safe_g - m, 0.0)) / s)[:, None]
        tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=ok)
    elif ALIGNED:  # see ALIGNED_BODY
        a0, b0, edge, edge_ok = _aligned_span(row * stride_x, row * stride_x + N, VEC)
        body = a0 + tl.arange(0, BLOCK_N)
        body_ok = body < b0
        xb = tl.load(x_ptr + body, mask=body_ok, other=-float("inf")).to(tl.float32)
        xe = tl.load(x_ptr + edge, mask=edge_ok, other=-float("inf")).to(tl.float32)
        _store_aligned_row(xb, xe, y_ptr, body, body_ok, edge, edge_ok)
    else:
        offs = tl.arange(0, BLOCK_N)
        ok = offs < N
        xf = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=-float("inf")).to(tl.float32)
        e = _exp(xf - tl.max(xf, axis=0))
        y = e * (1.0 / tl.sum(e, axis=0))
        tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _unpair(words, dtype: tl.constexpr):
    # 32-bit words of two 16-bit elements of `dtype` (the lower address in the low half): both as fp32
    lo = words.to(tl.int16).to(dtype, bitcast=True).to(tl.float32)
    hi = (words >> 16).to(tl.int16).to(dtype, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _softmax_row_pairs(x_ptr, y_ptr, stride_x, stride_y, zero, BLOCK_N: tl.constexpr):
    # A row of exactly BLOCK_N elements (see PAIRED_ROW_WARPS). `zero` is 0, an argument the compiler
    # cannot see through: the later passes unpack `words ^ zero` and `words ^ (zero >> 1)`, values it
    # cannot prove equal to `words`, so it converts them again instead of holding the first pass's fp32
    # row (twice the words' registers) across the reductions.
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N // 2)
    dtype = x_ptr.dtype.element_ty
    words = tl.load(x_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + row * (stride_x // 2) + offs)
    lo, hi = _unpair(words, dtype)
    m = tl.maximum(tl.max(lo, axis=0), tl.max(hi, axis=0))
    lo, hi = _unpair(words ^ zero, dtype)
    shift = m * LOG2E + tl.log2(tl.sum(_exp(lo - m), axis=0) + tl.sum(_exp(hi - m), axis=0))
    lo, hi = _unpair(words ^ (zero >> 1), dtype)
    # y's pairs joined before their conversion: two convert in one instruction (F2FP on sm_90)
    y = tl.reshape(tl.join(tl.exp2(lo * LOG2E - shift), tl.exp2(hi * LOG2E - shift)), (BLOCK_N,))
    tl.store(y_ptr + row * stride_y + tl.arange(0, BLOCK_N), y.to(y_ptr.dtype.element_ty))


if gluon is not None:
    @gluon.jit
    def _part_max_sum(buf, first: gl.constexpr, offs, ok_row, N, NCH: gl.constexpr, CHUNK: gl.constexpr,
                      layout: gl.constexpr):
        # (max, sum of exp(x - max)) of the part held in buf's chunks first .. first + NCH - 1
        m = gl.max(gl.full([CHUNK], -float("inf"), gl.float32, layout), axis=0)
        s = gl.sum(gl.zeros([CHUNK], gl.float32, layout), axis=0)
        for c in gl.static_range(NCH):
            cols = c * CHUNK + offs
            x = gl.where((cols < N) & ok_row, buf.index(first + c).load(layout).to(gl.float32), -float("inf"))
            new_m = gl.maximum(m, gl.max(x, axis=0))
            safe = gl.where(new_m == -float("inf"), 0.0, new_m)  # chunks of only -inf so far
            s = s * gl.exp2((m - safe) * LOG2E) + gl.sum(gl.exp2((x - safe) * LOG2E), axis=0)
            m = new_m
        return m, s

    @gluon.jit
    def _publish(words, team, part, it, m, s, W: gl.constexpr):
        # This program's partial of the row of iteration `it` as one 64-bit word: m's bits, then s's with
        # their low 8 bits replaced by it % 128 (s keeps 15 of its 23 mantissa bits: 3e-5 relative, under
        # a 16-bit output's rounding). The word is its own flag, so no fence orders it behind this
        # program's outstanding stores. Buffer it % 4 (W words a team: the P partials, and the dealt row's
        # word where rows are dealt): a program runs at most two rows ahead of a sibling.
        lo = (s.to(gl.int32, bitcast=True) & 0x7FFFFF00) | (it & 0x7F)
        word = (m.to(gl.int32, bitcast=True).to(gl.int64) << 32) | lo.to(gl.int64)
        gl.atomic_xchg(words + (team * 4 + it % 4) * W + part, word, sem="relaxed")

    @gluon.jit
    def _gather(words, team, it, slots, P: gl.constexpr, W: gl.constexpr, SPIN: gl.constexpr):
        # Every sibling's (max, sum) of the row of iteration `it`, and where rows are dealt (W = P + 1 words a
        # buffer) the row the team's first program posted after them (_post_row; -1 where not), once all W words
        # carry its stamp. The dealt row's word is read on a slot of its own beside the partials, so that the
        # slots stay one warp's lanes at P = 32 (P + 1 slots would span two warps: each reduction over them, the
        # spin's included, through shared memory behind barriers, 22 more BAR.SYNC at 262144).
        ok = slots < P
        dealt = (slots == 0) & (W > P)
        at = words + (team * 4 + it % 4) * W + slots
        # Volatile loads, not atomic reads: an aligned 64-bit load is single-copy atomic too, and a word
        # polled by every sibling is no longer an atomic target serialized in its L2 slice (layernorm
        # 512x262144: +2-3 points of copy; df8b865:experiments/sweep-h200-session18/call4-team-gather/).
        w = gl.load(at, mask=ok, other=0, volatile=True)
        wr = gl.load(at + P, mask=dealt, other=0, volatile=True)
        spins = 0
        while (gl.min(((((w & 0xFF).to(gl.int32) == (it & 0x7F)) | (slots >= P))
                       & (((wr & 0xFF).to(gl.int32) == (it & 0x7F)) | ~dealt)).to(gl.int32), axis=0) == 0) \
                & (spins < SPIN):
            w = gl.load(at, mask=ok, other=0, volatile=True)
            wr = gl.load(at + P, mask=dealt, other=0, volatile=True)
            spins += 1
        pm = gl.where(ok, (w >> 32).to(gl.int32).to(gl.float32, bitcast=True), -float("inf"))
        ps = gl.where(ok, (w & 0x7FFFFF00).to(gl.int32).to(gl.float32, bitcast=True), 0.0)
        return pm, ps, gl.max(gl.where(dealt, (wr >> 32).to(gl.int32), -1), axis=0)

    @gluon.jit
    def _claim(deal, lane, went):
        # The launch counter's next value, taken on the lanes `went` (lane 0 of the team's first program, while
        # the team's last claim found a row: see DEAL_ROWS). A tensor atomic, so that the value stays in that
        # thread's register until _post_row uses it after the reduce that follows: a scalar atomic would hand it
        # to every thread through shared memory behind a barrier, and the program would wait out the atomic's
        # round trip (~1 us) right there. Its address differs lane by lane (deal + lane; lanes past 0 are masked
        # off): at one address for the whole warp, ptxas aggregates the warp's adds and shuffles the value to the
        # lanes at once (SHFL.IDX right behind the ATOMG, Triton 3.6, sm_90), which is the same wait.
        return gl.atomic_add(deal + lane, lane * 0 + 1, mask=went, sem="relaxed")

    @gluon.jit
    def _post_row(words, deal, team, it, row, lead, went, lane, last, W: gl.constexpr, P: gl.constexpr):
        # The row the team takes two rows after the row of iteration `it` (M where its last claim found none),
        # as the word after the P partials of `it`: the row's index high, `it`'s stamp low, written by the
        # team's first program (`lead`) on the lane that claimed it (_claim), beside its partial. The siblings
        # read it in the gather they already wait on (no wait of its own) and copy that row into the half of
        # buf the row of `it` leaves. Same writer, readers and buffer as that partial, so the partials'
        # argument holds for it: overwritten (by it + 4) only once every sibling has gathered `it`, a stamp
        # never mistaken (it % 128, never UNSTAMPED). The claim (`went`) that got the launch's last value
        # (row `last`: each team claims until its first miss, so M - n_teams claims in all) sets the counter
        # back to 0 for the next launch: no claim follows it in this one.
        gl.atomic_xchg(words + (team * 4 + it % 4) * W + P + lane * 0, (row.to(gl.int64) << 32) | (it & 0x7F),
                       mask=(lane == 0) & lead, sem="relaxed")
        gl.atomic_xchg(deal + lane * 0, lane * 0, mask=went & (row == last), sem="relaxed")

    @gluon.jit
    def _cut(start, n, VEC: gl.constexpr):
        # Elements [start, start + n) of a tensor whose base is 16-byte aligned, cut at 16-byte boundaries
        # (see SMEM_CUT): the body's first element a0 and its length, both multiples of VEC (a row inside
        # one group: no body), so that cp.async copies the body as 16-byte groups.
        a0 = gl.multiple_of((start + VEC - 1) // VEC * VEC, VEC)
        b0 = gl.maximum((start + n) // VEC * VEC, a0)
        return a0, gl.multiple_of((b0 - a0).to(gl.int32), VEC)

    @gluon.jit
    def _cut_edge(start, n, j, VEC: gl.constexpr):
        # The elements _cut leaves at the row's two ends, on 2 VEC lanes j: the head [start, a0) on lanes
        # j < VEC, the tail [a0 + body, start + n) on the others; their columns (from start) and mask.
        a0, body = _cut(start, n, VEC)
        end = start + n
        at = gl.where(j < VEC, start + j, a0 + body + j - VEC)
        return (at - start).to(gl.int32), at < gl.where(j < VEC, gl.minimum(a0, end), end)

    @gluon.jit
    def _row_body(x_ptr, r, stride_x, off_x, N, CUT: gl.constexpr, VEC: gl.constexpr):
        # Where row r's part of columns 0, 1, ... that cp.async copies starts, and how many there are: the
        # whole row, or (CUT) its body from its first 16-byte boundary (x_ptr 16-byte aligned, the row at
        # element off_x + r * stride_x of it).
        if CUT:
            a0, body = _cut(r.to(gl.int64) * stride_x + off_x, N, VEC)
            return x_ptr + a0, body
        else:
            return x_ptr + r.to(gl.int64) * stride_x, N

    @gluon.jit
    def _y_body(y_ptr, r, stride_x, stride_y, off_x, off_y, N, CUT: gl.constexpr, Y_CUT: gl.constexpr,
                VEC: gl.constexpr):
        # Where row r's part that _row_body gives in x goes in y: the row's start, or (CUT) its body's, as many
        # elements into y's row r (at element off_y + r * stride_y of y_ptr) as x's body is into x's; Y_CUT: y's
        # rows at x's offsets from 16-byte boundaries (y_ptr 16-byte aligned), so that it is y's own cut,
        # which Triton sees as 16-byte groups.
        if CUT:
            if Y_CUT:
                return _row_body(y_ptr, r, stride_y, off_y, N, CUT, VEC)[0]
            else:
                start = r.to(gl.int64) * stride_x + off_x
                return y_ptr + (r.to(gl.int64) * stride_y + off_y + (_cut(start, N, VEC)[0] - start))
        else:
            return y_ptr + r.to(gl.int64) * stride_y

    @gluon.jit
    def _edge_load(x_ptr, r, stride_x, off_x, N, mine, j, VEC: gl.constexpr):
        # Row r's head and tail elements (_cut_edge) where `mine` (the program that owns them, r a row),
        # loaded element by element (cp.async moves 4 bytes at least); -inf elsewhere.
        start = r.to(gl.int64) * stride_x + off_x
        col, ok = _cut_edge(start, N, j, VEC)
        return gl.load(x_ptr + start + col, mask=ok & mine, other=-float("inf"))

    @gluon.jit
    def _with_edge(m, s, xe):
        # A part's (max, sum of exp(x - max)) with its row's edge elements xe (-inf where not its own)
        xe = xe.to(gl.float32)
        new_m = gl.maximum(m, gl.max(xe, axis=0))
        safe = gl.where(new_m == -float("inf"), 0.0, new_m)  # only -inf so far
        return new_m, s * gl.exp2((m - safe) * LOG2E) + gl.sum(gl.exp2((xe - safe) * LOG2E), axis=0)

    @gluon.jit(do_not_specialize=["off_x", "off_y"])  # one compilation for every offset 0-7
    def _softmax_smem_team(x_ptr, y_ptr, words, exits, deal, M, N, stride_x, stride_y, off_x, off_y,
                           CHUNK: gl.constexpr, NCH: gl.constexpr, P: gl.constexpr, P_POW2: gl.constexpr,
                           SPIN: gl.constexpr, CUT: gl.constexpr, Y_CUT: gl.constexpr, VEC: gl.constexpr,
                           DEAL: gl.constexpr):
        # Program `part` of team `team` owns columns [part * NCH * CHUNK, (part + 1) * NCH * CHUNK) of
        # its team's rows: team and team + n_teams first, then (DEAL, see DEAL_ROWS) each next one claimed
        # from the launch's counter `deal` by the team's first program, as rows 2 n_teams, 2 n_teams + 1, ...
        # in the order the teams ask, or (not DEAL) team + 2 n_teams, team + 3 n_teams, ... Shared memory
        # holds that part of two rows (halves 0 and 1 of buf, NCH chunks each, one cp.async commit group a
        # chunk). As in _softmax_split, row i+1's partial goes out before the wait for row i's siblings; while
        # it writes row i, each chunk it has read is refilled with row i+2, whose index (DEAL) came with row
        # i's partials, claimed by the first program before it reduced row i (_claim, _post_row).
        # CUT (see SMEM_CUT): the columns are those of each row's body, from its first 16-byte boundary
        # (x_ptr is 16-byte aligned, row r at element off_x + r * stride_x of it); program P - 1 also owns
        # the under 2 VEC elements at the row's ends (its edge), loaded into registers as its chunks are
        # copied, a row ahead of their use, and folded into its partial. Y_CUT: y's rows sit at the same
        # offsets from 16-byte boundaries as x's (y_ptr 16-byte aligned too), so the body's stores are
        # 16-byte vectors; else y's row r starts at element off_y + r * stride_y, stored element by element.
        layout: gl.constexpr = gl.BlockedLayout([8], [32], [gl.num_warps()], [0])
        slot_layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
        W: gl.constexpr = P + DEAL  # words a buffer: the partials, and the dealt row's
        buf = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [2 * NCH, CHUNK],
                                        gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        pid = gl.program_id(0)
        G = gl.num_programs(0)
        team = pid // P
        part = pid % P
        n_teams = G // P
        offs = part * (NCH * CHUNK) + gl.arange(0, CHUNK, layout)
        # y's rows not at x's offsets from 16-byte boundaries (CUT, not Y_CUT): stored element by element, one
        # element a thread a store, so that a warp's store writes 64 contiguous bytes (8 elements a thread would
        # scatter each store over 512 bytes, 2 of each 16: 8 times the L2's partial sector writes), a quarter
        # chunk at a time (a whole chunk of single-element stores spilled 224 bytes under Triton 3.9)
        out_layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
        SUB: gl.constexpr = CHUNK // 4
        lane_offs = gl.arange(0, SUB, out_layout)  # a quarter's columns from its first: scalars do the rest
        slots = gl.arange(0, P_POW2, slot_layout)
        zeros = gl.zeros([P_POW2], gl.int32, slot_layout)  # Triton 3.6's atomics take no scalar operand
        row = team
        nxt = team + n_teams
        if DEAL:
            lane = gl.arange(0, 32 * gl.num_warps(), slot_layout)  # one element a thread: lane 0 claims
            lead = part == 0
            last = M + n_teams - 1  # the row of the launch's last claim (see _post_row)
            went = (lane == 0) & lead & (nxt < M)  # the claiming lane: the first claim, where there is a row 1
            claim = _claim(deal, lane, went)
        if CUT:
            lanes = gl.arange(0, 2 * VEC, slot_layout)
            mine = part == P - 1
            e_row = _edge_load(x_ptr, row, stride_x, off_x, N, mine, lanes, VEC)
            e_nxt = _edge_load(x_ptr, nxt, stride_x, off_x, N, mine & (nxt < M), lanes, VEC)

        for h in gl.static_range(2):  # rows team and team + n_teams (no more teams than rows)
            r = team + h * n_teams
            src, n = _row_body(x_ptr, r, stride_x, off_x, N, CUT, VEC)
            for c in gl.static_range(NCH):
                cols = c * CHUNK + offs
                copy_to_shared(buf.index(h * NCH + c), src + cols, mask=(cols < n) & (r < M))
                cp.commit_group()
        cp.wait_group(NCH)  # the first row's groups (the second row's may still be in flight)
        cta_barrier()  # every thread's copies, not only this one's
        n = _row_body(x_ptr, row, stride_x, off_x, N, CUT, VEC)[1]
        m, s = _part_max_sum(buf, 0, offs, row < M, n, NCH, CHUNK, layout)
        if CUT:
            m, s = _with_edge(m, s, e_row)
        if DEAL:
            got = gl.where(went, 2 * n_teams + claim, M)  # the claim's first use: its round trip under the reduce
            _post_row(words, deal, team, 0, got, lead, went, lane, last, W, P)
        _publish(words, team, part, 0, m, s, W)

        # two rows an iteration, so that each half of buf is named by a constant (Triton 3.6 does not
        # compile a runtime index here)
        it = 0
        while row < M:
            for half in gl.static_range(2):
                if row < M:
                    # no partial of a row past the last: its reduce (an exponential an element, ~2 us) would sit
                    # between the program's last gather and its last writes, in the launch's tail (sm60, H100:
                    # 512x50257 bf16 43.7 -> 41.9 us, 77.9 -> 81.1% of copy)
                    if nxt < M:
                        if DEAL:  # claimed here, used after the reduce below: its round trip under the reduce
                            went = (lane == 0) & lead & (got < M)  # until the team's first miss
                            claim = _claim(deal, lane, went)
                        cp.wait_group(0)  # the next row's groups are the only ones outstanding
                        cta_barrier()
                        n = _row_body(x_ptr, nxt, stride_x, off_x, N, CUT, VEC)[1]
                        mn, sn = _part_max_sum(buf, (1 - half) * NCH, offs, nxt < M, n, NCH, CHUNK, layout)
                        if CUT:
                            mn, sn = _with_edge(mn, sn, e_nxt)
                        if DEAL:
                            got = gl.where(went, 2 * n_teams + claim, M)
                            _post_row(words, deal, team, it + 1, got, lead, went, lane, last, W, P)
                        _publish(words, team, part, it + 1, mn, sn, W)
                    pm, ps, dealt = _gather(words, team, it, slots, P, W, SPIN)
                    gm = gl.max(pm, axis=0)
                    shift = gm * LOG2E + gl.log2(gl.sum(ps * gl.exp2((pm - gm) * LOG2E), axis=0))
                    if DEAL:  # the row its first program posted beside its partial of this row
                        ahead = dealt
                    else:
                        ahead = row + 2 * n_teams
                    if CUT:
                        e_ahead = _edge_load(x_ptr, ahead, stride_x, off_x, N, mine & (ahead < M), lanes, VEC)
                    src, n_ahead = _row_body(x_ptr, ahead, stride_x, off_x, N, CUT, VEC)  # bodies differ a row
                    n = _row_body(x_ptr, row, stride_x, off_x, N, CUT, VEC)[1]
                    y_row = _y_body(y_ptr, row, stride_x, stride_y, off_x, off_y, N, CUT, Y_CUT, VEC)
                    for c in gl.static_range(NCH):
                        cols = c * CHUNK + offs
                        if CUT and not Y_CUT:  # stored from shared memory before the refill (see out_layout)
                            for q in gl.static_range(CHUNK // SUB):
                                first = part * (NCH * CHUNK) + c * CHUNK + q * SUB
                                x = buf.index(half * NCH + c).slice(q * SUB, SUB).load(out_layout).to(gl.float32)
                                gl.store(y_row + first + lane_offs,
                                         gl.exp2(x * LOG2E - shift).to(y_ptr.dtype.element_ty),
                                         mask=lane_offs < n - first)
                            cta_barrier()  # every warp has read chunk c: refill it with the row after next
                            copy_to_shared(buf.index(half * NCH + c), src + cols,
                                           mask=(cols < n_ahead) & (ahead < M))
                            cp.commit_group()
                        else:
                            x = buf.index(half * NCH + c).load(layout).to(gl.float32)
                            cta_barrier()  # every warp has read chunk c: refill it with the row after next
                            copy_to_shared(buf.index(half * NCH + c), src + cols,
                                           mask=(cols < n_ahead) & (ahead < M))
                            cp.commit_group()
                            gl.store(y_row + cols, gl.exp2(x * LOG2E - shift).to(y_ptr.dtype.element_ty),
                                     mask=cols < n)
                    if CUT:
                        col, ok = _cut_edge(row.to(gl.int64) * stride_x + off_x, N, lanes, VEC)
                        gl.store(y_ptr + (row.to(gl.int64) * stride_y + off_y) + col,
                                 gl.exp2(e_row.to(gl.float32) * LOG2E - shift).to(y_ptr.dtype.element_ty),
                                 mask=ok & mine)
                        e_row = e_nxt
                        e_nxt = e_ahead
                    row = nxt
                    nxt = ahead
                    it += 1
        cp.wait_group(0)
        # unstamp the team's words for the next launch: the last program of the team to get here knows
        # that all P have left their waits
        done = gl.atomic_add(exits + team, 1, sem="acq_rel")
        if done == P - 1:
            for k in gl.static_range(4):
                gl.atomic_xchg(words + (team * 4 + k) * W + slots, (zeros + UNSTAMPED).to(gl.int64),
                               mask=slots < P, sem="relaxed")
                if DEAL:  # the dealt row's word
                    gl.atomic_xchg(words + (team * 4 + k) * W + P + slots, (zeros + UNSTAMPED).to(gl.int64),
                                   mask=slots == 0, sem="relaxed")
            gl.atomic_xchg(exits + team, 0, sem="release")


@triton.jit
def _stamp(words, at, value, it):
    # fp32 `value` of the row of iteration `it` as one 64-bit word: its bits high, the stamp it % 128
    # low. The word is its own flag: no fence orders it behind the program's outstanding stores.
    tl.atomic_xchg(words + at, (value.to(tl.int32, bitcast=True).to(tl.int64) << 32) | (it & 0x7F), sem="relaxed")


@triton.jit
def _stamped(words, at, slots, it, P: tl.constexpr, SPIN: tl.constexpr):
    # The fp32 values at words + at[slot] (slot < P), once every one carries the stamp of iteration `it`.
    # Read by volatile loads, as the 16-bit team's _gather reads: fp32 rows of 65536 / 131072 / 262144
    # 85.1 / 84.2 / 78.2 -> 86.9 / 86.5 / 81.4% of copy (its A/B,
    # df8b865:experiments/sweep-h200-session18/call7-split-gather/).
    ok = slots < P
    w = tl.load(words + at, mask=ok, other=0, volatile=True)
    spins = 0
    while (tl.min(((w & 0xFF) == (it & 0x7F)) | (slots >= P), axis=0) == 0) & (spins < SPIN):
        w = tl.load(words + at, mask=ok, other=0, volatile=True)
        spins += 1
    return (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)


@triton.jit
def _unstamp(words, exits, team, slots, WORDS: tl.constexpr, P: tl.constexpr):
    # The last program of the team to leave (so all P have left their waits) unstamps the team's WORDS * P
    # words and zeroes its exit counter: the next launch finds them as the launcher made them.
    done = tl.atomic_add(exits + team, 1, sem="acq_rel")
    if done == P - 1:
        for k in tl.static_range(WORDS):
            tl.atomic_xchg(words + (team * WORDS + k) * P + slots, tl.full(slots.shape, UNSTAMPED, tl.int64),
                           mask=slots < P, sem="relaxed")
        tl.atomic_xchg(exits + team, 0, sem="release")


@triton.jit
def _chunk(row, stride, part, N, BLOCK_N: tl.constexpr, VEC: tl.constexpr, ALIGNED: tl.constexpr):
    # Offsets and masks of the columns [part * BLOCK_N, (part + 1) * BLOCK_N) of a row: cut at 16-byte
    # boundaries where ALIGNED (see ALIGNED_BODY), else one run of columns and an edge of no element.
    start = row * stride + part * BLOCK_N
    if ALIGNED:
        a0, b0, edge, edge_ok = _aligned_span(start, row * stride + tl.minimum((part + 1) * BLOCK_N, N), VEC)
        body = a0 + tl.arange(0, BLOCK_N)
        body_ok = body < b0
    else:
        cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
        body, body_ok = row * stride + cols, cols < N
        edge = start + tl.arange(0, 2 * VEC)
        edge_ok = edge < start
    return body, body_ok, edge, edge_ok


@triton.jit
def _chunk_max_sum(xb, xe):
    # (max, sum of exp(x - max)) of a chunk held as body and edge; a chunk of only -inf: (-inf, 0)
    m = tl.maximum(tl.max(xb, axis=0), tl.max(xe, axis=0))
    safe = tl.where(m == -float("inf"), 0.0, m)
    return m, tl.sum(_exp(xb - safe), axis=0) + tl.sum(_exp(xe - safe), axis=0)


@triton.jit
def _softmax_split(x_ptr, y_ptr, words, exits, M, N, stride_x, stride_y,
                   BLOCK_N: tl.constexpr, P: tl.constexpr, P_POW2: tl.constexpr, MAX_SPIN: tl.constexpr,
                   ALIGNED: tl.constexpr, VEC: tl.constexpr):
    # Program `part` of team `team` owns columns [part*BLOCK_N, (part+1)*BLOCK_N)
    # of rows team, team + n_teams, ... Per row it publishes its partial
    # (max, sum) as two stamped words (_stamp). The exchange is
    # software-pipelined: a program publishes row i+1's partial BEFORE it waits
    # for its siblings' row-i partials, so the wait overlaps a whole chunk load.
    # A program can then be up to 3 rows ahead of a sibling that is still
    # reading, hence 4 buffers of partials (indexed by iteration % 4).
    # ALIGNED: stride_x == stride_y, and each chunk is cut at 16-byte boundaries (see ALIGNED_BODY).
    pid = tl.program_id(0)
    team = pid // P
    part = pid % P
    n_teams = tl.num_programs(0) // P
    slots = tl.arange(0, P_POW2)

    # row `team` (< M: the launcher never makes more teams than rows)
    body, body_ok, edge, edge_ok = _chunk(tl.cast(team, tl.int64), stride_x, part, N, BLOCK_N, VEC, ALIGNED)
    xb = tl.load(x_ptr + body, mask=body_ok, other=-float("inf")).to(tl.float32)
    xe = tl.load(x_ptr + edge, mask=edge_ok, other=-float("inf")).to(tl.float32)
    m, s = _chunk_max_sum(xb, xe)
    _stamp(words, team * 8 * P + part, m, 0)
    _stamp(words, (team * 8 + 1) * P + part, s, 0)

    it = 0
    for row in range(team, M, n_teams):
        # next row: load, reduce, publish
        nxt = tl.minimum(row + n_teams, M - 1)  # past the last row: that row again, published, unused
        body, body_ok, edge, edge_ok = _chunk(tl.cast(nxt, tl.int64), stride_x, part, N, BLOCK_N, VEC, ALIGNED)
        xbn = tl.load(x_ptr + body, mask=body_ok, other=-float("inf")).to(tl.float32)
        xen = tl.load(x_ptr + edge, mask=edge_ok, other=-float("inf")).to(tl.float32)
        mn, sn = _chunk_max_sum(xbn, xen)
        nbuf = (team * 4 + (it + 1) % 4) * 2
        _stamp(words, nbuf * P + part, mn, it + 1)
        _stamp(words, (nbuf + 1) * P + part, sn, it + 1)
        # this row: every sibling's (max, sum), once published
        buf = (team * 4 + it % 4) * 2
        pm = tl.where(slots < P, _stamped(words, buf * P + slots, slots, it, P, MAX_SPIN), -float("inf"))
        ps = tl.where(slots < P, _stamped(words, (buf + 1) * P + slots, slots, it, P, MAX_SPIN), 0.0)
        gm = tl.max(pm, axis=0)
        inv = 1.0 / tl.sum(ps * _exp(pm - gm), axis=0)
        body, body_ok, edge, edge_ok = _chunk(tl.cast(row, tl.int64), stride_y, part, N, BLOCK_N, VEC, ALIGNED)
        tl.store(y_ptr + body, (_exp(xb - gm) * inv).to(y_ptr.dtype.element_ty), mask=body_ok)
        tl.store(y_ptr + edge, (_exp(xe - gm) * inv).to(y_ptr.dtype.element_ty), mask=edge_ok)
        xb = xbn
        xe = xen
        it += 1
    _unstamp(words, exits, team, slots, 8, P)


@triton.jit
def _softmax_streamed(x_ptr, y_ptr, N, stride_x, stride_y,
                      BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr):
    # One program per row, two passes over it in BLOCK_N chunks. Pass 1 keeps a
    # running (max, sum), the sum rescaled by exp(old max - new max) when the max
    # grows. Pass 2 re-reads the row and writes it: up to 1.5x the minimal
    # traffic, as two thirds of the second read miss L2 at 512x262144 (ncu,
    # df8b865:experiments/worst-shapes-h200/streamed-2026-12-01; walking pass 2 last
    # chunk first, to start with what pass 1 left in L2, changed nothing).
    # Pipelined loads (num_stages) keep enough bytes in flight, which the
    # 16-bit team could not (experiments/worst-shapes-h200/).
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    n_chunks = tl.cdiv(N, BLOCK_N)
    x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
    y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
    m = tl.max(tl.full([BLOCK_N], -float("inf"), tl.float32), axis=0)
    s = tl.sum(tl.zeros([BLOCK_N], tl.float32), axis=0)
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf"), eviction_policy="evict_last")
        x = x.to(tl.float32)
        new_m = tl.maximum(m, tl.max(x, axis=0))
        safe = tl.where(new_m == -float("inf"), 0.0, new_m)  # a chunk of only -inf adds 0
        s = s * _exp(m - safe) + tl.sum(_exp(x - safe), axis=0)
        m = new_m
    inv = 1.0 / s
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        ok = cols < N
        x = tl.load(x_row + cols, mask=ok, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        tl.store(y_row + cols, (_exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=ok,
                 eviction_policy="evict_first")


# ---------------------------------------------------------------------------
# launcher

_OCCUPANCY = {}
_TEAM_WORDS = {}
_TEAM_FAILED = {}  # (device, cut) -> why the shared-memory team did not compile or launch there


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
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def _programs_per_sm(kernel, args, constexprs, num_warps, num_stages, device) -> int:
    """How many programs of this compiled kernel fit on one SM at once."""
    return _fit(kernel, args, constexprs, num_warps, num_stages, device)[0]


def _fit(kernel, args, constexprs, num_warps, num_stages, device) -> tuple[int, int]:
    """(programs an SM, spilled bytes) of this compiled kernel; (1, 0) if unknown."""
    key = (kernel.fn.__name__ if hasattr(kernel, "fn") else id(kernel), tuple(sorted(constexprs.items())),
           num_warps, num_stages, str(args[0].dtype), device.index)
    if key in _OCCUPANCY:
        return _OCCUPANCY[key]
    occ, spills = 1, 0
    if device.type == "cuda" and not _interpreting():
        try:
            compiled = kernel.warmup(*args, **constexprs, num_warps=num_warps, num_stages=num_stages, grid=(1,))
            compiled._init_handles()
            spills = compiled.n_spills
            props = torch.cuda.get_device_properties(device)
            threads = 32 * num_warps
            regs_per_sm = getattr(props, "regs_per_multiprocessor", 65536)
            smem_per_sm = getattr(props, "shared_memory_per_multiprocessor", 228 * 1024)
            threads_per_sm = getattr(props, "max_threads_per_multi_processor", 2048)
            n_regs = max(1, -(-compiled.n_regs // 8) * 8)  # allocated per warp in steps of 8 per thread
            smem = compiled.metadata.shared
            occ = min(threads_per_sm // threads, regs_per_sm // (n_regs * threads), 32)
            if smem:
                occ = min(occ, smem_per_sm // (smem + 1024))  # 1 KB per block reserved by the driver
            occ = max(1, occ)
        except Exception:
            occ, spills = 1, 0  # unknown: one program per SM is always co-resident
    _OCCUPANCY[key] = occ, spills
    return occ, spills


def _row_warps(kernel, args, constexprs, M: int, row_bytes: int, sms: int, device) -> int:
    """Of ROW_WARPS, the warps with which a compiled one-row-a-program kernel keeps the most bytes of rows in
    flight an SM, up to IN_FLIGHT_BYTES; ties, WHOLE_ROW_WARPS, else the most warps; never one that spills
    (see ROW_WARPS)."""
    rows_an_sm = triton.cdiv(M, sms)

    def held(warps):
        occ, spills = _fit(kernel, args, constexprs, warps, 1, device)
        return -1 if spills else min(min(occ, rows_an_sm) * row_bytes, IN_FLIGHT_BYTES)
    return max(ROW_WARPS, key=lambda warps: (held(warps), warps == WHOLE_ROW_WARPS, warps))


def _rows_grid(M: int, rows: int, sms: int, occ: int, cfg: dict) -> int:
    """PERSISTENT: one wave of resident programs that loop over the row tiles;
    else one program per tile (the hardware schedules the waves)."""
    tiles = triton.cdiv(M, rows)
    return min(tiles, sms * occ) if int(cfg.get("PERSISTENT", 1)) else tiles


# fp32 rows of at most BLOCK_SIZE on an NVIDIA GPU (unless a config is passed): one row a program, on the
# warps Triton's fused-softmax tutorial gives a row (8 elements a thread), instead of CONFIG's tile of rows
# on its warps. Measured on the H200 against the tutorial's kernel in one process (benchmarks/peer_rows.py;
# the run before the change, df8b865:experiments/sweep-h200-session29/call12-peer-rows/), % of copy, softmax / rmsnorm /
# layernorm: 131072x1024 CONFIG 97.0 / 96.7 / 96.8 against the one-row kernel's 99.6 / 99.6 / 99.5;
# 32768x4096 96.9 / 97.2 / 97.7 against 98.0 / 97.7 / 98.1. 16-bit rows keep CONFIG's tiles (there the
# one-row kernel read 79-93%); the interpreter keeps CONFIG, whose knobs a tuner moves there. With it (the
# run after, call13-peer-rows-after/ beside): 131072x1024 99.7 / 99.6 / 99.9, 32768x4096 98.1 / 97.6 and
# layernorm's one row on 16 warps 94.5, so layernorm's rows of 4096 keep CONFIG (one row on 4 warps there).
# Four rounds since (experiments/sweep-h200/peer-rows/): softmax fp32 x0.999-1.004 the peer.
FP32_ROW_WARPS = [(1024, 4), (2048, 8), (4096, 16)]  # (longest row, num_warps); longer rows: CONFIG


last_config = {}  # which kernel served the latest launch (the benchmark reports it: Spec.launched)


def softmax(x: torch.Tensor, out: torch.Tensor | None = None, config: dict | None = None) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D (or flattened) tensor."""
    cfg = dict(CONFIG, **(config or {}))
    assert x.stride(-1) == 1, "last dimension must be contiguous"
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

    if P == 1:
        block_n = max(16, triton.next_power_of_2(N))
        rows = max(1, block // block_n)
        one_row_warps = next((w for longest, w in FP32_ROW_WARPS if block_n <= longest), None)
        if config is None and x.element_size() == 4 and one_row_warps and _on_nvidia_gpu(x):
            rows, num_warps = 1, one_row_warps
        unit = _row_unit(x2, y2)
        args = (x2, y2, M, N // unit, x2.stride(0) // unit, y2.stride(0) // unit)
        consts = {"BLOCK_N": block_n, "ROWS": rows, "NUM_STAGES": num_stages, "EVEN": N == block_n and M % rows == 0,
                  "UNIT": unit, "ALIGNED": False, "VEC": 16 // x.element_size()}
        occ = _programs_per_sm(_softmax_rows, args, consts, num_warps, num_stages, dev)
        grid = (_rows_grid(M, rows, sms, occ, cfg),)
        # BLOCK_SIZE and num_warps as launched: the sweep's "ran" column then says when fp32 rows ran one
        # a program (BLOCK_SIZE the row's) rather than CONFIG's tile.
        last_config.update(kernel="_softmax_rows", BLOCK_SIZE=rows * block_n, num_warps=num_warps)
        _softmax_rows[grid](*args, **consts, num_warps=num_warps, num_stages=num_stages)
        return y

    # 16-bit rows over GROUPED_ROW_MAX up to WHOLE_ROW_MAX not in 16-element groups: their bodies pipelined
    # (see PIPELINED_BODIES)
    if (GROUPED_ROW_MAX < N <= WHOLE_ROW_MAX and x.element_size() == 2 and _aligned_body(x2, y2)
            and _launch_pipelined(x2, y2, M, N, sms, True)):
        return y

    # 16-bit rows over GROUPED_ROW_MAX not in 16-element groups (that the pipelined loop did not take): the
    # shared-memory team on their bodies cut at 16-byte boundaries (see SMEM_CUT), else the split team (see
    # 'Rows not in ...' by SPLIT)
    if N > GROUPED_ROW_MAX and x.element_size() == 2 and not _rows_of_16(x2, y2):
        if _smem_team_cuts(x2, y2) and _launch_smem_team(x2, y2, M, N, sms, cut=True):
            return y
        if _launch_split(x2, y2, M, N, sms):
            return y

    if (GROUPED_ROW_MAX < N <= WHOLE_ROW_MAX and N == triton.next_power_of_2(N)
            and x.element_size() == y.element_size() == 2 and _rows_of_16(x2, y2)):
        args = (x2, y2, x2.stride(0), y2.stride(0), 0)
        if _programs_per_sm(_softmax_row_pairs, args, {"BLOCK_N": N}, PAIRED_ROW_WARPS, 1, dev) >= 2:
            last_config["kernel"] = "_softmax_row_pairs"
            _softmax_row_pairs[(M,)](*args, BLOCK_N=N, num_warps=PAIRED_ROW_WARPS)
            return y

    if GROUPED_ROW_MAX < N <= WHOLE_ROW_MAX and x.element_size() == 2 and _launch_pipelined(x2, y2, M, N, sms, False):
        return y

    if N > GROUPED_ROW_MAX and _smem_team_run(x2, y2) and _launch_smem_team(x2, y2, M, N, sms):
        return y

    if N <= WHOLE_ROW_MAX:
        grouped = x.element_size() == 2 and N <= GROUPED_ROW_MAX and _rows_of_16(x2, y2)
        args = (x2, y2, N, x2.stride(0), y2.stride(0))
        block_n = triton.next_power_of_2(N)
        consts = {"BLOCK_N": block_n, "GROUPED": grouped, "GROUP": min(GROUP, block_n),
                  "ALIGNED": not grouped and _aligned_body(x2, y2), "VEC": 16 // x.element_size()}
        warps = WHOLE_ROW_WARPS
        if not grouped and N <= GROUPED_ROW_MAX and _on_nvidia_gpu(x):  # see ROW_WARPS
            warps = _row_warps(_softmax_row, args, consts, M, N * x.element_size(), sms, dev)
        last_config.update(kernel="_softmax_row", ALIGNED=consts["ALIGNED"])
        _softmax_row[(M,)](*args, **consts, num_warps=warps)
        return y

    if x.element_size() == 4 and _launch_split(x2, y2, M, N, sms):
        return y

    _launch_streamed(x2, y2, M, N)
    return y


def _launch_split(x2, y2, M, N, sms) -> bool:
    """Launch _softmax_split on SPLIT's chunk and warps with as many teams as fit the GPU at once; False in
    the interpreter (it runs programs one after another: a team would wait forever) or where not even one
    team of P programs fits."""
    if _interpreting():
        return False
    words, exits = _team_words(x2.device, sms * 32)
    args = (x2, y2, words, exits, M, N, x2.stride(0), y2.stride(0))
    P = triton.cdiv(N, SPLIT["BLOCK_N"])
    consts = {"BLOCK_N": SPLIT["BLOCK_N"], "P": P, "P_POW2": triton.next_power_of_2(P), "MAX_SPIN": MAX_SPIN,
              "ALIGNED": _aligned_body(x2, y2), "VEC": 16 // x2.element_size(), "maxnreg": SPLIT["maxnreg"]}
    occ = _programs_per_sm(_softmax_split, args, consts, SPLIT["num_warps"], 1, x2.device)
    teams = min(M, (sms * occ) // P)
    if teams < 1:
        return False
    last_config.update(kernel="_softmax_split", ALIGNED=consts["ALIGNED"])
    _softmax_split[(teams * P,)](*args, **consts, num_warps=SPLIT["num_warps"], num_stages=1)
    return True


def _launch_pipelined(x2, y2, M, N, sms, aligned: bool) -> bool:
    """Launch _softmax_rows on one row a tile on a persistent grid, with as many stages as fit
    (_pipelined_stages): on each row's body cut at 16-byte boundaries where `aligned`, on the warps and
    stages _pipelined_choice picks (see PIPELINED_BODIES); else on the whole row, PIPELINED_ROWS's warps.
    False where too few stages fit or nothing pipelines."""
    vec = 16 // x2.element_size()
    block_n = triton.next_power_of_2(N // vec * vec if aligned else N)  # a body is at most N's whole groups
    stages = _pipelined_stages(x2.device, block_n * x2.element_size())
    if not stages:
        return False
    args = (x2, y2, M, N, x2.stride(0), y2.stride(0))
    consts = {"BLOCK_N": block_n, "ROWS": 1, "NUM_STAGES": stages, "EVEN": not aligned and N == block_n,
              "UNIT": 1, "ALIGNED": aligned, "VEC": vec}
    warps = PIPELINED_ROWS["num_warps"]
    if aligned and _on_nvidia_gpu(x2):
        warps, stages = _pipelined_choice(args, consts, M, N * x2.element_size(), stages, sms, x2.device)
        consts["NUM_STAGES"] = stages
    occ = _programs_per_sm(_softmax_rows, args, consts, warps, stages, x2.device)
    last_config.update(kernel="_softmax_rows", ALIGNED=aligned, num_warps=warps, num_stages=stages)
    _softmax_rows[(min(M, sms * occ),)](*args, **consts, num_warps=warps, num_stages=stages)
    return True


def _pipelined_choice(args, consts, M: int, row_bytes: int, most_stages: int, sms: int, device) -> tuple[int, int]:
    """Of PIPELINED_BODY_WARPS and MIN_PIPELINED_STAGES to most_stages, the (warps, stages) whose compiled
    loop keeps the most bytes of rows in flight an SM (programs an SM times stages - 1 rows each, no more
    rows than the grid gives an SM, counted up to IN_FLIGHT_BYTES); ties to PIPELINED_ROWS's warps, then to
    more stages; never one that spills (see PIPELINED_BODIES)."""
    rows_an_sm = triton.cdiv(M, sms)

    def held(choice):
        warps, stages = choice
        occ, spills = _fit(_softmax_rows, args, dict(consts, NUM_STAGES=stages), warps, stages, device)
        return -1 if spills else min(min(occ * (stages - 1), rows_an_sm) * row_bytes, IN_FLIGHT_BYTES)
    choices = [(w, s) for w in PIPELINED_BODY_WARPS for s in range(MIN_PIPELINED_STAGES, most_stages + 1)]
    return max(choices, key=lambda c: (held(c), c[0] == PIPELINED_ROWS["num_warps"], c[1]))


def _pipelined_stages(device, row_bytes: int) -> int:
    """PIPELINED_ROWS's stages, or as many as this GPU's shared memory a program holds (Triton keeps
    stages - 1 rows of row_bytes there, beside a little scratch); 0 when that is under
    MIN_PIPELINED_STAGES, off NVIDIA GPUs with cp.async (sm_80 and newer: the pipeline's copies) and in
    the interpreter (which has no pipeline)."""
    if device.type != "cuda" or torch.version.hip or _interpreting() or torch.cuda.get_device_capability(device)[0] < 8:
        return 0
    props = torch.cuda.get_device_properties(device)
    smem = getattr(props, "shared_memory_per_block_optin", props.shared_memory_per_block)
    stages = min(PIPELINED_ROWS["num_stages"], 1 + (smem - 1024) // row_bytes)
    return stages if stages >= MIN_PIPELINED_STAGES else 0


def _smem_team_run(x2, y2) -> bool:
    """Whether _softmax_smem_team can take these rows: Gluon present, an NVIDIA GPU with cp.async
    (sm_80 and newer), not the interpreter, 16-bit rows whose length, row stride and start Triton
    sees as multiples of 16 elements (it specializes arguments on 16), so that its copies can move
    8-element groups (16 bytes): cp.async moves 4 bytes at least, and a row of 16-bit elements
    whose mask or stride Triton cannot prove 8-aligned fails to compile. Other 16-bit rows: cut
    (_smem_team_cuts)."""
    return _smem_team_device(x2) and _rows_of_16(x2, y2)


def _smem_team_cuts(x2, y2) -> bool:
    """Whether _softmax_smem_team can take these 16-bit rows cut at their 16-byte boundaries (see SMEM_CUT):
    where it runs (_smem_team_device), x's start a whole element past 16 bytes and that address in its storage
    (_base_offset), so that the kernel can be given a 16-byte aligned x. y: any."""
    return _smem_team_device(x2) and _base_offset(x2) is not None


def _smem_team_device(x2) -> bool:
    """Gluon present, 16-bit x on an NVIDIA GPU with cp.async (sm_80 and newer), not the interpreter."""
    if gluon is None or x2.device.type != "cuda" or torch.version.hip or _interpreting():
        return False
    return x2.element_size() == 2 and torch.cuda.get_device_capability(x2.device)[0] >= 8


def _base_offset(t):
    """The elements from t's start rounded down to 16 bytes to its start, or None where that address is not in
    t's storage (a tensor over memory that does not begin on 16 bytes) or t's start is not a whole element
    past it."""
    skew = t.data_ptr() % 16
    if skew % t.element_size() or t.storage_offset() * t.element_size() < skew:
        return None
    return skew // t.element_size()


def _aligned_base(t):
    """(a view of t's storage at t's start rounded down to 16 bytes, _base_offset), or None (see there)."""
    off = _base_offset(t)
    return None if off is None else (t.as_strided((1,), (1,), t.storage_offset() - off), off)


def _rows_of_16(x2, y2) -> bool:
    """Whether Triton sees these rows' length, row stride and start as multiples of 16 elements (it
    specializes arguments on 16): then a mask covers whole 8-element groups of a 16-bit row."""
    return all(t.shape[-1] % 16 == 0 and t.stride(0) % 16 == 0 and t.data_ptr() % 16 == 0 for t in (x2, y2))


def _aligned_body(x2, y2) -> bool:
    """Whether a row's elements sit at the same offsets from 16-byte boundaries in x and y, and Triton
    does not already see them in 16-element groups (_rows_of_16): x and y 16-byte aligned (Triton then
    specializes their pointers on 16), one row stride. Then each row can be loaded and stored as 16-byte
    vectors over its whole groups, and element by element only at its ends (see ALIGNED_BODY)."""
    return (x2.stride(0) == y2.stride(0) and x2.data_ptr() % 16 == 0 and y2.data_ptr() % 16 == 0
            and x2.element_size() == y2.element_size() and not _rows_of_16(x2, y2))


def _row_unit(x2, y2) -> int:
    """The 16-byte group's elements where the rows' length and both strides are multiples of it, x and y
    16-byte aligned, and Triton does not already see them in 16-element groups; else 1 (see ROW_UNIT)."""
    vec = 16 // x2.element_size()
    whole = all(n % vec == 0 for n in (x2.shape[-1], x2.stride(0), y2.stride(0)))
    return vec if whole and x2.data_ptr() % 16 == 0 and y2.data_ptr() % 16 == 0 and not _rows_of_16(x2, y2) else 1


def _launch_smem_team(x2, y2, M, N, sms, cut: bool = False) -> bool:
    """Launch _softmax_smem_team with as many programs an SM as fit (up to SMEM_TEAM's); False when
    not even one team of P programs fits the GPU at once, or when it failed to compile or launch on this
    device before (_TEAM_FAILED). `cut`: on each row's body cut at 16-byte boundaries (see SMEM_CUT),
    P parts enough for the longest body, N's whole 16-byte groups."""
    if (x2.device, cut) in _TEAM_FAILED:
        return False
    st = SMEM_TEAM
    vec = 16 // x2.element_size()
    P = _team_parts(N, st["CHUNK"] * st["NCH"], vec if cut else 1)
    words, exits = _team_words(x2.device, sms * 32)
    x_arg, off_x, y_arg, off_y, y_cut = _cut_args(x2, y2) if cut else (x2, 0, y2, 0, False)
    args = (x_arg, y_arg, words, exits, exits[-1:], M, N, x2.stride(0), y2.stride(0), off_x, off_y)
    consts = {"CHUNK": st["CHUNK"], "NCH": st["NCH"], "P": P, "P_POW2": triton.next_power_of_2(P), "SPIN": MAX_SPIN,
              "CUT": cut, "Y_CUT": y_cut, "VEC": vec, "DEAL": True, "maxnreg": st["maxnreg"]}
    # programs an SM as the kernel that deals rows compiles (maxnreg holds it and the static deal to the same 96
    # registers, the same shared memory): which one runs depends on the teams
    occ = min(st["PROGRAMS_PER_SM"], _programs_per_sm(_softmax_smem_team, args, consts, st["num_warps"], 1, x2.device))
    teams = min(M, (sms * occ) // P)
    if teams < 1:
        return False
    deal = M > 2 * teams  # DEAL_ROWS: some row past each team's first two
    consts["DEAL"] = deal
    try:
        last_config.update(kernel="_softmax_smem_team", CUT=cut, Y_CUT=y_cut, DEAL=deal)
        _softmax_smem_team[(teams * P,)](*args, **consts, num_warps=st["num_warps"])
    except Exception as e:  # Gluon changes between Triton releases: fall back, and say so once
        lines = str(e).strip().splitlines()
        _TEAM_FAILED[x2.device, cut] = f"{type(e).__name__}: {lines[-1] if lines else ''}"
        warnings.warn(f"softmax: the shared-memory team{' (rows cut at 16-byte boundaries)' if cut else ''} does not "
                      f"run with Triton {triton.__version__} here ({_TEAM_FAILED[x2.device, cut]}); other kernels "
                      f"take its rows")
        return False
    return True


def _team_parts(N: int, part: int, vec: int) -> int:
    """The shared-memory team's programs a row: parts of `part` elements enough for N's whole groups of vec
    (vec 1: the whole row; a row cut at 16-byte boundaries has a body of at most N // vec * vec), one at
    least (the one that holds the row's edge)."""
    return max(1, triton.cdiv(N // vec * vec, part))


def _cut_args(x2, y2):
    """(x, off_x, y, off_y, Y_CUT) as _softmax_smem_team takes rows cut at 16-byte boundaries (see SMEM_CUT):
    x at its start rounded down to 16 bytes (_aligned_base) and its start's elements past it; y likewise
    where its rows sit at x's offsets from 16-byte boundaries, row after row (the same element size, the
    same offset, strides a whole number of 16-byte groups apart: Y_CUT, its body's stores then 16-byte
    vectors), else y as it is and 0."""
    x_arg, off_x = _aligned_base(x2)
    vec = 16 // x2.element_size()
    y_base = _aligned_base(y2) if y2.element_size() == x2.element_size() else None
    if y_base is not None and y_base[1] == off_x and (y2.stride(0) - x2.stride(0)) % vec == 0:
        return x_arg, off_x, *y_base, True
    return x_arg, off_x, y2, 0, False


def _team_words(device, n_programs: int):
    """The teams' 64-bit words, unstamped (8 a program: the split teams publish two values a partial in
    4 buffers, the shared-memory team one word a partial and one a team for its dealt row), and their exit
    counters (zero), the last of them the shared-memory team's row counter (DEAL_ROWS); the kernels leave
    them as they found them, so no memset per launch."""
    key = _stream_key(device)
    words, exits = _TEAM_WORDS.get(key, (None, None))
    if words is None or exits.numel() < n_programs + 1:
        words = torch.full((8 * n_programs,), UNSTAMPED.value, device=device, dtype=torch.int64)
        exits = torch.zeros(n_programs + 1, device=device, dtype=torch.int32)
        _TEAM_WORDS[key] = (words, exits)
    return words, exits


def _launch_streamed(x2, y2, M, N):
    st = STREAMED
    last_config["kernel"] = "_softmax_streamed"
    _softmax_streamed[(M,)](x2, y2, N, x2.stride(0), y2.stride(0),
                            BLOCK_N=min(st["BLOCK_N"], triton.next_power_of_2(N)), NUM_STAGES=st["num_stages"],
                            num_warps=st["num_warps"], num_stages=st["num_stages"])
