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
  row           _rmsnorm_row launched directly, as the launcher does (64-bit row offset)
  row32         _rmsnorm_row32 below: _rmsnorm_row with a 32-bit row offset
Prediction: if the 64-bit offset is the cost, row32 reads level with the peer and row with the template,
0.4-0.6% under; if row32 is also under, the difference is elsewhere (launch, placement) and the peer's lead
is within what this machine's runs move.
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
def _rmsnorm_row32(x_ptr, w_ptr, y_ptr, N, stride_x, stride_y, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)  # the only change from the template's _rmsnorm_row: no .to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    ok = cols < N
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
                                                      num_warps=warps),
                "row32": lambda y: _rmsnorm_row32[(M,)](x, w, y, N, x.stride(0), y.stride(0), T.EPS, BLOCK_N=block,
                                                        num_warps=warps),
            }
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
