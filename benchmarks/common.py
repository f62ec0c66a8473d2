"""What the benchmarks share. They time with kgit's harness, as every kernel test does
(kgit.harness.timing: medians over calls, the L2 cleared by a read before each; kgit.harness.device: the
device and its measured copy bandwidth); this module adds what a script needs around it: a module
imported from its file, a kernel test's Spec with its template's CONFIG, and the machine a run measured on.

A script beside this file imports it as `common` (its own folder is first on sys.path when run as
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


def load_module(path, name: str):
    """The Python file at `path`, imported under `name`: every kernel folder has a triton_template.py, so
    two revisions of one template, or two kernels' tests, live in one process under names of their own."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def template(kernel: str, path=None, side: str = "template"):
    """skills/kernels/<kernel>/triton_template.py, or another revision of that kernel's template at `path`."""
    path = path or ROOT / "skills" / "kernels" / kernel / "triton_template.py"
    return load_module(path, f"{kernel.replace('-', '_')}_{side}")


def load_test(test_path) -> tuple:
    """(SPEC, CONFIG) of a kernel test: its kgit.harness.Spec, and the CONFIG dict of the triton_template it
    imports, the one its launches read (a change to it holds for this process)."""
    sys.modules.pop("triton_template", None)  # the previous kernel's, which has the same module name
    test = load_module(test_path, f"test_of_{Path(test_path).parent.name.replace('-', '_')}")
    return test.SPEC, sys.modules["triton_template"].CONFIG


def machine() -> dict:
    """The device (kgit.harness.device's name and backend), torch and triton a run measured with, and when;
    cpu_timing where no GPU ran it (Triton's interpreter: CPU figures, never compared with a GPU's)."""
    import torch
    import triton

    from kgit.harness import device

    info = device.detect()
    return {"gpu": info["name"], "backend": info["backend"], "cpu_timing": not device.on_gpu(),
            "torch": torch.__version__, "triton": triton.__version__, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
