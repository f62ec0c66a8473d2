"""RMSNorm in Triton, with the torch reference beside it.

    y[r, j] = x[r, j] * rstd_r * w[j],   rstd_r = 1 / sqrt(mean_j x[r, j]^2 + eps)

fp32 arithmetic whatever the storage dtype, one rounding on the store.
Minimal traffic: read x, write y (w is N elements, read once per program and
negligible). ~4 flops per element: memory-bound everywhere.

Same structure as the softmax template (see its docstring):
  _rmsnorm_rows   whole rows of at most BLOCK_SIZE elements, a tile of rows
                  per program, persistent grid: one read, one write.
  _rmsnorm_row    rows over BLOCK_SIZE, up to WHOLE_ROW_MAX (32768): one program
                  per whole row, no loop.
  _rmsnorm_half_rows rows of 32768, enough of them: two programs a row, each half
                  of it in registers (16-bit as loaded, two elements a 32-bit
                  word), trading their sums of squares (see HALF_ROW_WARPS).
  _rmsnorm_smem_team 16-bit rows over WHOLE_ROW_MAX on NVIDIA GPUs: the split
                  team, each program's part of two rows in shared memory (Gluon,
                  cp.async), up to six programs an SM, each partial one 64-bit
                  word that carries its row's iteration (the softmax template's
                  _softmax_smem_team; see SMEM_TEAM).
  _rmsnorm_split  longer fp32 rows, and 16-bit ones over 65536 the shared-memory
                  team cannot take, split over P
                  co-resident programs that exchange their partial sum of
                  squares through a tiny global workspace, one stamped word
                  each (as the shared-memory team; bounded spin): one read,
                  one write.
  _rmsnorm_streamed 16-bit rows of 32769-65536 that the shared-memory team cannot
                  take (and any in the interpreter; P beyond capacity): a
                  persistent grid whose programs loop over rows;
                  per row the sum of squares over pipelined chunks, then a
                  second pass that re-reads: 1.5x traffic, yet faster than the
                  team there (see STREAMED).
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
EPS = 1e-6
MAX_SPIN = 1 << 20  # bounded wait (~1 s), then give up: wrong output, which the harness catches, never a hang
# Rows over BLOCK_SIZE and up to WHOLE_ROW_MAX elements go to _rmsnorm_row: one program per row, the
# whole row in registers, WHOLE_ROW_WARPS warps, no loop. Measured on the H200 (the whole-row A/Bs,
# df8b865:experiments/memory-bound/whole-rows/): at rows of 8192-32768 the split team reached 55-79% of copy,
# whole rows in the row-tile kernel (a loop over tiles, 2-D tiles) 69-98%, and this plain kernel,
# as Triton's tutorial writes it, 89-98% (softmax 16-bit 32768: 70%, the one shape where the row-tile
# kernel did better, 72%).
# Its row offset is a 32-bit product where every row's offset fits (OFFSETS_64 off: row_offsets_64). On
# the H200 (the A/B runs against the peer, df8b865:experiments/sweep-h200-session30/call3-gemm-bk128-row-offsets/
# and call4-row-offsets-cg/ beside, 4-6 rounds, rounds within 0.2%) the 64-bit
# offset read 0.990-0.995x the tutorial's kernel (32-bit) in fp32 and fp16 at 8192x12288-16384 and the
# 32-bit one 1.000-1.027x; in bf16 64-bit read 1.03-1.07x there and 32-bit 1.01-1.03x. The same loads in
# the same order in either, a few integer instructions apart before the first: the schedule moves 16-bit
# rows by 2-3% either way, and only the 32-bit offset was never under the peer (0.9975-1.033).
WHOLE_ROW_MAX = 32768
WHOLE_ROW_WARPS = 16
# Rows of a power of two over HALF_ROWS_ABOVE, up to WHOLE_ROW_MAX (32768), go to _rmsnorm_half_rows where
# its programs make at least HALF_ROW_MIN_WAVES waves (rows x 2 over the programs the GPU holds at once)
# and as many fit an SM as were measured (HALF_ROW_PROGRAMS_PER_SM, by element size): programs 2r and
# 2r + 1 take the first and second half of row r, HALF_ROW_WARPS warps, and trade their sums of squares,
# each one 64-bit word (the layernorm template's _layernorm_half_rows says how and why). fp32 halves are
# loaded as they are (a half row of 32768 is a row of 16384, which the whole row reads at 96%); 16-bit ones
# (x, w and y of one dtype, rows of 16) are held as loaded, 32-bit words of two elements, the output pass
# unpacking `words ^ zero` (converted, a 16-bit half took 88 registers: 80-85% of copy). Compiled for sm_90
# by Triton 3.6: fp32 114 registers (two programs an SM), 16-bit 70 (three). H200, % of copy, the whole
# row -> halves, two rounds in one process (the A/B runs, df8b865:experiments/sweep-h200-session21/call7-rmsnorm/
# and call8-rmsnorm-pairs/ beside, by df8b865:benchmarks/explore/rmsnorm_half_rows.py), fp32 / bf16 / fp16:
# 1024x32768 83.6-84.2 -> 89.9-90.0,
# 81.1-82.3 -> 82.9-83.2, 83.2-83.3 -> 82.4-83.0; 2048x32768 89.7-90.1 -> 94.3-94.5, 87.3-87.4 -> 89.7-89.9,
# 89.2-89.3 -> 89.6-89.9; 4096x32768 92.2 -> 95.5-95.6, 90.8 -> 92.7-92.9, 92.6 -> 94.4-94.6; 8192x32768
# 94.2 -> 96.5-96.6, 92.3-92.4 -> 94.7, 94.0 -> 95.2-95.3. Not kept: fp32 halves on 16 or 32 warps (one
# program an SM, 75-79%), 16-bit halves in pairs on 16 warps (within a point of 8, 8 B spilled).
HALF_ROWS_ABOVE = 16384
HALF_ROW_WARPS = 8
HALF_ROW_MIN_WAVES = 5
HALF_ROW_PROGRAMS_PER_SM = {4: 2, 2: 3}
# A half-row word nobody has posted: a sum of squares's bits sit in the low half, so no post is -1, and
# -1's low half is a NaN: a half whose partner never came (after MAX_SPIN tries) writes NaN.
NO_HALF = tl.constexpr(-1)
# Rows over WHOLE_ROW_MAX: fp32 ones, and 16-bit ones over STREAMED_16BIT_MAX, go to the split team;
# 16-bit ones up to it to the streamed kernel (and all of them in the interpreter, where a team would
# wait forever). Measured on the H200 (two per-kernel sweeps, df8b865:experiments/sweep-h200-2026-12-01/rmsnorm
# against df8b865:experiments/sweep-h200/rmsnorm): in bf16 the streamed kernel read 68.8% of copy at 65536 where the
# team read 63.2%, but 61.2% / 59.8% at 131072 / 262144 where the team read 66.7% / 62.0%; in fp32 the
# team leads everywhere (74-83%). With STREAMED below (its search,
# df8b865:experiments/long-rows-h200/streamed-l2/explore2)
# the team still leads at 131072 / 262144 in bf16: 67.1% / 61.8% against 66.2% / 60.4%.
# STREAMED: 16384-element chunks on 16 warps, 3 stages, a grid of PROGRAMS_PER_SM programs per SM that
# loop over the rows (0: one program per row). At 2048x65536 on the H200
# (df8b865:experiments/long-rows-h200/streamed-l2/): 72.4/73.6% of copy in bf16/fp16 in the sweep, where one
# program per row on 8192/8 warps/3 stages (shipped before) read 62.3-62.9%. The gain is the larger
# chunk on 16 warps, not the L2 fit the persistent grid was tried for: that chunk fits one program an
# SM whatever the grid (17 MB of rows in flight), 1-4 programs per SM read 71.0-72.6%, and one program
# per row without the loop read 71.9% against this kernel's 72.8% in the same process.
STREAMED_16BIT_MAX = 65536
STREAMED = {"BLOCK_N": 16384, "num_warps": 16, "num_stages": 3, "PROGRAMS_PER_SM": 4}
# The split team's chunk and warps for rows over SPLIT_LONG_ABOVE elements (shorter rows keep CONFIG's). On
# the H200 at 512x262144 (the team's A/B runs,
# df8b865:experiments/sweep-h200-2026-12-01/session10-reduce-once/team/), 8192-element
# chunks on 8 warps read 82.7 / 64.4% of copy in fp32 / bf16 against 75.3 / 59.9% on CONFIG's 4096 and 4
# warps in the same process; at 131072 they read 81.6 / 62.5% against 81.2 / 67.6%, hence the limit.
SPLIT_LONG_ABOVE = 131072
SPLIT_LONG = {"BLOCK_N": 8192, "num_warps": 8}
# 16-bit rows over WHOLE_ROW_MAX go to _rmsnorm_smem_team on NVIDIA GPUs (Gluon): parts of NCH chunks of
# CHUNK elements, num_warps warps, up to PROGRAMS_PER_SM programs an SM. On the H200 (the team's A/B runs,
# df8b865:experiments/sweep-h200-2026-12-01/session11-smem/team-norms/, bf16) it read 88.4 / 88.3 / 89.2% of copy
# at rows of 65536 / 131072 / 262144, where the streamed kernel and the register team read 73.9 / 68.1 /
# 64.4%. At 4096x32768 it read 88.2% against the whole row's 90.9%, so rows up to WHOLE_ROW_MAX keep the
# whole row. w held in shared memory too read within a point (88.1-89.8%, four programs an SM).
SMEM_TEAM = {"CHUNK": 4096, "NCH": 2, "num_warps": 4, "PROGRAMS_PER_SM": 6}
UNSTAMPED = tl.constexpr(0xFF)  # the stamp of a word no partial has written (partials carry their iteration % 128)


def rmsnorm_ref(x: torch.Tensor, w: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * w.double()


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, M, N, stride_x, stride_y, eps,
                  BLOCK_N: tl.constexpr, ROWS: tl.constexpr, NUM_STAGES: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    for tile in tl.range(pid, tl.cdiv(M, ROWS), nprog, num_stages=NUM_STAGES):
        rows = tile * ROWS + tl.arange(0, ROWS)
        ok = (rows[:, None] < M) & col_ok[None, :]
        rows64 = rows.to(tl.int64)[:, None]
        x = tl.load(x_ptr + rows64 * stride_x + cols[None, :], mask=ok, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + rows64 * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, N, stride_x, stride_y, eps, BLOCK_N: tl.constexpr, OFFSETS_64: tl.constexpr):
    row = tl.program_id(0)
    if OFFSETS_64:  # some row starts past 2^31 elements
        row = row.to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    ok = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _unpair(words, dtype: tl.constexpr):
    # 32-bit words of two 16-bit elements of `dtype` (the lower address in the low half): both as fp32
    lo = words.to(tl.int16).to(dtype, bitcast=True).to(tl.float32)
    hi = (words >> 16).to(tl.int16).to(dtype, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _rmsnorm_half_rows(x_ptr, w_ptr, y_ptr, words_ptr, N, stride_x, stride_y, eps, zero,
                       HALF: tl.constexpr, SPIN: tl.constexpr, PAIRS: tl.constexpr):
    # Programs 2r and 2r + 1 take row r's first and second HALF elements (see HALF_ROW_WARPS). PAIRS: 16-bit
    # x held as 32-bit words of two elements; `zero` is 0, an argument the compiler cannot see through, so
    # the output pass converts `words ^ zero` again instead of holding an fp32 half across the trade.
    pid = tl.program_id(0)
    row = (pid // 2).to(tl.int64)
    if PAIRS:
        start = (pid % 2) * (HALF // 2)  # in words
        offs = start + tl.arange(0, HALF // 2)
        dtype = x_ptr.dtype.element_ty
        words = tl.load(x_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + row * (stride_x // 2) + offs,
                        cache_modifier=".cg")
        lo, hi = _unpair(words, dtype)
        ss = tl.sum(lo * lo, axis=0) + tl.sum(hi * hi, axis=0)
        rstd = 1.0 / tl.sqrt((ss + _trade_halves(words_ptr, pid, ss, SPIN)) / N + eps)
        lo, hi = _unpair(words ^ zero, dtype)
        wl, wh = _unpair(tl.load(w_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + offs,
                                 eviction_policy="evict_last"), dtype)
        # y's pairs joined before their conversion: two convert in one instruction (F2FP on sm_90)
        y = tl.reshape(tl.join(lo * rstd * wl, hi * rstd * wh), (HALF,))
        tl.store(y_ptr + row * stride_y + 2 * start + tl.arange(0, HALF), y.to(y_ptr.dtype.element_ty),
                 cache_modifier=".cs")
    else:
        cols = (pid % 2) * HALF + tl.arange(0, HALF)
        x = tl.load(x_ptr + row * stride_x + cols, cache_modifier=".cg").to(tl.float32)
        ss = tl.sum(x * x, axis=0)
        rstd = 1.0 / tl.sqrt((ss + _trade_halves(words_ptr, pid, ss, SPIN)) / N + eps)
        w = tl.load(w_ptr + cols, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), cache_modifier=".cs")


@triton.jit
def _trade_halves(words_ptr, pid, ss, SPIN: tl.constexpr):
    # Post this half's sum of squares (its bits the word's low half) and take the partner's (program
    # pid ^ 1), leaving NO_HALF in its place: a launch leaves the words as it found them (CUDA graphs replay
    # safely). Relaxed atomics: each word carries its own data (a release would wait for the program's
    # traffic). After SPIN tries the program withdraws its post, unless the partner already took it (its own
    # post then came first: wait for that once more). Returns the partner's sum (NaN if it never came).
    tl.atomic_xchg(words_ptr + pid, ss.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF, sem="relaxed")
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
    return theirs.to(tl.int32).to(tl.float32, bitcast=True)


@triton.jit
def _stamp(words, at, value, it):
    # fp32 `value` of the row of iteration `it` as one 64-bit word: its bits high, the stamp it % 128
    # low. The word is its own flag: no fence orders it behind the program's outstanding stores.
    tl.atomic_xchg(words + at, (value.to(tl.int32, bitcast=True).to(tl.int64) << 32) | (it & 0x7F), sem="relaxed")


@triton.jit
def _stamped(words, at, slots, it, P: tl.constexpr, SPIN: tl.constexpr):
    # The fp32 values at words + at[slot] (slot < P), once every one carries the stamp of iteration `it`.
    ok = slots < P
    w = tl.atomic_add(words + at, 0, mask=ok, sem="relaxed")
    spins = 0
    while (tl.min(((w & 0xFF) == (it & 0x7F)) | (slots >= P), axis=0) == 0) & (spins < SPIN):
        w = tl.atomic_add(words + at, 0, mask=ok, sem="relaxed")
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
def _rmsnorm_split(x_ptr, w_ptr, y_ptr, words, exits, M, N, stride_x, stride_y, eps,
                   BLOCK_N: tl.constexpr, P: tl.constexpr, P_POW2: tl.constexpr, MAX_SPIN: tl.constexpr):
    # The exchange of the softmax template's _softmax_split: publish row i+1's
    # partial sum of squares (one stamped word) before waiting for the siblings'
    # row-i partials; 4 buffers of partials, indexed by iteration % 4.
    pid = tl.program_id(0)
    team = pid // P
    part = pid % P
    n_teams = tl.num_programs(0) // P
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = cols < N
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)  # this program's chunk of w, for every row
    slots = tl.arange(0, P_POW2)

    xf = tl.load(x_ptr + tl.cast(team, tl.int64) * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    _stamp(words, team * 4 * P + part, tl.sum(xf * xf, axis=0), 0)
    it = 0
    for row in range(team, M, n_teams):
        nxt = tl.minimum(row + n_teams, M - 1)  # past the last row: that row again, published, unused
        xn = tl.load(x_ptr + tl.cast(nxt, tl.int64) * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
        _stamp(words, (team * 4 + (it + 1) % 4) * P + part, tl.sum(xn * xn, axis=0), it + 1)
        parts = _stamped(words, (team * 4 + it % 4) * P + slots, slots, it, P, MAX_SPIN)
        sumsq = tl.sum(tl.where(slots < P, parts, 0.0), axis=0)
        rstd = 1.0 / tl.sqrt(sumsq / N + eps)
        tl.store(y_ptr + tl.cast(row, tl.int64) * stride_y + cols, (xf * rstd * w).to(y_ptr.dtype.element_ty), mask=ok)
        xf = xn
        it += 1
    _unstamp(words, exits, team, slots, 4, P)


if gluon is not None:
    @gluon.jit
    def _publish(words, team, part, it, sumsq, P: gl.constexpr):
        # This program's sum of squares of the row of iteration `it` as one 64-bit word: its bits, then
        # the stamp it % 128. The word is its own flag: no fence orders it behind this program's
        # outstanding stores. Buffer it % 4: a program runs at most two rows ahead of a sibling.
        word = (sumsq.to(gl.int32, bitcast=True).to(gl.int64) << 32) | (it & 0x7F)
        gl.atomic_xchg(words + (team * 4 + it % 4) * P + part, word, sem="relaxed")

    @gluon.jit
    def _gather(words, team, it, slots, P: gl.constexpr, SPIN: gl.constexpr):
        # The row's sum of squares, once every sibling's word carries the stamp of iteration `it`.
        ok = slots < P
        at = words + (team * 4 + it % 4) * P + slots
        # Volatile loads, not atomic reads: an aligned 64-bit load is single-copy atomic too, and a word
        # polled by every sibling is no longer an atomic target serialized in its L2 slice (layernorm
        # 512x262144: +2-3 points of copy in its A/B, df8b865:experiments/sweep-h200-session18/call4-team-gather/).
        w = gl.load(at, mask=ok, other=0, volatile=True)
        spins = 0
        while (gl.min((((w & 0xFF).to(gl.int32) == (it & 0x7F)) | (slots >= P)).to(gl.int32), axis=0) == 0) \
                & (spins < SPIN):
            w = gl.load(at, mask=ok, other=0, volatile=True)
            spins += 1
        return gl.sum(gl.where(ok, (w >> 32).to(gl.int32).to(gl.float32, bitcast=True), 0.0), axis=0)

    @gluon.jit
    def _part_sumsq(buf, first: gl.constexpr, offs, N, NCH: gl.constexpr, CHUNK: gl.constexpr,
                    layout: gl.constexpr):
        acc = gl.sum(gl.zeros([CHUNK], gl.float32, layout), axis=0)
        for c in gl.static_range(NCH):
            cols = c * CHUNK + offs
            x = gl.where(cols < N, buf.index(first + c).load(layout).to(gl.float32), 0.0)
            acc += gl.sum(x * x, axis=0)
        return acc

    @gluon.jit
    def _rmsnorm_smem_team(x_ptr, w_ptr, y_ptr, words, exits, M, N, stride_x, stride_y, eps,
                           CHUNK: gl.constexpr, NCH: gl.constexpr, P: gl.constexpr, P_POW2: gl.constexpr,
                           SPIN: gl.constexpr):
        # Program `part` of team `team` owns columns [part * NCH * CHUNK, (part + 1) * NCH * CHUNK) of
        # rows team, team + n_teams, ...; shared memory holds that part of two rows (halves 0 and 1 of
        # buf, NCH chunks each, one cp.async commit group a chunk). Row i+1's partial goes out before the
        # wait for row i's siblings; while it writes row i, each chunk it has read is refilled with row
        # i+2. w comes from global memory (L2) with each output chunk.
        layout: gl.constexpr = gl.BlockedLayout([8], [32], [gl.num_warps()], [0])
        slot_layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
        buf = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [2 * NCH, CHUNK],
                                        gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        pid = gl.program_id(0)
        G = gl.num_programs(0)
        team = pid // P
        part = pid % P
        n_teams = G // P
        offs = part * (NCH * CHUNK) + gl.arange(0, CHUNK, layout)
        slots = gl.arange(0, P_POW2, slot_layout)
        zeros = gl.zeros([P_POW2], gl.int32, slot_layout)  # Triton 3.6's atomics take no scalar operand

        for h in gl.static_range(2):  # rows team and team + n_teams (no more teams than rows)
            r = team + h * n_teams
            src = x_ptr + r.to(gl.int64) * stride_x
            for c in gl.static_range(NCH):
                cols = c * CHUNK + offs
                copy_to_shared(buf.index(h * NCH + c), src + cols, mask=(cols < N) & (r < M))
                cp.commit_group()
        cp.wait_group(NCH)  # the first row's groups (the second row's may still be in flight)
        cta_barrier()  # every thread's copies, not only this one's
        _publish(words, team, part, 0, _part_sumsq(buf, 0, offs, N, NCH, CHUNK, layout), P)

        # two rows an iteration, so that each half of buf is named by a constant (Triton 3.6 does not
        # compile a runtime index here)
        it = 0
        for pair in range(team, M, 2 * n_teams):
            for half in gl.static_range(2):
                row = pair + half * n_teams
                if row < M:
                    cp.wait_group(0)  # the next row's groups are the only ones outstanding
                    cta_barrier()
                    _publish(words, team, part, it + 1, _part_sumsq(buf, (1 - half) * NCH, offs, N, NCH, CHUNK,
                                                                    layout), P)
                    rstd = 1.0 / gl.sqrt(_gather(words, team, it, slots, P, SPIN) / N + eps)
                    ahead = row + 2 * n_teams
                    src = x_ptr + ahead.to(gl.int64) * stride_x
                    y_row = y_ptr + row.to(gl.int64) * stride_y
                    for c in gl.static_range(NCH):
                        cols = c * CHUNK + offs
                        ok = cols < N
                        w = gl.load(w_ptr + cols, mask=ok, other=0.0).to(gl.float32)
                        x = buf.index(half * NCH + c).load(layout).to(gl.float32)
                        cta_barrier()  # every warp has read chunk c: refill it with row + 2 * n_teams
                        copy_to_shared(buf.index(half * NCH + c), src + cols, mask=ok & (ahead < M))
                        cp.commit_group()
                        gl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=ok)
                    it += 1
        cp.wait_group(0)
        # unstamp the team's words for the next launch: the last program of the team to get here knows
        # that all P have left their waits
        done = gl.atomic_add(exits + team, 1, sem="acq_rel")
        if done == P - 1:
            for k in gl.static_range(4):
                gl.atomic_xchg(words + (team * 4 + k) * P + slots, (zeros + UNSTAMPED).to(gl.int64),
                               mask=slots < P, sem="relaxed")
            gl.atomic_xchg(exits + team, 0, sem="release")


@triton.jit
def _rmsnorm_streamed(x_ptr, w_ptr, y_ptr, M, N, stride_x, stride_y, eps,
                      BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr):
    # Rows pid, pid + nprog, ... (one row per program when the grid is M), two
    # passes over each in BLOCK_N chunks: the sum of squares, then re-read,
    # scale and write (see the softmax template's _softmax_streamed).
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK_N)
    n_chunks = tl.cdiv(N, BLOCK_N)
    for row in range(pid, M, nprog):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
        y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
        acc = tl.zeros([BLOCK_N], tl.float32)
        for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
            cols = c * BLOCK_N + offs
            x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
        for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
            cols = c * BLOCK_N + offs
            ok = cols < N
            x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
            tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=ok,
                     eviction_policy="evict_first")


# ---------------------------------------------------------------------------
# launcher (occupancy and workspace helpers as in the softmax template)

_OCCUPANCY = {}
_TEAM_WORDS = {}
_HALF_ROW_WORDS = {}
_TEAM_FAILED = {}  # device -> why the shared-memory team did not compile or launch there


def row_offsets_64(M: int, stride: int, block_n: int) -> bool:
    """Whether a kernel that adds row * stride to a pointer, then up to block_n columns, needs 64-bit offsets:
    the last row's last column past 2^31 - 1 elements."""
    return (M - 1) * stride + block_n - 1 >= 2 ** 31


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
    key = (id(kernel), tuple(sorted(consts.items())), num_warps, num_stages, str(args[0].dtype), device.index)
    if key not in _OCCUPANCY:
        occ = 1
        if device.type == "cuda" and not _interpreting():
            try:
                k = kernel.warmup(*args, **consts, num_warps=num_warps, num_stages=num_stages, grid=(1,))
                k._init_handles()
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
                occ = 1
        _OCCUPANCY[key] = occ
    return _OCCUPANCY[key]


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
# Four rounds since: experiments/sweep-h200/peer-rows/.
FP32_ROW_WARPS = [(1024, 4), (2048, 8), (4096, 16)]  # (longest row, num_warps); longer rows: CONFIG


last_config = {}  # which kernel served the latest launch (the benchmark reports it: Spec.launched)


def rmsnorm(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None, eps: float = EPS,
            config: dict | None = None) -> torch.Tensor:
    cfg = dict(CONFIG, **(config or {}))
    assert x.stride(-1) == 1 and w.is_contiguous()
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
        args = (x2, w, y2, M, N, x2.stride(0), y2.stride(0), eps)
        consts = {"BLOCK_N": block_n, "ROWS": rows, "NUM_STAGES": num_stages}
        occ = _programs_per_sm(_rmsnorm_rows, args, consts, num_warps, num_stages, dev)
        # BLOCK_SIZE and num_warps as launched: the sweep's "ran" column then says when fp32 rows ran one
        # a program (BLOCK_SIZE the row's) rather than CONFIG's tile.
        last_config.update(kernel="_rmsnorm_rows", BLOCK_SIZE=rows * block_n, num_warps=num_warps)
        _rmsnorm_rows[(_rows_grid(M, rows, sms, occ, cfg),)](*args, **consts, num_warps=num_warps,
                                                               num_stages=num_stages)
        return y
    half_rows = HALF_ROWS_ABOVE < N <= WHOLE_ROW_MAX and N == triton.next_power_of_2(N)
    if half_rows and _launch_half_rows(x2, w, y2, eps, sms):
        return y
    if N <= WHOLE_ROW_MAX:
        last_config["kernel"] = "_rmsnorm_row"
        block_n = triton.next_power_of_2(N)
        _rmsnorm_row[(M,)](x2, w, y2, N, x2.stride(0), y2.stride(0), eps, BLOCK_N=block_n,
                           OFFSETS_64=row_offsets_64(M, max(x2.stride(0), y2.stride(0)), block_n),
                           num_warps=WHOLE_ROW_WARPS)
        return y
    if _smem_team_run(x2, y2) and _launch_smem_team(x2, w, y2, M, N, eps, sms):
        return y
    if (x.element_size() == 4 or N > STREAMED_16BIT_MAX) and not _interpreting():
        if N > SPLIT_LONG_ABOVE:  # the team's own chunk and warps instead of CONFIG's
            block, num_warps = SPLIT_LONG["BLOCK_N"], SPLIT_LONG["num_warps"]
            P = triton.cdiv(N, block)
        words, exits = _team_words(dev, sms * 32)
        args = (x2, w, y2, words, exits, M, N, x2.stride(0), y2.stride(0), eps)
        consts = {"BLOCK_N": block, "P": P, "P_POW2": triton.next_power_of_2(P), "MAX_SPIN": MAX_SPIN}
        teams = min(M, (sms * _programs_per_sm(_rmsnorm_split, args, consts, num_warps, 1, dev)) // P)
        if teams >= 1:
            last_config["kernel"] = "_rmsnorm_split"
            _rmsnorm_split[(teams * P,)](*args, **consts, num_warps=num_warps, num_stages=1)
            return y
    _launch_streamed(x2, w, y2, M, N, eps)
    return y


def _launch_half_rows(x2, w, y2, eps, sms) -> bool:
    """Launch _rmsnorm_half_rows on fp32 rows, or on 16-bit rows of x, w and y alike (held in pairs, aligned
    as the shared-memory team's rows are), where HALF_ROW_PROGRAMS_PER_SM of its programs fit an SM and make
    HALF_ROW_MIN_WAVES waves; False otherwise, and in the interpreter, whose programs run one after
    another: a half would wait for a partner to come."""
    M, N = x2.shape
    if _interpreting() or x2.element_size() not in HALF_ROW_PROGRAMS_PER_SM:
        return False
    pairs = x2.element_size() == 2
    if pairs and not (x2.dtype == y2.dtype == w.dtype and _rows_of_16(x2, y2) and w.data_ptr() % 16 == 0):
        return False
    args = (x2, w, y2, _half_row_words(x2.device, 2 * M), N, x2.stride(0), y2.stride(0), eps, 0)
    consts = {"HALF": N // 2, "SPIN": MAX_SPIN, "PAIRS": pairs}
    occ = _programs_per_sm(_rmsnorm_half_rows, args, consts, HALF_ROW_WARPS, 1, x2.device)
    if occ < HALF_ROW_PROGRAMS_PER_SM[x2.element_size()] or 2 * M < HALF_ROW_MIN_WAVES * occ * sms:
        return False
    last_config["kernel"] = "_rmsnorm_half_rows"
    _rmsnorm_half_rows[(2 * M,)](*args, **consts, num_warps=HALF_ROW_WARPS)
    return True


def _half_row_words(device, n_programs: int):
    """_rmsnorm_half_rows's words, one a program, NO_HALF; the kernel leaves them so. One buffer a stream
    (_stream_key)."""
    key = _stream_key(device)
    words = _HALF_ROW_WORDS.get(key)
    if words is None or words.numel() < n_programs:
        words = torch.full((n_programs,), NO_HALF.value, device=device, dtype=torch.int64)
        _HALF_ROW_WORDS[key] = words
    return words


def _rows_of_16(x2, y2) -> bool:
    """Whether Triton sees the rows' length, row stride and start as multiples of 16 elements (it
    specializes arguments on 16)."""
    return all(t.shape[-1] % 16 == 0 and t.stride(0) % 16 == 0 and t.data_ptr() % 16 == 0 for t in (x2, y2))


def _smem_team_run(x2, y2) -> bool:
    """Whether _rmsnorm_smem_team can take these rows: Gluon present, an NVIDIA GPU with cp.async
    (sm_80 and newer), not the interpreter, 16-bit rows whose length, row stride and start Triton
    sees as multiples of 16 elements (it specializes arguments on 16), so that its copies can move
    8-element groups (16 bytes): cp.async moves 4 bytes at least, and a row of 16-bit elements
    whose mask or stride Triton cannot prove 8-aligned fails to compile."""
    if gluon is None or x2.device.type != "cuda" or torch.version.hip or _interpreting():
        return False
    if x2.element_size() != 2 or torch.cuda.get_device_capability(x2.device)[0] < 8:
        return False
    return _rows_of_16(x2, y2)


def _launch_smem_team(x2, w, y2, M, N, eps, sms) -> bool:
    """Launch _rmsnorm_smem_team with as many programs an SM as fit (up to SMEM_TEAM's); False when
    not even one team of P programs fits the GPU at once, or when it failed to compile or launch on this
    device before (_TEAM_FAILED)."""
    if x2.device in _TEAM_FAILED:
        return False
    st = SMEM_TEAM
    P = triton.cdiv(N, st["CHUNK"] * st["NCH"])
    words, exits = _team_words(x2.device, sms * 32)
    args = (x2, w, y2, words, exits, M, N, x2.stride(0), y2.stride(0), eps)
    consts = {"CHUNK": st["CHUNK"], "NCH": st["NCH"], "P": P, "P_POW2": triton.next_power_of_2(P), "SPIN": MAX_SPIN}
    occ = min(st["PROGRAMS_PER_SM"], _programs_per_sm(_rmsnorm_smem_team, args, consts, st["num_warps"], 1, x2.device))
    teams = min(M, (sms * occ) // P)
    if teams < 1:
        return False
    try:
        last_config["kernel"] = "_rmsnorm_smem_team"
        _rmsnorm_smem_team[(teams * P,)](*args, **consts, num_warps=st["num_warps"])
    except Exception as e:  # Gluon changes between Triton releases: fall back, and say so once
        lines = str(e).strip().splitlines()
        _TEAM_FAILED[x2.device] = f"{type(e).__name__}: {lines[-1] if lines else ''}"
        warnings.warn(f"rmsnorm: the shared-memory team does not run with Triton {triton.__version__} here "
                      f"({_TEAM_FAILED[x2.device]}); other kernels take its rows")
        return False
    return True


def _team_words(device, n_programs: int):
    """The teams' 64-bit partials (4 a program: one word a partial, 4 buffers), unstamped, and their
    exit counters (zero); the kernels leave both as they found them, so no memset per launch."""
    key = _stream_key(device)
    words, exits = _TEAM_WORDS.get(key, (None, None))
    if words is None or exits.numel() < n_programs:
        words = torch.full((4 * n_programs,), UNSTAMPED.value, device=device, dtype=torch.int64)
        exits = torch.zeros(n_programs, device=device, dtype=torch.int32)
        _TEAM_WORDS[key] = (words, exits)
    return words, exits


def _launch_streamed(x2, w, y2, M, N, eps):
    st = STREAMED
    pps = int(st.get("PROGRAMS_PER_SM", 0))  # 0: one program per row
    grid = (min(M, pps * _sm_count(x2.device)) if pps else M,)
    last_config["kernel"] = "_rmsnorm_streamed"
    _rmsnorm_streamed[grid](x2, w, y2, M, N, x2.stride(0), y2.stride(0), eps,
                            BLOCK_N=min(st["BLOCK_N"], triton.next_power_of_2(N)), NUM_STAGES=st["num_stages"],
                            num_warps=st["num_warps"], num_stages=st["num_stages"])
