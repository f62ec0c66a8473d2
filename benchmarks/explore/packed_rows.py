"""Issue 15: 16-bit rows of 32768 held in registers as packed pairs, two programs an SM.

    python benchmarks/explore/packed_rows.py [--out DIR] [--rounds 2] [--shapes 4096x32768,...]

Softmax and layernorm at 16-bit 4096x32768 read 88-89% and 85% of copy (bar 90), one program an SM:
the pipelined row loop (softmax) and the shared-memory team (layernorm). The fp32 row of the same 64 KB
(8192x16384) reads 97.8% as a whole row in registers with two programs an SM, one's loads under the
other's reductions. A 16-bit row of 32768 converted to fp32 takes 32 registers an element per 1024
threads, and Triton keeps that converted copy alive between the reductions and the output (56-88
registers a thread: one program an SM, 69-78% of copy; experiments/long-rows-h200/whole-rows-16bit/).

Here the row stays as loaded: 32-bit words of two elements each, 16 registers a thread on 32 warps.
Each pass unpacks its own fp32 values (bf16: a shift or a mask; fp16: a conversion), and the later
passes unpack from `word ^ zero`, a zero passed as an argument that the compiler cannot see through, so
no pass's fp32 values stay alive into the next. Compiled for sm_90 by Triton 3.6: softmax 32 registers a
thread on 32 warps in fp16 and bf16 (53 unsalted), no spill: two programs an SM; layernorm 48-49 (its w
and b loads are hoisted), 32 with 88 bytes spilled under maxnreg 32.
Prediction: softmax 4096x32768 16-bit 92-96% of copy (the fp32 row of 64 KB, 97.8, less the unpacking);
layernorm under maxnreg 32 +2-5 points over its team if the spill stays in L1, level or worse if not.
Outcome (experiments/sweep-h200-session20/call1-packed/): softmax fp16 on 16 warps (61 registers, two
programs an SM) 92.7-93.4% against the template's 88.6; bf16 unpacked by a shift took 68 registers, one
program an SM, 59%; 32 warps 88.2-90.0 (softmax) and 69-70 (layernorm, any cap): falsified there. The
template's _softmax_row_pairs came of it (16 warps, bf16 unpacked by Triton's conversion).

Each variant is checked against torch in fp32 (output poisoned first), then timed, A B A B.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)
from kgit.harness import device  # noqa: E402

LOG2E = tl.constexpr(1.4426950408889634)
SHAPES = [(4096, 32768), (8192, 16384), (2048, 32768)]


@triton.jit
def _unpack(p, IS_BF16: tl.constexpr):
    # a 32-bit word of two 16-bit elements, the lower address in the low half: both as fp32
    if IS_BF16:
        lo = (p << 16).to(tl.float32, bitcast=True)
        hi = (p & -65536).to(tl.float32, bitcast=True)
    else:
        lo = p.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
        hi = (p >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _pack(lo, hi, dtype: tl.constexpr):
    low = lo.to(dtype).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    return low | (hi.to(dtype).to(tl.int16, bitcast=True).to(tl.int32) << 16)


@triton.jit
def _softmax_packed(x_ptr, y_ptr, stride_x, stride_y, zero, BLOCK_N: tl.constexpr, IS_BF16: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N // 2)
    p = tl.load(x_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + row * (stride_x // 2) + offs)
    lo, hi = _unpack(p, IS_BF16)
    m = tl.maximum(tl.max(lo, axis=0), tl.max(hi, axis=0))
    lo, hi = _unpack(p ^ zero, IS_BF16)
    s = tl.sum(tl.exp2((lo - m) * LOG2E), axis=0) + tl.sum(tl.exp2((hi - m) * LOG2E), axis=0)
    shift = m * LOG2E + tl.log2(s)
    lo, hi = _unpack(p ^ (zero >> 1), IS_BF16)
    out = _pack(tl.exp2(lo * LOG2E - shift), tl.exp2(hi * LOG2E - shift), y_ptr.dtype.element_ty)
    tl.store(y_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + row * (stride_y // 2) + offs, out)


@triton.jit
def _layernorm_packed(x_ptr, w_ptr, b_ptr, y_ptr, N, stride_x, stride_y, eps, zero, BLOCK_N: tl.constexpr,
                      IS_BF16: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N // 2)
    p = tl.load(x_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + row * (stride_x // 2) + offs)
    lo, hi = _unpack(p, IS_BF16)
    mean = (tl.sum(lo, axis=0) + tl.sum(hi, axis=0)) / N
    lo, hi = _unpack(p ^ zero, IS_BF16)
    lo = lo - mean
    hi = hi - mean
    rstd = 1.0 / tl.sqrt((tl.sum(lo * lo, axis=0) + tl.sum(hi * hi, axis=0)) / N + eps)
    lo, hi = _unpack(p ^ (zero >> 1), IS_BF16)
    wl, wh = _unpack(tl.load(w_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + offs), IS_BF16)
    bl, bh = _unpack(tl.load(b_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + offs), IS_BF16)
    out = _pack((lo - mean) * rstd * wl + bl, (hi - mean) * rstd * wh + bh, y_ptr.dtype.element_ty)
    tl.store(y_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + row * (stride_y // 2) + offs, out)


def variants(kernel, T, x, w, b):
    """label -> run(out) for one kernel on x (M, N) 16-bit, N a power of two: the template's launcher, then
    the packed row at each setting."""
    M, N = x.shape
    bf16 = x.dtype == torch.bfloat16

    def softmax(warps, **opts):
        return lambda y: _softmax_packed[(M,)](x, y, x.stride(0), y.stride(0), 0, BLOCK_N=N, IS_BF16=bf16,
                                               num_warps=warps, **opts)

    def layernorm(warps, **opts):
        return lambda y: _layernorm_packed[(M,)](x, w, b, y, N, x.stride(0), y.stride(0), T.EPS, 0, BLOCK_N=N,
                                                 IS_BF16=bf16, num_warps=warps, **opts)

    run, ref = templates.norm_call(kernel, T, x, w, b)
    if kernel == "softmax":
        return {"template": run, "packed 32w": softmax(32), "packed 16w": softmax(16)}, ref
    return {"template": run, "packed 32w": layernorm(32), "packed 32w maxnreg 32": layernorm(32, maxnreg=32),
            "packed 32w maxnreg 40": layernorm(32, maxnreg=40)}, ref


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--shapes", default=",".join(f"{m}x{n}" for m, n in SHAPES))
    args = p.parse_args()
    out, timer, copy, results = templates.begin(args.out)
    for kernel in ("softmax", "layernorm"):
        T = templates.load(kernel)
        for shape in args.shapes.split(","):
            M, N = (int(n) for n in shape.split("x"))
            for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
                x, w, b = templates.norm_inputs(M, N, dtype)
                y = torch.empty_like(x)
                runs, ref = variants(kernel, T, x, w, b)
                templates.time_variants(kernel, runs, y, ref, M, N, dname, args.rounds, timer, copy, results)
    results["copy_gbps_end"] = device.measured_copy_gbps(refresh=True)
    (out / "packed_rows.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
