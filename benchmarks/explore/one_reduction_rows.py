"""Issue 15: whole rows reduced across the program once, not twice (softmax and layernorm, 16-bit rows of
16384-32768).

    python benchmarks/explore/one_reduction_rows.py [--out DIR]      (GPU, about a minute)
    python benchmarks/explore/one_reduction_rows.py --compile-only  (sm_90 offline: registers, barriers)

Why: one program an SM holding whole 64 KB rows, the same bytes and structure, reads 90.6-92.5% of copy
for rmsnorm (one reduction a row: the sum of squares; experiments/sweep-h200-session19/call3-sweep-memory/)
but 73% for softmax (a max, then a sum) and 77% for layernorm (a mean, then the squares around it). Each
reduction across 16-32 warps ends in a barrier and a round trip through shared memory, during which the
SM has no loads in flight. Session 19's first calls cut the instructions an element (softmax's issue
slots 46 -> 28% busy) without moving DRAM: the arithmetic is not the pace; the reductions may be.

The variants take each row as G groups of K contiguous elements. A group's statistics come from its own
registers and a few lanes of one warp: softmax's (max, sum of exp(x - max)), layernorm's (mean, M2 around
it), both exact in two passes over registers. One reduction across the program then combines the groups:
softmax's pairs by m = max(m_a, m_b), s = s_a exp(m_a - m) + s_b exp(m_b - m); layernorm's by Chan's
formula, M2 = M2_a + M2_b + (mean_b - mean_a)^2 n_a n_b / n. The output needs one multiply an element more
for softmax (each group's exp(x - m_g) scaled by exp(m_g - m) / s), none for layernorm.

Prediction: softmax 16-bit 4096x32768 from 88% (the pipelined loop) toward rmsnorm's 91-92 in the
pipelined loop, and the whole row in registers from 73% to 85+; layernorm 16-bit 4096x32768 from the team's
85% to 88-91 as a whole row; rows of 16384 level or better.

Outcome (experiments/sweep-h200-session19/call4-one-reduction/): falsified at 32768 (the pipelined loop
level, the whole rows 45-76%), but the whole 16-bit softmax row of 16384 read 96.4-96.7% against 93-94: the
template took it (GROUPED_ROW_MAX). --twice (call6-read-twice/): the row of 32768 read twice, the second
time from L1, so that none lives in registers across the reduction: 75-84.5% against the template's 88.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)

LOG2E = tl.constexpr(1.4426950408889634)
K = 64  # elements a group: 128 contiguous bytes of a 16-bit row, 8 lanes of 8


@triton.jit
def _max_sum(m_a, s_a, m_b, s_b):
    m = tl.maximum(m_a, m_b)
    safe = tl.where(m == -float("inf"), 0.0, m)  # groups of only -inf so far
    return m, s_a * tl.exp2((m_a - safe) * LOG2E) + s_b * tl.exp2((m_b - safe) * LOG2E)


@triton.jit
def _chan(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    n = n_a + n_b
    share_b = tl.where(n > 0, n_b / n, 0.0)
    delta = mean_b - mean_a
    return n, mean_a + delta * share_b, m2_a + m2_b + delta * delta * n_a * share_b


@triton.jit
def _softmax_groups(x):
    # x: [groups, elements] fp32 (-inf where masked). Returns the output in fp32. The scale from safe_g is
    # wrong (0 * inf) for a group of only -inf in a row whose max is under -88; the template clamps it.
    m_g = tl.max(x, axis=1)
    safe_g = tl.where(m_g == -float("inf"), 0.0, m_g)
    e = tl.exp2((x - safe_g[:, None]) * LOG2E)
    s_g = tl.sum(e, axis=1)
    m, s = tl.reduce((m_g, s_g), 0, _max_sum)
    scale = tl.exp2((safe_g - m) * LOG2E) / s
    return e * scale[:, None]


@triton.jit
def softmax_rows_once(x_ptr, y_ptr, M, N, stride_x, stride_y, BLOCK_N: tl.constexpr, KG: tl.constexpr,
                      NUM_STAGES: tl.constexpr):
    # the template's pipelined row loop (one row a tile, persistent), the row reduced across the program once
    G: tl.constexpr = BLOCK_N // KG
    offs = tl.arange(0, G)[:, None] * KG + tl.arange(0, KG)[None, :]
    ok = offs < N
    for row in tl.range(tl.program_id(0), M, tl.num_programs(0), num_stages=NUM_STAGES):
        x = tl.load(x_ptr + tl.cast(row, tl.int64) * stride_x + offs, mask=ok, other=-float("inf")).to(tl.float32)
        y = _softmax_groups(x)
        tl.store(y_ptr + tl.cast(row, tl.int64) * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def softmax_row_once(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr, KG: tl.constexpr):
    # the template's whole row in registers, one program a row, reduced across the program once
    G: tl.constexpr = BLOCK_N // KG
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, G)[:, None] * KG + tl.arange(0, KG)[None, :]
    ok = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=-float("inf")).to(tl.float32)
    y = _softmax_groups(x)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def softmax_row_once_16bit(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr, KG: tl.constexpr):
    # softmax_row_once with the row kept in its 16-bit type: each element's exp taken twice (for its
    # group's sum, then for the output) so that no fp32 row lives across the reduction
    G: tl.constexpr = BLOCK_N // KG
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, G)[:, None] * KG + tl.arange(0, KG)[None, :]
    ok = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=-float("inf"))
    m_g = tl.max(x, axis=1).to(tl.float32)
    safe_g = tl.where(m_g == -float("inf"), 0.0, m_g)
    s_g = tl.sum(tl.exp2((x.to(tl.float32) - safe_g[:, None]) * LOG2E), axis=1)
    m, s = tl.reduce((m_g, s_g), 0, _max_sum)
    y = tl.exp2((x.to(tl.float32) - safe_g[:, None]) * LOG2E) * (tl.exp2((m_g - m) * LOG2E) / s)[:, None]
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def softmax_row_twice(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr, KG: tl.constexpr):
    # softmax_row_once reading the row twice, the second time from L1 (the first load's .ca put it there;
    # the second, a plain load, is a different op, so the compiler does not merge them): no row lives in
    # registers across the reduction
    G: tl.constexpr = BLOCK_N // KG
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, G)[:, None] * KG + tl.arange(0, KG)[None, :]
    ok = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=-float("inf"), cache_modifier=".ca").to(tl.float32)
    m_g = tl.max(x, axis=1)
    safe_g = tl.where(m_g == -float("inf"), 0.0, m_g)
    m, s = tl.reduce((m_g, tl.sum(tl.exp2((x - safe_g[:, None]) * LOG2E), axis=1)), 0, _max_sum)
    x = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=-float("inf")).to(tl.float32)
    y = tl.exp2((x - safe_g[:, None]) * LOG2E) * (tl.exp2((m_g - m) * LOG2E) / s)[:, None]
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def layernorm_row_once(x_ptr, w_ptr, b_ptr, y_ptr, N, stride_x, stride_y, eps, BLOCK_N: tl.constexpr,
                       KG: tl.constexpr):
    # the template's whole row, one program a row, its (mean, M2) from the groups' by one reduction
    G: tl.constexpr = BLOCK_N // KG
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, G)[:, None] * KG + tl.arange(0, KG)[None, :]
    ok = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=0.0).to(tl.float32)
    n_g = tl.sum(ok.to(tl.float32), axis=1)
    mean_g = tl.sum(x, axis=1) / tl.maximum(n_g, 1.0)
    d = tl.where(ok, x - mean_g[:, None], 0.0)
    m2_g = tl.sum(d * d, axis=1)
    _, mean, m2 = tl.reduce((n_g, mean_g, m2_g), 0, _chan)
    rstd = 1.0 / tl.sqrt(m2 / N + eps)
    w = tl.load(w_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + offs, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok)


def softmax_pipelined(S, x, y, warps, stages):
    M, N = x.shape
    args = (x, y, M, N, x.stride(0), y.stride(0))
    consts = {"BLOCK_N": triton.next_power_of_2(N), "KG": K, "NUM_STAGES": stages}
    occ = S._programs_per_sm(softmax_rows_once, args, consts, warps, stages, x.device)
    softmax_rows_once[(min(M, S._sm_count(x.device) * occ),)](*args, **consts, num_warps=warps, num_stages=stages)


def softmax_whole(x, y, warps):
    M, N = x.shape
    softmax_row_once[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=triton.next_power_of_2(N), KG=K,
                           num_warps=warps)


def softmax_twice(x, y, warps, maxnreg=None):
    M, N = x.shape
    cap = {"maxnreg": maxnreg} if maxnreg else {}
    softmax_row_twice[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=triton.next_power_of_2(N), KG=K,
                            num_warps=warps, **cap)


def layernorm_whole(x, w, b, y, eps, warps):
    M, N = x.shape
    layernorm_row_once[(M,)](x, w, b, y, N, x.stride(0), y.stride(0), eps, BLOCK_N=triton.next_power_of_2(N),
                             KG=K, num_warps=warps)


def compile_only():
    import torch
    for dtype in (torch.bfloat16, torch.float16):
        x = torch.empty(4096, 32768, dtype=dtype)
        for warps, stages in ((16, 4), (16, 3)):
            k = templates.compile_sm90(softmax_rows_once, (x, x, 4096, 32768, 32768, 32768),
                                       {"BLOCK_N": 32768, "KG": K, "NUM_STAGES": stages},
                                       {"num_warps": warps, "num_stages": stages})
            print("softmax pipelined", dtype, warps, stages, templates.resource_usage(k),
                  k.asm["ptx"].count("bar.sync"), "barriers")
        for warps in (16, 32):
            k = templates.compile_sm90(softmax_row_once, (x, x, 32768, 32768, 32768),
                                       {"BLOCK_N": 32768, "KG": K}, {"num_warps": warps})
            print("softmax whole row", dtype, warps, templates.resource_usage(k), k.asm["ptx"].count("bar.sync"))
            w = torch.empty(32768, dtype=dtype)
            k = templates.compile_sm90(layernorm_row_once, (x, w, w, x, 32768, 32768, 32768, 1e-5),
                                       {"BLOCK_N": 32768, "KG": K}, {"num_warps": warps})
            print("layernorm whole row", dtype, warps, templates.resource_usage(k), k.asm["ptx"].count("bar.sync"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--compile-only", action="store_true")
    p.add_argument("--twice", action="store_true", help="call 6: softmax_row_twice at 4096x32768 only")
    args = p.parse_args()
    if args.compile_only:
        return compile_only()
    import torch
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    S, L = templates.load("softmax"), templates.load("layernorm")
    torch.manual_seed(0)
    for (M, N) in ((4096, 32768),) if args.twice else ((4096, 32768), (8192, 16384)):
        for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            x, w, b = templates.norm_inputs(M, N, dtype)
            y = torch.empty_like(x)
            nbytes = 2 * x.numel() * x.element_size()
            twice = [
                ("softmax", "template", lambda y: S.softmax(x, out=y), S.softmax_ref(x).float()),
                ("softmax", "twice 32w cap 32", lambda y: softmax_twice(x, y, 32, 32), None),
                ("softmax", "twice 32w", lambda y: softmax_twice(x, y, 32), None),
                ("softmax", "twice 16w cap 64", lambda y: softmax_twice(x, y, 16, 64), None),
                ("softmax", "twice 16w", lambda y: softmax_twice(x, y, 16), None),
            ]
            cases = twice if args.twice else [
                ("softmax", "template", lambda y: S.softmax(x, out=y), S.softmax_ref(x).float()),
                ("softmax", "pipelined once 16w 4st", lambda y: softmax_pipelined(S, x, y, 16, 4), None),
                ("softmax", "whole row once 16w", lambda y: softmax_whole(x, y, 16), None),
                ("softmax", "whole row once 32w", lambda y: softmax_whole(x, y, 32), None),
                ("layernorm", "template", lambda y: L.layernorm(x, w, b, out=y), L.layernorm_ref(x, w, b).float()),
                ("layernorm", "whole row once 16w", lambda y: layernorm_whole(x, w, b, y, L.EPS, 16), None),
                ("layernorm", "whole row once 32w", lambda y: layernorm_whole(x, w, b, y, L.EPS, 32), None),
            ]
            refs = {}
            for rnd in range(2):
                for kernel, label, run, ref in cases:
                    refs.setdefault(kernel, ref)
                    row = {"kernel": kernel, "shape": [M, N], "dtype": dname, "variant": label, "round": rnd}
                    templates.check_and_time(row, run, y, refs[kernel], nbytes, timer, copy, True)
                    results["rows"].append(row)
                    print(f"{kernel} {M}x{N} {dname} round {rnd} {label}: {templates.figure(row)}", flush=True)
            (out / f"one_reduction_rows{'_twice' if args.twice else ''}.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
