"""Issue 15's near misses at rows of 4096-32768 (layernorm, rmsnorm) and rotary at 16384x64x128.

    python benchmarks/explore/norm_near_misses.py [--out DIR] [--only layernorm,rmsnorm,rotary]
    python benchmarks/explore/norm_near_misses.py --registers     # no GPU: compile for sm_90, print registers

Hypotheses (experiments/sweep-h200-2026-12-01/session9-near-misses/ has the outcome):
  layernorm whole rows (_layernorm_row, 16 warps) at 16384 fp32 read 84% where softmax and rmsnorm read
  96%: the extra is w and b, re-read by every row, and held in registers with x (one program an SM).
  Variants: `late` (w and b loads masked by rstd, so they cannot be hoisted above the reductions),
  `cg` (x past L1, w and b kept in it, y streamed), `cg-w-only` (x and b past L1, w alone kept: at
  32768 fp32 w and b are 256 KB, more than L1), `w32` (32 warps), and `rows-persist` (the template's
  _layernorm_rows as a persistent one-row tile: w and b loaded once a program). At 32768x4096 16-bit,
  other ROW_PIPELINED tiles (`rp-*`; ROW_PIPELINED left the template in session 16, so these need the
  template of their day).
  rmsnorm at 32768 16-bit: `late`, `cg`, `w32`, and the row kept in 16 bits (`keep16`).
  rotary at H=64: two programs a token (BLOCK_H 32) with program_id(0) over tokens, so the programs
  resident at once read every other 8 KB (16-bit) of x: `flat` puts the head block fastest in a 1-D
  grid, as at H=32.

Every output is checked against torch first; GB/s a do_bench median (L2 cleared) of 3 repeats with its
spread, % of the copy measured at the start and end, and the registers, spills and shared memory the
device compiled. Writes DIR/norm_near_misses.json. --registers prints the same for sm_90 from this
machine's Triton wheel (its ptxas; the counts differ from another Triton's).
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
import templates  # noqa: E402  (beside this file)

LN_SHAPES = [(32768, 4096), (8192, 16384), (4096, 32768)]
RMS_SHAPES = [(8192, 16384), (4096, 32768)]
ROPE_SHAPES = [(16384, 64, 128), (32768, 32, 128)]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@triton.jit
def _ln_row(x_ptr, w_ptr, b_ptr, y_ptr, N, stride_x, stride_y, eps, BLOCK_N: tl.constexpr,
            LATE: tl.constexpr, CG: tl.constexpr):
    # CG 0: plain loads (as _layernorm_row); 1: x skips L1 (.cg), w and b evict_last, y streamed (.cs), so
    # that L1 keeps w and b across rows; 2: as 1 with b skipping L1 too, so that L1 keeps w alone (fp32
    # 32768: w and b are 256 KB, more than L1; w alone is 128 KB)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    ok = cols < N
    if CG > 0:
        x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0, cache_modifier=".cg").to(tl.float32)
    else:
        x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(ok, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)
    wb_ok = ok
    if LATE:
        wb_ok = cols < tl.where(rstd > 0.0, N, 0)  # always N; the loads cannot be hoisted above the reductions
    if CG > 0:
        w = tl.load(w_ptr + cols, mask=wb_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        if CG == 2:
            b = tl.load(b_ptr + cols, mask=wb_ok, other=0.0, cache_modifier=".cg").to(tl.float32)
        else:
            b = tl.load(b_ptr + cols, mask=wb_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + row * stride_y + cols, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok,
                 cache_modifier=".cs")
    else:
        w = tl.load(w_ptr + cols, mask=wb_ok, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=wb_ok, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_y + cols, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _rms_row(x_ptr, w_ptr, y_ptr, N, stride_x, stride_y, eps, BLOCK_N: tl.constexpr, LATE: tl.constexpr,
             KEEP16: tl.constexpr, CG: tl.constexpr):
    # CG 1: x skips L1 (.cg), w evict_last, y streamed (.cs): L1 keeps w across rows
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    ok = cols < N
    if CG:
        x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0, cache_modifier=".cg")
    else:
        x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0)
    if not KEEP16:
        x = x.to(tl.float32)
    w_ok = ok
    if LATE:
        xf = x.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(xf * xf, axis=0) / N + eps)
        w_ok = cols < tl.where(rstd > 0.0, N, 0)
    if CG:
        w = tl.load(w_ptr + cols, mask=w_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    else:
        w = tl.load(w_ptr + cols, mask=w_ok, other=0.0).to(tl.float32)
    if not LATE:
        xf = x.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(xf * xf, axis=0) / N + eps)
    y = (x.to(tl.float32) * rstd * w).to(y_ptr.dtype.element_ty)
    if CG:
        tl.store(y_ptr + row * stride_y + cols, y, mask=ok, cache_modifier=".cs")
    else:
        tl.store(y_ptr + row * stride_y + cols, y, mask=ok)


@triton.jit
def _rope_flat(x_ptr, cos_ptr, sin_ptr, y_ptr, T, H, stride_xt, stride_xh, stride_yt, stride_yh, stride_ct,
               HALF: tl.constexpr, HALF_POW2: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr,
               N_HB: tl.constexpr):
    pid = tl.program_id(0)
    toks = (pid // N_HB) * BLOCK_T + tl.arange(0, BLOCK_T)
    heads = (pid % N_HB) * BLOCK_H + tl.arange(0, BLOCK_H)
    d = tl.arange(0, HALF_POW2)
    tok_ok = toks < T
    cs_ok = tok_ok[:, None] & (d[None, :] < HALF)
    cs_off = toks.to(tl.int64)[:, None] * stride_ct + d[None, :]
    c = tl.load(cos_ptr + cs_off, mask=cs_ok, other=0.0).to(tl.float32)[:, None, :]
    s = tl.load(sin_ptr + cs_off, mask=cs_ok, other=0.0).to(tl.float32)[:, None, :]
    ok = cs_ok[:, None, :] & (heads < H)[None, :, None]
    t64 = toks.to(tl.int64)[:, None, None]
    h64 = heads.to(tl.int64)[None, :, None]
    x_off = t64 * stride_xt + h64 * stride_xh + d[None, None, :]
    y_off = t64 * stride_yt + h64 * stride_yh + d[None, None, :]
    x1 = tl.load(x_ptr + x_off, mask=ok, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + x_off + HALF, mask=ok, other=0.0).to(tl.float32)
    ty = y_ptr.dtype.element_ty
    tl.store(y_ptr + y_off, (x1 * c - x2 * s).to(ty), mask=ok)
    tl.store(y_ptr + y_off + HALF, (x2 * c + x1 * s).to(ty), mask=ok)


def _launch(kernel, grid, args, consts, warps, stages=1, maxnreg=None, found=None, key=None):
    opts = {"num_warps": warps, "num_stages": stages}
    if maxnreg:
        opts["maxnreg"] = maxnreg
    k = kernel[grid](*args, **consts, **opts)
    if found is not None and key not in found:
        found[key] = k
    return k


def layernorm_variants(t, x, w, b, y, sms, found):
    M, N = x.shape
    B = triton.next_power_of_2(N)
    base = (x, w, b, y, N, x.stride(0), y.stride(0), t.EPS)

    def row(name, late, cg, warps=16, maxnreg=None):
        return name, lambda: (_launch(_ln_row, (M,), base, {"BLOCK_N": B, "LATE": late, "CG": cg}, warps,
                                      maxnreg=maxnreg, found=found, key=name), y)[1]

    def rows_kernel(name, warps, stages):
        # the template's _layernorm_rows, one row a tile, persistent: w and b loaded once a program
        args = (x, w, b, y, M, N, x.stride(0), y.stride(0), t.EPS)
        return name, lambda: (_launch(t._layernorm_rows, (min(M, sms),), args,
                                      {"BLOCK_N": B, "ROWS": 1, "NUM_STAGES": stages}, warps, stages, found=found,
                                      key=name), y)[1]

    def pipelined(name, cfg):
        # 16-bit rows of 4096: the launcher's ROW_PIPELINED swapped for cfg during the call
        def fn():
            saved, t.ROW_PIPELINED = t.ROW_PIPELINED, cfg
            try:
                return t.layernorm(x, w, b, out=y)
            finally:
                t.ROW_PIPELINED = saved
        return name, fn

    if N <= 4096:
        return dict([("today", lambda: t.layernorm(x, w, b, out=y)),
                     *[pipelined(f"rp-{bs}-w{nw}-s{ns}",
                                 {"BLOCK_SIZE": bs, "num_warps": nw, "num_stages": ns, "PERSISTENT": 1})
                       for bs, nw, ns in ((4096, 4, 3), (4096, 8, 3), (8192, 8, 3), (8192, 4, 4), (16384, 8, 3))]])
    out = dict([("today", lambda: t.layernorm(x, w, b, out=y)),
                row("late", 1, 0), row("cg", 0, 1), row("cg-w-only", 0, 2),
                row("w32", 0, 0, 32), row("cg-w32", 0, 1, 32), row("cg-w-only-w32", 0, 2, 32)])
    if N <= 16384:
        out.update([rows_kernel("rows-persist-w32-s2", 32, 2), rows_kernel("rows-persist-w16-s2", 16, 2)])
    return out


def rmsnorm_variants(t, x, w, y, found):
    M, N = x.shape
    B = triton.next_power_of_2(N)
    base = (x, w, y, N, x.stride(0), y.stride(0), t.EPS)

    def row(name, late, keep16, cg, warps=16, maxnreg=None):
        return name, lambda: (_launch(_rms_row, (M,), base, {"BLOCK_N": B, "LATE": late, "KEEP16": keep16, "CG": cg},
                                      warps,
                                      maxnreg=maxnreg, found=found, key=name), y)[1]

    out = dict([("today", lambda: t.rmsnorm(x, w, out=y)), row("late", 1, 0, 0), row("cg", 0, 0, 1),
                row("w32", 0, 0, 0, 32), row("cg-w32", 0, 0, 1, 32), row("keep16-late-w32", 1, 1, 0, 32)])
    return out


def rope_variants(t, x, c, s, y, found):
    T, H, D = x.shape

    def flat(name, bt, bh, warps):
        bh = min(bh, triton.next_power_of_2(H))
        n_hb = triton.cdiv(H, bh)
        args = (x, c, s, y, T, H, x.stride(0), x.stride(1), y.stride(0), y.stride(1), c.stride(0))
        consts = {"HALF": D // 2, "HALF_POW2": max(triton.next_power_of_2(D // 2), 2), "BLOCK_T": bt,
                  "BLOCK_H": bh, "N_HB": n_hb}
        return name, lambda: (_launch(_rope_flat, (triton.cdiv(T, bt) * n_hb,), args, consts, warps,
                                      found=found, key=name), y)[1]

    return dict([("today", lambda: t.rope(x, c, s, out=y)), flat("flat-h32", 1, 32, 4),
                 flat("flat-h64-8w", 1, 64, 8), flat("flat-t2-h32", 2, 32, 8)])


def registers(compiled):
    try:
        compiled._init_handles()
        return compiled.n_regs, compiled.n_spills, compiled.metadata.shared
    except Exception:
        return None


def measure(args) -> None:
    from kgit.harness import device
    from kgit.harness.timing import Timer, spread_pct

    args.out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    timer = Timer(repeats=3)
    copy_before = device.measured_copy_gbps(refresh=True)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []

    def run(kernel, shape, name, fns, reference, nbytes, tol):
        expected = reference()
        for variant, fn in fns.items():
            row = {"kernel": kernel, "shape": shape, "dtype": name, "variant": variant}
            try:
                y = fn()
                y.fill_(float("nan"))
                error = float((fn().float() - expected).abs().max())
                row["max_error"] = error
                if error <= tol:
                    gbps = [nbytes / (ms * 1e-3) / 1e9 for ms in timer.times_ms(fn, on_gpu=True)]
                    row.update(gbps=statistics.median(gbps), spread_pct=spread_pct(gbps))
            except Exception as exc:  # one variant failing to compile must not lose the rest
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            row["registers"] = registers(found[variant]) if variant in found else None
            rows.append(row)
            print(kernel, shape, name, variant, f"{row.get('gbps', 0):.0f} GB/s ±{row.get('spread_pct', 0):.1f}%",
                  f"err {row.get('max_error', -1):.1e}", f"regs {row['registers']}", row.get("error", ""), flush=True)

    tol = {"fp32": 1e-3, "fp16": 0.02, "bf16": 0.13}
    if "layernorm" in only:
        t = templates.load("layernorm")
        for M, N in LN_SHAPES:
            for name, dtype in DTYPES.items():
                if N <= 4096 and name == "fp32":
                    continue  # 97% of copy already
                torch.manual_seed(0)
                x = torch.randn(M, N, device="cuda", dtype=dtype)
                w = torch.randn(N, device="cuda", dtype=dtype)
                b = torch.randn(N, device="cuda", dtype=dtype)
                y = torch.empty_like(x)
                found = {}
                ref = lambda: torch.nn.functional.layer_norm(x.float(), (N,), w.float(), b.float(), t.EPS)  # noqa: E731
                run("layernorm", f"{M}x{N}", name, layernorm_variants(t, x, w, b, y, sms, found), ref,
                    2 * x.numel() * x.element_size(), tol[name] * 8)
    if "rmsnorm" in only:
        t = templates.load("rmsnorm")
        for M, N in RMS_SHAPES:
            for name, dtype in DTYPES.items():
                if name == "fp32":
                    continue
                torch.manual_seed(0)
                x = torch.randn(M, N, device="cuda", dtype=dtype)
                w = torch.randn(N, device="cuda", dtype=dtype)
                y = torch.empty_like(x)
                found = {}
                ref = lambda: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + t.EPS)  # noqa: E731
                               * w.float())
                run("rmsnorm", f"{M}x{N}", name, rmsnorm_variants(t, x, w, y, found), ref,
                    2 * x.numel() * x.element_size(), tol[name] * 8)
    if "rotary" in only:
        t = templates.load("rotary-embedding")
        for T, H, D in ROPE_SHAPES:
            for name, dtype in DTYPES.items():
                torch.manual_seed(0)
                x = torch.randn(T, H, D, device="cuda", dtype=dtype)
                ang = torch.rand(T, D // 2, device="cuda") * 6.28
                c, s = ang.cos().to(dtype), ang.sin().to(dtype)
                y = torch.empty_like(x)
                found = {}
                ref = lambda: t.rope_ref(x, c, s).float()  # noqa: E731
                run("rotary", f"{T}x{H}x{D}", name, rope_variants(t, x, c, s, y, found), ref,
                    2 * x.numel() * x.element_size() + 2 * c.numel() * c.element_size(), tol[name])
    copy_after = device.measured_copy_gbps(refresh=True)
    copy = statistics.mean([copy_before, copy_after])
    for row in rows:
        if "gbps" in row:
            row["pct_of_copy"] = 100 * row["gbps"] / copy
    (args.out / "norm_near_misses.json").write_text(json.dumps(
        {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
         "copy_gbps": [copy_before, copy_after], "rows": rows}, indent=1))
    print(f"copy {copy_before:.0f} / {copy_after:.0f} GB/s")
    for row in rows:
        print(f"{row['kernel']} {row['shape']} {row['dtype']} {row['variant']}: "
              f"{row.get('pct_of_copy', 0):.1f}% of copy ±{row.get('spread_pct', 0):.1f}, "
              f"registers {row['registers']}")


def offline_registers() -> None:
    """Registers, spills and shared memory of each layernorm/rmsnorm variant compiled for sm_90 here
    (no GPU: the Triton wheel's ptxas; cuobjdump reads the cubin)."""
    import re
    import subprocess
    import tempfile

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    bindir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    target = GPUTarget("cuda", 90, 32)

    def usage(fn, sig, consts, warps, stages=1, maxnreg=None):
        opts = {"num_warps": warps, "num_stages": stages}
        if maxnreg:
            opts["maxnreg"] = maxnreg
        sig = dict(sig, **{k: "constexpr" for k in consts})
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=target, options=opts)
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(k.asm["cubin"])
            f.flush()
            text = subprocess.run([str(bindir / "cuobjdump"), "-res-usage", f.name], capture_output=True,
                                  text=True).stdout
        m = re.search(r"REG:(\d+) STACK:(\d+)", text)
        return f"regs {m.group(1)} stack {m.group(2)} shared {k.metadata.shared}" if m else text

    ln = templates.load("layernorm")
    rms = templates.load("rmsnorm")
    for dt in ("fp32", "bf16"):
        p = f"*{dt}"
        s_row = {"x_ptr": p, "w_ptr": p, "b_ptr": p, "y_ptr": p, "N": "i32", "stride_x": "i32", "stride_y": "i32",
                 "eps": "fp32"}
        s_rows = {"x_ptr": p, "w_ptr": p, "b_ptr": p, "y_ptr": p, "M": "i32", "N": "i32", "stride_x": "i32",
                  "stride_y": "i32", "eps": "fp32"}
        s_rms = {"x_ptr": p, "w_ptr": p, "y_ptr": p, "N": "i32", "stride_x": "i32", "stride_y": "i32", "eps": "fp32"}
        for N in (16384, 32768):
            print("layernorm", dt, N, "today", usage(ln._layernorm_row, s_row, {"BLOCK_N": N, "W_IN_L1": 0}, 16))
            for name, late, cg, warps in (("late", 1, 0, 16), ("cg", 0, 1, 16), ("cg-w-only", 0, 2, 16),
                                          ("w32", 0, 0, 32), ("cg-w32", 0, 1, 32), ("cg-w-only-w32", 0, 2, 32)):
                print("layernorm", dt, N, name, usage(_ln_row, s_row, {"BLOCK_N": N, "LATE": late, "CG": cg}, warps))
            if N <= 16384:
                for warps in (32, 16):
                    print("layernorm", dt, N, f"rows-persist-w{warps}-s2",
                          usage(ln._layernorm_rows, s_rows, {"BLOCK_N": N, "ROWS": 1, "NUM_STAGES": 2}, warps, 2))
            print("rmsnorm", dt, N, "today", usage(rms._rmsnorm_row, s_rms, {"BLOCK_N": N}, 16))
            for name, late, keep, cg, warps in (("late", 1, 0, 0, 16), ("cg", 0, 0, 1, 16), ("w32", 0, 0, 0, 32),
                                                ("cg-w32", 0, 0, 1, 32), ("keep16-late-w32", 1, 1, 0, 32)):
                print("rmsnorm", dt, N, name,
                      usage(_rms_row, s_rms, {"BLOCK_N": N, "LATE": late, "KEEP16": keep, "CG": cg}, warps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--only", default="layernorm,rmsnorm,rotary")
    parser.add_argument("--registers", action="store_true", help="compile for sm_90 here and print registers")
    args = parser.parse_args()
    if args.registers:
        offline_registers()
    else:
        measure(args)


if __name__ == "__main__":
    main()
