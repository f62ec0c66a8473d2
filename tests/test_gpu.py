"""kgit.gpu: the datasheet table and its lookups by the names drivers report."""

import pytest

from kgit import gpu


def test_peak_table():
    assert gpu.peak_for("NVIDIA H200", "gbps") == 4800
    assert gpu.peak_for("NVIDIA H100 80GB HBM3", "tflops", "bf16") == pytest.approx(989.4)
    assert gpu.peak_for("NVIDIA H100 PCIe", "gbps") == 2000
    assert gpu.peak_for("NVIDIA A100-SXM4-80GB", "gbps") == 2039
    assert gpu.peak_for("NVIDIA GeForce RTX 4090", "tflops", "fp16") == pytest.approx(165.2)
    assert gpu.peak_for("AMD Instinct MI300X", "gbps") == 5300
    assert gpu.peak_for("AMD Instinct MI250X / MI250", "tflops", "torch.bfloat16") == pytest.approx(383.0)
    assert gpu.peak_for("AMD Instinct MI250", "tflops", "tf32") is None
    assert gpu.peak_for("triton-interpreter (CPU)", "gbps") is None
    with pytest.raises(ValueError):
        gpu.peak_for("NVIDIA H200", "flops")


def test_canonical_names():
    assert gpu.canonical_gpu("NVIDIA H200 NVL") == "NVIDIA H200 NVL"
    assert gpu.canonical_gpu("NVIDIA H100 80GB HBM3") == "NVIDIA H100 SXM"
    assert gpu.peaks_for("gfx942")["name"] == "AMD Instinct MI300X"
    assert gpu.canonical_gpu(None) is None
