"""The Spec's one dtype naming and its validation."""

import pytest
import torch

from kgit import harness
from kgit.harness.spec import dtype_name, torch_dtype


def test_one_dtype_naming():
    for short, dtype in (("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)):
        assert torch_dtype(short) == dtype and dtype_name(dtype) == short
    assert dtype_name(torch.int64) == "int64"


def test_a_spec_names_its_metric_and_a_tflops_one_its_flops(softmax_spec):
    with pytest.raises(ValueError, match="metric must be 'gbps' or 'tflops'"):
        softmax_spec(None, metric="GB/s")
    with pytest.raises(ValueError, match="needs flops"):
        softmax_spec(None, metric="tflops")


def test_labels(softmax_spec):
    assert softmax_spec(None).shape_label((3, 1023)) == "3x1023"
    assert softmax_spec(None, label=lambda s: f"rows {s[0]}").shape_label((3, 1023)) == "rows 3"


def test_plan_dtype_defaults():
    plan = harness.Plan(check_shapes=[], time_shapes=[], dtypes=("fp16", "bf16"))
    assert plan.headline_dtypes() == ("fp16", "bf16") == plan.swept_dtypes()
    assert harness.Plan([], [], time_dtypes=("bf16",)).swept_dtypes() == ("bf16",)
