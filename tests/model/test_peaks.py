"""kgit.model.peaks: the datasheet table and its lookups by the names drivers report."""

import pytest

from kgit.model import peaks


def test_peak_table():
    assert peaks.peak_for("NVIDIA H200", "gbps") == 4800
    assert peaks.peak_for("NVIDIA H100 80GB HBM3", "tflops", "bf16") == pytest.approx(989.4)
    assert peaks.peak_for("NVIDIA H100 PCIe", "gbps") == 2000
    assert peaks.peak_for("NVIDIA A100-SXM4-80GB", "gbps") == 2039
    assert peaks.peak_for("NVIDIA GeForce RTX 4090", "tflops", "fp16") == pytest.approx(165.2)
    assert peaks.peak_for("AMD Instinct MI300X", "gbps") == 5300
    assert peaks.peak_for("AMD Instinct MI250X / MI250", "tflops", "torch.bfloat16") == pytest.approx(383.0)
    assert peaks.peak_for("AMD Instinct MI250", "tflops", "tf32") is None
    assert peaks.peak_for("triton-interpreter (CPU)", "gbps") is None
    with pytest.raises(ValueError):
        peaks.peak_for("NVIDIA H200", "flops")


def test_canonical_names():
    assert peaks.canonical_gpu("NVIDIA H200 NVL") == "NVIDIA H200 NVL"
    assert peaks.canonical_gpu("NVIDIA H100 80GB HBM3") == "NVIDIA H100 SXM"
    assert peaks.peaks_for("gfx942")["name"] == "AMD Instinct MI300X"
    assert peaks.canonical_gpu(None) is None
