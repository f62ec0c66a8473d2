"""Correctness against torch, then a benchmark: perf_counter around a loop, one JSON line."""

import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmax import softmax  # noqa: E402

ROWS, COLS = (int(v) for v in os.environ.get("SOFTMAX_SHAPE", "4096x8192").split("x"))
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: Triton's interpreter, a dry run
DIGITS = 1 if DEVICE == "cuda" else 6


def main():
    x = torch.randn(ROWS, COLS, device=DEVICE, dtype=torch.float16)
    correct = torch.allclose(softmax(x).float(), torch.softmax(x.float(), dim=-1), atol=1e-3, rtol=1e-2)
    sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)
    iterations = 100 if DEVICE == "cuda" else 2
    sync()
    start = time.perf_counter()
    for _ in range(iterations):
        softmax(x)
    sync()
    seconds = (time.perf_counter() - start) / iterations
    gbps = 2 * x.numel() * x.element_size() / seconds / 1e9
    result = {"kernel": "softmax", "gpu": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu",
              "correctness": bool(correct), "latency_us": round(seconds * 1e6, 1), "gbps": round(gbps, DIGITS),
              "status": "pass" if correct else "fail"}
    print(json.dumps(result) if "--json" in sys.argv else result)
    sys.exit(0 if correct else 1)


if __name__ == "__main__":
    main()
