"""Rates and the figures that cannot be real work."""

import pytest

from kgit.harness.measure import COPY_CEILING, L2_SAFE_BYTES, PEAK_CEILING, default_nbytes, impossible, rate


def test_rates():
    assert rate("gbps", 2e9, 1.0) == pytest.approx(2000.0)
    assert rate("tflops", 3e12, 2.0) == pytest.approx(1500.0)


def test_default_traffic_counts_tensors_only(softmax_spec):
    import torch

    assert default_nbytes((torch.empty(4, dtype=torch.float16), True), (torch.empty(2),)) == 4 * 2 + 2 * 4


def test_a_memory_figure_above_the_copy_ceiling_is_impossible_past_the_l2(softmax_spec):
    spec = softmax_spec(lambda i, o: None)
    copy = 4000.0
    big = {"bytes": L2_SAFE_BYTES, "dtype": "fp32", "gbps": COPY_CEILING * copy * 1.01}
    assert "exceeds 1.2x the measured copy" in impossible(spec, big, "NVIDIA H200", copy)
    assert impossible(spec, {**big, "gbps": COPY_CEILING * copy * 0.99}, "NVIDIA H200", copy) is None
    assert impossible(spec, {**big, "bytes": L2_SAFE_BYTES - 1}, "NVIDIA H200", copy) is None  # may sit in L2


def test_a_compute_figure_above_the_datasheet_peak_is_impossible(gemm_spec):
    spec = gemm_spec(lambda i, o: None)
    peak = 989.4  # H200 dense bf16
    assert "exceeds the 989 datasheet peak" in impossible(
        spec, {"bytes": 1, "dtype": "bf16", "tflops": PEAK_CEILING * peak * 1.01}, "NVIDIA H200", None)
    assert impossible(spec, {"bytes": 1, "dtype": "bf16", "tflops": PEAK_CEILING * peak * 0.99}, "NVIDIA H200", None) is None
    assert impossible(spec, {"bytes": 1, "dtype": "bf16", "tflops": 1e6}, "an unknown GPU", None) is None
