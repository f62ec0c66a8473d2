"""Issue 15: a change to the memory-bound templates, before against after, in one process, alternated.

    python benchmarks/explore/template_ab.py --before DIR [--out DIR] [--cases softmax,layernorm]

DIR holds the templates before the change as <kernel>.py (`git show REV:skills/kernels/softmax/
triton_template.py > DIR/softmax.py`); after is this checkout's. Two processes differ by a point or two
of copy on the same code, so both sides run on the same inputs, A B A B, each checked against torch in
fp32 first (templates.check_and_time).

Session 19 (experiments/sweep-h200-session19/): fewer instructions an element. Softmax's pipelined row
loop at 16-bit 4096x32768 read 88% of copy (bar 90) with its issue slots 46% busy on one program an SM
(experiments/sweep-h200-session17/call5-profiles/); compiled for sm_90 it drops from 1264 to 776 SASS
instructions with exp as one MUFU.EX2 (tl.exp adds a denormal fix-up of four instructions an element)
and no masks on rows of exactly BLOCK_N. Predicted +2-4 points there, +0-1 where the arithmetic is not
the pace. Layernorm's team at 16-bit 4096x32768 (84%, issue slots 61% busy) drops 2176 -> 1944
instructions in fp16 and 2104 -> 1976 in bf16 without the column masks on rows whose length is a
multiple of the part: predicted +0-2 points at rows of 32768-262144; its whole fp32 row of 32768 (89.6%,
bar 90) 496 -> 336: +0-2.
Outcome: softmax 4096x32768 fp16 +1.9, bf16 -0.6 (falsified: the issue slots fell to 28% and DRAM
stayed 75% busy); the fp32 split teams +1.7-2.2 and bf16 4096x30000 +4.1 from exp2; layernorm's team
+1.0-2.4 and its fp32 row of 32768 +5.1 (94.5%). Call 2 ran --also "exp2 only=DIR" (the launcher's
EVEN set False) beside them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)

CASES = {
    "softmax": [((4096, 32768), ("bf16", "fp16", "fp32")), ((8192, 16384), ("bf16", "fp16", "fp32")),
                ((32768, 4096), ("bf16", "fp32")), ((131072, 1024), ("bf16",)),
                ((4096, 30000), ("bf16", "fp32")), ((1024, 131072), ("fp32",)), ((512, 262144), ("fp32",)),
                ((16384, 8192), ("bf16", "fp16")), ((8192, 12000), ("bf16", "fp16")), ((8192, 12001), ("bf16",))],
    "layernorm": [((4096, 32768), ("bf16", "fp16", "fp32")), ((8192, 16384), ("fp16", "fp32")),
                  ((2048, 65536), ("bf16", "fp16")),
                  ((1024, 131072), ("bf16", "fp16")), ((512, 262144), ("bf16", "fp16")),
                  ((1024, 32768), ("bf16", "fp16")), ((2048, 32768), ("bf16", "fp16")),
                  ((8192, 32768), ("bf16", "fp16"))],
    "rmsnorm": [((4096, 32768), ("bf16", "fp16", "fp32")), ((2048, 32768), ("bf16", "fp16", "fp32")),
                ((1024, 32768), ("bf16", "fp16", "fp32")), ((512, 32768), ("bf16", "fp32"))],
}
ROUNDS = 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--before", required=True, help="a folder of the templates before the change, <kernel>.py")
    p.add_argument("--also", action="append", default=[], metavar="NAME=DIR",
                   help="another side: a folder of templates as --before's, timed after the checkout's")
    p.add_argument("--out", default=".")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--rounds", type=int, default=ROUNDS)
    p.add_argument("--shapes", default="", help="only these shapes, e.g. 4096x32768,8192x16384")
    args = p.parse_args()
    only = {tuple(int(n) for n in s.split("x")) for s in args.shapes.split(",") if s}
    import torch

    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    torch.manual_seed(0)
    for kernel in args.cases.split(","):
        sides = {"before": templates.load(kernel, Path(args.before) / f"{kernel}.py", "before"),
                 "after": templates.load(kernel)}
        for also in args.also:
            name, folder = also.split("=", 1)
            if (Path(folder) / f"{kernel}.py").exists():
                sides[name] = templates.load(kernel, Path(folder) / f"{kernel}.py", name)
        for (M, N), dtypes in CASES[kernel]:
            if only and (M, N) not in only:
                continue
            for dname in dtypes:
                templates.time_sides(kernel, sides, M, N, dname, args.rounds, timer, copy, results)
                (out / "template_ab.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
