"""Issue 15: the register split teams (fp32 rows over 32768) with stamped words instead of flags.

    python benchmarks/explore/stamped_split.py [--out DIR] [--kernels softmax,rmsnorm] [--compile-only]

Not yet run on a GPU (written in session 11, compile-checked for sm_90 with --compile-only).

The fp32 split teams (_softmax_split, _rmsnorm_split) read 77.6-84.4% of copy at rows of 65536-262144
(experiments/sweep-h200-2026-12-01/session11-smem/). Each row, a program stores its partial, then
releases a flag: the release waits until every earlier store of the program is visible, the previous
row's output included. In the 16-bit shared-memory team the same exchange read 73-75% and stamped words
(one 64-bit word a partial value, its row's iteration in the low bits, relaxed atomics, no fence)
86% (benchmarks/explore/smem_team.py).

Here each partial value travels as its own word: the value's 32 bits high, the iteration low (all 32
bits: nothing of an fp32 value is lost, so the outputs match the flagged team's). softmax publishes two
words a partial (max, sum), rmsnorm one (sum of squares); a reader polls K * P words. A word no partial
has written holds -1 (the launcher creates them so, the last program of a team leaves them so).
Hypothesis: the fence is the split teams' gap too. Prediction: fp32 rows of 65536-262144 at 85-90% of
copy (softmax 77.6-82.3, rmsnorm 79.9-84.4 today). Each variant runs beside the template ("today") on
the same inputs, checked against an fp32 reference first (benchmarks/explore/templates.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import templates  # noqa: E402  (beside this file)

MAX_SPIN = 1 << 20


@triton.jit
def _publish(words, team, part, it, value, k: tl.constexpr, K: tl.constexpr, P: tl.constexpr):
    # value k of this program's partial of the row of iteration `it`, in buffer it % 4
    word = (value.to(tl.int32, bitcast=True).to(tl.int64) << 32) | it
    tl.atomic_xchg(words + ((team * 4 + it % 4) * K + k) * P + part, word, sem="relaxed")


@triton.jit
def _poll(words, team, it, slots, k: tl.constexpr, K: tl.constexpr, P: tl.constexpr, SPIN: tl.constexpr):
    # value k of every sibling's partial of the row of iteration `it`, once all carry its stamp
    at = words + ((team * 4 + it % 4) * K + k) * P + slots
    ok = slots < P
    w = tl.atomic_add(at, 0, mask=ok, sem="relaxed")
    spins = 0
    while (tl.min(((w & 0xFFFFFFFF) == it) | (slots >= P), axis=0) == 0) & (spins < SPIN):
        w = tl.atomic_add(at, 0, mask=ok, sem="relaxed")
        spins += 1
    return (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)


@triton.jit
def _unstamp(words, exits, team, slots, K: tl.constexpr, P: tl.constexpr):
    # the last program of the team to leave (all P have left their waits) makes its words unwritten again
    done = tl.atomic_add(exits + team, 1, sem="acq_rel")
    if done == P - 1:
        for k in tl.static_range(4 * K):
            tl.atomic_xchg(words + (team * 4 * K + k) * P + slots, tl.full(slots.shape, -1, tl.int64),
                           mask=slots < P, sem="relaxed")
        tl.atomic_xchg(exits + team, 0, sem="release")


@triton.jit
def _softmax_split_stamped(x_ptr, y_ptr, words, exits, M, N, stride_x, stride_y,
                           BLOCK_N: tl.constexpr, P: tl.constexpr, P_POW2: tl.constexpr, SPIN: tl.constexpr):
    # _softmax_split with stamped words: row i+1's partial goes out before the wait for row i's
    pid = tl.program_id(0)
    team = pid // P
    part = pid % P
    n_teams = tl.num_programs(0) // P
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = cols < N
    slots = tl.arange(0, P_POW2)

    xf = tl.load(x_ptr + tl.cast(team, tl.int64) * stride_x + cols, mask=ok, other=-float("inf")).to(tl.float32)
    m = tl.max(xf, axis=0)
    _publish(words, team, part, 0, m, 0, 2, P)
    _publish(words, team, part, 0, tl.sum(tl.exp(xf - tl.where(m == -float("inf"), 0.0, m)), axis=0), 1, 2, P)
    it = 0
    for row in range(team, M, n_teams):
        nxt = row + n_teams
        xn = tl.load(x_ptr + tl.cast(nxt, tl.int64) * stride_x + cols, mask=ok & (nxt < M),
                     other=-float("inf")).to(tl.float32)
        mn = tl.max(xn, axis=0)
        _publish(words, team, part, it + 1, mn, 0, 2, P)
        _publish(words, team, part, it + 1, tl.sum(tl.exp(xn - tl.where(mn == -float("inf"), 0.0, mn)), axis=0),
                 1, 2, P)
        pm = tl.where(slots < P, _poll(words, team, it, slots, 0, 2, P, SPIN), -float("inf"))
        ps = tl.where(slots < P, _poll(words, team, it, slots, 1, 2, P, SPIN), 0.0)
        gm = tl.max(pm, axis=0)
        inv = 1.0 / tl.sum(ps * tl.exp(pm - gm), axis=0)
        tl.store(y_ptr + tl.cast(row, tl.int64) * stride_y + cols, (tl.exp(xf - gm) * inv).to(y_ptr.dtype.element_ty),
                 mask=ok)
        xf = xn
        it += 1
    _unstamp(words, exits, team, slots, 2, P)


@triton.jit
def _rmsnorm_split_stamped(x_ptr, w_ptr, y_ptr, words, exits, M, N, stride_x, stride_y, eps,
                           BLOCK_N: tl.constexpr, P: tl.constexpr, P_POW2: tl.constexpr, SPIN: tl.constexpr):
    # _rmsnorm_split with stamped words
    pid = tl.program_id(0)
    team = pid // P
    part = pid % P
    n_teams = tl.num_programs(0) // P
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = cols < N
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    slots = tl.arange(0, P_POW2)

    xf = tl.load(x_ptr + tl.cast(team, tl.int64) * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    _publish(words, team, part, 0, tl.sum(xf * xf, axis=0), 0, 1, P)
    it = 0
    for row in range(team, M, n_teams):
        nxt = row + n_teams
        xn = tl.load(x_ptr + tl.cast(nxt, tl.int64) * stride_x + cols, mask=ok & (nxt < M), other=0.0).to(tl.float32)
        _publish(words, team, part, it + 1, tl.sum(xn * xn, axis=0), 0, 1, P)
        sumsq = tl.sum(tl.where(slots < P, _poll(words, team, it, slots, 0, 1, P, SPIN), 0.0), axis=0)
        rstd = 1.0 / tl.sqrt(sumsq / N + eps)
        tl.store(y_ptr + tl.cast(row, tl.int64) * stride_y + cols, (xf * rstd * w).to(y_ptr.dtype.element_ty), mask=ok)
        xf = xn
        it += 1
    _unstamp(words, exits, team, slots, 1, P)


_WORDS = {}


def launch(kernel: str, T, x, w, y, block: int, warps: int):
    """kernel's stamped team on x into y, sized as the template sizes its split team."""
    M, N = x.shape
    sms = T._sm_count(x.device)
    if x.device not in _WORDS:
        _WORDS[x.device] = (torch.full((sms * 32 * 4 * 2,), -1, dtype=torch.int64, device=x.device),
                            torch.zeros(sms * 32, dtype=torch.int32, device=x.device))
    words, exits = _WORDS[x.device]
    P = triton.cdiv(N, block)
    consts = {"BLOCK_N": block, "P": P, "P_POW2": triton.next_power_of_2(P), "SPIN": MAX_SPIN}
    if kernel == "softmax":
        fn, args = _softmax_split_stamped, (x, y, words, exits, M, N, x.stride(0), y.stride(0))
    else:
        fn, args = _rmsnorm_split_stamped, (x, w, y, words, exits, M, N, x.stride(0), y.stride(0), T.EPS)
    teams = min(M, (sms * T._programs_per_sm(fn, args, consts, warps, 1, x.device)) // P)
    if teams < 1:
        raise RuntimeError(f"a team of {P} does not fit the GPU at once")
    fn[(teams * P,)](*args, **consts, num_warps=warps, num_stages=1)


def compile_only():
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    rows = {"M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
    kernels = {
        "softmax": (_softmax_split_stamped, {"x_ptr": "*fp32", "y_ptr": "*fp32", "words": "*i64", "exits": "*i32",
                                             **rows}),
        "rmsnorm": (_rmsnorm_split_stamped, {"x_ptr": "*fp32", "w_ptr": "*fp32", "y_ptr": "*fp32", "words": "*i64",
                                             "exits": "*i32", **rows, "eps": "fp32"}),
    }
    for name, (fn, sig) in kernels.items():
        for block, warps, P in ((4096, 8, 16), (8192, 8, 32)):
            consts = {"BLOCK_N": block, "P": P, "P_POW2": P, "SPIN": MAX_SPIN}
            src = ASTSource(fn=fn, signature={**sig, **{k: "constexpr" for k in consts}}, constexprs=consts,
                            attrs={(i,): [["tt.divisibility", 16]] for i, k in enumerate(sig) if k not in ("M", "eps")})
            k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
            ptx = k.asm["ptx"]
            print(name, block, warps, P, "fences", ptx.count("fence") + ptx.count("membar"),
                  "release atomics", ptx.count(".release."), "relaxed atomics", ptx.count(".relaxed."))


SHAPES = [(2048, 65536), (1024, 131072), (512, 262144)]
# (BLOCK_N, num_warps): the templates' SPLIT (softmax), CONFIG's and SPLIT_LONG's (rmsnorm)
CHUNKS = {"softmax": [(4096, 8), (4096, 4)], "rmsnorm": [(4096, 4), (8192, 8)]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--kernels", default="softmax,rmsnorm")
    p.add_argument("--compile-only", action="store_true")
    p.add_argument("--budget-s", type=float, default=120.0, help="stop timing new variants after this")
    args = p.parse_args()
    if args.compile_only:
        compile_only()
        return
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    torch.manual_seed(0)
    for kernel in args.kernels.split(","):
        T = templates.load(kernel)
        for M, N in SHAPES:
            x = torch.randn(M, N, device="cuda") * 3
            w = torch.rand(N, device="cuda") + 0.5
            y = torch.empty_like(x)
            if kernel == "softmax":
                x[1, :100] = -float("inf")
                x[2, N // 2:] = -float("inf")  # whole chunks of -inf on some team members
                ref = torch.softmax(x, -1)
                variants = [("today", lambda y: T.softmax(x, out=y))]
            else:
                ref = T.rmsnorm_ref(x, w).float()
                variants = [("today", lambda y: T.rmsnorm(x, w, out=y))]
            variants += [(f"stamped {b}/{wp}", lambda y, b=b, wp=wp: launch(kernel, T, x, w, y, b, wp))
                         for b, wp in CHUNKS[kernel]]
            for name, run in variants:
                if time.time() - started > args.budget_s:
                    break
                row = {"kernel": kernel, "shape": [M, N], "dtype": "fp32", "variant": name}
                templates.check_and_time(row, run, y, ref, 2 * x.numel() * x.element_size(), timer, copy, True)
                results["rows"].append(row)
                print(f"{kernel} {M}x{N} fp32 {name}: {templates.figure(row)}", flush=True)
            (out / "stamped_split.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
