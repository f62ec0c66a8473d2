"""Issue 15: softmax and layernorm at 16-bit rows of 32768 through a TMA ring in shared memory (Gluon).

    python benchmarks/explore/tma_ring_rows.py --out DIR [--budget-s S]
    python benchmarks/explore/tma_ring_rows.py --compile-only

Where they stand (H200, % of the copy bandwidth measured in the same run): softmax 89.2 / 88.5% (bf16 /
fp16) on the template's row loop, which Triton pipelines with cp.async four stages deep (bar 90);
layernorm 81.6% on its shared-memory team (bar 90): its row loop, pipelined the same way, holds w and b
beside the row and spills (experiments/sweep-h200-session13/call3/). The softmax profile
(session 13, call 9) reads one program an SM, DRAM 75.3% of peak, 1.98 instructions issued a cycle: the
16 warps that reduce a row also issue its copies and wait on them, and two barriers a row stall them all.

Here a one-warp loader partition keeps a ring of NUM_BUFFERS whole rows in shared memory filled by TMA
(a row of 32768 is one [128, 256] box of the (M * 128, 256) view), released through mbarriers; the
compute partition never issues a load to global memory for x. Variants:
  whole     the compute partition takes the row into registers (64 fp32 a thread on 16 warps), frees its
            buffer at once, reduces and stores from registers (softmax only: one exp an element).
  chunked   the row stays in shared memory and is read in NCHUNK slices a pass: softmax max, sum, output
            (two exps an element); layernorm mean, centred variance, output with w and b read from L2 a
            slice at a time (nothing row-long lives in registers, so nothing spills).
  *_tma     the output is written back over the row's own buffer and stored by TMA; the buffer is freed
            once the store has read it (store_wait(1) a row later).
Hypothesis: with the copies off the compute warps and three rows of buffers, the bytes in flight an SM
stay near the ring's 128-192 KB through the reductions. Prediction: softmax 90-93%, layernorm 86-91%
(its three passes and the L2 reads of w and b cost issue slots); *_tma +0-2 over plain stores.

Compiled for sm_90 by Triton 3.6: no spills, 196.7 KB of shared memory (three 64 KB buffers), the compute
partition at 112 registers on 16 warps (240 on 8), the loader at 24.

Measured on the H200 (experiments/sweep-h200-session14/call1-ring/, one process, % of copy, bf16 / fp16):
every variant correct; softmax: the template 88.0 / 87.6, whole 87.2 / 87.7, whole_tma 86.5 / 88.4,
chunked 88.7 / 88.1, chunked_tma 87.0 / 86.5, chunked8_tma 86.4 / 86.7; layernorm: the template
81.3 / 84.6, chunked 73.3 / 73.4, chunked_tma 64.8 / 67.1, chunked8_tma 64.2 / 65.5. Falsified: taking
the copies off the compute warps moves softmax by nothing (within the 0.5-1 point two runs differ by),
and the TMA store, which holds a buffer until the store has read it (one row fewer in flight), loses
1-2 points. The ring holds two to three rows in flight an SM, far above what the latency needs
(about 32 KB an SM at 4.3 TB/s and a microsecond), so bytes in flight are not the ceiling either. What is
left, as a suspect not yet measured, is the work a row costs one program an SM: the same instructions a
row whatever the dtype, which a 16-bit row's 128 KB of traffic hides less well than an fp32 row's 256 KB
(fp32 rows of 32768 read 96.5%). A second program an SM to overlap it needs registers or shared memory
that a 64 KB row does not leave; an instruction-level profile of the whole variant would test it.

Each variant is checked against an fp32 torch reference, then timed with templates' timer (medians, the
spread, % of the copy measured at the start), in one process beside the template.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parent))
import templates  # noqa: E402  (beside this file)

_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global

M, N = 4096, 32768
COLS = 256            # a row is a [N // COLS, COLS] box: TMA boxes are at most 256 elements a side
LOG2E = 1.4426950408889634
LOADER_REGS = 24
# name: (kernel, compute warps, buffers, slices a pass (0 = whole row in registers), TMA store)
VARIANTS = {
    "softmax_whole": ("softmax", 16, 3, 0, False),
    "softmax_whole_tma": ("softmax", 16, 3, 0, True),
    "softmax_chunked": ("softmax", 16, 3, 4, False),
    "softmax_chunked_tma": ("softmax", 16, 3, 4, True),
    "softmax_chunked8_tma": ("softmax", 8, 3, 4, True),
    "layernorm_chunked": ("layernorm", 16, 3, 4, False),
    "layernorm_chunked_tma": ("layernorm", 16, 3, 4, True),
    "layernorm_chunked8_tma": ("layernorm", 8, 3, 4, True),
    "copy_whole": ("copy", 16, 3, 0, False),
    "copy_tma": ("copy", 16, 3, 0, True),
}
KINDS = ("softmax", "layernorm", "copy")


@gluon.jit
def _loader(x_desc, ring, ready, empty, M, NUM_BUFFERS: gl.constexpr):
    # Row i of this program goes to buffer i % NUM_BUFFERS once the compute partition has freed it. A
    # fresh mbarrier counts its phase "1" as complete, so the first lap's waits (parity 1) pass at once.
    R: gl.constexpr = x_desc.block_type.shape[0]
    i = 0
    for row in range(gl.program_id(0), M, gl.num_programs(0)):
        buf = i % NUM_BUFFERS
        mbarrier.wait(empty.index(buf), ((i // NUM_BUFFERS) & 1) ^ 1)
        mbarrier.expect(ready.index(buf), x_desc.block_type.nbytes)
        _tma_load(x_desc, [row * R, 0], ready.index(buf), ring.index(buf))
        i += 1


@gluon.jit
def _row_offsets(R: gl.constexpr, C: gl.constexpr, layout: gl.constexpr):
    r = gl.arange(0, R, layout=gl.SliceLayout(1, layout))
    c = gl.arange(0, C, layout=gl.SliceLayout(0, layout))
    return gl.expand_dims(r, 1) * C + gl.expand_dims(c, 0)


@gluon.jit
def _softmax_regs(x, buf, y_ptr, row, N, ROWS: gl.constexpr, C: gl.constexpr, TMA_STORE: gl.constexpr,
                  layout: gl.constexpr):
    # softmax of one row x ([ROWS, C] fp32 registers, one exp an element); written to y or into buf
    m = gl.max(gl.max(x, axis=1), axis=0)
    e = gl.exp2((x - m) * 1.4426950408889634)
    y = e * (1.0 / gl.sum(gl.sum(e, axis=1), axis=0))
    if TMA_STORE:
        buf.store(y.to(buf.dtype))
    else:
        gl.store(y_ptr + row.to(gl.int64) * N + _row_offsets(ROWS, C, layout), y.to(y_ptr.dtype.element_ty))


@gluon.jit
def _softmax_tile(buf, y_ptr, row, N, ROWS: gl.constexpr, C: gl.constexpr, NCHUNK: gl.constexpr,
                  TMA_STORE: gl.constexpr, layout: gl.constexpr):
    # softmax of one row held in buf ([ROWS, C]) read a slice at a time; written to y (row-major,
    # N = ROWS * C) or back into buf
    RC: gl.constexpr = ROWS // NCHUNK
    # each pass keeps an element-wise running max (sum) across the slices and reduces it across the
    # partition once: one cross-warp exchange a pass, not one a slice
    m = gl.full([RC, C], -float("inf"), gl.float32, layout)
    for k in gl.static_range(NCHUNK):
        m = gl.maximum(m, buf.slice(k * RC, RC).load(layout).to(gl.float32))
    m2 = gl.max(gl.max(m, axis=1), axis=0) * 1.4426950408889634
    s = gl.zeros([RC, C], gl.float32, layout)
    for k in gl.static_range(NCHUNK):
        s += gl.exp2(buf.slice(k * RC, RC).load(layout).to(gl.float32) * 1.4426950408889634 - m2)
    s = gl.sum(gl.sum(s, axis=1), axis=0)
    # y = exp2(x log2e - (m log2e + log2 s)): the division folded into the exponent
    shift = m2 + gl.log2(s)
    offs = _row_offsets(RC, C, layout)
    for k in gl.static_range(NCHUNK):
        part = buf.slice(k * RC, RC)
        y = gl.exp2(part.load(layout).to(gl.float32) * 1.4426950408889634 - shift)
        if TMA_STORE:
            part.store(y.to(buf.dtype))
        else:
            gl.store(y_ptr + row.to(gl.int64) * N + k * RC * C + offs, y.to(y_ptr.dtype.element_ty))


@gluon.jit
def _layernorm_tile(buf, y_ptr, w_ptr, b_ptr, row, N, eps, ROWS: gl.constexpr, C: gl.constexpr,
                    NCHUNK: gl.constexpr, TMA_STORE: gl.constexpr, layout: gl.constexpr):
    # layernorm of one row held in buf: the mean, the centred variance (a second pass over shared
    # memory, not E[x^2] - mean^2, which cancels for rows far from zero), then y = (x - mean) * rstd * w + b
    # with w and b read a slice at a time (they stay in L2: every row reads them)
    RC: gl.constexpr = ROWS // NCHUNK
    acc = gl.zeros([RC, C], gl.float32, layout)
    for k in gl.static_range(NCHUNK):
        acc += buf.slice(k * RC, RC).load(layout).to(gl.float32)
    mean = gl.sum(gl.sum(acc, axis=1), axis=0) / N
    var = gl.zeros([RC, C], gl.float32, layout)
    for k in gl.static_range(NCHUNK):
        d = buf.slice(k * RC, RC).load(layout).to(gl.float32) - mean
        var += d * d
    var = gl.sum(gl.sum(var, axis=1), axis=0)
    rstd = gl.rsqrt(var / N + eps)
    offs = _row_offsets(RC, C, layout)
    for k in gl.static_range(NCHUNK):
        part = buf.slice(k * RC, RC)
        w = gl.load(w_ptr + k * RC * C + offs).to(gl.float32)
        b = gl.load(b_ptr + k * RC * C + offs).to(gl.float32)
        y = (part.load(layout).to(gl.float32) - mean) * rstd * w + b
        if TMA_STORE:
            part.store(y.to(buf.dtype))
        else:
            gl.store(y_ptr + row.to(gl.int64) * N + k * RC * C + offs, y.to(y_ptr.dtype.element_ty))


@gluon.jit
def _compute(ring, ready, empty, y_desc, y_ptr, w_ptr, b_ptr, M, N, eps, KIND: gl.constexpr,
             NUM_BUFFERS: gl.constexpr, NCHUNK: gl.constexpr, TMA_STORE: gl.constexpr,
             WARPS: gl.constexpr):
    ROWS: gl.constexpr = y_desc.block_type.shape[0]
    C: gl.constexpr = y_desc.block_type.shape[1]
    # 8 contiguous 16-bit elements a thread (one 16-byte shared-memory access), a warp across a 256-wide
    # line of the box, the warps down its rows
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [WARPS, 1], [1, 0])
    i = 0
    for row in range(gl.program_id(0), M, gl.num_programs(0)):
        buf = i % NUM_BUFFERS
        mbarrier.wait(ready.index(buf), (i // NUM_BUFFERS) & 1)
        tile = ring.index(buf)
        if KIND == 2:
            # the control: the row out as it came in, through registers or straight from its buffer
            if not TMA_STORE:
                x = tile.load(layout)
                mbarrier.arrive(empty.index(buf))
                gl.store(y_ptr + row.to(gl.int64) * N + _row_offsets(ROWS, C, layout), x)
        elif NCHUNK == 0:
            # the whole row into registers: its buffer is free at once unless the output goes back into it
            x = tile.load(layout).to(gl.float32)
            if not TMA_STORE:
                mbarrier.arrive(empty.index(buf))
            _softmax_regs(x, tile, y_ptr, row, N, ROWS, C, TMA_STORE, layout)
        elif KIND == 1:
            _layernorm_tile(tile, y_ptr, w_ptr, b_ptr, row, N, eps, ROWS, C, NCHUNK, TMA_STORE, layout)
        else:
            _softmax_tile(tile, y_ptr, row, N, ROWS, C, NCHUNK, TMA_STORE, layout)
        if TMA_STORE:
            fence_async_shared()
            _tma_store(y_desc, [row * ROWS, 0], tile)
            # the previous row's store has read its buffer once at most this one is outstanding
            tma.store_wait(1)
            if i > 0:
                mbarrier.arrive(empty.index((i - 1) % NUM_BUFFERS))
        elif NCHUNK > 0:
            mbarrier.arrive(empty.index(buf))
        i += 1
    if TMA_STORE:
        tma.store_wait(0)


@gluon.jit
def ring_rows(x_desc, y_desc, y_ptr, w_ptr, b_ptr, M, N, eps, KIND: gl.constexpr,
              NUM_BUFFERS: gl.constexpr, NCHUNK: gl.constexpr, TMA_STORE: gl.constexpr,
              WARPS: gl.constexpr, LOADER_REGS: gl.constexpr):
    ring = gl.allocate_shared_memory(x_desc.dtype, [NUM_BUFFERS] + x_desc.block_type.shape, x_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize([
        (_compute, (ring, ready, empty, y_desc, y_ptr, w_ptr, b_ptr, M, N, eps, KIND, NUM_BUFFERS, NCHUNK,
                    TMA_STORE, WARPS)),
        (_loader, (x_desc, ring, ready, empty, M, NUM_BUFFERS)),
    ], [1], [LOADER_REGS])


GL_DTYPE = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


def _launch_args(x, y, w, b, variant, eps=1e-5):
    kernel, warps, buffers, nchunk, tma_store = VARIANTS[variant]
    rows, n = x.shape
    if n % COLS or not x.is_contiguous() or x.dtype not in GL_DTYPE:
        raise ValueError(f"unsupported: {tuple(x.shape)} {x.dtype} (contiguous 16-bit rows, N a multiple of {COLS})")
    box = [n // COLS, COLS]
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)

    def desc(t):
        return TensorDescriptor(t.view(rows * box[0], COLS), [rows * box[0], COLS], [COLS, 1], box, layout)

    args = [desc(x), desc(y), y, w if w is not None else y, b if b is not None else y, rows, n, eps]
    consts = dict(KIND=KINDS.index(kernel), NUM_BUFFERS=buffers, NCHUNK=nchunk, TMA_STORE=tma_store,
                  WARPS=warps, LOADER_REGS=LOADER_REGS)
    return args, consts, warps


def ring_rows_run(x, y, variant, w=None, b=None):
    args, consts, warps = _launch_args(x, y, w, b, variant)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    ring_rows[(min(x.shape[0], sms), 1, 1)](*args, **consts, num_warps=warps)
    return y


def compile_only(variants):
    for name in variants:
        for dtype in (torch.bfloat16, torch.float16):
            x, y = (torch.empty(64, N, dtype=dtype) for _ in range(2))
            w, b = (torch.empty(N, dtype=dtype) for _ in range(2))
            args, consts, warps = _launch_args(x, y, w, b, name)
            tag = f"{name:24s} {str(dtype)[6:]:8s}"
            try:
                kernel = templates.compile_sm90(ring_rows, args, consts, {"num_warps": warps})
                u = templates.resource_usage(kernel)
                waits = sorted({line.split()[0] for line in kernel.asm["ptx"].splitlines() if "bulk.wait_group" in line})
                print(f"{tag}: regs {u['regs']} spills {u['spill_bytes']} B smem {u['smem']} B "
                      f"setmaxnreg {u['setmaxnreg']} {waits}"
                      + (f" WARNINGS {u['ptxas_warnings']}" if u["ptxas_warnings"] else ""), flush=True)
            except Exception as e:  # one variant's failure is a result, the others go on
                print(f"{tag}: ERROR {templates.last_lines(e)}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=".")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--budget-s", type=float, default=150.0)
    p.add_argument("--hang-s", type=float, default=60.0)
    p.add_argument("--compile-only", action="store_true")
    args = p.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    if args.compile_only:
        compile_only(variants)
        return
    out, timer, copy, results = templates.begin(args.out)
    templates.start_watchdog(args.hang_s)
    started = time.time()
    softmax, layernorm = templates.load("softmax"), templates.load("layernorm")
    torch.manual_seed(0)
    cases = [(k, d) for k in ("copy", "softmax", "layernorm") for d in (torch.bfloat16, torch.float16)]
    cases.append(("softmax", torch.float32))  # the control: the same rows at twice the bytes
    for kernel, dtype in cases:
        if time.time() - started > args.budget_s:
            print(f"budget spent: skipping {kernel} {dtype} and later", flush=True)
            break
        w = b = None
        if kernel == "copy":
            x = torch.randn(M, N, device="cuda").to(dtype)
            ref = x.float()
            today = (lambda y, x=x: y.copy_(x))
        elif kernel == "softmax":
            x = (torch.randn(M, N, device="cuda") * 3).to(dtype)
            ref = torch.softmax(x.float(), -1)
            today = (lambda y, x=x: softmax.softmax(x, out=y))
        else:
            x = (torch.randn(M, N, device="cuda") * 3 + 100).to(dtype)  # a mean far from 0
            w = (torch.rand(N, device="cuda") + 0.5).to(dtype)
            b = torch.randn(N, device="cuda").to(dtype)
            ref = torch.nn.functional.layer_norm(x.float(), (N, ), w.float(), b.float(), 1e-5)
            today = (lambda y, x=x, w=w, b=b: layernorm.layernorm(x, w, b, out=y))
        runs = [("torch copy_" if kernel == "copy" else "template", today)]
        runs += [(v, lambda y, x=x, w=w, b=b, v=v: ring_rows_run(x, y, v, w, b))
                 for v in variants if VARIANTS[v][0] == kernel and dtype in GL_DTYPE]
        y = torch.empty_like(x)
        for name, run in runs:
            row = {"kernel": kernel, "shape": [M, N], "dtype": str(dtype)[6:], "variant": name}
            templates.check_and_time(row, run, y, ref, 2 * x.numel() * x.element_size(), timer, copy, True)
            results["rows"].append(row)
            print(f"{kernel} {M}x{N} {str(dtype)[6:]} {name}: {templates.figure(row)}", flush=True)
            (out / "tma_ring_rows.json").write_text(json.dumps(results, indent=1))
            templates.row_done()
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
