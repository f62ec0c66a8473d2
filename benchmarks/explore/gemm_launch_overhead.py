"""Is gemm's slow mode at 1024^3-2048^3 the host's launch path? (issue 15)

    python benchmarks/explore/gemm_launch_overhead.py [--out FILE] [--rounds 3]

The sweeps of 2026-12-01 saw 1024^3 and 2048^3 at 0.42-0.52x cuBLAS in some runs and 0.90-1.02x in
others. If the cause is the host (Python and Triton's launcher take longer to enqueue a launch than the
GPU takes to run it, more than do_bench's L2-clearing write can hide), then per size and dtype:
  - the host time per call (200 calls enqueued back to back, then one synchronize) is at or above the
    kernel's time in the slow rounds;
  - do_bench_cudagraph (launches replayed from a CUDA graph: no host work) stays fast in every round.
Prints and writes one row per round, size, dtype and callee (kgit's gemm, torch.matmul).
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton

import templates  # beside this file


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    T = templates.load("gemm")
    rows = []
    for round_ in range(args.rounds):
        for size in (1024, 2048, 4096):
            for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
                a = torch.randn(size, size, device="cuda").to(dtype)
                b = torch.randn(size, size, device="cuda").to(dtype)
                c = torch.empty(size, size, device="cuda", dtype=dtype)
                for callee, fn in (("kgit", lambda: T.gemm(a, b, out=c)), ("torch", lambda: torch.matmul(a, b, out=c))):
                    fn()
                    bench = [triton.testing.do_bench(fn, warmup=100, rep=100, return_mode="median") for _ in range(3)]
                    with torch.cuda.stream(torch.cuda.Stream()):
                        graph = triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")
                    row = {"round": round_, "size": size, "dtype": dname, "callee": callee,
                           "do_bench_us": statistics.median(bench) * 1e3, "cudagraph_us": graph * 1e3,
                           "host_us_per_call": templates.host_us_per_call(fn)}
                    rows.append(row)
                    print(f"round {round_} {size}^3 {dname} {callee}: do_bench {row['do_bench_us']:.1f} us, "
                          f"cudagraph {row['cudagraph_us']:.1f} us, host {row['host_us_per_call']:.1f} us/call",
                          flush=True)
                del a, b, c
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
