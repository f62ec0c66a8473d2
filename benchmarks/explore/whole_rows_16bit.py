"""16-bit rows of 16384-32768 (issue 15): can a whole row stay in 16-bit registers?

    python benchmarks/explore/whole_rows_16bit.py [--out DIR]

ncu (experiments/worst-shapes-h200/session8-2026-12-01/) found the whole-row kernels at 4096x32768 bf16
holding one program an SM: the row in fp32 registers, 115-127 registers a thread x 512 threads, 25%
occupancy, DRAM 62-64% busy. The prediction: a row kept in its 16-bit storage type, converted to fp32
where each reduction and the output need it, takes about half the registers, so two programs fit an
SM and one's load overlaps the other's reductions: DRAM busier, GB/s up, if the compiler does not keep
one fp32 copy of the converted row alive across the reductions anyway (n_regs tells).

Variants, for softmax and layernorm at each shape and dtype, on the same inputs, in one process:
  today     the template as shipped (its whole-row kernel, 16 warps)
  lowp-16   the row kept 16-bit, 16 warps;   lowp-32   the same on 32 warps
Each output is checked against torch first; GB/s is a do_bench median (L2 cleared) of 3 repeats with its
spread, and % of the copy measured at the start and the end. Writes DIR/whole_rows_16bit.json.
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

SHAPES = [(8192, 16384), (4096, 32768)]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _softmax_row_lowp(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    # max in the storage type (exact), the sum from converted values, and the output as
    # exp2(x log2e - (m log2e + log2 s)) = e / s: a different expression from the sum's, so no
    # converted fp32 row need stay alive between the two.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=ok, other=-float("inf"))
    m = tl.max(x, axis=0).to(tl.float32) * LOG2E
    s = tl.sum(tl.exp2(x.to(tl.float32) * LOG2E - m), axis=0)
    y = tl.exp2(x.to(tl.float32) * LOG2E - (m + tl.log2(s)))
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _layernorm_row_lowp(x_ptr, w_ptr, b_ptr, y_ptr, N, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=ok, other=0.0)
    mean = tl.sum(x.to(tl.float32), axis=0) / N
    d = tl.where(ok, x.to(tl.float32) - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    y = (x.to(tl.float32) - mean) * rstd * w + b
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


def registers(compiled) -> int | None:
    try:
        compiled._init_handles()
        return compiled.n_regs
    except Exception:  # another Triton: the figure is only a hint
        return None


def variants(kernel: str, template, x, w, b, y):
    M, N = x.shape
    block = triton.next_power_of_2(N)
    found = {}

    def lowp(warps):
        def run():
            if kernel == "softmax":
                k = _softmax_row_lowp[(M,)](x, y, N, x.stride(0), BLOCK=block, num_warps=warps)
            else:
                k = _layernorm_row_lowp[(M,)](x, w, b, y, N, x.stride(0), template.EPS, BLOCK=block, num_warps=warps)
            found.setdefault(warps, k)
            return y
        return run

    if kernel == "softmax":
        today = lambda: template.softmax(x, out=y)  # noqa: E731
        reference = lambda: torch.softmax(x.float(), dim=-1)  # noqa: E731
    else:
        today = lambda: template.layernorm(x, w, b, out=y)  # noqa: E731
        reference = lambda: torch.nn.functional.layer_norm(x.float(), (N,), w.float(), b.float(), template.EPS)  # noqa: E731
    return {"today": today, "lowp-16": lowp(16), "lowp-32": lowp(32)}, reference, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    timer = Timer(repeats=3)
    copy_before = device.measured_copy_gbps(refresh=True)
    rows = []
    for kernel in ("softmax", "layernorm"):
        template = templates.load(kernel)
        for shape in SHAPES:
            for name, dtype in DTYPES.items():
                torch.manual_seed(0)
                x = torch.randn(shape, device="cuda", dtype=dtype)
                w = torch.randn(shape[1], device="cuda", dtype=dtype)
                b = torch.randn(shape[1], device="cuda", dtype=dtype)
                y = torch.empty_like(x)
                fns, reference, compiled = variants(kernel, template, x, w, b, y)
                expected = reference()
                for variant, fn in fns.items():
                    y.fill_(float("nan"))  # poisoned: unwritten rows show as NaN errors
                    error = float((fn().float() - expected).abs().max())
                    row = {"kernel": kernel, "shape": f"{shape[0]}x{shape[1]}", "dtype": name, "variant": variant,
                           "max_error": error}
                    if error < 0.05:  # 16-bit outputs round at ~4e-3 of values up to ~8
                        gbps = [2 * x.numel() * x.element_size() / (t * 1e-3) / 1e9
                                for t in timer.times_ms(fn, on_gpu=True)]
                        row.update(gbps=statistics.median(gbps), spread_pct=spread_pct(gbps))
                    warps = {"lowp-16": 16, "lowp-32": 32}.get(variant)
                    row["registers"] = registers(compiled[warps]) if warps in compiled else None
                    rows.append(row)
                    print(kernel, row["shape"], name, variant, f"{row.get('gbps', 0):.0f} GB/s",
                          f"±{row.get('spread_pct', 0):.1f}%", f"err {error:.1e}", f"regs {row['registers']}", flush=True)
    copy_after = device.measured_copy_gbps(refresh=True)
    copy = statistics.mean([copy_before, copy_after])
    for row in rows:
        if "gbps" in row:
            row["pct_of_copy"] = 100 * row["gbps"] / copy
    (args.out / "whole_rows_16bit.json").write_text(json.dumps(
        {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
         "copy_gbps": [copy_before, copy_after], "rows": rows}, indent=1))
    for row in rows:
        print(f"{row['kernel']} {row['shape']} {row['dtype']} {row['variant']}: "
              f"{row.get('pct_of_copy', 0):.1f}% of copy, registers {row['registers']}")


if __name__ == "__main__":
    main()
