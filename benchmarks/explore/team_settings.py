"""Issue 15: layernorm's 16-bit rows of 32768-262144 on rmsnorm's team layout (call 2), softmax's 16-bit rows of 32768, the one softmax shape under its bar (85.4-87.0% of copy,
bar 90), on other settings of the template's own shared-memory team; and layernorm's fp32 rows of 32768
(89.9%, bar 90) measured again beside torch.

    python benchmarks/explore/team_settings.py [--out DIR] [--budget-s S] [--layernorm-16bit | --pipelined-rows]

Call 3 (--pipelined-rows). Softmax's fp32 rows of 32768 read 96.5% on one program an SM holding a
128 KB row; its 16-bit rows (64 KB) read 85-87% on the team and 71-74% on one program a row in
registers (one program an SM, 64 KB in flight). The row-tile kernel's loop over rows, software-pipelined
by Triton (num_stages: the next rows' loads become cp.async copies into shared memory, 64 KB a stage),
keeps two or three rows in flight on one program an SM. Compiled for sm_90 by Triton 3.9: softmax
99-101 registers on 16 warps, 56-60 on 32, 64-128 KB of shared memory; layernorm spills (64 registers,
240-384 bytes of stack), as it holds w and b too. Hypothesis: bytes in flight, not the exchange, hold
the 16-bit rows of 32768 down. Prediction: softmax 90-95% on 3 stages, layernorm under its team (it
spills).

Call 2 (--layernorm-16bit). Layernorm's 16-bit team reads 80-83% at rows of 65536-131072, 75-78% at
262144 and 81-84% at 32768, where rmsnorm's reads 88-92%. The two differ in what a program holds:
rmsnorm's team holds 8192-element parts of two rows (32 KB) and reads w from L2 with each output
chunk; layernorm's holds 4096-element parts (16 KB) beside its w and b (16 KB), six programs an SM
either way, so layernorm has half the row bytes in flight an SM. Session 11 ran layernorm on
rmsnorm's layout (smem_team.py's _norm_smem_team, w and b from L2): 76.7-81.5%, but on four or five
programs an SM (registers). Hypothesis: on six (a register cap of 80-88) it reads as rmsnorm's does.
Prediction: 84-88% at 65536-262144 and over 85% at 32768, against the template in the same process.

Why: the worst-shape profile (experiments/sweep-h200-session12/worst-shapes/) reads the team of four
programs (8192-element parts, 95 registers) at five programs an SM and DRAM 74.5%. Softmax's fp32 rows
of 32768 read 96.5% on one program an SM holding a 128 KB row; a 16-bit row of 32768 is 64 KB, so the
bytes in flight an SM, not the exchange, are the suspect. Hypothesis: settings that put more programs
(more bytes) on an SM lift the team: 4096-element parts on 8 programs an SM (capped at 64 registers),
or the 8192-element parts capped at 80-88 registers (six an SM). Prediction: +1-4 points, the best
near 88-89%; the bar of 90 probably not met by settings alone.
Every variant is checked against an fp32 torch reference before it is timed (templates.check_and_time).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import templates  # noqa: E402  (beside this file)
from smem_team import launch_norm  # noqa: E402

# (CHUNK, NCH, num_warps, PROGRAMS_PER_SM, maxnreg); the first is the template's
SOFTMAX_SETTINGS = [(4096, 2, 4, 6, 96), (4096, 2, 4, 6, 88), (4096, 2, 4, 6, 80), (4096, 1, 4, 8, None),
                    (4096, 1, 4, 8, 64), (4096, 1, 4, 8, 72), (2048, 2, 4, 8, 64), (2048, 4, 4, 6, 80)]


def with_setting(template, setting: dict, run):
    """run() with the template's shared-memory team on `setting`; restored after."""
    saved = template.SMEM_TEAM
    template.SMEM_TEAM = setting
    try:
        run()
    finally:
        template.SMEM_TEAM = saved


# (CHUNK, NCH, num_warps, PROGRAMS_PER_SM, maxnreg) of _norm_smem_team with w and b from L2
LAYERNORM_SETTINGS = [(4096, 2, 4, 6, None), (4096, 2, 4, 6, 88), (4096, 2, 4, 6, 80), (4096, 2, 4, 6, 72),
                      (4096, 1, 4, 8, 64)]
LAYERNORM_SHAPES = [(4096, 32768), (2048, 65536), (1024, 131072), (512, 262144)]


def layernorm_cases(L):
    """Call 2's cases: each shape in bf16, 262144 in fp16 too: the template, torch, the settings."""
    cases = []
    for (M, N), dtype in [(s, torch.bfloat16) for s in LAYERNORM_SHAPES] + [((512, 262144), torch.float16)]:
        x = (torch.randn(M, N, device="cuda") * 3 + 100).to(dtype)  # a mean far from 0: no cancelling
        w_, b_ = (torch.rand(N, device="cuda") + 0.5).to(dtype), torch.randn(N, device="cuda").to(dtype)
        variants = [("today", lambda y, x=x, w_=w_, b_=b_: L.layernorm(x, w_, b_, out=y)),
                    ("torch", lambda y, x=x, w_=w_, b_=b_, N=N: y.copy_(torch.nn.functional.layer_norm(
                        x, (N,), w_, b_, L.EPS)))]
        variants += [(f"w,b from L2 {c}x{n}/{w}/{pps} maxnreg {r}",
                      lambda y, x=x, w_=w_, b_=b_, c=c, n=n, w=w, pps=pps, r=r:
                      launch_norm(L, x, w_, b_, y, L.EPS, c, n, w, pps, False, r))
                     for c, n, w, pps, r in LAYERNORM_SETTINGS]
        cases.append(("layernorm", x, L.layernorm_ref(x, w_, b_).float(), variants))
    return cases


# (num_warps, num_stages) of the row-tile kernels, one 32768-element row a tile, a persistent grid
PIPELINED = {"softmax": [(16, 1), (16, 2), (16, 3), (16, 4), (32, 2), (32, 3)],
             "layernorm": [(32, 1), (32, 2), (32, 3), (16, 3)]}


def pipelined_rows(template, kernel, args, M, N, warps, stages):
    """The template's row-tile kernel (`kernel`, args up to the strides and eps) on one row a tile and
    `stages` pipeline stages, as many programs as fit the SMs, each looping over rows."""
    consts = {"BLOCK_N": triton.next_power_of_2(N), "ROWS": 1, "NUM_STAGES": stages}
    dev = args[0].device
    occ = template._programs_per_sm(kernel, args, consts, warps, stages, dev)
    grid = template._rows_grid(M, 1, template._sm_count(dev), occ, {"PERSISTENT": 1})
    kernel[(grid,)](*args, **consts, num_warps=warps, num_stages=stages)
    return occ


def pipelined_cases(S, L):
    """Call 3's cases at 4096x32768: softmax in bf16 and fp16, layernorm in bf16."""
    M, N = 4096, 32768
    cases = []
    for dtype in (torch.bfloat16, torch.float16):
        x = (torch.randn(M, N, device="cuda") * 3).to(dtype)
        variants = [("today", lambda y, x=x: S.softmax(x, out=y)),
                    ("torch", lambda y, x=x: y.copy_(torch.softmax(x, -1)))]
        variants += [(f"rows pipelined {w} warps {st} stages",
                      lambda y, x=x, w=w, st=st: pipelined_rows(S, S._softmax_rows,
                                                                (x, y, M, N, x.stride(0), y.stride(0)), M, N, w, st))
                     for w, st in PIPELINED["softmax"]]
        cases.append(("softmax", x, torch.softmax(x.float(), -1), variants))
    x = (torch.randn(M, N, device="cuda") * 3 + 100).to(torch.bfloat16)
    w_, b_ = (torch.rand(N, device="cuda") + 0.5).to(x.dtype), torch.randn(N, device="cuda").to(x.dtype)
    variants = [("today", lambda y: L.layernorm(x, w_, b_, out=y)),
                ("torch", lambda y: y.copy_(torch.nn.functional.layer_norm(x, (N,), w_, b_, L.EPS)))]
    variants += [(f"rows pipelined {w} warps {st} stages",
                  lambda y, w=w, st=st: pipelined_rows(L, L._layernorm_rows,
                                                       (x, w_, b_, y, M, N, x.stride(0), y.stride(0), L.EPS),
                                                       M, N, w, st))
                 for w, st in PIPELINED["layernorm"]]
    cases.append(("layernorm", x, L.layernorm_ref(x, w_, b_).float(), variants))
    return cases


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--budget-s", type=float, default=200.0)
    p.add_argument("--layernorm-16bit", action="store_true", help="call 2: layernorm's 16-bit team settings")
    p.add_argument("--pipelined-rows", action="store_true", help="call 3: the row-tile kernels, pipelined")
    args = p.parse_args()
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    S, L = templates.load("softmax"), templates.load("layernorm")
    torch.manual_seed(0)
    if args.layernorm_16bit:
        run_cases(layernorm_cases(L), started, args.budget_s, out, timer, copy, results)
        return
    if args.pipelined_rows:
        run_cases(pipelined_cases(S, L), started, args.budget_s, out, timer, copy, results)
        return
    M, N = 4096, 32768
    cases = []
    for dtype in (torch.bfloat16, torch.float16):
        x = (torch.randn(M, N, device="cuda") * 3).to(dtype)
        x[1, :100] = -float("inf")
        ref = torch.softmax(x.float(), -1)
        variants = [("today", lambda y, x=x: S.softmax(x, out=y)),
                    ("torch", lambda y, x=x: y.copy_(torch.softmax(x, -1)))]
        variants += [(f"team {c}x{n}/{w}/{pps} maxnreg {r}",
                      lambda y, x=x, s={"CHUNK": c, "NCH": n, "num_warps": w, "PROGRAMS_PER_SM": pps, "maxnreg": r}:
                      with_setting(S, s, lambda: S.softmax(x, out=y)))
                     for c, n, w, pps, r in SOFTMAX_SETTINGS]
        cases.append(("softmax", x, ref, variants))
    x = torch.randn(M, N, device="cuda") + 100  # a mean far from 0: the variance must not cancel
    w_, b_ = torch.rand(N, device="cuda") + 0.5, torch.randn(N, device="cuda")
    cases.append(("layernorm", x, L.layernorm_ref(x, w_, b_).float(),
                  [("today", lambda y: L.layernorm(x, w_, b_, out=y)),
                   ("torch", lambda y: y.copy_(torch.nn.functional.layer_norm(x, (N,), w_, b_, L.EPS))),
                   ("today again", lambda y: L.layernorm(x, w_, b_, out=y))]))
    run_cases(cases, started, args.budget_s, out, timer, copy, results)


def run_cases(cases, started, budget_s, out, timer, copy, results):
    """Check and time each case's variants (kernel, x, fp32 reference, [(name, run(y))]) until budget_s
    has passed since `started`; the results are written after each case."""
    for kernel, x, ref, variants in cases:
        y = torch.empty_like(x)
        M, N = x.shape
        for name, run in variants:
            if time.time() - started > budget_s:
                break
            row = {"kernel": kernel, "shape": [M, N], "dtype": str(x.dtype), "variant": name}
            templates.check_and_time(row, run, y, ref, 2 * x.numel() * x.element_size(), timer, copy, True)
            if name.startswith(("w,b", "rows")) and "error" not in row:
                row["programs_per_sm"] = run(y)
            results["rows"].append(row)
            pps = f" ({row['programs_per_sm']} an SM)" if "programs_per_sm" in row else ""
            print(f"{kernel} {M}x{N} {str(x.dtype)[6:]} {name}{pps}: {templates.figure(row)}", flush=True)
        (out / "team_settings.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
