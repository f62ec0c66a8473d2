"""Issue 15, session 29: GEMM at 4096^3, the last bar missed (0.992x cuBLAS in bf16 and fp16, session 29's
sweep): the template's CONFIG against its neighbours in one process, alternated, timed as kgit times.

    python benchmarks/explore/gemm_4096_configs.py [--out DIR] [--rounds 5] [--size 4096]

Why: under ncu (experiments/worst-shapes-h200/session28-2026-12-04/) the template's kernel read DRAM 24.9%
busy and hit L2 67.1% of the time, cuBLAS's 20.6% and 72.3%: ours goes to DRAM for ~20% more bytes. A
wave of 132 tiles in GROUP_M=8 order spans 8 tile-rows of A (8 MB) and every tile-column of B (32 MB);
GROUP_M 16 would span 16 rows and ~8 columns (32 MB). Session 12 found GROUP_M 8 and 16 level within
spreads of 1-14%; kgit's timer has since brought them under 1%. Also the 4-stage pipeline with the C tile
stored in halves, and the tile loop not flattened.
Prediction: GROUP_M 16 +0-1%; the others level. Each side is checked against an fp32 product first.
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

VARIANTS = {"CONFIG": {}, "GROUP_M 4": {"GROUP_M": 4}, "GROUP_M 16": {"GROUP_M": 16}, "GROUP_M 32": {"GROUP_M": 32},
            "4 stages, split C": {"num_stages": 4, "EPILOGUE_SUBTILE": 1}, "not flattened": {"FLATTEN": 0}}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--size", type=int, default=4096)
    args = p.parse_args()
    out, timer, _, results = templates.begin(args.out)
    G = templates.load("gemm")
    n = args.size
    for dtype in (torch.bfloat16, torch.float16):
        torch.manual_seed(0)
        a = (torch.randn(n, n, device="cuda") * n ** -0.25).to(dtype)
        b = (torch.randn(n, n, device="cuda") * n ** -0.25).to(dtype)
        ref = G.reference(a, b)
        c = torch.empty(n, n, device="cuda", dtype=dtype)
        runs = {"cuBLAS": lambda: torch.matmul(a, b, out=c)}
        runs.update({name: (lambda cfg=cfg: G.gemm(a, b, out=c, config={**G.CONFIG, "AUTOTUNE": 0, **cfg}))
                     for name, cfg in VARIANTS.items()})
        rows = {name: {"size": n, "dtype": str(dtype)[6:], "side": name, "ms": []} for name in runs}
        for name, run in runs.items():
            c.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
            rows[name]["max_rel_err"] = err
            if not err < 1e-2:
                rows[name]["error"] = f"wrong output: max relative error {err:.3g}"
        for _ in range(args.rounds):
            for name, run in runs.items():
                if "error" not in rows[name]:
                    rows[name]["ms"].append(statistics.median(timer.times_ms(run, on_gpu=True)))
        base = statistics.median(rows["cuBLAS"]["ms"])
        for name, row in rows.items():
            if row["ms"]:
                row["median_ms"] = statistics.median(row["ms"])
                row["tflops"] = 2 * n ** 3 / row["median_ms"] * 1e-9
                row["spread_pct"] = 100 * (max(row["ms"]) - min(row["ms"])) / row["median_ms"]
                row["x_cublas"] = base / row["median_ms"]
                print(f"{n}^3 {row['dtype']} {name:18s} {row['tflops']:6.1f} TFLOP/s ±{row['spread_pct']:.1f}% "
                      f"x{row['x_cublas']:.3f} of cuBLAS", flush=True)
            else:
                print(f"{n}^3 {row['dtype']} {name:18s} {row['error']}", flush=True)
            results["rows"].append(row)
        (out / "gemm_4096_configs.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
