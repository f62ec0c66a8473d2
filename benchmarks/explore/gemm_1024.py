"""GEMM at 1024^3: more work in flight per SM (issue 15, session 17).

    python benchmarks/explore/gemm_1024.py [--out DIR]      (GPU, about a minute)

Why: 1024^3 reads 0.90-0.94x cuBLAS in bf16 run after run (bar 0.95). Session 17's profile
(experiments/sweep-h200-session17/call5-profiles/gemm-*.txt) finds neither the L2 (36% of its peak
throughput; cuBLAS 31%) nor the tensor cores (SM 33%) busy: the kernel is latency-bound. Today's
candidates put one 4-warp program of 64x128 on an SM (128 tiles), whose prologue fills its pipeline alone.
cuBLAS runs 128 programs of three warpgroups (a producer, two consumers).

Hypotheses, each a variant here:
- `8 warps`: the same 64x128 tile on two warpgroups (each issues its own wgmma on half the columns);
  prediction 0-5% faster.
- `BLOCK_K 32`: a finer pipeline, twice the stages for the same shared memory, starts computing sooner;
  prediction 0-4%.
- `split-K`: two programs a tile, each over half of K (256 programs, two an SM), the second to finish
  adds the first's fp32 partial (through L2, a flag a tile) and stores: twice the programs in flight;
  prediction 5-12% faster, unless the exchange's round trip eats it.
Each variant is checked against an fp32 product, then timed by the harness's Timer (L2 cleared by a read,
as the sweep times) and replayed from a CUDA graph (no host), beside torch.matmul, in two rounds.
Outcome (experiments/sweep-h200-session17/call6-gemm-1024/), all three falsified. Under the graph, bf16 /
fp16: today's 64x128x64 on 5 stages 6.33-6.44 / 6.35-6.43 us against cuBLAS's 5.39-5.42 / 5.38-5.45;
8 warps 6.77-7.35 us; BLOCK_K 32 6.48-6.71; split-K 10.4-10.8 (the Timer: 150-153 TFLOP/s against
215-221). The harness's figures: 0.93-0.95x torch with today's tile in this run.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)
from kgit.harness.timing import Timer, spread_pct  # noqa: E402

T = templates.load("gemm")
_tile_coords = T._tile_coords
SIZE = 1024


@triton.jit
def splitk_kernel(a_ptr, b_ptr, c_ptr, part_ptr, flag_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Programs 2t and 2t+1 share tile t, each over half of K. Whichever finishes second (the flag's old
    # value says) adds the other's fp32 partial and stores C; the first leaves its partial and goes.
    tile = tl.program_id(0) // 2
    half = tl.program_id(0) % 2
    pid_m, pid_n = _tile_coords(tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_half = K // 2
    offs_k = half * k_half + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, k_half, BLOCK_K):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    tile_offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    mine = part_ptr + tl.program_id(0).to(tl.int64) * BLOCK_M * BLOCK_N + tile_offs
    tl.store(mine, acc)  # both store: the second's store is wasted, but neither ever waits
    seen = tl.atomic_add(flag_ptr + tile, 1, sem="acq_rel")
    if seen == 1:  # second to finish: the other's partial is visible (its release, our acquire)
        other = tl.load(part_ptr + (2 * tile + 1 - half).to(tl.int64) * BLOCK_M * BLOCK_N + tile_offs,
                        cache_modifier=".cg")
        tl.atomic_xchg(flag_ptr + tile, 0, sem="relaxed")  # reset for the next launch
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
        tl.store(c_ptrs, (acc + other).to(c_ptr.dtype.element_ty))


def splitk(a, b, c, part, flags, cfg):
    tiles = (SIZE // cfg["BLOCK_M"]) * (SIZE // cfg["BLOCK_N"])
    splitk_kernel[(2 * tiles,)](a, b, c, part, flags, SIZE, SIZE, SIZE, a.stride(0), b.stride(0), c.stride(0),
                               cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], 8, num_warps=cfg["num_warps"],
                               num_stages=cfg["num_stages"])


def ptr(bm, bn, bk, warps, stages):
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages, PERSISTENT=0, USE_TMA=0,
                AUTOTUNE=0)


VARIANTS = [  # (label, kind, config)
    ("today 64x128x64 s5", "template", ptr(64, 128, 64, 4, 5)),
    ("today 64x128x128 s3", "template", ptr(64, 128, 128, 4, 3)),
    ("8 warps 64x128x64 s5", "template", ptr(64, 128, 64, 8, 5)),
    ("8 warps 64x128x64 s6", "template", ptr(64, 128, 64, 8, 6)),
    ("8 warps 128x64x64 s5", "template", ptr(128, 64, 64, 8, 5)),
    ("BLOCK_K 32 s8", "template", ptr(64, 128, 32, 4, 8)),
    ("BLOCK_K 32 s10", "template", ptr(64, 128, 32, 4, 10)),
    ("split-K 64x128x64 s3", "splitk", ptr(64, 128, 64, 4, 3)),
    ("split-K 64x128x64 s4", "splitk", ptr(64, 128, 64, 4, 4)),
    ("split-K 64x128x64 8w s4", "splitk", ptr(64, 128, 64, 8, 4)),
    ("split-K 128x128x64 8w s4", "splitk", ptr(128, 128, 64, 8, 4)),
]


def graph_us(fn, calls=20):
    """Microseconds a call when `calls` calls replay from one CUDA graph (no host work; L2 warm)."""
    return triton.testing.do_bench_cudagraph(lambda: [fn() for _ in range(calls)], rep=50) / calls * 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    timer = Timer(repeats=3)
    flops = 2 * SIZE ** 3
    rows = []
    for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        a = torch.randn(SIZE, SIZE, device="cuda").to(dtype)
        b = torch.randn(SIZE, SIZE, device="cuda").to(dtype)
        c = torch.empty(SIZE, SIZE, device="cuda", dtype=dtype)
        part = torch.empty(2 * SIZE * SIZE, device="cuda", dtype=torch.float32)
        flags = torch.zeros(SIZE, device="cuda", dtype=torch.int32)
        ref = T.reference(a, b)
        runs = [("torch", None, lambda: torch.matmul(a, b, out=c))]
        for label, kind, cfg in VARIANTS:
            if kind == "template":
                runs.append((label, cfg, lambda cfg=cfg: T.gemm(a, b, out=c, config=cfg)))
            else:
                runs.append((label, cfg, lambda cfg=cfg: splitk(a, b, c, part, flags, cfg)))
        for rnd in range(2):
            for label, cfg, fn in runs:
                row = {"dtype": dname, "variant": label, "config": cfg, "round": rnd}
                try:
                    c.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    row["rel_err"] = ((c.float() - ref).norm() / ref.norm()).item()
                    if not row["rel_err"] < 1e-2:
                        row["error"] = f"wrong output: relative error {row['rel_err']:.3g}"
                    else:
                        t = timer.times_ms(fn, on_gpu=True)
                        row["tflops"] = flops / statistics.median(t) * 1e-9
                        row["spread_pct"] = spread_pct(t)
                        row["graph_us"] = graph_us(fn)
                except Exception as e:  # a variant that does not compile or fit is a result too
                    row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
                rows.append(row)
                print(f"{dname} round {rnd} {label}: " + (row.get("error") or
                      f"{row['tflops']:.1f} TFLOP/s ±{row['spread_pct']:.1f}%, graph {row['graph_us']:.2f} us"),
                      flush=True)
        (out / "gemm_1024.json").write_text(json.dumps({"rows": rows}, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
