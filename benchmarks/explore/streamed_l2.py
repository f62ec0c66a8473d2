"""Issue 15: does a persistent streamed kernel keep pass 1's row in L2 for pass 2?

    python benchmarks/explore/streamed_l2.py [--out DIR] [--kernels softmax,rmsnorm,layernorm]
                                             [--budget-s 280] [--quick]

The streamed two-pass kernels (_<kernel>_streamed in the templates: one program per row, pass 1 reduces
the row in pipelined chunks, pass 2 re-reads it and writes) reach 55-67% of copy on 16-bit rows of
65536-262144 on the H200. ncu (experiments/worst-shapes-h200/streamed-2026-12-01) saw two thirds of
pass 2's re-read miss L2 at 512x262144. Hypothesis: with grid = M, every resident program (5 an SM for
softmax's 8 warps) has a row in flight, 660 x 512 KB = 330 MB against a 50 MB L2, so pass 1's lines are
gone when pass 2 comes back. A persistent grid of PPS x SM-count programs, each looping over rows
pid, pid + nprog, ..., bounds the bytes in flight to PPS x 132 x row bytes.

Variants, beside the launcher as it is ("today") and torch, on the same fresh random inputs, in one
process with the device copy (measured at the start and the end):
  persistent kernels defined here, the template's body inside a row loop, under
  pps (programs per SM: 0.5 means half the SMs), BLOCK_N, num_warps, num_stages, and REVERSE (pass 2
  walks the chunks last to first: with a working set a little over L2, an LRU cache then serves the
  most recently read chunks first instead of thrashing).
The template's own kernel at grid = M is "today" for softmax and layernorm; for rmsnorm "today" is
the launcher (the split team at 131072-262144) and the template's streamed kernel is measured beside it,
and so is the streamed kernel as it was before this exploration (one program per row, no row loop,
commit d225cb4) on 8192/8/3 (shipped then) and 16384/16/3.
Every variant's output (poisoned with NaN first) is checked against torch before it is timed: a do_bench
median (L2 cleared) over 3 repeats, the spread beside it. bf16 runs the whole grid; fp16 then re-runs
the best three of bf16 per shape (and today, and torch). Writes DIR/streamed_l2.json after every shape
(a timeout keeps what was measured) and prints one line per variant with the bytes in flight
(resident programs x row bytes; resident = min(pps, programs that fit an SM) x SMs).

--quick: tiny shapes, for Triton's interpreter (TRITON_INTERPRET=1) or a smoke test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from kgit.harness import device  # noqa: E402
from kgit.harness.timing import Timer, spread_pct  # noqa: E402
import templates  # noqa: E402  (beside this file)

SHAPES = [(2048, 65536), (1024, 131072), (512, 262144)]  # the sweep's time shapes (test_softmax.py)
QUICK_SHAPES = [(7, 300), (3, 1000)]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
PPS = [0.5, 1, 2, 3, 4]

# (BLOCK_N, num_warps, num_stages) per kernel for the bf16 grid; REVERSE=1 at the first three.
GRID = {
    "softmax": [(4096, 8, 3), (8192, 8, 3), (8192, 16, 3), (4096, 8, 4), (8192, 8, 4), (8192, 16, 4),
                (16384, 16, 2), (16384, 16, 3)],
    "rmsnorm": [(8192, 8, 3), (4096, 8, 3), (8192, 16, 3), (16384, 16, 3)],
    "layernorm": [(8192, 8, 3), (4096, 8, 3), (8192, 16, 3), (16384, 16, 3)],
}
REVERSE_PPS = [0.5, 1, 2]
QUICK_GRID = [(64, 4, 2), (128, 4, 3)]


@triton.jit
def _softmax_persistent(x_ptr, y_ptr, M, N, stride_x, stride_y,
                        BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr, REVERSE: tl.constexpr):
    # _softmax_streamed's two passes, for rows pid, pid + nprog, ...
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK_N)
    n_chunks = tl.cdiv(N, BLOCK_N)
    for row in range(pid, M, nprog):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
        y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
        m = tl.max(tl.full([BLOCK_N], -float("inf"), tl.float32), axis=0)
        s = tl.sum(tl.zeros([BLOCK_N], tl.float32), axis=0)
        for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
            cols = c * BLOCK_N + offs
            x = tl.load(x_row + cols, mask=cols < N, other=-float("inf"), eviction_policy="evict_last")
            x = x.to(tl.float32)
            new_m = tl.maximum(m, tl.max(x, axis=0))
            safe = tl.where(new_m == -float("inf"), 0.0, new_m)
            s = s * tl.exp(m - safe) + tl.sum(tl.exp(x - safe), axis=0)
            m = new_m
        inv = 1.0 / s
        for k in tl.range(0, n_chunks, num_stages=NUM_STAGES):
            c = n_chunks - 1 - k if REVERSE else k
            cols = c * BLOCK_N + offs
            ok = cols < N
            x = tl.load(x_row + cols, mask=ok, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
            tl.store(y_row + cols, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=ok,
                     eviction_policy="evict_first")


@triton.jit
def _rmsnorm_persistent(x_ptr, w_ptr, y_ptr, M, N, stride_x, stride_y, eps,
                        BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr, REVERSE: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK_N)
    n_chunks = tl.cdiv(N, BLOCK_N)
    for row in range(pid, M, nprog):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
        y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
        acc = tl.zeros([BLOCK_N], tl.float32)
        for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
            cols = c * BLOCK_N + offs
            x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
        for k in tl.range(0, n_chunks, num_stages=NUM_STAGES):
            c = n_chunks - 1 - k if REVERSE else k
            cols = c * BLOCK_N + offs
            ok = cols < N
            x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
            tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=ok,
                     eviction_policy="evict_first")


@triton.jit
def _layernorm_persistent(x_ptr, w_ptr, b_ptr, y_ptr, M, N, stride_x, stride_y, eps,
                          BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr, REVERSE: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK_N)
    n_chunks = tl.cdiv(N, BLOCK_N)
    for row in range(pid, M, nprog):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
        y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
        zero = tl.sum(tl.zeros([BLOCK_N], tl.float32), axis=0)
        n, mean, m2 = zero, zero, zero
        for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
            cols = c * BLOCK_N + offs
            ok = cols < N
            x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            n_c = tl.minimum(N - c * BLOCK_N, BLOCK_N).to(tl.float32)
            mean_c = tl.sum(x, axis=0) / n_c
            d_c = tl.where(ok, x - mean_c, 0.0)
            n_new = n + n_c
            d = mean_c - mean
            mean = mean + d * (n_c / n_new)
            m2 = m2 + tl.sum(d_c * d_c, axis=0) + d * d * (n * n_c / n_new)
            n = n_new
        rstd = 1.0 / tl.sqrt(m2 / N + eps)
        for k in tl.range(0, n_chunks, num_stages=NUM_STAGES):
            c = n_chunks - 1 - k if REVERSE else k
            cols = c * BLOCK_N + offs
            ok = cols < N
            x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
            tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok,
                     eviction_policy="evict_first")


@triton.jit
def _rmsnorm_before(x_ptr, w_ptr, y_ptr, N, stride_x, stride_y, eps,
                    BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr):
    # The template's _rmsnorm_streamed before this exploration (commit d225cb4): one program per row, no
    # row loop; shipped with BLOCK_N 8192, 8 warps, 3 stages.
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    n_chunks = tl.cdiv(N, BLOCK_N)
    x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
    y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
    acc = tl.zeros([BLOCK_N], tl.float32)
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        ok = cols < N
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")


PERSISTENT = {"softmax": _softmax_persistent, "rmsnorm": _rmsnorm_persistent, "layernorm": _layernorm_persistent}


def problem(kernel: str, T, x: torch.Tensor):
    """(kernel args before the constexprs, given y; launcher call; template streamed call; torch call;
    fp32 reference) for one input."""
    M, N = x.shape
    if kernel == "softmax":
        return ((lambda y: (x, y, M, N, x.stride(0), y.stride(0))), (lambda y: T.softmax(x, out=y)),
                (lambda y: T._launch_streamed(x, y, M, N)), (lambda: torch.softmax(x, -1)),
                torch.softmax(x.float(), -1))
    w = torch.rand(N, device=x.device, dtype=x.dtype) + 0.5
    if kernel == "rmsnorm":
        return ((lambda y: (x, w, y, M, N, x.stride(0), y.stride(0), T.EPS)), (lambda y: T.rmsnorm(x, w, out=y)),
                (lambda y: T._launch_streamed(x, w, y, M, N, T.EPS)),
                (lambda: torch.nn.functional.rms_norm(x, (N,), w, T.EPS)), T.rmsnorm_ref(x, w).float())
    b = torch.randn(N, device=x.device, dtype=x.dtype)
    return ((lambda y: (x, w, b, y, M, N, x.stride(0), y.stride(0), T.EPS)), (lambda y: T.layernorm(x, w, b, out=y)),
            (lambda y: T._launch_streamed(x, w, b, y, M, N, T.EPS)),
            (lambda: torch.nn.functional.layer_norm(x, (N,), w, b, T.EPS)),
            torch.nn.functional.layer_norm(x.float(), (N,), w.float(), b.float(), T.EPS))


def persistent_call(kernel, T, args_of, M, sms, v):
    block_n, warps, stages, pps, rev = v["BLOCK_N"], v["num_warps"], v["num_stages"], v["pps"], v["REVERSE"]
    fn = PERSISTENT[kernel]
    grid = (max(1, min(M, int(round(pps * sms)))),)
    consts = {"BLOCK_N": block_n, "NUM_STAGES": stages, "REVERSE": rev}

    def run(y):
        fn[grid](*args_of(y), **consts, num_warps=warps, num_stages=stages)

    return run, grid[0], consts


def label(v):
    return (f"pps={v['pps']:g} BLOCK_N={v['BLOCK_N']} warps={v['num_warps']} stages={v['num_stages']}"
            + (" REVERSE" if v["REVERSE"] else ""))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--kernels", default="softmax,rmsnorm,layernorm")
    p.add_argument("--budget-s", type=float, default=280.0, help="stop timing new variants after this")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-fp16", action="store_true", help="bf16 only")
    args = p.parse_args()
    started = time.time()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    gpu = device.on_gpu()
    dev = torch.device("cuda" if gpu else "cpu")
    shapes = QUICK_SHAPES if args.quick else SHAPES
    timer = Timer(repeats=3, warmup_ms=10, rewarm_ms=5, rep_ms=15)
    copy = device.measured_copy_gbps(refresh=True) if gpu else None
    sms = torch.cuda.get_device_properties(dev).multi_processor_count if gpu else 4
    results = {"copy_gbps_start": copy, "sms": sms, "device": device.detect(), "torch": torch.__version__,
               "triton": triton.__version__, "rows": [], "skipped": []}
    print(f"copy {copy} GB/s, {sms} SMs", flush=True)
    path = out_dir / "streamed_l2.json"
    torch.manual_seed(0)

    def measure(kernel, M, N, dname, variant, run, y, ref, nbytes, extra=None):
        row = {"kernel": kernel, "shape": [M, N], "dtype": dname, "variant": variant, **(extra or {})}
        if time.time() - started > args.budget_s:
            results["skipped"].append(row)
            return row
        templates.check_and_time(row, run, y, ref, nbytes, timer, copy, gpu)
        results["rows"].append(row)
        inflight = f" in flight {row['inflight_mb']:.0f} MB" if "inflight_mb" in row else ""
        print(f"{kernel} {M}x{N} {dname} {variant}{inflight}: {templates.figure(row)}", flush=True)
        return row

    for kernel in args.kernels.split(","):
        T = templates.load(kernel)
        grid_cfgs = QUICK_GRID if args.quick else GRID[kernel]
        bf16_variants = [dict(BLOCK_N=b, num_warps=w, num_stages=s, pps=pps, REVERSE=0)
                         for (b, w, s) in grid_cfgs for pps in PPS]
        bf16_variants += [dict(BLOCK_N=b, num_warps=w, num_stages=s, pps=pps, REVERSE=1)
                          for (b, w, s) in grid_cfgs[:3 if not args.quick else 1] for pps in REVERSE_PPS]
        best = {}  # shape -> the bf16 variants, best first
        for dname in ["bf16"] if args.no_fp16 else ["bf16", "fp16"]:
            dtype = DTYPES[dname]
            for (M, N) in shapes:
                x = (torch.randn(M, N, device=dev) * 3).to(dtype)
                args_of, launcher, streamed, run_torch, ref = problem(kernel, T, x)
                y = torch.empty_like(x)
                nbytes = 2 * x.numel() * x.element_size()
                row_bytes = N * x.element_size()
                measure(kernel, M, N, dname, "today", launcher, y, ref, nbytes)
                if kernel == "rmsnorm":  # rows over 65536 go to the split team today
                    measure(kernel, M, N, dname, "template streamed", streamed, y, ref, nbytes,
                            {"STREAMED": dict(T.STREAMED)})
                    for (b, w_, s_) in [(8192, 8, 3), (16384, 16, 3)]:
                        def before(y, b=b, w_=w_, s_=s_):
                            a = args_of(y)
                            _rmsnorm_before[(M,)](*a[:3], *a[4:], BLOCK_N=b, NUM_STAGES=s_, num_warps=w_,
                                                  num_stages=s_)
                        measure(kernel, M, N, dname, f"one program per row, no loop (d225cb4) {b}/{w_}/{s_}",
                                before, y, ref, nbytes)
                variants = bf16_variants if dname == "bf16" else best.get((M, N), [])[:3]
                rows = []
                for v in variants:
                    run, nprog, consts = persistent_call(kernel, T, args_of, M, sms, v)
                    occ = T._programs_per_sm(PERSISTENT[kernel], args_of(y), {**consts}, v["num_warps"],
                                             v["num_stages"], dev) if gpu else 1
                    resident = min(nprog, occ * sms)
                    extra = {"config": v, "programs": nprog, "fit_per_sm": occ,
                             "inflight_mb": resident * row_bytes / 1e6}
                    r = measure(kernel, M, N, dname, "persistent " + label(v), run, y, ref, nbytes, extra)
                    if "gbps" in r:
                        rows.append((r["gbps"], v))
                if dname == "bf16":
                    best[(M, N)] = [v for _, v in sorted(rows, key=lambda t: -t[0])]
                t = timer.times_ms(run_torch, on_gpu=gpu)
                gbps = nbytes / statistics.median(t) * 1e-6
                results["rows"].append({"kernel": kernel, "shape": [M, N], "dtype": dname, "variant": "torch",
                                        "gbps": gbps, "spread_pct": spread_pct(t),
                                        **({"pct_of_copy": 100 * gbps / copy} if copy else {})})
                print(f"{kernel} {M}x{N} {dname} torch: {gbps:.0f} GB/s", flush=True)
                del x, y, ref
                path.write_text(json.dumps(results, indent=1))
    results["copy_gbps_end"] = device.measured_copy_gbps(refresh=True) if gpu else None
    results["wall_s"] = time.time() - started
    path.write_text(json.dumps(results, indent=1))
    print(f"copy at the end {results['copy_gbps_end']} GB/s; {len(results['skipped'])} variants skipped "
          f"(budget); done in {results['wall_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
