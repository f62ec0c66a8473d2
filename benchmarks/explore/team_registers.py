"""Issue 15: the softmax shared-memory team with its registers capped (maxnreg), 16-bit long rows.

    python benchmarks/explore/team_registers.py [--out DIR]

Why: under ncu (experiments/sweep-h200-session12/worst-shapes/) the team holds 127 registers a thread
at 512x262144 (P = 32 parts), four programs an SM, and reads 79.1% of copy; at 4096x32768 (P = 4) 95
registers, five an SM. The fp32 split team gained 11 points at 262144 from a cap that gave it one
more program an SM (exchange-ab/maxnreg64/). Prediction: a cap of 96 (five an SM) or 80 (six) lifts
512x262144 bf16 by 2-5 points, to the bar of 80 or over, unless the cap spills in the gather loop.
Each cap runs the template's own kernel and launcher (the cap is passed at compile and launch),
checked against an fp32 reference first, beside the template as it is, on the same inputs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import templates  # noqa: E402  (beside this file)

SHAPES = [(512, 262144), (1024, 131072), (2048, 65536), (4096, 32768)]
CAPS = [None, 96, 80]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    args = p.parse_args()
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    S = templates.load("softmax")
    team = S._softmax_smem_team
    torch.manual_seed(0)
    for M, N in SHAPES:
        x = (torch.randn(M, N, device="cuda") * 3).to(torch.bfloat16)
        x[2, N // 2:] = -float("inf")  # a whole part of -inf on some team members
        ref = torch.softmax(x.float(), -1)
        y = torch.empty_like(x)
        for cap in CAPS:
            S._softmax_smem_team = team if cap is None else templates.Overridden(team, maxnreg=cap)
            row = {"shape": [M, N], "dtype": "bf16", "maxnreg": cap}
            templates.check_and_time_team(S, row, lambda y: S.softmax(x, out=y), y, ref, 2 * x.numel() * 2, timer,
                                          copy)
            results["rows"].append(row)
            print(f"softmax {M}x{N} bf16 maxnreg {cap}: {templates.figure(row)}", flush=True)
        (out / "team_registers.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
