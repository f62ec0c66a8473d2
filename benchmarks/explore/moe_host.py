"""Is part of the fused MoE's gap to a dense GEMM the host? (issue 15)

    python benchmarks/explore/moe_host.py [--out DIR]

At the Mixtral shape the sweep timed fused_moe at 4.88 ms (591 TFLOP/s, 83.9% of the dense GEMM pair),
while ncu's durations of its kernels add up to 4.45 ms (gate/up 2.85, down 1.52, the gather 0.03, routing
and alignment 0.01, the sum over k 0.04: experiments/sweep-h200-session13/call9-profiles/). A call
launches six kernels and builds four descriptors and five tensors in Python; the first three kernels
take the GPU about 40 us, so a host slower than that leaves the GPU idle before the GEMMs, inside the
timed region. Prediction: the host takes 150-400 us a call; a CUDA graph of the call (no host work)
reads 0.2-0.4 ms faster than the plain call, about 88-92% of the dense pair, and the dense pair's own
two launches lose nothing to the host.
Per dtype: the host's microseconds a call (calls enqueued back to back), do_bench's median of the call,
and do_bench_cudagraph's, for fused_moe and for the dense GEMM pair of the same work.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import templates  # noqa: E402  (beside this file)

T, E, K, HD, I = 4096, 8, 2, 4096, 14336  # Mixtral


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    M = templates.load("fused-moe")
    flops = 6.0 * T * K * HD * I
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        torch.manual_seed(0)
        x = torch.randn(T, HD, device="cuda", dtype=dtype)
        w13 = torch.randn(E, 2 * I, HD, device="cuda", dtype=dtype) / HD ** 0.5
        w2 = torch.randn(E, HD, I, device="cuda", dtype=dtype) / I ** 0.5
        logits = torch.randn(T, E, device="cuda")
        o = torch.empty(T, HD, device="cuda", dtype=dtype)
        x_rep = torch.randn(T * K, HD, device="cuda", dtype=dtype)
        h_rep = torch.randn(T * K, I, device="cuda", dtype=dtype)
        calls = {"fused_moe": lambda: M.fused_moe(x, w13, w2, logits, K, out=o),
                 "dense pair": lambda: M.dense_equivalent(x_rep, w13[0], h_rep, w2[0])}
        for name, fn in calls.items():
            fn()  # compile and autotune
            torch.cuda.synchronize()
            row = {"dtype": str(dtype), "call": name, "host_us": templates.host_us_per_call(fn, 50)}
            plain = [triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") for _ in range(3)]
            graph = [triton.testing.do_bench_cudagraph(fn, rep=200, return_mode="median") for _ in range(3)]
            row.update(plain_ms=statistics.median(plain), graph_ms=statistics.median(graph),
                       plain_spread_pct=100 * (max(plain) - min(plain)) / statistics.median(plain),
                       graph_spread_pct=100 * (max(graph) - min(graph)) / statistics.median(graph))
            row["plain_tflops"] = flops / row["plain_ms"] * 1e-9
            row["graph_tflops"] = flops / row["graph_ms"] * 1e-9
            rows.append(row)
            print(f"{str(dtype)[6:]} {name}: host {row['host_us']:.0f} us a call; do_bench {row['plain_ms']:.3f} ms "
                  f"({row['plain_tflops']:.0f} TFLOP/s, ±{row['plain_spread_pct']:.1f}%), CUDA graph "
                  f"{row['graph_ms']:.3f} ms ({row['graph_tflops']:.0f}, ±{row['graph_spread_pct']:.1f}%)", flush=True)
        moe, dense = rows[-2], rows[-1]
        print(f"  of dense: plain {dense['plain_ms'] / moe['plain_ms']:.3f}, graph {dense['graph_ms'] / moe['graph_ms']:.3f}",
              flush=True)
    (out / "moe_host.json").write_text(json.dumps({"time": time.ctime(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
