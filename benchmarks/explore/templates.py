"""What the exploration scripts beside this file share: a kernel's template imported by path, and the
host's time per call of a launch."""

import importlib.util
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load(kernel: str):
    """skills/kernels/<kernel>/triton_template.py, imported under a name of its own (every kernel folder
    has a module of the same file name)."""
    path = ROOT / "skills" / "kernels" / kernel / "triton_template.py"
    spec = importlib.util.spec_from_file_location(f"{kernel.replace('-', '_')}_template", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def host_us_per_call(fn, calls: int = 200) -> float:
    """Microseconds of host time per call of fn: `calls` calls enqueued back to back, timed before the
    one synchronize that follows them."""
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    enqueued = time.perf_counter() - start
    torch.cuda.synchronize()
    return enqueued / calls * 1e6
