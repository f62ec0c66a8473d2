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


def test_every_timed_call_writes_a_poisoned_output_so_skipping_work_gains_nothing(softmax_spec, softmax_t):
    import math

    from kgit.harness.measure import time_entry
    from kgit.harness.timing import Timer

    counts = {"calls": 0, "work": 0}

    def skips_when_written(inputs, outputs):  # a cheat: nothing to do when the output holds a result already
        counts["calls"] += 1
        if not math.isnan(outputs[0][0, 0].item()):  # a scalar read: an allowed op, no computing in torch
            return
        counts["work"] += 1
        softmax_t.softmax(inputs[0], out=outputs[0])

    entry = time_entry(softmax_spec(skips_when_written), (6, 40), "fp32", "time", Timer(repeats=3), False, None)
    assert "error" not in entry
    assert counts["work"] == counts["calls"] == 5  # the timed calls (1 + 3) and the recheck: each did the work


def test_a_kernel_that_skips_some_timed_calls_is_caught(softmax_spec, softmax_t):
    from kgit.harness.measure import time_entry
    from kgit.harness.timing import Timer

    calls = [0]

    def every_other(inputs, outputs):
        calls[0] += 1
        if calls[0] % 2 == 0:
            return
        softmax_t.softmax(inputs[0], out=outputs[0])

    entry = time_entry(softmax_spec(every_other), (6, 40), "fp32", "time", Timer(repeats=3), False, None)
    assert "error" in entry and "the timed output is wrong" in entry["error"]


def test_a_share_of_the_timed_calls_is_checked_before_its_output_is_reused(softmax_spec):
    import random

    import torch

    from kgit.harness import measure

    calls = [0]

    def skips_the_second_call(inputs, outputs):
        calls[0] += 1
        if calls[0] != 2:
            outputs[0].copy_(torch.softmax(inputs[0], -1))

    spec = softmax_spec(skips_the_second_call)
    inputs = spec.make_inputs((6, 40), torch.float32, "cpu", "normal")
    sets = [spec.make_outputs(inputs) for _ in range(measure.ROTATED_OUTPUTS)]

    class Always(random.Random):
        def random(self):
            return 0.0  # every draw below CHECKED_SHARE: every reuse is checked

    call, before, wrong = measure.rotating(spec, inputs, sets, Always())
    for _ in range(measure.ROTATED_OUTPUTS + 2):  # the second call's buffer is checked before its reuse
        before()
        call()
    assert calls[0] == 5 and wrong() is not None and wrong().startswith("a timed call: output 0: ")
    # honest calls: neither the sampled checks nor the sets' last results find anything
    calls[0] = 10
    call, before, wrong = measure.rotating(spec, inputs, sets, random.Random(1))
    for _ in range(measure.ROTATED_OUTPUTS + 1):
        before()
        call()
    assert wrong() is None
