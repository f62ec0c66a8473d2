"""Issue 15: a 16-bit row held in shared memory, read once (Gluon).

    python benchmarks/explore/smem_rows.py [--out DIR] [--kernels softmax,layernorm] [--compile-only]

16-bit rows of 32768-65536 are where softmax reads 62-75% of copy: past 32768 the streamed kernel reads
each row twice, and at 32768 the whole row in registers holds one program an SM, whose load, reductions
and store run one after another. A 16-bit row of 65536 is 128 KB: it fits the H200's 227 KB of shared
memory a program. Hypothesis: a persistent program per SM that copies its row into shared memory
(cp.async, one commit group per chunk), reduces it as the chunks land, then writes the output chunk by
chunk and refills each chunk with the next row as soon as every warp has read it, reads the row once
and keeps loads in flight through the whole loop. Predicted: 85-90% of copy at 2048x65536 and
4096x32768 in 16 bits.

Measured (experiments/sweep-h200-2026-12-01/session10-reduce-once/smem-rows/): 82.1 / 83.0% at
4096x32768 bf16 / fp16 on 4096-element chunks, 4 warps, 3 programs an SM (today 73.2 / 75.4%);
65-68% at 2048x65536, where a 128 KB row leaves one program an SM (today 62%).

_layernorm_smem_rows is the same design for layernorm: 20-70% of copy on the H200 (session11-smem/call1),
below the whole row's 77-79%, with w and b read from global memory in the write loop.

The softmax template took this design for 16-bit rows of 16385-32768 (b54f46d: 81.5 / 83.0% at
4096x32768), then replaced it with the shared-memory team of benchmarks/explore/smem_team.py (86%).

Triton's language cannot name shared memory; Gluon (triton.experimental.gluon) can. Gluon does not run in
Triton's interpreter, so this kernel is GPU-only. --compile-only compiles it for sm_90 here (no GPU).
Outputs are checked against an fp32 torch reference before timing (benchmarks/explore/templates.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import templates  # noqa: E402  (beside this file)

LOG2E = gl.constexpr(1.4426950408889634)
# Triton 3.9 renamed these (async_load, barrier); the H200's 3.6 has only the old names.
copy_to_shared = getattr(cp, "async_load", None) or cp.async_copy_global_to_shared
cta_barrier = getattr(gl, "thread_barrier", None) or gl.barrier


@gluon.jit
def _softmax_smem_rows(x_ptr, y_ptr, M, N, stride_x, stride_y, CHUNK: gl.constexpr, NCH: gl.constexpr):
    # Rows pid, pid + nprog, ... Shared memory holds one row as NCH chunks of CHUNK elements.
    layout: gl.constexpr = gl.BlockedLayout([8], [32], [gl.num_warps()], [0])
    buf = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [NCH, CHUNK],
                                    gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    offs = gl.arange(0, CHUNK, layout)
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    first = x_ptr + pid.to(gl.int64) * stride_x
    for c in gl.static_range(NCH):
        cols = c * CHUNK + offs
        copy_to_shared(buf.index(c), first + cols, mask=(cols < N) & (pid < M))
        cp.commit_group()
    for row in range(pid, M, nprog):
        # the row's max and sum, a chunk at a time as the chunks land (copies complete in order)
        m = gl.max(gl.full([CHUNK], -float("inf"), gl.float32, layout), axis=0)
        s = gl.sum(gl.zeros([CHUNK], gl.float32, layout), axis=0)
        for c in gl.static_range(NCH):
            cp.wait_group(NCH - 1 - c)
            cta_barrier()  # every thread's copies of chunk c, not only this one's
            cols = c * CHUNK + offs
            x = gl.where(cols < N, buf.index(c).load(layout).to(gl.float32), -float("inf"))
            new_m = gl.maximum(m, gl.max(x, axis=0))
            safe = gl.where(new_m == -float("inf"), 0.0, new_m)  # chunks of only -inf so far
            s = s * gl.exp2((m - safe) * LOG2E) + gl.sum(gl.exp2((x - safe) * LOG2E), axis=0)
            m = new_m
        shift = m * LOG2E + gl.log2(s)
        # write the row, refilling each chunk with the next row once every warp has read it
        nxt = row + nprog
        nxt_row = x_ptr + nxt.to(gl.int64) * stride_x
        y_row = y_ptr + row.to(gl.int64) * stride_y
        for c in gl.static_range(NCH):
            cols = c * CHUNK + offs
            x = buf.index(c).load(layout).to(gl.float32)
            cta_barrier()
            copy_to_shared(buf.index(c), nxt_row + cols, mask=(cols < N) & (nxt < M))
            cp.commit_group()
            gl.store(y_row + cols, gl.exp2(x * LOG2E - shift).to(y_ptr.dtype.element_ty), mask=cols < N)
    cp.wait_group(0)


@gluon.jit
def _layernorm_smem_rows(x_ptr, w_ptr, b_ptr, y_ptr, M, N, stride_x, stride_y, eps,
                         CHUNK: gl.constexpr, NCH: gl.constexpr):
    # As _softmax_smem_rows, with the row's mean and variance: sums of d = x - k and d^2 around k, the
    # row's first element, so that S2/N - (S1/N)^2 does not cancel the mean away; w and b come from
    # global memory (L2) as each output chunk is written.
    layout: gl.constexpr = gl.BlockedLayout([8], [32], [gl.num_warps()], [0])
    buf = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [NCH, CHUNK], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    offs = gl.arange(0, CHUNK, layout)
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    first = x_ptr + pid.to(gl.int64) * stride_x
    for c in gl.static_range(NCH):
        cols = c * CHUNK + offs
        copy_to_shared(buf.index(c), first + cols, mask=(cols < N) & (pid < M))
        cp.commit_group()
    for row in range(pid, M, nprog):
        k = gl.load(x_ptr + row.to(gl.int64) * stride_x).to(gl.float32)
        s1 = gl.sum(gl.zeros([CHUNK], gl.float32, layout), axis=0)
        s2 = gl.sum(gl.zeros([CHUNK], gl.float32, layout), axis=0)
        for c in gl.static_range(NCH):
            cp.wait_group(NCH - 1 - c)
            cta_barrier()
            cols = c * CHUNK + offs
            d = gl.where(cols < N, buf.index(c).load(layout).to(gl.float32) - k, 0.0)
            s1 += gl.sum(d, axis=0)
            s2 += gl.sum(d * d, axis=0)
        d_mean = s1 / N
        mean = k + d_mean
        rstd = 1.0 / gl.sqrt(gl.maximum(s2 / N - d_mean * d_mean, 0.0) + eps)
        nxt = row + nprog
        nxt_row = x_ptr + nxt.to(gl.int64) * stride_x
        y_row = y_ptr + row.to(gl.int64) * stride_y
        for c in gl.static_range(NCH):
            cols = c * CHUNK + offs
            ok = cols < N
            x = buf.index(c).load(layout).to(gl.float32)
            cta_barrier()
            copy_to_shared(buf.index(c), nxt_row + cols, mask=ok & (nxt < M))
            cp.commit_group()
            w = gl.load(w_ptr + cols, mask=ok, other=0.0).to(gl.float32)
            b = gl.load(b_ptr + cols, mask=ok, other=0.0).to(gl.float32)
            gl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok)
    cp.wait_group(0)


def launch(x, y, chunk: int, warps: int, programs_per_sm: int = 1, w=None, b=None, eps=1e-5):
    """softmax of x into y, or layernorm when w and b are given."""
    M, N = x.shape
    nch = triton.cdiv(N, chunk)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    grid = (min(M, sms * programs_per_sm),)
    if w is None:
        _softmax_smem_rows[grid](x, y, M, N, x.stride(0), y.stride(0), CHUNK=chunk, NCH=nch, num_warps=warps)
    else:
        _layernorm_smem_rows[grid](x, w, b, y, M, N, x.stride(0), y.stride(0), eps, CHUNK=chunk, NCH=nch,
                                   num_warps=warps)


def compile_only():
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    target = GPUTarget("cuda", 90, 32)
    rows = {"M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
    kernels = {  # (kernel, signature, the arguments a launch specializes as multiples of 16)
        "softmax": (_softmax_smem_rows, {"x_ptr": "*bf16", "y_ptr": "*bf16", **rows}, (0, 1, 3, 4, 5)),
        "layernorm": (_layernorm_smem_rows, {"x_ptr": "*bf16", "w_ptr": "*bf16", "b_ptr": "*bf16",
                                             "y_ptr": "*bf16", **rows, "eps": "fp32"}, (0, 1, 2, 3, 5, 6, 7)),
    }
    for name, (fn, sig, aligned) in kernels.items():
        for chunk, nch, warps in ((4096, 16, 8), (4096, 8, 4), (8192, 8, 16)):
            src = GluonASTSource(fn=fn, signature={**sig, "CHUNK": "constexpr", "NCH": "constexpr"},
                                 constexprs={"CHUNK": chunk, "NCH": nch},
                                 attrs={(i,): [["tt.divisibility", 16]] for i in aligned})
            k = triton.compile(src, target=target, options={"num_warps": warps})
            ptx = k.asm["ptx"]
            print(name, chunk, nch, warps, "shared", k.metadata.shared,
                  "cp.async", ptx.count("cp.async.ca") + ptx.count("cp.async.cg"), "bar.sync", ptx.count("bar.sync"))


SHAPES = [(4096, 32768), (2048, 65536), (8192, 16384)]
VARIANTS = [(4096, 8, 1), (4096, 16, 1), (8192, 16, 1), (2048, 8, 1), (4096, 8, 2), (4096, 4, 3)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--compile-only", action="store_true")
    p.add_argument("--budget-s", type=float, default=150.0)
    p.add_argument("--kernels", default="softmax", help="softmax,layernorm")
    args = p.parse_args()
    if args.compile_only:
        compile_only()
        return
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    S, L = templates.load("softmax"), templates.load("layernorm")
    torch.manual_seed(0)
    for kernel in args.kernels.split(","):
        for dtype in (torch.bfloat16, torch.float16):
            for M, N in SHAPES:
                x = (torch.randn(M, N, device="cuda") * 3).to(dtype)
                y = torch.empty_like(x)
                if kernel == "softmax":
                    x[1, :100] = -float("inf")
                    ref = torch.softmax(x.float(), -1)
                    variants = [("today", lambda y: S.softmax(x, out=y)),
                                ("torch", lambda y: y.copy_(torch.softmax(x, -1)))]
                    variants += [(f"smem {c}/{w}/{pps}", lambda y, c=c, w=w, pps=pps: launch(x, y, c, w, pps))
                                 for c, w, pps in VARIANTS]
                else:
                    x += 100  # a mean far from 0: the variance must not cancel
                    w_, b_ = torch.rand(N, device="cuda").to(dtype) + 0.5, torch.randn(N, device="cuda").to(dtype)
                    ref = torch.nn.functional.layer_norm(x.float(), (N,), w_.float(), b_.float(), L.EPS)
                    variants = [("today", lambda y: L.layernorm(x, w_, b_, out=y)),
                                ("torch", lambda y: y.copy_(torch.nn.functional.layer_norm(x, (N,), w_, b_, L.EPS)))]
                    variants += [(f"smem {c}/{w}/{pps}",
                                  lambda y, c=c, w=w, pps=pps: launch(x, y, c, w, pps, w_, b_, L.EPS))
                                 for c, w, pps in VARIANTS]
                for name, run in variants:
                    if time.time() - started > args.budget_s:
                        break
                    row = {"kernel": kernel, "shape": [M, N], "dtype": str(dtype), "variant": name}
                    templates.check_and_time(row, run, y, ref, 2 * x.numel() * x.element_size(), timer, copy, True)
                    results["rows"].append(row)
                    print(f"{kernel} {M}x{N} {str(dtype)[6:]} {name}: {templates.figure(row)}", flush=True)
                (out / "smem_rows.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
