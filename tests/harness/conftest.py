"""Specs around the real softmax and gemm templates, small enough for Triton's interpreter, whose
kernel call a test replaces (an honest launcher, or a cheat the harness must catch)."""

import importlib.util
import os

import pytest
import torch

from kgit import harness
from kgit.config import kernel_file

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load_template(kernel: str):
    path = os.path.join(ROOT, "skills", "kernels", kernel, kernel_file(kernel))
    spec = importlib.util.spec_from_file_location(f"{kernel.replace('-', '_')}_template_for_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def softmax_t():
    return load_template("softmax")


@pytest.fixture(scope="session")
def gemm_t():
    return load_template("gemm")


@pytest.fixture
def softmax_spec(softmax_t):
    """softmax_spec(kernel, **fields): an elementwise-tolerance gbps Spec, fp32, two tiny shapes."""
    def make(kernel, **fields):
        base = dict(
            name="softmax-under-test", metric="gbps",
            make_inputs=lambda shape, dtype, device, case: (harness.rand(shape, dtype, device, case),),
            make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
            kernel=kernel,
            reference=lambda inputs: (softmax_t.softmax_ref(inputs[0]),),
            torch_impl=lambda inputs: torch.softmax(inputs[0], dim=-1),
            cases=("normal", "large"),
            gpu=harness.Plan(check_shapes=[], time_shapes=[]),
            interpreter=harness.Plan(check_shapes=[(6, 40), (3, 17)], extreme_shapes=[(6, 40)],
                                     time_shapes=[(6, 40)], dtypes=("fp32",)),
        )
        base.update(fields)
        return harness.Spec(**base)
    return make


@pytest.fixture
def gemm_spec(gemm_t):
    """gemm_spec(kernel, **fields): a norm-tolerance tflops Spec, fp16, one tiny shape."""
    def make(kernel, **fields):
        base = dict(
            name="gemm-under-test", metric="tflops",
            make_inputs=lambda shape, dtype, device, case: (harness.rand(shape[::2], dtype, device, case),
                                                             harness.rand(shape[:0:-1], dtype, device, case)),
            make_outputs=lambda inputs: (inputs[0].new_empty((inputs[0].shape[0], inputs[1].shape[1])),),
            kernel=kernel,
            reference=lambda inputs: (gemm_t.reference(*inputs),),
            flops=lambda inputs, outputs: 2.0 * outputs[0].numel() * inputs[0].shape[1],
            tolerances=harness.NORM,
            gpu=harness.Plan(check_shapes=[], time_shapes=[]),
            interpreter=harness.Plan(check_shapes=[(24, 20, 16)], time_shapes=[(24, 20, 16)], dtypes=("fp16",)),
        )
        base.update(fields)
        return harness.Spec(**base)
    return make
