"""Layernorm's fp32 rows of 4096 against the one-program-per-row peer (session 31).

    python benchmarks/explore/layernorm_fp32_rows.py [--out DIR] [--rounds 8] [--shape 32768x4096]
                                                     [--variants "kgit as shipped;peer 16 warps"]

The one cell of issue 15's peer bar that read under the peer by more than 0.1% in sessions 30-31:
layernorm fp32 32768x4096, x0.996-0.998 (peer_rows.py). There the template runs _layernorm_rows on one row
a program on CONFIG's 4 warps, w and b loaded before the row (WB_PER_TILE 0); the peer runs the row on 16
warps and loads w and b after both reductions. Session 29 put the template's row on 16 warps (w and b
first): 94.5% of copy against 97.7 on 4. The difference from the peer there is when w and b are loaded.
Prediction: WB_PER_TILE 1 on 16 warps reads as the peer does (98.1%); on 8 warps within 0.2% of it; on 4
warps as today's (w and b are then loaded once per row either way: one row is one tile).
Refuted (call 4): after on 16 warps 93.5%, first 94.6%, the peer 98.2, today's 97.9 (8 rounds). The
template's other whole-row kernel, _layernorm_row (1-D as the peer is; wide rows' kernel), is added: on 16
warps it is the peer's code but for a 64-bit row offset, so it should read as the peer does. It did (call 5:
98.2% masked; call 7, 20 rounds paired: x0.9996 the peer, x1.0024 the shipped launch), and now serves these
rows (the template's FP32_WHOLE_ROW_ABOVE).
Each variant is checked against the fp32 reference, then timed as kgit times, all alternated per round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)
from peer_rows import _peer_layernorm  # noqa: E402


def row_block(N: int) -> int:
    """A whole row's block: N's next power of two (at least 16), as the template and the peer take it."""
    return max(16, 1 << (N - 1).bit_length())


def template_row(T, x, w, b, warps: int, wb_per_tile: int):
    M, N = x.shape
    block = row_block(N)
    return lambda y: T._layernorm_rows[(M,)](x, w, b, y, M, N, x.stride(0), y.stride(0), T.EPS, BLOCK_N=block,
                                              ROWS=1, NUM_STAGES=1, WB_PER_TILE=wb_per_tile, num_warps=warps,
                                              num_stages=1)


def whole_row(T, x, w, b, warps: int, even: bool):
    """The template's _layernorm_row (1-D, the peer's code with a 64-bit row offset), W_IN_L1 off."""
    M, N = x.shape
    block = row_block(N)
    return lambda y: T._layernorm_row[(M,)](x, w, b, y, N, x.stride(0), y.stride(0), T.EPS, BLOCK_N=block,
                                             W_IN_L1=False, EVEN=even, num_warps=warps)


def peer_row(T, x, w, b, warps: int):
    M, N = x.shape
    block = row_block(N)
    return lambda y: _peer_layernorm[(M,)](x, w, b, y, N, x.stride(0), T.EPS, BLOCK=block, num_warps=warps)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--shape", default="32768x4096")
    p.add_argument("--variants", default="", help="labels to keep, separated by ; (default: all)")
    args = p.parse_args()
    M, N = (int(n) for n in args.shape.split("x"))
    out, timer, copy, results = templates.begin(args.out)
    T = templates.load("layernorm")
    torch.manual_seed(0)
    x, w, b = templates.norm_inputs(M, N, torch.float32)
    y = torch.empty_like(x)
    template_run, ref = templates.norm_call("layernorm", T, x, w, b)
    runs = {"kgit as shipped": template_run, "peer 16 warps": peer_row(T, x, w, b, 16),
            "peer 8 warps": peer_row(T, x, w, b, 8)}
    for warps in (4, 8, 16):
        for wb_per_tile in (0, 1):
            runs[f"row, {warps} warps, w b {'after' if wb_per_tile else 'first'}"] = \
                template_row(T, x, w, b, warps, wb_per_tile)
    for warps in (8, 16):
        for even in (False, True):
            runs[f"_layernorm_row, {warps} warps{', even' if even else ''}"] = whole_row(T, x, w, b, warps, even)
    if args.variants:
        runs = {label: runs[label] for label in args.variants.split(";")}
    templates.time_variants("layernorm", runs, y, ref, M, N, "fp32", args.rounds, timer, copy, results)
    (out / "layernorm_fp32_rows.json").write_text(json.dumps(results, indent=1))
    print(f"\nmedians over {args.rounds} rounds, % of copy {copy:.0f} GB/s:")
    for label in runs:
        figures = [r["gbps"] for r in results["rows"] if r["variant"] == label and "gbps" in r]
        if figures:
            median = statistics.median(figures)
            print(f"  {label:30s} {median:7.0f} GB/s  {100 * median / copy:5.1f}%  "
                  f"spread {100 * (max(figures) - min(figures)) / median:.1f}%")
        else:
            print(f"  {label:30s} failed: {[r.get('error') for r in results['rows'] if r['variant'] == label][:1]}")


if __name__ == "__main__":
    main()
