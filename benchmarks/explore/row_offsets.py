"""Issue 15, session 30: rmsnorm's whole-row kernel trails the one-program-per-row peer at 8192x16384.

    python benchmarks/explore/row_offsets.py [--out DIR] [--rounds 6] [--shapes 8192x16384,8192x12288]

Why: peer_rows.py read the template 0.994-0.995x the peer in fp32 and 0.996x in fp16 at 8192x16384 in three
runs (sessions 29-30, spreads 0.1-0.6%), where it runs _rmsnorm_row: the peer's code but for two things,
the row's offset in 64-bit integers (a row index times a stride may pass 2^31 elements) and separate
strides for x and y. The offline sm_90 compile of both has the same loads and stores (8-16 ld.global.v4,
4-8 st.global.v4), 15 more PTX lines in ours and 85 registers against 87.
Variants, each checked against the fp32 reference, then timed as kgit times, alternated for --rounds:
  peer          whole_rows.py's _peer_rmsnorm (32-bit offsets, one stride)
  template      the template's launcher (rmsnorm(): _rmsnorm_row at these rows)
  row           _rmsnorm_row launched directly with the 64-bit row offset (as the launcher did before)
  row32         _rmsnorm_row_variant below: _rmsnorm_row with a 32-bit row offset
Prediction: if the 64-bit offset is the cost, row32 reads level with the peer and row with the template,
0.4-0.6% under; if row32 is also under, the difference is elsewhere (launch, placement) and the peer's lead
is within what this machine's runs move.
Outcome (experiments/sweep-h200-session30/call3-gemm-bk128-row-offsets/, 6 rounds, spreads 0.0-0.9%, rounds
within 0.2% of each other), x the peer at 8192x16384 / 8192x12288: fp32 row 0.994 / 0.992, row32 0.999 /
1.002; fp16 row 0.994 / 0.994, row32 1.010 / 1.026; bf16 row 1.031 / 1.072, row32 1.011 / 1.032. Neither
offset wins everywhere: the same code moves 2-3% in 16-bit by a few integer instructions before the
first load, reproducibly. The sm_90 SASS of all three has the same loads in the same order (x and w
interleaved, 128-bit); the 16-bit ones hold 64 registers (two programs of 16 warps an SM), fp32 85-87 (one).
Next hypothesis: x, read once, goes through the L1 with w, which every program reads again; with two
programs an SM their timing decides whether w's lines survive. Loaded past the L1 (.cg, w evict_last, as
the template's half-rows kernel does), every variant should read at or over the best of today's.
  row32 .cg, row .cg: x loaded .cg and w evict_last, 32- and 64-bit offsets
Outcome (call4-row-offsets-cg/, 4 rounds, also 16384x8192): refuted. Past the L1 each variant reads as it
did without (row .cg fp16 0.993 / 0.990 of the peer, row32 .cg 1.013 / 1.028): the offset's width moves it,
not the L1. Over the 9 cells row32 read 0.9975-1.033x the peer, row 0.990-1.072x (under it at 6). So the
template's _rmsnorm_row takes the 32-bit offset wherever every row's offset fits (OFFSETS_64).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)
from whole_rows import _peer_rmsnorm  # noqa: E402  (session 7's peer, beside this file)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@triton.jit
def _rmsnorm_row_variant(x_ptr, w_ptr, y_ptr, N, stride_x, stride_y, eps, BLOCK_N: tl.constexpr,
                         OFFSETS_64: tl.constexpr, STREAM_X: tl.constexpr):
    # The template's _rmsnorm_row, its row offset in 64-bit integers or not (OFFSETS_64) and x, read once,
    # loaded past the L1 (.cg) with w kept (evict_last) or not (STREAM_X)
    row = tl.program_id(0)
    if OFFSETS_64:
        row = row.to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    ok = cols < N
    if STREAM_X:
        x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0, cache_modifier=".cg").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    else:
        x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=ok)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--shapes", default="8192x16384,8192x12288")
    args = p.parse_args()
    out_dir, timer, copy, results = templates.begin(args.out)
    T = templates.load("rmsnorm")
    for shape in args.shapes.split(","):
        M, N = (int(n) for n in shape.split("x"))
        block, warps = triton.next_power_of_2(N), T.WHOLE_ROW_WARPS
        for dname, dtype in DTYPES.items():
            torch.manual_seed(0)
            x, w, _ = templates.norm_inputs(M, N, dtype)
            y = torch.empty_like(x)
            ref = T.rmsnorm_ref(x, w).float()
            runs = {
                "peer": lambda y: _peer_rmsnorm[(M,)](x, w, y, N, x.stride(0), T.EPS, BLOCK=block, num_warps=warps),
                "template": lambda y: T.rmsnorm(x, w, out=y),
                "row": lambda y: T._rmsnorm_row[(M,)](x, w, y, N, x.stride(0), y.stride(0), T.EPS, BLOCK_N=block,
                                                      OFFSETS_64=1, num_warps=warps),
            }
            for name, offsets_64, stream_x in (("row32", 0, 0), ("row32 .cg", 0, 1), ("row .cg", 1, 1)):
                runs[name] = (lambda y, o=offsets_64, s=stream_x: _rmsnorm_row_variant[(M,)](
                    x, w, y, N, x.stride(0), y.stride(0), T.EPS, BLOCK_N=block, OFFSETS_64=o, STREAM_X=s,
                    num_warps=warps))
            first = len(results["rows"])
            templates.time_variants("rmsnorm", runs, y, ref, M, N, dname, args.rounds, timer, copy, results)
            gbps = {name: [r["gbps"] for r in results["rows"][first:] if r["variant"] == name and "gbps" in r]
                    for name in runs}
            if all(gbps.values()):
                peer = statistics.median(gbps["peer"])
                print(f"{M}x{N} {dname}, medians of {args.rounds} rounds, x the peer: "
                      + ", ".join(f"{name} {statistics.median(g) / peer:.4f}" for name, g in gbps.items()), flush=True)
            (out_dir / "row_offsets.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
