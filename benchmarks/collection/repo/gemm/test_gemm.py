"""Correctness, then TFLOP/s against torch at each size; a report, and the JSON after a marker."""

import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm import matmul  # noqa: E402

SIZES = [int(v) for v in os.environ.get("GEMM_SIZES", "1024,2048,4096").split(",")]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: Triton's interpreter, a dry run
DIGITS = 1 if DEVICE == "cuda" else 6


def seconds_per_call(fn, iterations):
    sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    sync()
    return (time.perf_counter() - start) / iterations


def main():
    correct, rows = True, []
    for n in SIZES:
        a = torch.randn(n, n, device=DEVICE, dtype=torch.float16)
        b = torch.randn(n, n, device=DEVICE, dtype=torch.float16)
        ok = torch.allclose(matmul(a, b).float(), (a.float() @ b.float()), atol=1.0, rtol=1e-2)
        correct = correct and bool(ok)
        iterations = 20 if DEVICE == "cuda" else 1
        flops = 2 * n**3
        triton_tflops = flops / seconds_per_call(lambda: matmul(a, b), iterations) / 1e12
        torch_tflops = flops / seconds_per_call(lambda: a @ b, iterations) / 1e12
        rows.append({"size": f"{n}x{n}x{n}", "triton_tflops": round(triton_tflops, DIGITS),
                     "pytorch_tflops": round(torch_tflops, DIGITS), "vs_pytorch": round(triton_tflops / torch_tflops, 2)})
        print(f"{n}^3: triton {triton_tflops:.1f} TFLOP/s, torch {torch_tflops:.1f} ({'ok' if ok else 'WRONG'})")
    result = {"kernel": "gemm", "gpu": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu",
              "correctness": correct, "benchmarks": rows,
              "avg_vs_pytorch": round(sum(r["vs_pytorch"] for r in rows) / len(rows), 2),
              "status": "pass" if correct else "fail"}
    if "--json" in sys.argv:
        print("--- JSON ---")
        print(json.dumps(result, indent=2))
    sys.exit(0 if correct else 1)


if __name__ == "__main__":
    main()
