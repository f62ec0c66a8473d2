"""A small test-contract harness for the two standalone kernels of this experiment (GPU or CPU).

Each test: --json prints one JSON line last; --profile runs the kernel 3 times at the headline shape
and exits (for kgit profile / ncu). Timing: triton.testing.do_bench median (it clears the L2 before
each run), repeated REPEATS times for the spread; torch's version in the same run.
"""
import argparse
import json
import os
import statistics

REPEATS = 3


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--json", action="store_true")
    p.add_argument("--profile", action="store_true")
    return p.parse_args()


def on_gpu() -> bool:
    import torch

    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "") in ("", "0")


def gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name() if on_gpu() else "cpu (Triton interpreter)"


def bench(fn) -> tuple[float, float]:
    """(median latency in us, spread in % of it) over REPEATS do_bench medians; CPU: perf_counter."""
    if on_gpu():
        from triton.testing import do_bench

        runs = [do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3 for _ in range(REPEATS)]
    else:
        import time

        runs = []
        for _ in range(REPEATS):
            t = time.perf_counter()
            fn()
            runs.append((time.perf_counter() - t) * 1e6)
    mid = statistics.median(runs)
    return mid, (max(runs) - min(runs)) / mid * 100.0


def emit(result: dict) -> None:
    print(json.dumps(result), flush=True)
