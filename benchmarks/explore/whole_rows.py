"""Mid-length rows (issue 15): softmax and rmsnorm at rows of 8192-32768 against the simplest peer.

    python benchmarks/explore/whole_rows.py [--out DIR]

For each shape and dtype, on the same fresh random inputs, one do_bench median each (L2 cleared,
3 repeats, the spread beside it), all in one process with torch and the device copy:
  peer       the simplest kernel: one program per row, the whole row in registers, num_warps as
             Triton's tutorial picks them (4, 8 from 2048 elements, 16 from 4096)
  split      kgit's template with WHOLE_ROW_MAX = 0: rows over BLOCK_SIZE split over a team (as shipped
             before issue 15)
  kgit       kgit's template as it is: rows up to WHOLE_ROW_MAX whole, one program each
  torch      torch.softmax / the rmsnorm reference formula in torch
Every variant's output is checked against torch first (fp32 math). Writes DIR/whole_rows.json and
DIR/whole_rows.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from kgit.harness import device  # noqa: E402
from kgit.harness.timing import Timer, spread_pct  # noqa: E402
import templates  # noqa: E402  (beside this file)

SHAPES = [(16384, 8192), (8192, 16384), (4096, 32768)]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@triton.jit
def _peer_softmax(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=cols < N)


@triton.jit
def _peer_rmsnorm(x_ptr, w_ptr, y_ptr, N, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(y_ptr + row * stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=cols < N)


def tutorial_warps(block: int) -> int:
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


def variants(kernel: str, template, x, w, y):
    block = triton.next_power_of_2(x.shape[1])
    M, N = x.shape

    shipped = template.WHOLE_ROW_MAX

    def with_limit(limit):
        def run():
            template.WHOLE_ROW_MAX = limit
            return template.softmax(x, out=y) if kernel == "softmax" else template.rmsnorm(x, w, out=y)
        return run

    if kernel == "softmax":
        def peer():
            _peer_softmax[(M,)](x, y, N, x.stride(0), BLOCK=block, num_warps=tutorial_warps(block))
            return y
        reference = lambda: torch.softmax(x, dim=-1)  # noqa: E731
    else:
        def peer():
            _peer_rmsnorm[(M,)](x, w, y, N, x.stride(0), template.EPS, BLOCK=block, num_warps=tutorial_warps(block))
            return y
        reference = lambda: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + template.EPS)  # noqa: E731
                             * w.float()).to(x.dtype)
    return {"peer": peer, "split": with_limit(0), "kgit": with_limit(shipped), "torch": reference}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    timer = Timer(repeats=3)
    copy_before = device.measured_copy_gbps(refresh=True)
    rows = []
    for kernel in ("softmax", "rmsnorm"):
        template = templates.load(kernel)
        for shape in SHAPES:
            for name, dtype in DTYPES.items():
                torch.manual_seed(0)
                x = torch.randn(shape, device="cuda", dtype=dtype)
                w = torch.randn(shape[1], device="cuda", dtype=dtype)
                y = torch.empty_like(x)
                fns = variants(kernel, template, x, w, y)
                outs = {}
                for variant, fn in fns.items():
                    y.fill_(float("nan"))  # poisoned: a variant that leaves rows unwritten shows NaN errors
                    outs[variant] = fn().float().clone()
                for variant, fn in fns.items():
                    gbps = [2 * x.numel() * x.element_size() / (t * 1e-3) / 1e9
                            for t in timer.times_ms(fn, on_gpu=True)]
                    rows.append({"kernel": kernel, "shape": f"{shape[0]}x{shape[1]}", "dtype": name,
                                 "variant": variant, "gbps": statistics.median(gbps), "spread_pct": spread_pct(gbps),
                                 "max_error": float((outs[variant] - outs["torch"]).abs().max())})
                print(" | ".join(f"{r['variant']} {r['gbps']:.0f}" for r in rows[-4:]), kernel, shape, name, flush=True)
    copy_after = device.measured_copy_gbps(refresh=True)
    copy = statistics.mean([copy_before, copy_after])
    for row in rows:
        row["pct_of_copy"] = 100 * row["gbps"] / copy
    (args.out / "whole_rows.json").write_text(json.dumps(
        {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
         "copy_gbps": [copy_before, copy_after], "rows": rows}, indent=1))
    lines = [f"copy {copy_before:.0f} / {copy_after:.0f} GB/s (start / end); GB/s, median of 3 do_bench medians, "
             "% of copy, spread; max |error| against torch", "",
             "| kernel | shape | dtype | peer | split | kgit | torch |", "|---|---|---|---|---|---|---|"]
    for i in range(0, len(rows), 4):
        group = rows[i:i + 4]
        cells = [f"{r['gbps']:.0f} ({r['pct_of_copy']:.0f}%, ±{r['spread_pct']:.1f}%, err {r['max_error']:.1e})" for r in group]
        lines.append(f"| {group[0]['kernel']} | {group[0]['shape']} | {group[0]['dtype']} | " + " | ".join(cells) + " |")
    (args.out / "whole_rows.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
