"""Issue 15: layernorm's 16-bit rows of 32768 split over two programs, each half a row in registers.

    python benchmarks/explore/layernorm_half_rows.py [--out DIR] [--rounds 2] [--shapes 4096x32768,...]
    python benchmarks/explore/layernorm_half_rows.py --compile-only   # registers for sm_90, no GPU

Why: the whole row a program (the template's _layernorm_row_pairs) reads 98.6-98.9% of copy a row but
costs 14.7-15.1 us a call besides (time = rows x 0.0310 us + fixed, four row counts; experiments/
sweep-h200-session20/call5-layernorm/): about 1.8 times one program's row (8.2 us at two programs an
SM). The fixed cost held at 2048, 4096 and 8192 rows, whose last waves are 0.76, 0.52 and 0.03 full:
not the tail's emptiness but the length of one program's work, at the start (every program loads its
first row at once, nothing is written) and at the end. 90% at 4096x32768 needs it under 12.7 us.
Here a row is two programs' work: each holds half of it as pairs (as _layernorm_row_pairs), takes its
half's mean and M2 (the sum of squares about that mean) in two passes, trades them with its partner in
one 64-bit word (mean's bits high, M2's low) and merges them (Chan: M2 = M2a + M2b + (ma - mb)^2 N / 4).
A program's work halves, and so should the fixed cost; the trade adds a round trip through L2 a row,
hidden while other programs of the SM load. The words are -1 where no half is posted; a program takes
its partner's with an exchange that leaves -1, so a launch leaves them as it found them (safe under CUDA
graphs); one that waits past SPIN withdraws its own (both halves then write NaN: wrong, never a hang).
Prediction: 4096x32768 90-92% of copy (88.7 today), 2048x32768 over the team's 80.8.
Call 1 (experiments/sweep-h200-session21/call1-half-rows/; posts as release, takes as acquire): falsified,
77.4-80.5 at 4096x32768 on 8 warps, 72-74 on 4 or 16, 79.6-82.1 even at 8192 rows: the rows' pace fell.
Call 2 (call2-relaxed/): relaxed atomics (each word carries its data; a release waits for the program's
traffic): 4096x32768 90.0-90.2 / 91.9-92.3 (bf16 / fp16) on 8 warps, 8192 92.6-92.8 / 94.3-94.4 (the whole
row 92.9 / 92.3-92.4), 2048 84.3 / 86.4-86.5 (the team 82.0-82.1 / 82.8-82.9); 16 warps 80-88.
Call 3 (call3-rows/): 512x32768 61.3-61.8 / 63.1-63.4 against the team's 63.5 / 64.5, 1024 75.1-75.2 /
77.0-77.6 against 75.0 / 75.9-76.1, 3072 88.0 / 90.0 against 85.3 / 84.7-84.8, 16384 94.4-94.5 / 96.2-96.3
against 95.3 / 95.1; rows of 65536 70.8-80.5 against the team's 79.7-84.7. The template's
_layernorm_half_rows came of it (relaxed, 8 warps, from three waves of programs).

Each variant is checked against torch in fp32 (output poisoned first), then timed, A B A B.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)

LAYERNORM = templates.load("layernorm")
_unpair = LAYERNORM._unpair  # CONVERT=True: every element converted, as these calls ran (before the bf16 shifts)
SHAPES = [(4096, 32768), (2048, 32768), (8192, 32768), (2048, 65536)]
SPIN = 1 << 20
# label -> (num_warps, RELAXED). Compiled for sm_90 by Triton 3.6 (--compile-only), rows of 32768:
# 4 warps 120-122 registers, 8 warps 57-59 (four programs an SM either way), 16 warps 40 (three); bf16
# unpacked by shifts and masks (an element's bits are an fp32's high half) took 8 warps to 90 (two).
SETTINGS = {"halves 4w": (4, 0), "halves 8w": (8, 0), "halves 16w": (16, 0),
            "halves 8w relaxed": (8, 1), "halves 16w relaxed": (16, 1)}


@triton.jit
def _layernorm_half_rows(x_ptr, w_ptr, b_ptr, y_ptr, words_ptr, N, stride_x, stride_y, eps, zero,
                         HALF: tl.constexpr, SPIN: tl.constexpr, RELAXED: tl.constexpr):
    # RELAXED: the posts and takes without fences (each word carries its data); else release / acq_rel
    pid = tl.program_id(0)
    row = (pid // 2).to(tl.int64)
    start = (pid % 2) * (HALF // 2)  # in words of two elements
    offs = start + tl.arange(0, HALF // 2)
    dtype = x_ptr.dtype.element_ty
    words = tl.load(x_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + row * (stride_x // 2) + offs,
                    cache_modifier=".cg")
    lo, hi = _unpair(words, dtype, CONVERT=True)
    mean = (tl.sum(lo, axis=0) + tl.sum(hi, axis=0)) / HALF
    lo, hi = _unpair(words ^ zero, dtype, CONVERT=True)
    lo = lo - mean
    hi = hi - mean
    m2 = tl.sum(lo * lo, axis=0) + tl.sum(hi * hi, axis=0)
    # post ours, take the partner's (leaving -1: no fp32 mean has all 32 bits set)
    mine = (mean.to(tl.int32, bitcast=True).to(tl.int64) << 32) | (m2.to(tl.int32, bitcast=True).to(tl.int64)
                                                                  & 0xFFFFFFFF)
    tl.atomic_xchg(words_ptr + pid, mine, sem="relaxed" if RELAXED else "release")
    theirs = tl.atomic_xchg(words_ptr + (pid ^ 1), -1, sem="relaxed" if RELAXED else "acq_rel")
    spins = 0
    while (theirs == -1) & (spins < SPIN):
        theirs = tl.atomic_xchg(words_ptr + (pid ^ 1), -1, sem="relaxed" if RELAXED else "acq_rel")
        spins += 1
    if theirs == -1:
        # withdraw ours; if the partner took it, its own was posted first: wait for it once more
        if tl.atomic_xchg(words_ptr + pid, -1, sem="acq_rel") == -1:
            spins = 0
            while (theirs == -1) & (spins < SPIN):
                theirs = tl.atomic_xchg(words_ptr + (pid ^ 1), -1, sem="acq_rel")
                spins += 1
    their_mean = (theirs >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    their_m2 = theirs.to(tl.int32).to(tl.float32, bitcast=True)
    d = mean - their_mean
    var = (m2 + their_m2 + d * d * (HALF * 0.5)) / N
    rstd = tl.where(theirs == -1, float("nan"), 1.0 / tl.sqrt(var + eps))
    mean = (mean + their_mean) * 0.5
    lo, hi = _unpair(words ^ (zero >> 1), dtype, CONVERT=True)
    wl, wh = _unpair(tl.load(w_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + offs, eviction_policy="evict_last"),
                     dtype, CONVERT=True)
    bl, bh = _unpair(tl.load(b_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + offs, eviction_policy="evict_last"),
                     dtype, CONVERT=True)
    y = tl.reshape(tl.join((lo - mean) * rstd * wl + bl, (hi - mean) * rstd * wh + bh), (HALF,))
    tl.store(y_ptr + row * stride_y + 2 * start + tl.arange(0, HALF), y.to(y_ptr.dtype.element_ty),
             cache_modifier=".cs")


_WORDS = {}


def half_row_words(device, programs: int):
    words = _WORDS.get(device)
    if words is None or words.numel() < programs:
        words = torch.full((programs,), -1, device=device, dtype=torch.int64)
        _WORDS[device] = words
    return words


def variants(x, w, b, eps, labels):
    M, N = x.shape
    words = half_row_words(x.device, 2 * M)

    def launcher(warps, relaxed):
        return lambda out: _layernorm_half_rows[(2 * M,)](x, w, b, out, words, N, x.stride(0), out.stride(0), eps, 0,
                                                         HALF=N // 2, SPIN=SPIN, RELAXED=relaxed, num_warps=warps)
    return {label: launcher(*SETTINGS[label]) for label in labels}


def compile_only():
    for N in (32768, 65536):
        for dtype in (torch.bfloat16, torch.float16):
            x = torch.empty(16, N, dtype=dtype)
            w = torch.empty(N, dtype=dtype)
            words = torch.empty(32, dtype=torch.int64)
            args = (x, w, w, x, words, N, N, N, 1e-5, 0)
            for label, (warps, relaxed) in SETTINGS.items():
                k = templates.compile_sm90(_layernorm_half_rows, args, {"HALF": N // 2, "SPIN": SPIN,
                                                                        "RELAXED": relaxed}, {"num_warps": warps})
                print(N, dtype, label, templates.resource_usage(k), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--shapes", default=",".join(f"{m}x{n}" for m, n in SHAPES))
    p.add_argument("--variants", default=",".join(SETTINGS), help="labels of SETTINGS to time")
    p.add_argument("--compile-only", action="store_true")
    args = p.parse_args()
    if args.compile_only:
        return compile_only()
    from kgit.harness import device

    out, timer, copy, results = templates.begin(args.out)
    for shape in args.shapes.split(","):
        M, N = (int(n) for n in shape.split("x"))
        for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            x, w, b = templates.norm_inputs(M, N, dtype)
            y = torch.empty_like(x)
            run, ref = templates.norm_call("layernorm", LAYERNORM, x, w, b)
            runs = {"template": run, **variants(x, w, b, LAYERNORM.EPS, args.variants.split(","))}
            templates.time_variants("layernorm", runs, y, ref, M, N, dname, args.rounds, timer, copy, results)
            words = _WORDS[x.device]
            results.setdefault("words_left_as_found", []).append(bool((words == -1).all().item()))
    results["copy_gbps_end"] = device.measured_copy_gbps(refresh=True)
    (out / "layernorm_half_rows.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
