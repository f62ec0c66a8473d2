"""What the benchmarks share. They time with kgit's harness, as every kernel test does
(kgit.harness.timing: medians over calls, the L2 cleared by a read before each; kgit.harness.device: the
device and its measured copy bandwidth); this module adds what a script needs around it: a module
imported from its file, a kernel test's Spec with its kernel file's CONFIG, and the machine a run measured on.

A script beside this file imports it as `bench` (its own folder is first on sys.path when run as
`python benchmarks/<script>.py`); importing it puts the repository root on sys.path, for kgit.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kgit import config  # noqa: E402

def load_module(path, name: str):
    """The Python file at `path`, imported under `name`: two revisions of one kernel file, or two kernels'
    tests, live in one process under names of their own."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel_module(kernel: str, path=None, side: str = "kernel"):
    """The module of skills/kernels/<kernel>/'s kernel file, or of another revision of that file at `path`."""
    path = path or ROOT / "skills" / "kernels" / kernel / config.kernel_file(kernel)
    return load_module(path, f"{kernel.replace('-', '_')}_{side}")


def kernel_file(test_path) -> Path:
    """The kernel file beside a kernel test: the one named for their folder (kgit.config.kernel_file)."""
    folder = Path(test_path).parent
    return folder / config.kernel_file(folder.name)


def load_test(test_path, kernel=None) -> tuple:
    """(SPEC, CONFIG) of a kernel test: its kgit.harness.Spec, and the CONFIG dict of the kernel file it
    imports (the one named for its folder), the one its launches read (a change to it holds for this process).
    kernel: a module to stand for that file (kernel_module's old revision of it), whose launches the Spec's
    kernel then calls."""
    name = kernel_file(test_path).stem
    sys.modules.pop(name, None)  # imported afresh: its CONFIG as the file has it, not as an earlier caller left it
    if kernel is not None:
        sys.modules[name] = kernel  # the test's `import <name>` finds it
    try:
        test = load_module(test_path, f"test_of_{name}_{id(kernel)}" if kernel else f"test_of_{name}")
        return test.SPEC, sys.modules[name].CONFIG
    finally:
        if kernel is not None:
            sys.modules.pop(name, None)


def machine() -> dict:
    """The device (kgit.harness.device's name and backend), torch and triton a run measured with, and when;
    cpu_timing where no GPU ran it (Triton's interpreter: CPU figures, never compared with a GPU's)."""
    import torch
    import triton

    from kgit.harness import device

    info = device.detect()
    return {"gpu": info["name"], "backend": info["backend"], "cpu_timing": not device.on_gpu(),
            "torch": torch.__version__, "triton": triton.__version__, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
