"""Issue 15, session 29: GEMM at 4096^3, the last bar missed (0.992x cuBLAS in bf16 and fp16, session 29's
sweep): the template's CONFIG against its neighbours in one process, alternated, timed as kgit times.

    python benchmarks/explore/gemm_4096_configs.py [--out DIR] [--rounds 5] [--sizes 4096] [--variants "A|B"]

Why: under ncu (experiments/worst-shapes-h200/session28-2026-12-04/) the template's kernel read DRAM 24.9%
busy and hit L2 67.1% of the time, cuBLAS's 20.6% and 72.3%: ours goes to DRAM for ~20% more bytes. A
wave of 132 tiles in GROUP_M=8 order spans 8 tile-rows of A (8 MB) and every tile-column of B (32 MB);
GROUP_M 16 would span 16 rows and ~8 columns (32 MB). Session 12 found GROUP_M 8 and 16 level within
spreads of 1-14%; kgit's timer has since brought them under 1%. Also the 4-stage pipeline with the C tile
stored in halves, and the tile loop not flattened.
Prediction: GROUP_M 16 +0-1%; the others level. Each side is checked against an fp32 product first.
Outcome (experiments/sweep-h200-session29/call7-gemm-4096-configs/): GROUP_M 16 level, GROUP_M 4 +0.5% in
both dtypes (0.994 / 0.996x cuBLAS against CONFIG's 0.988 / 0.991, spreads 0.1-0.4%), 4 stages with C in
halves +0.1-0.3%, not flattened -1.2%. Call 8 tried smaller groups, with and without 4 stages, at 2048^3,
4096^3 and 8192^3.
Session 30: k-steps of 128 on 2 stages (call 3 there: 0.73-0.80x, refuted); then as many programs as make
equal waves (128: 4 tiles each at 4096^3, 16 at 8192^3). Prediction: level to +0.5% (the same makespan in
tiles; a wave of 128 in GROUP_M 4 spans exactly two groups, 8 tile-rows of A and all of B, and 4 fewer
programs share the L2 and DRAM).
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

SPLIT_4 = {"num_stages": 4, "EPILOGUE_SUBTILE": 1}
VARIANTS = {"CONFIG": {}, "GROUP_M 4": {"GROUP_M": 4}, "GROUP_M 16": {"GROUP_M": 16}, "GROUP_M 32": {"GROUP_M": 32},
            "4 stages, split C": SPLIT_4, "not flattened": {"FLATTEN": 0},
            "GROUP_M 2": {"GROUP_M": 2}, "GROUP_M 3": {"GROUP_M": 3}, "GROUP_M 6": {"GROUP_M": 6},
            "GROUP_M 4, 4 stages": {"GROUP_M": 4, **SPLIT_4}, "GROUP_M 2, 4 stages": {"GROUP_M": 2, **SPLIT_4},
            # call 10: cuBLAS's tile (256x128: a warpgroup 128x128), finer k-steps, no persistence
            "256x128, GROUP_M 4, 4 stages": {"BLOCK_M": 256, "BLOCK_N": 128, "GROUP_M": 4, **SPLIT_4},
            "256x128, 4 stages": {"BLOCK_M": 256, "BLOCK_N": 128, **SPLIT_4},
            "256x128, GROUP_M 4": {"BLOCK_M": 256, "BLOCK_N": 128, "GROUP_M": 4},
            "GROUP_M 4, BLOCK_K 32, 8 stages": {"GROUP_M": 4, "BLOCK_K": 32, "num_stages": 8, "EPILOGUE_SUBTILE": 1},
            "GROUP_M 4, 4 stages, not persistent": {"GROUP_M": 4, "num_stages": 4, "PERSISTENT": 0},
            # session 30: k-steps of 128 on 2 stages (the space's BLOCK_K 128 had 3-4 stages: too big to fit)
            "BLOCK_K 128, 2 stages": {"BLOCK_K": 128, "num_stages": 2, "EPILOGUE_SUBTILE": 1},
            "GROUP_M 4, BLOCK_K 128, 2 stages": {"GROUP_M": 4, "BLOCK_K": 128, "num_stages": 2, "EPILOGUE_SUBTILE": 1},
            # session 30: as many persistent programs as make equal waves (SMS: the count the launcher sees;
            # 512 tiles in 4 waves of 128 rather than 3.88 of 132; with GROUP_M 4 a wave is two whole groups)
            "128 programs": {"SMS": 128},
            "128 programs, GROUP_M 4, 4 stages": {"GROUP_M": 4, **SPLIT_4, "SMS": 128},
            "128 programs, 4 stages": {**SPLIT_4, "SMS": 128}}


def run_variant(G, a, b, c, cfg):
    """One call of the template with cfg over its CONFIG, AUTOTUNE off; cfg's SMS, where given, is the
    multiprocessor count its launcher sees (the key also keeps the plan it caches apart from CONFIG's)."""
    real = G._num_sms
    if "SMS" in cfg:
        G._num_sms = lambda device: cfg["SMS"]
    try:
        return G.gemm(a, b, out=c, config={**G.CONFIG, "AUTOTUNE": 0, **cfg})
    finally:
        G._num_sms = real


def square_runs(G, n: int, dtype, variants: dict):
    """Fresh n x n inputs (scaled so that C's entries stay near 1), their fp32 product, an output, and a run
    writing it for cuBLAS and for each variant (name -> config over CONFIG)."""
    torch.manual_seed(0)
    a = (torch.randn(n, n, device="cuda") * n ** -0.25).to(dtype)
    b = (torch.randn(n, n, device="cuda") * n ** -0.25).to(dtype)
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    runs = {"cuBLAS": lambda: torch.matmul(a, b, out=c)}
    runs.update({name: (lambda cfg=cfg: run_variant(G, a, b, c, cfg)) for name, cfg in variants.items()})
    return G.reference(a, b), c, runs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sizes", default="4096", help="comma-separated squares")
    p.add_argument("--variants", default="CONFIG|GROUP_M 4|GROUP_M 16|GROUP_M 32|4 stages, split C|not flattened",
                   help="names of VARIANTS, separated by |")
    args = p.parse_args()
    names = args.variants.split("|")
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}")
    variants = {name: VARIANTS[name] for name in names}
    out, timer, _, results = templates.begin(args.out)
    G = templates.load("gemm")
    for n, dtype in ((int(size), dtype) for size in args.sizes.split(",") for dtype in (torch.bfloat16, torch.float16)):
        ref, c, runs = square_runs(G, n, dtype, variants)
        rows = {name: {"size": n, "dtype": str(dtype)[6:], "side": name, "ms": []} for name in runs}
        for name, run in runs.items():
            c.fill_(float("nan"))
            try:
                run()
                torch.cuda.synchronize()
            except Exception as e:  # one that does not compile or fit is a result too
                rows[name]["error"] = templates.last_lines(e)
                continue
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
            rows[name]["max_rel_err"] = err
            if not err < 1e-2:
                rows[name]["error"] = f"wrong output: max relative error {err:.3g}"
        for _ in range(args.rounds):
            for name, run in runs.items():
                if "error" not in rows[name]:
                    rows[name]["ms"].append(statistics.median(timer.times_ms(run, on_gpu=True)))
        base = statistics.median(rows["cuBLAS"]["ms"])  # cuBLAS is checked like the others: it passes
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
