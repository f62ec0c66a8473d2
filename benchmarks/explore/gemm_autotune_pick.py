"""Is the gemm template's small-output autotune pick stable? (1024^3 read 0.27x-0.72x torch across runs)

    python benchmarks/explore/gemm_autotune_pick.py

For each small shape: the autotune pass run 5 times afresh (which candidate it keeps), then every
candidate timed 3 times with do_bench (median, L2 cleared, rep 100 ms) to know which one is really
fastest. The cheat guard is not involved: the kernel is called directly.
"""

import os
import sys

import torch
import triton

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)
from kgit import harness  # noqa: E402
from kgit.harness.measure import rate  # noqa: E402
import templates  # noqa: E402  (beside this file)


T = templates.load("gemm")

for n, dtype in ((1024, torch.bfloat16), (1024, torch.float16), (2048, torch.float16)):
    a = harness.rand((n, n), dtype, "cuda")
    b = harness.rand((n, n), dtype, "cuda")
    c = torch.empty((n, n), device="cuda", dtype=dtype)
    candidates = T._candidates(n, n, a.device)
    picks = []
    for _ in range(5):
        T._TUNED.clear()
        picks.append(candidates.index(T._autotune(a, b, c)))
    flops = 2.0 * n ** 3
    print(f"{n}^3 {dtype}: autotune picks (candidate index, 5 fresh passes): {picks}")
    for i, cfg in enumerate(candidates):
        try:
            times = [triton.testing.do_bench(lambda: T._launch(a, b, c, cfg), rep=100, return_mode="median")
                     for _ in range(3)]
        except Exception as e:
            print(f"  [{i}] {type(e).__name__}")
            continue
        tiles = f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} w{cfg['num_warps']} s{cfg['num_stages']} p{cfg['PERSISTENT']}"
        print(f"  [{i}] {tiles}: " + ", ".join(f"{rate('tflops', flops, t):.0f}" for t in times) + " TFLOP/s")
    torch_ms = triton.testing.do_bench(lambda: torch.matmul(a, b, out=c), rep=100, return_mode="median")
    print(f"  torch.matmul: {rate('tflops', flops, torch_ms):.0f} TFLOP/s", flush=True)
