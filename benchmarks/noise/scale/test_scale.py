"""A test written the way the awesome-kernel-skills collection writes them: one JSON line with
--json, timed with perf_counter around a loop, no warm-up, no spread, rounded figures."""

import json
import os
import sys
import time

import torch

from scale import scale

N = int(os.environ.get("SCALE_N", 12 * 1024 * 1024))  # 48 MB in, 48 MB out: about 24 us on an H200
ITERATIONS = int(os.environ.get("SCALE_ITERS", 100))
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: Triton's interpreter, a dry run


def main():
    x = torch.randn(N, device=DEVICE)
    out = torch.empty_like(x)
    correct = bool(torch.allclose(scale(x, out), 2 * x))
    iterations = ITERATIONS
    sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(iterations):
        scale(x, out)
    sync()
    seconds = (time.perf_counter() - start) / iterations
    gbps = 2 * x.numel() * x.element_size() / seconds / 1e9
    result = {"kernel": "scale", "gpu": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu", "correctness": correct,
              "latency_us": round(seconds * 1e6, 1), "gbps": round(gbps, 1 if DEVICE == "cuda" else 6), "status": "pass" if correct else "fail"}
    print(json.dumps(result) if "--json" in sys.argv else result)


if __name__ == "__main__":
    main()
