"""Issue 15: the fused-MoE template before a change against after, at the Mixtral shape, in one process,
alternated with the dense GEMM pair of the same work (the bar's ceiling: 90% of it).

    python benchmarks/explore/moe_ab.py --before FILE [--out DIR] [--rounds 3] [--dtypes bf16,fp16]

FILE is the template before the change (`git show REV:skills/kernels/fused-moe/triton_template.py > FILE`);
after is this checkout's. Both run with their own AUTOTUNE on the same fresh inputs, are checked against
the fp32 reference first, then timed A B dense, A B dense, ... with the harness's timer (L2 cleared, the
GPU idle 100 ms before each function's first figure); each keeps its best median of the rounds.
Session 18's A/B of persistent GEMMs (moe_persistent_ab.py at bfa697a, which this script replaces) ran the
same rounds on the kernel test's inputs.

Session 22's change: the gate/up GEMM's B tile from one [2, BLOCK_N, BLOCK_K] box of w13's (E * 2, I, HD)
view, so that the gate rows and the up rows feed one m64n256k16 wgmma a warpgroup instead of two m64n128k16
that each read A from shared memory again (the same 174 registers and 196640 B of shared memory, compiled
for sm_90). The gemm template's 128x256 tile read 760 TFLOP/s at 4096^3 against 682 for 128x128.
Predicted: the gate/up GEMM +3-6%, the layer +2-4% (0.835-0.861 of the dense pair -> 0.86-0.89).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)
from kgit.harness.timing import Timer  # noqa: E402

MIXTRAL = (4096, 8, 2, 4096, 14336)  # tokens, experts, top k, hidden, intermediate
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True)
    p.add_argument("--out", default=".")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dtypes", default="bf16,fp16")
    p.add_argument("--also", action="append", default=[], metavar="LABEL=FILE",
                   help="another side: a template file timed in the same rounds")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sides = {"before": templates.load("fused-moe", path=args.before, side="before"),
             "after": templates.load("fused-moe", side="after")}
    for spec in args.also:
        label, _, path = spec.partition("=")
        sides[label] = templates.load("fused-moe", path=path, side=label)
    timer = Timer(repeats=3)
    T, E, K, HD, I = MIXTRAL
    flops = 6.0 * T * K * HD * I
    results = {"device": torch.cuda.get_device_name(), "shape": MIXTRAL, "rows": []}
    for dname in args.dtypes.split(","):
        dtype = DTYPES[dname]
        torch.manual_seed(0)
        x = torch.randn(T, HD, device="cuda", dtype=dtype)
        w13 = torch.randn(E, 2 * I, HD, device="cuda", dtype=dtype) * HD ** -0.5
        w2 = torch.randn(E, HD, I, device="cuda", dtype=dtype) * I ** -0.5
        logits = torch.randn(T, E, device="cuda")
        x_rep = torch.randn(T * K, HD, device="cuda", dtype=dtype)
        h_rep = torch.randn(T * K, I, device="cuda", dtype=dtype)
        ref = sides["after"].reference(x, w13, w2, logits, K).float()
        runs = {}
        for name, M in sides.items():
            o = torch.full_like(x, float("nan"))
            M.fused_moe(x, w13, w2, logits, K, out=o)  # autotunes on first call
            torch.cuda.synchronize()
            err = ((o.float() - ref).abs().max() / ref.abs().max()).item()
            picked = {k: M.last_config.get(k) for k in ("BLOCK_M", "DOWN_BLOCK_N", "USE_TMA", "GLUON")}
            print(f"{dname} {name}: max error {err:.2e} of the output's largest; config {picked}", flush=True)
            if not err < 2e-2:
                raise SystemExit(f"{dname} {name}: wrong output ({err:.3g})")
            runs[name] = lambda M=M, o=o: M.fused_moe(x, w13, w2, logits, K, out=o)
        runs["dense pair"] = lambda: sides["after"].dense_equivalent(x_rep, w13[0], h_rep, w2[0])
        best = {name: float("inf") for name in runs}
        all_times = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, run in runs.items():
                times = timer.times_ms(run, True)
                all_times[name] += times
                best[name] = min(best[name], statistics.median(times))
        for name in runs:
            times = all_times[name]
            row = dict(dtype=dname, side=name, ms=best[name], tflops=flops / best[name] * 1e-9,
                       spread_pct=100 * (max(times) - min(times)) / best[name],
                       of_dense=best["dense pair"] / best[name], times_ms=times)
            results["rows"].append(row)
            print(f"{dname} {name:10s} {row['ms']:.3f} ms {row['tflops']:6.1f} TFLOP/s ±{row['spread_pct']:.1f}% "
                  f"{row['of_dense']:.3f} of the dense pair", flush=True)
        (out / "moe_ab.json").write_text(json.dumps(results, indent=1))
    print(f"done {time.ctime()}", flush=True)


if __name__ == "__main__":
    main()
