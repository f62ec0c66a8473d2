"""Rows of 16384-262144 (issue 15): the streamed two-pass kernel against today's paths, per shape.

    python benchmarks/explore/long_rows.py [--out DIR] [--kernels softmax,rmsnorm,layernorm]

For softmax, rmsnorm and layernorm, at each shape and dtype, on the same fresh random inputs, in one
process with torch and the device copy: the launcher as it is ("today") and the streamed kernel alone
(_<kernel>_streamed: one program per row, two passes over pipelined chunks) under several (BLOCK_N,
num_warps, num_stages). Every variant's output is checked against torch first; the timing is a do_bench
median (L2 cleared) with its spread over 3 repeats. Writes DIR/long_rows.json and prints one line per
variant.

Run 1 (experiments/long-rows-h200/run1) set a template switch (STREAMED_MIN) to send rows to the
streamed kernel and tried a pass 2 that walks the chunks last to first (REVERSE), to read what pass 1
left in L2; it changed nothing, and both are gone from the templates. Run 2 measured "today" with the
split team keeping its rows in 16 bits, which was then reverted.
"""

from __future__ import annotations

import argparse
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
import templates  # noqa: E402  (beside this file)

SHAPES = [(8192, 16384), (4096, 32768), (2048, 65536), (1024, 131072), (512, 262144)]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# Run 1 tried BLOCK_N 4096-16384 on 4-16 warps, 2-4 stages; these are its leaders.
STREAMED = [dict(BLOCK_N=8192, num_warps=8, num_stages=3), dict(BLOCK_N=16384, num_warps=16, num_stages=3),
            dict(BLOCK_N=4096, num_warps=8, num_stages=3)]


def calls(kernel: str, T, x: torch.Tensor):
    """(launcher call, streamed-kernel call, torch call, reference output) for one input."""
    m, n = x.shape
    if kernel == "softmax":
        return ((lambda out: T.softmax(x, out=out)), (lambda out: T._launch_streamed(x, out, m, n)),
                (lambda: torch.softmax(x, -1)), torch.softmax(x.float(), -1))
    w = torch.randn(n, device=x.device, dtype=x.dtype)
    if kernel == "rmsnorm":
        return ((lambda out: T.rmsnorm(x, w, out=out)), (lambda out: T._launch_streamed(x, w, out, m, n, T.EPS)),
                (lambda: torch.nn.functional.rms_norm(x, (n,), w, T.EPS)), T.rmsnorm_ref(x, w).float())
    b = torch.randn(n, device=x.device, dtype=x.dtype)
    return ((lambda out: T.layernorm(x, w, b, out=out)),
            (lambda out: T._launch_streamed(x, w, b, out, m, n, T.EPS)),
            (lambda: torch.nn.functional.layer_norm(x, (n,), w, b, T.EPS)),
            torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), T.EPS))


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
        T = templates.load(kernel)
        for (M, N) in SHAPES:
            for dname, dtype in DTYPES.items():
                x = (torch.randn(M, N, device="cuda") * 3).to(dtype)
                launcher, streamed_kernel, run_torch, ref = calls(kernel, T, x)
                y = torch.empty_like(x)
                nbytes = 2 * x.numel() * x.element_size()
                shipped = T.STREAMED
                variants = [("today", None)] + [("streamed", v) for v in STREAMED]
                for label, streamed in variants:
                    T.STREAMED = streamed or shipped
                    run = streamed_kernel if streamed else launcher
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
