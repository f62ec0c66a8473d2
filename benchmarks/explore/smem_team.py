"""Issue 15: 16-bit rows of 65536-262144 split over a team of programs that hold their parts in shared
memory (Gluon).

    python benchmarks/explore/smem_team.py [--out DIR] [--kernels softmax,rmsnorm,layernorm] [--dtypes bf16,fp16]
                                           [--compile-only] [--budget-s S]

Today these rows read 55-62% of copy (softmax), streamed twice through one program a row. The fp32 team
(_softmax_split: P co-resident programs a row, each holding a 4096-element part in registers, exchanging
(max, sum) through global memory) reads 78-82% at the same rows, but in 16 bits the same team read
33-56%: a 16-bit part converted to fp32 costs 4 bytes of register per 2 bytes of row, so the SM holds half
the bytes in flight. benchmarks/explore/smem_rows.py showed that a row held in shared memory by cp.async,
with three programs an SM, reads 82-83% at 4096x32768 where registers read 73-75%.

Hypothesis: the team with its parts in shared memory, two rows deep (the next row's part lands while the
team waits for its siblings' partials), reads the row once and keeps the copy engine busy. Prediction:
75-85% of copy at 2048x65536, 1024x131072 and 512x262144 in bf16 and fp16, +15 points or more on today.

Measured (experiments/sweep-h200-2026-12-01/session11-smem/, its README has every call):
- with _softmax_split's exchange (partials, then a flag released after them): 73-75% on five or six
  programs an SM; the release waits for the program's earlier stores.
- STAMPED (each partial one 64-bit word carrying its iteration, relaxed atomics, no fence): 86.1 /
  85.9 / 79.3% at 65536 / 131072 / 262144 bf16, 86.0% at 4096x32768. The templates now hold this
  design (_softmax_smem_team, _rmsnorm_smem_team, _layernorm_smem_team).
- rmsnorm / layernorm (_norm_smem_team, --kernels rmsnorm,layernorm): 88-90% / 68-76%; layernorm's
  TEMPLATE_VARIANTS run the template's own team on other settings (with_team).

Every program of a team must be resident at once (a sibling spins on the others' words), so the grid is
at most the programs that fit the SMs (the template's _programs_per_sm, from the compiled kernel's
registers and shared memory); a wait gives up after MAX_SPIN polls, so a broken protocol shows as a
wrong output, not a hang. Outputs are checked against an fp32 torch reference before timing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import templates  # noqa: E402  (beside this file)

LOG2E = gl.constexpr(1.4426950408889634)
# Triton 3.9 renamed these (async_load, barrier); the H200's 3.6 has only the old names.
copy_to_shared = getattr(cp, "async_load", None) or cp.async_copy_global_to_shared
cta_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
MAX_SPIN = 1 << 22
UNSTAMPED = gl.constexpr(0xFF)  # a stamp no partial carries (they carry the iteration % 128)


@gluon.jit
def _part_max_sum(buf, first, offs, ok_row, N, NCH: gl.constexpr, CHUNK: gl.constexpr, layout: gl.constexpr):
    # (max, sum of exp(x - max)) of the part held in buf chunks first .. first + NCH - 1
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
def _publish(ws_ptr, flag_ptr, team, part, it, m, s, P: gl.constexpr, STAMPED: gl.constexpr):
    # This program's partial (m, s) of the row of iteration `it`, in buffer it % 4.
    if STAMPED:
        # one 64-bit word: m's bits, then s's bits with their low 8 bits replaced by it % 128 (s keeps
        # 15 bits of mantissa, 3e-5 relative). The word is its own flag: no fence, no second read.
        lo = (s.to(gl.int32, bitcast=True) & 0x7FFFFF00) | (it & 0x7F)
        word = (m.to(gl.int32, bitcast=True).to(gl.int64) << 32) | lo.to(gl.int64)
        gl.atomic_xchg(ws_ptr + (team * 4 + it % 4) * P + part, word, sem="relaxed")
    else:
        slot = ws_ptr + ((team * 4 + it % 4) * P + part) * 2
        gl.store(slot, m)
        gl.store(slot + 1, s)
        cta_barrier()  # every thread's stores happen before the release below
        gl.atomic_xchg(flag_ptr + team * P + part, it + 1, sem="release")


@gluon.jit
def _poll(words, ok, zeros, STAMPED: gl.constexpr):
    # STAMPED 1: relaxed atomics, which L2 serializes; 2: volatile loads (a 64-bit aligned load is
    # single-copy atomic). Not yet run on a GPU: every program polls all P words a row, P^2 reads a
    # row in all, 4096 at 262144 on 4096-element parts, where the teams read least.
    if STAMPED == 2:
        w = gl.load(words, mask=ok, volatile=True)
    else:
        w = gl.atomic_add(words, zeros.to(gl.int64), mask=ok, sem="relaxed")
    return w


@gluon.jit
def _gather(ws_ptr, flag_ptr, team, it, slots, zeros, P: gl.constexpr, SPIN: gl.constexpr,
            STAMPED: gl.constexpr):
    # Every sibling's partial of the row of iteration `it`, once all have published it.
    slot_ok = slots < P
    if STAMPED:
        words = ws_ptr + (team * 4 + it % 4) * P + slots
        w = _poll(words, slot_ok, zeros, STAMPED)
        spins = 0
        while (gl.min((((w & 0xFF).to(gl.int32) == (it & 0x7F)) | (slots >= P)).to(gl.int32), axis=0) == 0) \
                & (spins < SPIN):
            w = _poll(words, slot_ok, zeros, STAMPED)
            spins += 1
        pm = gl.where(slot_ok, (w >> 32).to(gl.int32).to(gl.float32, bitcast=True), -float("inf"))
        ps = gl.where(slot_ok, (w & 0x7FFFFF00).to(gl.int32).to(gl.float32, bitcast=True), 0.0)
    else:
        flags = flag_ptr + team * P + slots
        f = gl.where(slot_ok, gl.atomic_add(flags, zeros, mask=slot_ok, sem="acquire"), it + 1)
        spins = 0
        while (gl.min(f, axis=0) < it + 1) & (spins < SPIN):
            f = gl.where(slot_ok, gl.atomic_add(flags, zeros, mask=slot_ok, sem="acquire"), it + 1)
            spins += 1
        cta_barrier()
        pbuf = ws_ptr + (team * 4 + it % 4) * P * 2
        pm = gl.where(slot_ok, gl.load(pbuf + slots * 2, mask=slot_ok, volatile=True), -float("inf"))
        ps = gl.where(slot_ok, gl.load(pbuf + slots * 2 + 1, mask=slot_ok, volatile=True), 0.0)
    return pm, ps


@gluon.jit
def _softmax_smem_team(x_ptr, y_ptr, ws_ptr, flag_ptr, M, N, stride_x, stride_y,
                       CHUNK: gl.constexpr, NCH: gl.constexpr, P: gl.constexpr, P_POW2: gl.constexpr,
                       SPIN: gl.constexpr, STAMPED: gl.constexpr):
    # Program `part` of team `team` owns columns [part * NCH * CHUNK, (part + 1) * NCH * CHUNK) of rows
    # team, team + n_teams, ... Shared memory holds that part of two rows (halves 0 and 1 of buf, NCH
    # chunks each, one cp.async commit group a chunk). Per row it publishes its partial (max, sum);
    # as in _softmax_split, row i+1's partial goes out before the wait for row i's siblings, so a
    # program may run up to two rows ahead of a sibling that is still reading (four buffers of
    # partials). The exchange is either _softmax_split's (partials, then a flag = 1 + the row's
    # iteration released after them) or STAMPED (one 64-bit word per partial that carries its
    # iteration). While it writes row i, each chunk it has read is refilled with row i+2.
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

    for h in gl.static_range(2):  # rows team and team + n_teams (the launcher makes no more teams than rows)
        r = team + h * n_teams
        src = x_ptr + r.to(gl.int64) * stride_x
        for c in gl.static_range(NCH):
            cols = c * CHUNK + offs
            copy_to_shared(buf.index(h * NCH + c), src + cols, mask=(cols < N) & (r < M))
            cp.commit_group()
    cp.wait_group(NCH)  # the first row's groups (the second row's may still be in flight)
    cta_barrier()
    m, s = _part_max_sum(buf, 0, offs, team < M, N, NCH, CHUNK, layout)
    _publish(ws_ptr, flag_ptr, team, part, 0, m, s, P, STAMPED)

    # two rows an iteration, so that each half of buf is named by a constant (Triton 3.6 would not
    # compile the runtime index)
    it = 0
    for pair in range(team, M, 2 * n_teams):
        for half in gl.static_range(2):
            row = pair + half * n_teams
            if row < M:
                # the next row's partial: its groups are the only ones outstanding
                nxt = row + n_teams
                cp.wait_group(0)
                cta_barrier()
                mn, sn = _part_max_sum(buf, (1 - half) * NCH, offs, nxt < M, N, NCH, CHUNK, layout)
                _publish(ws_ptr, flag_ptr, team, part, it + 1, mn, sn, P, STAMPED)
                pm, ps = _gather(ws_ptr, flag_ptr, team, it, slots, zeros, P, SPIN, STAMPED)
                gm = gl.max(pm, axis=0)
                shift = gm * LOG2E + gl.log2(gl.sum(ps * gl.exp2((pm - gm) * LOG2E), axis=0))
                # write this row; each chunk, once every warp has read it, takes row + 2 * n_teams
                ahead = row + 2 * n_teams
                src = x_ptr + ahead.to(gl.int64) * stride_x
                y_row = y_ptr + row.to(gl.int64) * stride_y
                for c in gl.static_range(NCH):
                    cols = c * CHUNK + offs
                    x = buf.index(half * NCH + c).load(layout).to(gl.float32)
                    cta_barrier()
                    copy_to_shared(buf.index(half * NCH + c), src + cols, mask=(cols < N) & (ahead < M))
                    cp.commit_group()
                    gl.store(y_row + cols, gl.exp2(x * LOG2E - shift).to(y_ptr.dtype.element_ty), mask=cols < N)
                it += 1
    cp.wait_group(0)
    # leave the flags (or the stamped words) as a launch expects them: the last program of the team to
    # get here knows that all P have left their waits
    exit_ptr = flag_ptr + G + team
    done = gl.atomic_add(exit_ptr, 1, sem="acq_rel")
    if done == P - 1:
        if STAMPED:
            for k in gl.static_range(4):
                gl.atomic_xchg(ws_ptr + (team * 4 + k) * P + slots, (zeros + UNSTAMPED).to(gl.int64),
                               mask=slots < P, sem="relaxed")
        else:
            gl.atomic_xchg(flag_ptr + team * P + slots, zeros, mask=slots < P, sem="relaxed")
        gl.atomic_xchg(exit_ptr, 0, sem="release")


@gluon.jit
def _norm_smem_team(x_ptr, w_ptr, b_ptr, y_ptr, words, exits, M, N, stride_x, stride_y, eps,
                    CHUNK: gl.constexpr, NCH: gl.constexpr, P: gl.constexpr, P_POW2: gl.constexpr,
                    SPIN: gl.constexpr, LAYERNORM: gl.constexpr, W_SMEM: gl.constexpr):
    # _softmax_smem_team (stamped) for rmsnorm (a part's sum of squares) or layernorm (a part's mean and
    # M2, taken in two passes over shared memory, combined by Chan's formula). W_SMEM: this program's
    # part of w (and b) is copied into shared memory once; else it is read from global memory (L2) with
    # every output chunk.
    layout: gl.constexpr = gl.BlockedLayout([8], [32], [gl.num_warps()], [0])
    slot_layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    smem: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[0])
    PART: gl.constexpr = NCH * CHUNK
    buf = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [2 * NCH, CHUNK], smem)
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    team = pid // P
    part = pid % P
    n_teams = G // P
    offs = part * PART + gl.arange(0, CHUNK, layout)
    slots = gl.arange(0, P_POW2, slot_layout)
    zeros = gl.zeros([P_POW2], gl.int32, slot_layout)
    n_part = gl.minimum(N - part * PART, PART).to(gl.float32)
    n_slots = gl.minimum(gl.maximum(N - slots * PART, 0), PART).to(gl.float32)
    if W_SMEM:  # copied first, so the rows' wait_group counts hold
        wbuf = gl.allocate_shared_memory(w_ptr.dtype.element_ty, [NCH + NCH * LAYERNORM, CHUNK], smem)
        for c in gl.static_range(NCH):
            cols = c * CHUNK + offs
            copy_to_shared(wbuf.index(c), w_ptr + cols, mask=cols < N)
            if LAYERNORM:
                copy_to_shared(wbuf.index(NCH + c), b_ptr + cols, mask=cols < N)
            cp.commit_group()
    for h in gl.static_range(2):
        r = team + h * n_teams
        src = x_ptr + r.to(gl.int64) * stride_x
        for c in gl.static_range(NCH):
            cols = c * CHUNK + offs
            copy_to_shared(buf.index(h * NCH + c), src + cols, mask=(cols < N) & (r < M))
            cp.commit_group()
    cp.wait_group(NCH)
    cta_barrier()
    a, q = _part_stats(buf, 0, offs, N, n_part, NCH, CHUNK, layout, LAYERNORM)
    _publish(words, exits, team, part, 0, a, q, P, True)
    it = 0
    for pair in range(team, M, 2 * n_teams):
        for half in gl.static_range(2):
            row = pair + half * n_teams
            if row < M:
                cp.wait_group(0)
                cta_barrier()
                an, qn = _part_stats(buf, (1 - half) * NCH, offs, N, n_part, NCH, CHUNK, layout, LAYERNORM)
                _publish(words, exits, team, part, it + 1, an, qn, P, True)
                pa, pq = _gather(words, exits, team, it, slots, zeros, P, SPIN, True)
                if LAYERNORM:
                    mean = gl.sum(n_slots * pa, axis=0) / N
                    d = gl.where(slots < P, pa - mean, 0.0)
                    rstd = 1.0 / gl.sqrt((gl.sum(pq, axis=0) + gl.sum(n_slots * d * d, axis=0)) / N + eps)
                else:
                    mean = 0.0
                    rstd = 1.0 / gl.sqrt(gl.sum(pa, axis=0) / N + eps)
                ahead = row + 2 * n_teams
                src = x_ptr + ahead.to(gl.int64) * stride_x
                y_row = y_ptr + row.to(gl.int64) * stride_y
                for c in gl.static_range(NCH):
                    cols = c * CHUNK + offs
                    ok = cols < N
                    if W_SMEM:
                        w = wbuf.index(c).load(layout).to(gl.float32)
                    else:
                        w = gl.load(w_ptr + cols, mask=ok, other=0.0).to(gl.float32)
                    x = buf.index(half * NCH + c).load(layout).to(gl.float32)
                    cta_barrier()
                    copy_to_shared(buf.index(half * NCH + c), src + cols, mask=ok & (ahead < M))
                    cp.commit_group()
                    y = (x - mean) * rstd * w
                    if LAYERNORM:
                        if W_SMEM:
                            y += wbuf.index(NCH + c).load(layout).to(gl.float32)
                        else:
                            y += gl.load(b_ptr + cols, mask=ok, other=0.0).to(gl.float32)
                    gl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=ok)
                it += 1
    cp.wait_group(0)
    done = gl.atomic_add(exits + G + team, 1, sem="acq_rel")
    if done == P - 1:
        for k in gl.static_range(4):
            gl.atomic_xchg(words + (team * 4 + k) * P + slots, (zeros + UNSTAMPED).to(gl.int64),
                           mask=slots < P, sem="relaxed")
        gl.atomic_xchg(exits + G + team, 0, sem="release")


@gluon.jit
def _part_stats(buf, first, offs, N, n_part, NCH: gl.constexpr, CHUNK: gl.constexpr, layout: gl.constexpr,
                LAYERNORM: gl.constexpr):
    # rmsnorm: (sum of squares, 0); layernorm: (mean, M2) of the part in buf's chunks first ..
    a = gl.sum(gl.zeros([CHUNK], gl.float32, layout), axis=0)
    for c in gl.static_range(NCH):
        cols = c * CHUNK + offs
        x = gl.where(cols < N, buf.index(first + c).load(layout).to(gl.float32), 0.0)
        if LAYERNORM:
            a += gl.sum(x, axis=0)
        else:
            a += gl.sum(x * x, axis=0)
    q = a * 0.0
    if LAYERNORM:
        a = a / n_part
        cta_barrier()  # read the chunks again rather than hold them in registers from the first pass
        for c in gl.static_range(NCH):
            cols = c * CHUNK + offs
            d = gl.where(cols < N, buf.index(first + c).load(layout).to(gl.float32) - a, 0.0)
            q += gl.sum(d * d, axis=0)
    return a, q


_STAMPED_WORDS = {}


def launch(S, x, y, chunk: int, nch: int, warps: int, programs_per_sm: int, stamped: int):
    """softmax of x into y by the shared-memory team (stamped: the exchange, as VARIANTS says); S is the
    softmax template (its workspace and its occupancy count). Returns the programs an SM it ran."""
    M, N = x.shape
    P = triton.cdiv(N, chunk * nch)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    ws, sync = S._sync_buffers(x.device, sms * 32)
    if stamped:  # 4 words a program, unstamped until a partial lands
        if x.device not in _STAMPED_WORDS:
            _STAMPED_WORDS[x.device] = torch.full((sms * 32 * 4,), UNSTAMPED.value, dtype=torch.int64, device=x.device)
        ws = _STAMPED_WORDS[x.device]
    args = (x, y, ws, sync, M, N, x.stride(0), y.stride(0))
    consts = {"CHUNK": chunk, "NCH": nch, "P": P, "P_POW2": triton.next_power_of_2(P), "SPIN": MAX_SPIN,
              "STAMPED": stamped}
    occ = min(programs_per_sm, S._programs_per_sm(_softmax_smem_team, args, consts, warps, 1, x.device))
    teams = min(M, (sms * occ) // P)
    _softmax_smem_team[(teams * P,)](*args, **consts, num_warps=warps)
    return occ


def launch_norm(S, x, w, b, y, eps, chunk: int, nch: int, warps: int, programs_per_sm: int, w_smem: bool,
                maxnreg: int | None = None):
    """rmsnorm (b None) or layernorm of x into y by the stamped shared-memory team (at most maxnreg
    registers a thread). Returns the programs an SM it ran."""
    M, N = x.shape
    P = triton.cdiv(N, chunk * nch)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    _, sync = S._sync_buffers(x.device, sms * 32)
    if x.device not in _STAMPED_WORDS:
        _STAMPED_WORDS[x.device] = torch.full((sms * 32 * 4,), UNSTAMPED.value, dtype=torch.int64, device=x.device)
    args = (x, w, w if b is None else b, y, _STAMPED_WORDS[x.device], sync, M, N, x.stride(0), y.stride(0), eps)
    consts = {"CHUNK": chunk, "NCH": nch, "P": P, "P_POW2": triton.next_power_of_2(P), "SPIN": MAX_SPIN,
              "LAYERNORM": b is not None, "W_SMEM": w_smem, "maxnreg": maxnreg}
    occ = min(programs_per_sm, S._programs_per_sm(_norm_smem_team, args, consts, warps, 1, x.device))
    teams = min(M, (sms * occ) // P)
    _norm_smem_team[(teams * P,)](*args, **consts, num_warps=warps)
    return occ


def compile_only():
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    for chunk, nch, warps, P, stamped in ((4096, 4, 4, 4, 0), (4096, 2, 4, 16, 1), (4096, 2, 8, 8, 1),
                                          (4096, 1, 4, 64, 2)):
        sig = {"x_ptr": "*bf16", "y_ptr": "*bf16", "ws_ptr": "*i64" if stamped else "*fp32", "flag_ptr": "*i32",
               "M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
        consts = {"CHUNK": chunk, "NCH": nch, "P": P, "P_POW2": P, "SPIN": MAX_SPIN, "STAMPED": stamped}
        src = GluonASTSource(fn=_softmax_smem_team, signature={**sig, **{k: "constexpr" for k in consts}},
                             constexprs=consts,
                             attrs={(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 5, 6, 7)})
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
        ptx = k.asm["ptx"]
        print("softmax", chunk, nch, warps, P, ["flags", "stamped", "stamped, loads"][stamped], "shared",
              k.metadata.shared,
              "cp.async", ptx.count("cp.async.cg") + ptx.count("cp.async.ca"), "atom", ptx.count("atom."))
    for layernorm, w_smem in ((False, False), (False, True), (True, False), (True, True)):
        sig = {"x_ptr": "*bf16", "w_ptr": "*bf16", "b_ptr": "*bf16", "y_ptr": "*bf16", "words": "*i64",
               "exits": "*i32", "M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32", "eps": "fp32"}
        consts = {"CHUNK": 4096, "NCH": 2, "P": 8, "P_POW2": 8, "SPIN": MAX_SPIN, "LAYERNORM": layernorm,
                  "W_SMEM": w_smem}
        src = GluonASTSource(fn=_norm_smem_team, signature={**sig, **{k: "constexpr" for k in consts}},
                             constexprs=consts,
                             attrs={(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 5, 7, 8, 9)})
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
        ptx = k.asm["ptx"]
        print("layernorm" if layernorm else "rmsnorm", "w in shared memory" if w_smem else "w from L2", "shared",
              k.metadata.shared, "cp.async", ptx.count("cp.async.cg") + ptx.count("cp.async.ca"))


SHAPES = [(2048, 65536), (1024, 131072), (512, 262144), (4096, 32768)]
# (chunk, chunks a part, warps, programs an SM asked for, exchange: 0 flags, 1 stamped words polled by
# atomics, 2 by volatile loads)
VARIANTS = [(4096, 2, 4, 6, 0), (4096, 2, 4, 6, 1), (4096, 4, 8, 3, 1), (2048, 4, 4, 6, 1),
            (4096, 2, 8, 3, 1), (4096, 4, 4, 3, 1), (2048, 2, 4, 8, 1), (4096, 1, 4, 8, 1),
            (4096, 2, 4, 6, 2), (4096, 1, 4, 8, 2), (2048, 2, 4, 8, 2)]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


TEMPLATE_VARIANTS = [(4096, 2, 4, 6), (4096, 1, 4, 8), (4096, 1, 4, 6), (2048, 2, 4, 8), (2048, 1, 4, 8)]


def with_team(template, setting: dict, run):
    """run() with the template's shared-memory team on `setting` and taking rows over 16384; restored
    after. Returns nothing: the template reads its own programs an SM."""
    saved = template.SMEM_TEAM, template.SMEM_TEAM_ABOVE
    template.SMEM_TEAM, template.SMEM_TEAM_ABOVE = setting, 16384
    try:
        run()
    finally:
        template.SMEM_TEAM, template.SMEM_TEAM_ABOVE = saved


NORM_VARIANTS = [(4096, 2, 4, 6, False), (4096, 1, 4, 8, False), (4096, 1, 4, 8, True), (2048, 2, 4, 8, False)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--compile-only", action="store_true")
    p.add_argument("--budget-s", type=float, default=200.0)
    p.add_argument("--dtypes", default="bf16,fp16")
    p.add_argument("--kernels", default="softmax", help="softmax,rmsnorm,layernorm")
    p.add_argument("--exchanges", default="0,1,2", help="the softmax variants with these exchanges only")
    p.add_argument("--shapes", help="MxN,... (default: all of SHAPES)")
    args = p.parse_args()
    exchanges = {int(e) for e in args.exchanges.split(",")}
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")] if args.shapes else SHAPES
    if args.compile_only:
        compile_only()
        return
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    S, R, L = templates.load("softmax"), templates.load("rmsnorm"), templates.load("layernorm")
    torch.manual_seed(0)
    for kernel in args.kernels.split(","):
        for dtype in [DTYPES[d] for d in args.dtypes.split(",")]:
            for M, N in shapes:
                x = (torch.randn(M, N, device="cuda") * 3).to(dtype)
                y = torch.empty_like(x)
                w_, b_ = torch.rand(N, device="cuda").to(dtype) + 0.5, torch.randn(N, device="cuda").to(dtype)
                if kernel == "softmax":
                    x[1, :100] = -float("inf")
                    x[2, N // 2:] = -float("inf")  # a whole part of -inf on some team member
                    ref = torch.softmax(x.float(), -1)
                    variants = [("today", lambda y: S.softmax(x, out=y)),
                                ("torch", lambda y: y.copy_(torch.softmax(x, -1)))]
                    variants += [(f"team {c}x{n}/{w}/{pps}{['', ' stamped', ' stamped, loads'][st]}",
                                  lambda y, c=c, n=n, w=w, pps=pps, st=st: launch(S, x, y, c, n, w, pps, st))
                                 for c, n, w, pps, st in VARIANTS if st in exchanges]
                elif kernel == "rmsnorm":
                    ref = R.rmsnorm_ref(x, w_).float()
                    variants = [("today", lambda y: R.rmsnorm(x, w_, out=y)),
                                ("torch", lambda y: y.copy_(torch.nn.functional.rms_norm(x, (N,), w_, R.EPS)))]
                    variants += [(f"team {c}x{n}/{w}/{pps}{' w-smem' if ws else ''}",
                                  lambda y, c=c, n=n, w=w, pps=pps, ws=ws: launch_norm(S, x, w_, None, y, R.EPS, c, n, w,
                                                                                     pps, ws))
                                 for c, n, w, pps, ws in NORM_VARIANTS]
                else:
                    x += 100  # a mean far from 0: the variance must not cancel
                    ref = L.layernorm_ref(x, w_, b_).float()
                    variants = [("today", lambda y: L.layernorm(x, w_, b_, out=y)),
                                ("torch", lambda y: y.copy_(torch.nn.functional.layer_norm(x, (N,), w_, b_, L.EPS)))]
                    # the template's own team on other settings, and on rows of 32768 too
                    variants += [(f"template team {c}x{n}/{w}/{pps}",
                                  lambda y, c=c, n=n, w=w, pps=pps: with_team(L, {"CHUNK": c, "NCH": n, "num_warps": w,
                                                                                  "PROGRAMS_PER_SM": pps},
                                                                              lambda: L.layernorm(x, w_, b_, out=y)))
                                 for c, n, w, pps in TEMPLATE_VARIANTS]
                for name, run in variants:
                    if time.time() - started > args.budget_s:
                        break
                    row = {"kernel": kernel, "shape": [M, N], "dtype": str(dtype), "variant": name}
                    templates.check_and_time(row, run, y, ref, 2 * x.numel() * x.element_size(), timer, copy, True)
                    if name.startswith("team") and "error" not in row:
                        row["programs_per_sm"] = run(y)
                    results["rows"].append(row)
                    pps = f" ({row['programs_per_sm']} an SM)" if "programs_per_sm" in row else ""
                    print(f"{kernel} {M}x{N} {str(dtype)[6:]} {name}{pps}: {templates.figure(row)}", flush=True)
                (out / "smem_team.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
