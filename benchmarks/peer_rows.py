"""The row kernels against the simplest one-program-per-row kernel: softmax, rmsnorm and layernorm at every row
length of their sweeps up to 32768, in every dtype, peer and template alternated in one process.

    python benchmarks/peer_rows.py [--out DIR] [--rounds 2] [--kernels a,b] [--shapes MxN,..] [--dtypes fp32,..]

The peer is the kernel of Triton's fused-softmax tutorial and of the kernel-skill collections: one program
a row, the whole row in registers (BLOCK = the row's next power of two), num_warps as the tutorial picks
them; rmsnorm and layernorm written the same way. Rows over 32768 are left out: there a whole row in one
program's registers spills (a 65536-element fp32 row is 256 KB), which is why the templates split them.
The templates' bar: at or over the peer at every row length and dtype (experiments/sweep-h200/peer-rows/).

Each side is checked against the fp32 reference first, then timed with kgit's timer; a row per shape and
dtype with both sides' medians over the rounds, their ratio and spreads; DIR/peer_rows.json. Without a GPU
it runs in Triton's interpreter (give small --shapes): a check of the script, CPU figures.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402
from kgit.harness import device  # noqa: E402
from kgit.harness.timing import Timer, spread_pct  # noqa: E402

SHAPES = [(131072, 1024), (32768, 4096), (8192, 16384), (4096, 32768)]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TIMER = Timer(repeats=3, warmup_ms=10, rewarm_ms=5, rep_ms=15)


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


@triton.jit
def _peer_layernorm(x_ptr, w_ptr, b_ptr, y_ptr, N, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    centred = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (centred * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def inputs(M: int, N: int, dtype, where: str):
    """A row norm's fresh inputs: x (M, N) off zero (mean 0.5, std 2), w near 1, b around 0."""
    x = (torch.randn(M, N, device=where) * 2 + 0.5).to(dtype)
    w = (torch.rand(N, device=where) + 0.5).to(dtype)
    b = torch.randn(N, device=where).to(dtype)
    return x, w, b


def template_run(kernel: str, T, x, w, b):
    """(run(out), the fp32 reference) of the template T of a row kernel on its inputs."""
    if kernel == "layernorm":
        return (lambda y: T.layernorm(x, w, b, out=y)), T.layernorm_ref(x, w, b).float()
    if kernel == "rmsnorm":
        return (lambda y: T.rmsnorm(x, w, out=y)), T.rmsnorm_ref(x, w).float()
    return (lambda y: T.softmax(x, out=y)), T.softmax_ref(x).float()


def peer_run(kernel: str, T, x, w, b):
    """The peer's run(out) on the same inputs (T gives the kernel's eps)."""
    M, N = x.shape
    block = triton.next_power_of_2(N)
    warps = 16 if block >= 4096 else 8 if block >= 2048 else 4  # the tutorial's choice
    if kernel == "softmax":
        return lambda y: _peer_softmax[(M,)](x, y, N, x.stride(0), BLOCK=block, num_warps=warps)
    if kernel == "rmsnorm":
        return lambda y: _peer_rmsnorm[(M,)](x, w, y, N, x.stride(0), T.EPS, BLOCK=block, num_warps=warps)
    return lambda y: _peer_layernorm[(M,)](x, w, b, y, N, x.stride(0), T.EPS, BLOCK=block, num_warps=warps)


def gbps(run, out, ref, nbytes: int) -> float | str:
    """One side's GB/s over `nbytes`: its output poisoned with NaN, checked against the fp32 `ref` (a 16-bit
    output is off by up to an ulp of bf16, 0.8%: 2e-2 relative to the largest value passes), then timed;
    the reason instead where it is wrong or does not compile (a result too)."""
    try:
        out.fill_(float("nan"))
        run(out)
        device.sync()
        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        if not err < 2e-2:
            return f"wrong output: max relative error {err:.3g}"
        return nbytes / statistics.median(TIMER.times_ms(lambda: run(out), on_gpu=device.on_gpu())) * 1e-6
    except Exception as e:
        text = str(e).strip()  # a compiler error ends with its cause: keep both ends
        return f"{type(e).__name__}: {text if len(text) <= 600 else text[:200] + ' ... ' + text[-400:]}"


def compare(kernel: str, T, M: int, N: int, dname: str, rounds: int) -> dict:
    """The row of one shape and dtype: each side's median GB/s over the rounds, peer and template alternated."""
    torch.manual_seed(0)
    x, w, b = inputs(M, N, DTYPES[dname], device.detect()["device"])
    out = torch.empty_like(x)
    run, ref = template_run(kernel, T, x, w, b)
    sides = {"peer": peer_run(kernel, T, x, w, b), "kgit": run}
    figures = {name: [] for name in sides}
    row = {"kernel": kernel, "shape": [M, N], "dtype": dname}
    for _ in range(rounds):
        for name, side in sides.items():
            figure = gbps(side, out, ref, 2 * x.numel() * x.element_size())
            if isinstance(figure, str):
                row[f"{name}_error"] = figure
            else:
                figures[name].append(figure)
    for name, values in figures.items():
        row[name] = statistics.median(values) if values else float("nan")
        if len(values) > 1:
            row[f"{name}_spread_pct"] = spread_pct(values)
    row["kgit_over_peer"] = row["kgit"] / row["peer"]
    return row


def line(row: dict, copy: float | None) -> str:
    def side(name):
        pct = f" ({100 * row[name] / copy:.1f}%)" if copy else ""
        spread = f" ±{row[name + '_spread_pct']:.1f}%" if f"{name}_spread_pct" in row else ""
        return f"{name} {row[name]:.4g} GB/s{pct}{spread}"

    errors = "".join(f"  {k}: {v}" for k, v in row.items() if k.endswith("_error"))
    M, N = row["shape"]
    return (f"{row['kernel']:10s} {M}x{N} {row['dtype']}: {side('peer')}  {side('kgit')}  "
            f"x{row['kgit_over_peer']:.3f}{errors}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("."))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--kernels", default="softmax,rmsnorm,layernorm")
    p.add_argument("--shapes", default=",".join(f"{M}x{N}" for M, N in SHAPES), help="e.g. 8192x16384,32768x4096")
    p.add_argument("--dtypes", default=",".join(DTYPES))
    args = p.parse_args()
    shapes = [tuple(int(n) for n in shape.split("x")) for shape in args.shapes.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    copy = device.measured_copy_gbps(refresh=True)
    results = {**bench.machine(), "copy_gbps_start": copy, "rows": []}
    for kernel in args.kernels.split(","):
        T = bench.kernel_module(kernel)
        for M, N in shapes:
            for dname in args.dtypes.split(","):
                row = compare(kernel, T, M, N, dname, args.rounds)
                results["rows"].append(row)
                print(line(row, copy), flush=True)
        (args.out / "peer_rows.json").write_text(json.dumps(results, indent=1))
    below = [r for r in results["rows"] if not r["kgit_over_peer"] >= 1.0]
    print(f"kgit under the peer at {len(below)} of {len(results['rows'])}: "
          + ", ".join(f"{r['kernel']} {r['shape'][0]}x{r['shape'][1]} {r['dtype']} x{r['kgit_over_peer']:.3f}"
                      for r in below), flush=True)


if __name__ == "__main__":
    main()
