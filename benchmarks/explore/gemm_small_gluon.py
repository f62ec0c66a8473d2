"""Issue 15, GEMM at 1024^3: the warp-specialized Gluon kernel (gluon_gemm.py) against the template, timed as
kgit times (kgit.harness.timing: the L2 cleared clean before each call, the warm-up, the pause).

    python benchmarks/explore/gemm_small_gluon.py --out DIR [--sizes 1024,2048] [--rounds 3]

Why: under ncu (experiments/sweep-h200-session25/call5-ncu/) gluon_gemm.py's ws4_64x128_s6 ran 1024^3 bf16
in 7.20 us against cuBLAS's 7.17, where the template's pointer kernel had read 7.74 against 7.01
(experiments/sweep-h200-session17/call5-profiles/); do_bench's figures of the same kernels (dirty L2 clears,
no pause) swung from 0.87x to 1.02x cuBLAS between runs. Prediction: under kgit's timer the Gluon kernel is
3-7% ahead of the template at 1024^3 (0.95-0.99x cuBLAS), level at 2048^3 (where the template's 128x256 tiles
run and the 64x128 ones trail).

Each side is checked against the fp32 product (its output poisoned first), then timed in rounds, A B C ...
A B C ..., each round a Timer figure (3 repeats: the median and the spread).
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
import gluon_gemm  # noqa: E402  (beside this file)
import templates  # noqa: E402
from kgit.harness.timing import Timer  # noqa: E402

GLUON_VARIANTS = ["ws4_64x128_s6", "ws4_64x128_s8", "ws8_128x64_s8", "ws2x4_128x64_s8"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=".")
    p.add_argument("--sizes", default="1024,2048")
    p.add_argument("--dtypes", default="bf16,fp16")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    T = templates.load("gemm")
    timer = Timer()
    rows = []
    for dname in args.dtypes.split(","):
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dname]
        for size in args.sizes.split(","):
            n = int(size)
            torch.manual_seed(0)
            a = (torch.randn(n, n, device="cuda") * n ** -0.25).to(dtype)
            b = (torch.randn(n, n, device="cuda") * n ** -0.25).to(dtype)
            c = torch.empty(n, n, device="cuda", dtype=dtype)
            ref = T.reference(a, b)
            sides = {"cublas": lambda: torch.matmul(a, b, out=c), "template": lambda: T.gemm(a, b, out=c)}
            sides.update({v: (lambda v=v: gluon_gemm.gluon_gemm(a, b, v, out=c)) for v in GLUON_VARIANTS})
            for name, run in sides.items():
                run()
                c.fill_(float("nan"))
                run()
                err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
                assert err < 1e-2, f"{name} {n} {dname}: max relative error {err}"
            figures = {name: [] for name in sides}
            for _ in range(args.rounds):
                for name, run in sides.items():
                    figures[name].append(timer.times_ms(run, on_gpu=True))
            base = statistics.median(statistics.median(r) for r in figures["cublas"])
            for name, rounds in figures.items():
                med = statistics.median(statistics.median(r) for r in rounds)
                every = [t for r in rounds for t in r]
                row = dict(size=n, dtype=dname, side=name, us=med * 1e3, vs_cublas=base / med,
                           spread_pct=100 * (max(every) - min(every)) / med,
                           rounds_us=[[round(t * 1e3, 2) for t in r] for r in rounds])
                if name == "template":
                    row["template_config"] = dict(T.last_config)
                rows.append(row)
                print(f"{n}^3 {dname} {name:16s} {row['us']:7.2f} us  x{row['vs_cublas']:.3f} cuBLAS  "
                      f"spread {row['spread_pct']:.1f}%", flush=True)
            gluon_gemm._PLANS.clear()
    (out / "gemm_small_gluon.json").write_text(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows),
                                                          indent=1))


if __name__ == "__main__":
    main()
