"""Issue 15: reduce once per row, not once per chunk.

    python benchmarks/explore/reduce_once.py [--out DIR] [--only softmax,layernorm,ce-short,ce-long]
                                             [--budget-s 300] [--quick]

Hypothesis. The memory-bound kernels that stay furthest under copy spend their time on block-wide
reductions, not on memory:
- softmax's and layernorm's streamed kernels (16-bit rows of 65536-262144: 54-63% of copy) reduce every
  chunk of pass 1 across the whole program (max, then sum; mean, then M2): two barriers a chunk. rmsnorm's
  streamed kernel keeps a sum per lane and reduces once at the end of the row, and reads 72-73% at the
  same shapes.
- cross-entropy's 16-bit rows of 1024 (59%) spread each row over four warps: 20 PTX instructions per
  logit (Triton 3.9 for sm_90: 29 shuffles and 4 barriers for 16 logits a thread), ncu's SM 82% busy
  against DRAM 46% (experiments/worst-shapes-h200/). One warp per row needs no barrier: 10 per logit.
- cross-entropy's 16-bit rows of 4096-262144 (80-85%) reduce every chunk too.

Variants, each beside the template's launcher ("today") and torch on the same fresh random inputs:
- lanes (softmax): pass 1 keeps a running (max, sum) per lane, in log2 units, one exp2 per element:
  e = exp2(-|x - m|) is the new term when x <= m, and the old sum's rescale when x > m:
      s' = s + e (x <= m),   s' = s * e + 1 (x > m),   m' = max(m, x)
  then one max and one sum over the lanes at the end of the row.
- lanes (layernorm): per-lane sums of d = x - k and d^2 around k, the row's first element (so the
  variance S2/N - (S1/N)^2 does not cancel the mean away), reduced once.
- warp rows (cross-entropy, rows up to 4096): a [CH, ROWS, W] tile, W = 32 lanes x 16 bytes, so Triton
  lays one warp per row (warpsPerCTA [1, ROWS, 1]); the row's max and sum are shuffles within the warp.
- lanes (cross-entropy, one row a program, rows over 4096): the softmax lanes' pass 1, then the loss.

Every output (poisoned with NaN first) is checked against an fp32 torch reference before it is timed:
do_bench medians (L2 cleared) of 3 repeats, the spread beside them, % of the copy measured at the start
and the end. Writes DIR/reduce_once.json after every shape.
--quick: tiny shapes, for Triton's interpreter (TRITON_INTERPRET=1).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from kgit.harness import device  # noqa: E402
from kgit.harness.timing import Timer  # noqa: E402
import templates  # noqa: E402  (beside this file)

LOG2E = tl.constexpr(1.4426950408889634)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@triton.jit
def _softmax_lanes(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    n_chunks = tl.cdiv(N, BLOCK_N)
    x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
    y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
    m = tl.full([BLOCK_N], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_N], tl.float32)
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf"), eviction_policy="evict_last")
        x = x.to(tl.float32) * LOG2E
        up = x > m
        e = tl.exp2(tl.where(up, m - x, x - m))
        s = tl.where(up, s * e + 1.0, s + tl.where(x == -float("inf"), 0.0, e))  # -inf - -inf is NaN
        m = tl.maximum(m, x)
    m_row = tl.max(m, axis=0)
    s_row = tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp2(m - m_row)), axis=0)
    shift = m_row + tl.log2(s_row)
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        ok = cols < N
        x = tl.load(x_row + cols, mask=ok, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        tl.store(y_row + cols, tl.exp2(x * LOG2E - shift).to(y_ptr.dtype.element_ty), mask=ok,
                 eviction_policy="evict_first")


@triton.jit
def _layernorm_lanes(x_ptr, w_ptr, b_ptr, y_ptr, N, stride_x, stride_y, eps,
                     BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    n_chunks = tl.cdiv(N, BLOCK_N)
    x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
    y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
    k = tl.load(x_row).to(tl.float32)
    s1 = tl.zeros([BLOCK_N], tl.float32)
    s2 = tl.zeros([BLOCK_N], tl.float32)
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        ok = cols < N
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        d = tl.where(ok, x - k, 0.0)
        s1 += d
        s2 += d * d
    d_mean = tl.sum(s1, axis=0) / N
    mean = k + d_mean
    rstd = 1.0 / tl.sqrt(tl.maximum(tl.sum(s2, axis=0) / N - d_mean * d_mean, 0.0) + eps)
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        ok = cols < N
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok,
                 eviction_policy="evict_first")


@triton.jit
def _ce_warp_rows(x_ptr, t_ptr, loss_ptr, M, V, stride_x, ignore_index,
                  ROWS: tl.constexpr, CH: tl.constexpr, W: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < M
    rows64 = rows.to(tl.int64)
    t = tl.load(t_ptr + rows, mask=row_ok, other=ignore_index)
    keep = row_ok & (t != ignore_index)
    xt = tl.load(x_ptr + rows64 * stride_x + tl.where(keep, t, 0), mask=keep, other=0.0).to(tl.float32)
    cols = tl.arange(0, CH)[:, None, None] * W + tl.arange(0, W)[None, None, :]
    ok = (cols < V) & row_ok[None, :, None]
    x = tl.load(x_ptr + rows64[None, :, None] * stride_x + cols, mask=ok, other=-float("inf"))
    x = x.to(tl.float32) * LOG2E
    m = tl.max(tl.max(x, axis=0), axis=1)  # axis 0 within a thread first, then the warp's lanes
    m = tl.where(m == -float("inf"), 0.0, m)
    s = tl.sum(tl.sum(tl.exp2(x - m[None, :, None]), axis=0), axis=1)
    loss = tl.where(keep, (m + tl.log2(s)) / LOG2E - xt, 0.0)
    tl.store(loss_ptr + rows, loss, mask=row_ok)


@triton.jit
def _ce_lanes(x_ptr, t_ptr, loss_ptr, V, stride_x, ignore_index, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
    t = tl.load(t_ptr + row)
    keep = t != ignore_index
    xt = tl.load(x_row + tl.where(keep, t, 0)).to(tl.float32)
    offs = tl.arange(0, BLOCK_N)
    m = tl.full([BLOCK_N], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_N], tl.float32)
    for start in tl.range(0, V, BLOCK_N, num_stages=NUM_STAGES):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < V, other=-float("inf")).to(tl.float32) * LOG2E
        up = x > m
        e = tl.exp2(tl.where(up, m - x, x - m))
        s = tl.where(up, s * e + 1.0, s + tl.where(x == -float("inf"), 0.0, e))
        m = tl.maximum(m, x)
    m_row = tl.max(m, axis=0)
    s_row = tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp2(m - m_row)), axis=0)
    tl.store(loss_ptr + row, tl.where(keep, (m_row + tl.log2(s_row)) / LOG2E - xt, 0.0))


# ---------------------------------------------------------------------------
# what is measured

SHAPES = {
    "softmax": [(4096, 32768), (2048, 65536), (1024, 131072), (512, 262144)],
    "layernorm": [(4096, 32768), (2048, 65536), (1024, 131072), (512, 262144)],
    "ce-short": [(131072, 1024), (65536, 2048), (32768, 4096)],
    "ce-long": [(32768, 4096), (8192, 16384), (4096, 32768), (2048, 65536), (512, 262144)],
    "rmsnorm": [(4096, 32768), (2048, 65536), (1024, 131072), (512, 262144)],
    "ce-config": [(131072, 1024), (65536, 2048), (32768, 4096), (8192, 16384), (4096, 32768), (2048, 65536),
                  (512, 262144)],
    "ce-config-long": [(8192, 16384), (4096, 32768), (2048, 65536), (512, 262144)],
}
QUICK_SHAPES = {"softmax": [(3, 300), (2, 1000)], "layernorm": [(3, 300), (2, 1000)],
                "ce-short": [(9, 256), (5, 512)], "ce-long": [(3, 1000)], "rmsnorm": [(3, 300)],
                "ce-config": [(9, 256), (3, 1000)], "ce-config-long": [(3, 1000)]}
# (BLOCK_N, num_warps, num_stages)
LANES = [(8192, 8, 3), (16384, 16, 3), (16384, 16, 2), (8192, 16, 3), (32768, 16, 2), (4096, 8, 3)]
CE_LANES = [(2048, 4, 3), (4096, 8, 3), (8192, 8, 3), (8192, 16, 3), (4096, 4, 3), (8192, 8, 2)]
WARP_ROWS = [1, 2, 4, 8]  # rows (= warps) a program
QUICK_LANES = [(128, 4, 2)]
# Call 2: the templates' own streamed kernels on one or two warps a row, where a reduction is shuffles
# within a warp and no barrier; and cross-entropy's CONFIG down to one warp (BLOCK_SIZE 1024: a row of
# 1024 a program, one warp: the "warp rows 1" of call 1).
FEW_WARPS = [(1024, 1, 3), (1024, 1, 4), (2048, 1, 3), (2048, 2, 3), (1024, 2, 3), (2048, 2, 4), (4096, 2, 3),
             (4096, 4, 3)]
CE_CONFIGS = [{"BLOCK_SIZE": b, "num_warps": w, "num_stages": s}
              for b in (512, 1024, 2048, 4096) for w in (1, 2, 4) for s in (1, 3)]
# Call 3: longer 16-bit rows (80-85% on every setting of call 2) on larger tiles and deeper pipelines.
CE_CONFIGS_LONG = [{"BLOCK_SIZE": b, "num_warps": w, "num_stages": s}
                   for (b, w, s) in ((8192, 4, 3), (8192, 8, 3), (8192, 8, 2), (16384, 8, 3), (16384, 16, 3),
                                     (4096, 4, 4), (4096, 8, 3), (4096, 2, 4), (2048, 2, 4))]


def variants(kind: str, T, x: torch.Tensor, quick: bool):
    """[(name, run(y_or_loss), config)] for one input, "today" and torch first; and the problem's
    (reference, output buffer, bytes moved)."""
    M, N = x.shape
    dev = x.device
    out = []
    if kind == "softmax":
        ref = torch.softmax(x.float(), -1)
        y = torch.empty_like(x)
        out.append(("today", lambda y: T.softmax(x, out=y), None))
        out.append(("torch", lambda y: y.copy_(torch.softmax(x, -1)), None))
        for (b, w, s) in QUICK_LANES if quick else LANES:
            def run(y, b=b, w=w, s=s):
                _softmax_lanes[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=b, NUM_STAGES=s,
                                     num_warps=w, num_stages=s)
            out.append((f"lanes {b}/{w}/{s}", run, {"BLOCK_N": b, "num_warps": w, "num_stages": s}))
        for (b, w, s) in QUICK_LANES if quick else FEW_WARPS:
            def run(y, b=b, w=w, s=s):
                T._softmax_streamed[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=b, NUM_STAGES=s,
                                          num_warps=w, num_stages=s)
            out.append((f"streamed {b}/{w}/{s}", run, {"BLOCK_N": b, "num_warps": w, "num_stages": s}))
        return out, ref, y, 2 * x.numel() * x.element_size()
    if kind == "rmsnorm":
        w_ = torch.rand(N, device=dev, dtype=x.dtype) + 0.5
        ref = T.rmsnorm_ref(x, w_).float()
        y = torch.empty_like(x)
        out.append(("today", lambda y: T.rmsnorm(x, w_, out=y), None))
        out.append(("torch", lambda y: y.copy_(torch.nn.functional.rms_norm(x, (N,), w_, T.EPS)), None))
        for (b, w, s) in QUICK_LANES if quick else FEW_WARPS:
            def run(y, b=b, w=w, s=s):
                T._rmsnorm_streamed[(M,)](x, w_, y, M, N, x.stride(0), y.stride(0), T.EPS, BLOCK_N=b,
                                          NUM_STAGES=s, num_warps=w, num_stages=s)
            out.append((f"streamed {b}/{w}/{s}", run, {"BLOCK_N": b, "num_warps": w, "num_stages": s}))
        return out, ref, y, 2 * x.numel() * x.element_size()
    if kind == "layernorm":
        w_ = torch.rand(N, device=dev, dtype=x.dtype) + 0.5
        b_ = torch.randn(N, device=dev, dtype=x.dtype)
        ref = torch.nn.functional.layer_norm(x.float(), (N,), w_.float(), b_.float(), T.EPS)
        y = torch.empty_like(x)
        out.append(("today", lambda y: T.layernorm(x, w_, b_, out=y), None))
        out.append(("torch", lambda y: y.copy_(torch.nn.functional.layer_norm(x, (N,), w_, b_, T.EPS)), None))
        for (b, w, s) in QUICK_LANES if quick else LANES:
            def run(y, b=b, w=w, s=s):
                _layernorm_lanes[(M,)](x, w_, b_, y, N, x.stride(0), y.stride(0), T.EPS, BLOCK_N=b,
                                       NUM_STAGES=s, num_warps=w, num_stages=s)
            out.append((f"lanes {b}/{w}/{s}", run, {"BLOCK_N": b, "num_warps": w, "num_stages": s}))
        for (b, w, s) in QUICK_LANES if quick else FEW_WARPS:
            def run(y, b=b, w=w, s=s):
                T._layernorm_streamed[(M,)](x, w_, b_, y, N, x.stride(0), y.stride(0), T.EPS, BLOCK_N=b,
                                            NUM_STAGES=s, num_warps=w, num_stages=s)
            out.append((f"streamed {b}/{w}/{s}", run, {"BLOCK_N": b, "num_warps": w, "num_stages": s}))
        return out, ref, y, 2 * x.numel() * x.element_size()
    # cross-entropy
    t = torch.randint(0, N, (M,), device=dev)
    t[::7] = T.IGNORE_INDEX
    ref = T.cross_entropy_ref(x, t).float()
    loss = torch.empty(M, device=dev, dtype=torch.float32)
    nbytes = x.numel() * x.element_size() + 12 * M
    out.append(("today", lambda l: T.cross_entropy(x, t, out=l), None))
    out.append(("torch", lambda l: l.copy_(torch.nn.functional.cross_entropy(
        x, t, reduction="none", ignore_index=T.IGNORE_INDEX)), None))
    if kind == "ce-short":
        width = 32 * max(1, 16 // x.element_size())  # 32 lanes x 16 bytes
        ch = triton.cdiv(triton.next_power_of_2(N), width)
        for rows in WARP_ROWS:
            def run(l, rows=rows):
                _ce_warp_rows[(triton.cdiv(M, rows),)](x, t, l, M, N, x.stride(0), T.IGNORE_INDEX, ROWS=rows,
                                                       CH=ch, W=width, num_warps=rows)
            out.append((f"warp rows {rows}", run, {"ROWS": rows, "CH": ch, "W": width}))
    elif kind.startswith("ce-config"):
        configs = CE_CONFIGS_LONG if kind == "ce-config-long" else CE_CONFIGS
        for cfg in configs[:2] if quick else configs:
            out.append(("config " + "/".join(str(v) for v in cfg.values()),
                        lambda l, cfg=cfg: T.cross_entropy(x, t, out=l, config=cfg), cfg))
    else:
        for (b, w, s) in QUICK_LANES if quick else CE_LANES:
            def run(l, b=b, w=w, s=s):
                _ce_lanes[(M,)](x, t, l, N, x.stride(0), T.IGNORE_INDEX, BLOCK_N=b, NUM_STAGES=s,
                                num_warps=w, num_stages=s)
            out.append((f"lanes {b}/{w}/{s}", run, {"BLOCK_N": b, "num_warps": w, "num_stages": s}))
    return out, ref, loss, nbytes


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--only", default="softmax,layernorm,ce-short,ce-long")
    p.add_argument("--dtypes", default="bf16,fp16,fp32")
    p.add_argument("--budget-s", type=float, default=300.0, help="stop timing new variants after this")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    started = time.time()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    gpu = device.on_gpu()
    dev = torch.device("cuda" if gpu else "cpu")
    timer = Timer(repeats=3, warmup_ms=10, rewarm_ms=5, rep_ms=15)
    copy = device.measured_copy_gbps(refresh=True) if gpu else None
    results = {"copy_gbps_start": copy, "device": device.detect(), "torch": torch.__version__,
               "triton": triton.__version__, "rows": [], "skipped": []}
    print(f"copy {copy} GB/s", flush=True)
    path = out_dir / "reduce_once.json"
    torch.manual_seed(0)
    for kind in args.only.split(","):
        T = templates.load("cross-entropy" if kind.startswith("ce") else kind)
        for dname in args.dtypes.split(","):
            for (M, N) in (QUICK_SHAPES if args.quick else SHAPES)[kind]:
                x = (torch.randn(M, N, device=dev) * 3).to(DTYPES[dname])
                found, ref, buf, nbytes = variants(kind, T, x, args.quick)
                for name, run, cfg in found:
                    row = {"kernel": kind, "shape": [M, N], "dtype": dname, "variant": name, "config": cfg}
                    if time.time() - started > args.budget_s:
                        results["skipped"].append(row)
                        continue
                    templates.check_and_time(row, run, buf, ref, nbytes, timer, copy, gpu)
                    results["rows"].append(row)
                    print(f"{kind} {M}x{N} {dname} {name}: {templates.figure(row)}", flush=True)
                del x, ref, buf, found
                path.write_text(json.dumps(results, indent=1))
    results["copy_gbps_end"] = device.measured_copy_gbps(refresh=True) if gpu else None
    results["wall_s"] = time.time() - started
    path.write_text(json.dumps(results, indent=1))
    print(f"copy at the end {results['copy_gbps_end']} GB/s; {len(results['skipped'])} variants skipped "
          f"(budget); done in {results['wall_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
