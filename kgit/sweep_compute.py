"""Side-by-side benchmark of the compute-bound kernels against torch, with the issue's bars.

    python -m kgit.sweep_compute [--only gemm,flash-attention,fused-moe] [--out DIR]

One process: the measured bf16 torch.matmul rate at 8192^3 (before and after, to see drift), then for
every kernel every benchmark shape of its test (checked for correctness first, then timed beside its
torch baseline). Prints a table per kernel and writes DIR/results.json (raw rows) and DIR/table.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from kgit import bench_compute as bc

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
KERNELS = {
    "gemm": "skills/kernels/gemm/test_gemm.py",
    "flash-attention": "skills/kernels/flash-attention/test_flash_attention.py",
    "fused-moe": "skills/kernels/fused-moe/test_fused_moe.py",
}


def matmul_rate(n: int = 8192) -> dict:
    """torch.matmul bf16 at n^3 on random data: the measured matrix ceiling of this GPU today."""
    import torch

    gen = bc.new_generator()
    a = bc.randn_(torch.empty((n, n), device="cuda", dtype=torch.bfloat16), gen)
    b = bc.randn_(torch.empty((n, n), device="cuda", dtype=torch.bfloat16), gen)
    ms, spread = bc.time_ms(lambda: torch.matmul(a, b))
    return {"tflops": bc.tflops(2.0 * n ** 3, ms), "spread_pct": spread, "n": n}


def bar(kernel: str, row: dict):
    """(target text, met?) for one row, per the issue; None where the issue sets no bar."""
    if not row.get("correct", True):
        return "correct", False
    if kernel == "gemm":
        key = (row["M"], row["N"], row["K"])
        need = 1.0 if row["dtype"] == "bfloat16" and key in ((4096,) * 3, (8192,) * 3) else 0.9
        return f">= {need:.0%} torch", row["speedup"] >= need
    if kernel == "flash-attention":
        if row["S"] < 4096:
            return None, None
        return ">= 100% sdpa-flash", row["speedup"] >= 1.0
    if kernel == "fused-moe":
        fast = row["speedup"] >= 10.0
        dense = row["tflops"] / row["dense_tflops"]
        text = (f">= 10x loop ({row['speedup']:.1f}x: {'yes' if fast else 'no'}), "
                f">= 50% dense ({dense:.0%}: {'yes' if dense >= 0.5 else 'no'})")
        return text, fast and dense >= 0.5
    return None, None


def run(only, out_dir) -> dict:
    import torch

    meta = {"gpu": bc.gpu_name(), "torch": torch.__version__, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    import triton

    meta["triton"] = triton.__version__
    meta["matmul_before"] = matmul_rate()
    print(f"# {meta['gpu']}  torch {meta['torch']}  triton {meta['triton']}")
    print(f"# measured torch.matmul bf16 8192^3: {meta['matmul_before']['tflops']:.0f} TFLOP/s "
          f"(spread {meta['matmul_before']['spread_pct']:.1f}%)", flush=True)
    results = {}
    for name in only:
        test = bc.load_sibling(os.path.join(ROOT, KERNELS[name]), os.path.basename(KERNELS[name])[:-3],
                               "kgit_sweep_" + name.replace("-", "_"))
        rows = []
        for make in test.sweep_problems():
            t0 = time.time()
            p = make()
            try:
                row = bc.measure(p)
            except Exception as exc:  # a shape that fails to compile/run is a row, not a crash of the sweep
                row = {"shape": p.label, "dtype": p.dtype, **p.params, "correct": False,
                       "reason": f"{type(exc).__name__}: {exc}"[:300]}
            del p
            torch.cuda.empty_cache()
            target, met = bar(name, row) if "speedup" in row or not row.get("correct", True) else (None, None)
            row.update({"bar": target, "meets_bar": met, "wall_s": round(time.time() - t0, 1)})
            if getattr(test.T, "last_config", None):
                row["config"] = dict(test.T.last_config)
            rows.append(row)
            print(_line(name, row), flush=True)
        results[name] = rows
    meta["matmul_after"] = matmul_rate()
    print(f"# torch.matmul bf16 8192^3 after: {meta['matmul_after']['tflops']:.0f} TFLOP/s", flush=True)
    doc = {"meta": meta, "results": results}
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "results.json"), "w") as f:
            json.dump(bc._clean(doc), f, indent=1)
        with open(os.path.join(out_dir, "table.md"), "w") as f:
            f.write(render(doc))
    print(render(doc))
    return doc


def _line(name, r):
    if "tflops" not in r:
        return f"{name:<16} {r['shape']:<34} {r['dtype']:<9} FAIL {r.get('reason', '')}"
    extra = f" dense {r['dense_tflops']:.0f}" if "dense_tflops" in r else ""
    return (f"{name:<16} {r['shape']:<34} {r['dtype']:<9} {r['tflops']:7.1f} ±{r['spread_pct']:.1f}%  "
            f"{r['baseline']} {r['baseline_tflops']:7.1f}  x{r['speedup']:.3f}{extra}  err {r.get('rel_err', 0):.1e}"
            f"  bar {r['bar']}: {r['meets_bar']}")


def render(doc) -> str:
    m = doc["meta"]
    out = [f"# Compute-bound kernels on {m['gpu']}", "",
           f"torch {m['torch']}, triton {m['triton']}, {m['time']}. Measured torch.matmul bf16 8192^3: "
           f"{m['matmul_before']['tflops']:.0f} TFLOP/s before, {m['matmul_after']['tflops']:.0f} after. "
           "Times: triton.testing.do_bench median (L2 cleared), spread = (p80 - p20) / median. "
           "err: relative Frobenius error vs an fp32 reference (the worst of the checked runs).", ""]
    for name, rows in doc["results"].items():
        out += [f"## {name}", "",
                "| shape | dtype | ours TFLOP/s | spread | baseline | baseline TFLOP/s | ratio | extra | err | bar | met |",
                "|---|---|---:|---:|---|---:|---:|---|---:|---|---|"]
        for r in rows:
            if "tflops" not in r:
                out.append(f"| {r['shape']} | {r['dtype']} | - | - | - | - | - | {r.get('reason', '')} | - | - | no |")
                continue
            extra = f"dense GEMM {r['dense_tflops']:.0f} TFLOP/s" if "dense_tflops" in r else ""
            met = {True: "yes", False: "**no**", None: "(no bar)"}[r["meets_bar"]]
            out.append(f"| {r['shape']} | {r['dtype']} | {r['tflops']:.1f} | {r['spread_pct']:.1f}% | {r['baseline']} | "
                       f"{r['baseline_tflops']:.1f} | {r['speedup']:.3f} | {extra} | {r.get('rel_err', 0):.1e} | "
                       f"{r['bar'] or ''} | {met} |")
        out.append("")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(KERNELS), help="comma-separated kernel names")
    ap.add_argument("--out", default=None, help="directory for results.json and table.md")
    args = ap.parse_args(argv)
    if bc.device() != "cuda":
        print("sweep_compute needs a GPU (the interpreter path is for correctness only)", file=sys.stderr)
        return 2
    run([k.strip() for k in args.only.split(",") if k.strip()], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
