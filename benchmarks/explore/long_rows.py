"""Rows of 16384-262144 (issue 15): the streamed two-pass kernel against today's paths, per shape.

    python benchmarks/explore/long_rows.py [--out DIR] [--kernels softmax,rmsnorm,layernorm]

For softmax, rmsnorm and layernorm, at each shape and dtype, on the same fresh random inputs, in one
process with torch and the device copy: today's launcher (whole row to 32768, the split team beyond)
and the streamed kernel (_<kernel>_streamed: one program per row, two passes, pass 2 last chunk first
so it reads what pass 1 left in L2) under several (BLOCK_N, num_warps, num_stages, REVERSE). Every
variant's output is checked against torch first; the timing is a do_bench median (L2 cleared) with
its spread over 3 repeats. Writes DIR/long_rows.json and prints one line per variant.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from kgit.harness import device  # noqa: E402
from kgit.harness.timing import Timer, spread_pct  # noqa: E402

SHAPES = [(8192, 16384), (4096, 32768), (2048, 65536), (1024, 131072), (512, 262144)]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# Run 1 (experiments/long-rows-h200/run1) tried BLOCK_N 4096-16384 on 4-16 warps, 2-4 stages, both
# directions; these are its leaders. REVERSE made no difference there: pass 2 misses L2 either way.
STREAMED = [dict(BLOCK_N=8192, num_warps=8, num_stages=3, REVERSE=1),
            dict(BLOCK_N=16384, num_warps=16, num_stages=3, REVERSE=1),
            dict(BLOCK_N=4096, num_warps=8, num_stages=3, REVERSE=1)]


def template(kernel: str):
    path = ROOT / "skills" / "kernels" / kernel / "triton_template.py"
    spec = importlib.util.spec_from_file_location(f"{kernel}_template", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def calls(kernel: str, T, x: torch.Tensor):
    """(kgit call, torch call, reference output) for one input."""
    n = x.shape[-1]
    if kernel == "softmax":
        return (lambda out: T.softmax(x, out=out)), (lambda: torch.softmax(x, -1)), torch.softmax(x.float(), -1)
    w = torch.randn(n, device=x.device, dtype=x.dtype)
    if kernel == "rmsnorm":
        ref = T.rmsnorm_ref(x, w).float()
        return ((lambda out: T.rmsnorm(x, w, out=out)),
                (lambda: torch.nn.functional.rms_norm(x, (n,), w, T.EPS)), ref)
    b = torch.randn(n, device=x.device, dtype=x.dtype)
    ref = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), T.EPS)
    return ((lambda out: T.layernorm(x, w, b, out=out)),
            (lambda: torch.nn.functional.layer_norm(x, (n,), w, b, T.EPS)), ref)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--kernels", default="softmax,rmsnorm,layernorm")
    args = p.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    timer = Timer(repeats=3, warmup_ms=50, rewarm_ms=10, rep_ms=40)
    copy = device.measured_copy_gbps(refresh=True)
    results = {"copy_gbps_start": copy, "rows": []}
    print(f"copy {copy:.0f} GB/s", flush=True)
    for kernel in args.kernels.split(","):
        T = template(kernel)
        for (M, N) in SHAPES:
            for dname, dtype in DTYPES.items():
                x = (torch.randn(M, N, device="cuda") * 3).to(dtype)
                run, run_torch, ref = calls(kernel, T, x)
                y = torch.empty_like(x)
                nbytes = 2 * x.numel() * x.element_size()
                variants = [("today", None)] + [("streamed", v) for v in STREAMED]
                for label, streamed in variants:
                    T.STREAMED_MIN = 1 << 62 if streamed is None else 0
                    if streamed is not None:
                        T.STREAMED = streamed
                    row = {"kernel": kernel, "shape": [M, N], "dtype": dname, "variant": label,
                           "streamed": streamed}
                    try:
                        y.fill_(float("nan"))
                        run(y)
                        torch.cuda.synchronize()
                        err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
                        row["max_rel_err"] = err
                        if not err < (1e-4 if dtype == torch.float32 else 2e-2):
                            row["error"] = f"wrong output: max relative error {err:.3g}"
                        else:
                            t = timer.times_ms(lambda: run(y), on_gpu=True)
                            row["gbps"] = nbytes / statistics.median(t) * 1e-6
                            row["spread_pct"] = spread_pct(t)
                            row["pct_of_copy"] = 100 * row["gbps"] / copy
                    except Exception as e:  # a variant that does not compile is a result too
                        row["error"] = f"{type(e).__name__}: {str(e)[:160]}"
                    results["rows"].append(row)
                    print(f"{kernel} {M}x{N} {dname} {label} {streamed or ''}: "
                          + (row.get("error") or f"{row['gbps']:.0f} GB/s {row['pct_of_copy']:.1f}% "
                                                  f"±{row['spread_pct']:.1f}%"), flush=True)
                t = timer.times_ms(run_torch, on_gpu=True)
                gbps = nbytes / statistics.median(t) * 1e-6
                results["rows"].append({"kernel": kernel, "shape": [M, N], "dtype": dname, "variant": "torch",
                                        "gbps": gbps, "spread_pct": spread_pct(t), "pct_of_copy": 100 * gbps / copy})
                print(f"{kernel} {M}x{N} {dname} torch: {gbps:.0f} GB/s {100 * gbps / copy:.1f}%", flush=True)
                del x, y, ref
    results["copy_gbps_end"] = device.measured_copy_gbps(refresh=True)
    (out_dir / "long_rows.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"done in {time.time() - started:.0f} s")
