"""One-call config exploration on the GPU (first device call): which tile configs are fast, per kernel.

    python benchmarks/explore/compute_configs.py OUT_DIR

Times a fixed list of configs of each template at the shapes the bars are set on, beside torch, and
checks each config's output once (relative Frobenius error). Used to choose CONFIG and the autotune
candidates; the numbers that count are the ones `python benchmarks/sweep.py` prints.

Kept as run (first device call, commit 5c3ac30's templates): explore.log / explore.json beside it. The
MoE part refers to the torch-side alignment and SMALL_* keys that the routing kernels later replaced,
so it no longer runs against the current fused-moe template as is.
"""

import json
import os
import sys
import time

import torch
import triton

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)
from kgit import harness  # noqa: E402
from kgit.harness import device  # noqa: E402
import templates  # noqa: E402  (beside this file)


G = templates.load("gemm")
A = templates.load("flash-attention")
M = templates.load("fused-moe")
rows = []


def bench(fn):
    try:
        ms = triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")
        return ms
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:120]}"


def record(kernel, shape, name, ms, flops, err=None):
    r = {"kernel": kernel, "shape": shape, "config": name}
    if isinstance(ms, str):
        r["error"] = ms
        print(f"{kernel:6} {shape:32} {name:44} ERROR {ms[:100]}", flush=True)
    else:
        r.update(ms=ms, tflops=flops / ms / 1e9, err=err)
        print(f"{kernel:6} {shape:32} {name:44} {r['tflops']:7.1f} TFLOP/s  err={err}", flush=True)
    rows.append(r)


def relerr(out, ref):
    return float((out.float() - ref).norm() / ref.norm())


def explore_gemm():
    base = {**G.CONFIG, "AUTOTUNE": 0}
    configs = {
        "p128x256x64 s3 w8 flat": {},
        "p128x256x64 s3 w8 noflat": {"FLATTEN": 0},
        "p128x256x64 s3 w8 flat WS": {"WARP_SPECIALIZE": 1},
        "n128x256x64 s3 w8": {"PERSISTENT": 0},
        "n128x256x64 s4 w8": {"PERSISTENT": 0, "num_stages": 4},
        "p128x256x64 s4 w8 flat": {"num_stages": 4},
        "p256x128x64 s3 w8 flat": {"BLOCK_M": 256, "BLOCK_N": 128},
        "p128x128x64 s4 w8 flat": {"BLOCK_N": 128, "num_stages": 4},
        "n128x128x64 s4 w4": {"BLOCK_N": 128, "num_stages": 4, "num_warps": 4, "PERSISTENT": 0},
        "p128x256x64 s3 w8 G16": {"GROUP_M": 16},
        "ptr128x256x64 s3 w8": {"USE_TMA": 0},
    }
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 2048, 2048), (1024, 1024, 1024),
              (8192, 1024, 8192), (4096, 4096, 1000), (4000, 4000, 4000)]
    for (m, n, k) in shapes:
        a = harness.rand((m, k), torch.bfloat16, "cuda")
        b = harness.rand((k, n), torch.bfloat16, "cuda")
        c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
        ref = G.reference(a, b) if m * n * k <= 4096 ** 3 else None
        flops = 2.0 * m * n * k
        label = f"{m}x{n}x{k}"
        record("gemm", label, "torch.matmul", bench(lambda: torch.matmul(a, b, out=c)), flops)
        for name, extra in configs.items():
            cfg = {**base, **extra}
            c.fill_(float("nan"))
            try:
                G.gemm(a, b, out=c, config=cfg)
                torch.cuda.synchronize()
                err = relerr(c, ref) if ref is not None else None
            except Exception as exc:
                record("gemm", label, name, f"{type(exc).__name__}: {str(exc)[:120]}", flops)
                continue
            record("gemm", label, name, bench(lambda: G.gemm(a, b, out=c, config=cfg)), flops, err)
        del a, b, c, ref


def explore_attention():
    configs = {
        "128x128 w8 s3": {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3},
        "128x128 w8 s2": {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 2},
        "128x64 w4 s3": {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
        "128x64 w8 s3": {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3},
        "128x64 w4 s4": {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4},
        "64x64 w4 s3": {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
        "128x128 w4 s3": {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 3},
    }
    for D in (64, 128):
        for S in (4096, 16384):
            for causal in (False, True):
                H = 16 if D == 128 else 32
                B = max(1, 16 * 16384 // S // 16)
                q, k, v = (harness.rand((B, H, S, D), torch.bfloat16, "cuda")
                           for _ in range(3))
                o = torch.empty_like(q)
                ref = A.reference(q[0, :1], k[0, :1], v[0, :1], causal)
                flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
                label = f"B{B}H{H}S{S}D{D}{'c' if causal else ''}"
                record("attn", label, "sdpa-flash", bench(lambda: A.torch_sdpa_flash(q, k, v, causal)), flops)
                for name, cfg in configs.items():
                    o.fill_(float("nan"))
                    try:
                        A.flash_attention(q, k, v, causal, out=o, config={**cfg, "AUTOTUNE": 0})
                        torch.cuda.synchronize()
                        err = relerr(o[0, :1], ref)
                    except Exception as exc:
                        record("attn", label, name, f"{type(exc).__name__}: {str(exc)[:120]}", flops)
                        continue
                    record("attn", label, name,
                           bench(lambda: A.flash_attention(q, k, v, causal, out=o, config={**cfg, "AUTOTUNE": 0})),
                           flops, err)
                del q, k, v, o, ref
                torch.cuda.empty_cache()


def explore_moe():
    configs = {
        "default": {},
        "gu BN64": {"BLOCK_N": 64},
        "s3": {"num_stages": 3, "DOWN_num_stages": 3},
        "down BN128": {"DOWN_BLOCK_N": 128},
        "G16": {"GROUP_M": 16},
        "BK128 s3": {"BLOCK_K": 128, "num_stages": 3, "DOWN_num_stages": 3},
        "small BM32 w4": {"SMALL_BLOCK_M": 32},
        "small BM64 w8": {"SMALL_num_warps": 8},
        "small off (BM128)": {"SMALL_ROWS_PER_EXPERT": 0},
    }
    for (T, E, k, HD, I) in [(4096, 8, 2, 4096, 14336), (1024, 64, 6, 2048, 1408)]:
        x = harness.rand((T, HD), torch.bfloat16, "cuda")
        logits = harness.rand((T, E), torch.float32, "cuda")
        w13 = harness.rand((E, 2 * I, HD), torch.bfloat16, "cuda", scale=HD ** -0.5)
        w2 = harness.rand((E, HD, I), torch.bfloat16, "cuda", scale=I ** -0.5)
        out = torch.empty((T, HD), device="cuda", dtype=torch.bfloat16)
        ref = M.reference(x, w13, w2, logits, k)
        flops = 6.0 * T * k * HD * I
        label = f"T{T}E{E}k{k}H{HD}I{I}"
        xr = harness.rand((T * k, HD), torch.bfloat16, "cuda")
        hr = harness.rand((T * k, I), torch.bfloat16, "cuda")
        record("moe", label, "torch-expert-loop", bench(lambda: M.torch_expert_loop(x, w13, w2, logits, k)), flops)
        record("moe", label, "dense", bench(lambda: M.dense_equivalent(xr, w13[0], hr, w2[0])), flops)
        for name, cfg in configs.items():
            out.fill_(float("nan"))
            try:
                M.fused_moe(x, w13, w2, logits, k, out=out, config=cfg)
                torch.cuda.synchronize()
                err = relerr(out, ref)
            except Exception as exc:
                record("moe", label, name, f"{type(exc).__name__}: {str(exc)[:120]}", flops)
                continue
            record("moe", label, name, bench(lambda: M.fused_moe(x, w13, w2, logits, k, out=out, config=cfg)), flops, err)
        # where the time goes: routing + alignment alone
        record("moe", label, "align only", bench(lambda: M.align_by_expert(M.route(logits, k)[1], E, 128)), flops)
        del x, w13, w2, ref, xr, hr
        torch.cuda.empty_cache()


if __name__ == "__main__":
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    t0 = time.time()
    print(device.detect()["name"], torch.__version__, triton.__version__, flush=True)
    for fn in (explore_gemm, explore_attention, explore_moe):
        t = time.time()
        try:
            fn()
        except Exception as exc:
            print(f"{fn.__name__} crashed: {type(exc).__name__}: {exc}", flush=True)
        print(f"# {fn.__name__}: {time.time() - t:.0f}s", flush=True)
        with open(os.path.join(out_dir, "explore.json"), "w") as f:
            json.dump(rows, f, indent=1)
    print(f"# total {time.time() - t0:.0f}s")
