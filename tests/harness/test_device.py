"""The torch-side probe, and the datasheet table that stays torch-free (kgit.model.peaks)."""

import os
import subprocess
import sys

from kgit.harness import device

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_the_interpreter_is_detected_and_has_no_copy_bandwidth():
    info = device.detect()
    assert info["backend"] == "interpreter" and info["device"] == "cpu" and not device.on_gpu()
    assert device.measured_copy_gbps() is None


def test_architecture_families():
    assert device._arch_family("nvidia", "9.0") == "hopper"
    assert device._arch_family("nvidia", "10.0") == "blackwell"
    assert device._arch_family("amd", "gfx942") == "cdna3"
    assert device._arch_family("amd", "gfx1030") == "rdna2"


def test_the_harness_and_the_peak_table_import_neither_torch_nor_triton():
    code = ("import sys, kgit.model.peaks, kgit.harness; "
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
