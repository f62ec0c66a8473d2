"""harness.from_launcher: a launcher checked as its users call it, its tuple and its backward included."""

import importlib.util

import pytest
import torch

from kgit import harness
from user_kernels import SOFTMAX

TINY = harness.Plan(check_shapes=[(3, 33), (2, 70)], time_shapes=[(4, 64)], dtypes=("fp32", "fp16"))
BROKEN_BACKWARD = ("(dz * inv_temperature)", "(dz * inv_temperature * 1.5)")


def load(tmp_path, source, name="user_softmax"):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference(x, temperature, mode):
    assert x.dtype == torch.float64  # the reference gets float64 copies
    z = x / temperature
    return (torch.log_softmax(z, -1) if mode == "log_softmax" else torch.softmax(z, -1)), torch.logsumexp(z, -1)


def spec(launch, backward_of=(0,), arguments=None, ref=reference, **fields):
    arguments = arguments or (lambda shape, dtype, device, case: (harness.rand(shape, dtype, device, case), 2.0,
                                                                    "log_softmax"))
    return harness.from_launcher(name="softmax", metric="gbps", launch=launch, arguments=arguments, reference=ref,
                                 backward_of=backward_of, gpu=TINY, interpreter=TINY, **fields)


def run(built, timing=False):
    return harness.run(built, timer=harness.Timer(repeats=1), timing=timing)


def test_a_launcher_passes_with_its_tuple_its_scalars_and_its_backward(tmp_path):
    module = load(tmp_path, SOFTMAX)
    result = run(spec(module.softmax), timing=True)
    assert result["status"] == "pass", result["errors"]
    built = spec(module.softmax)
    inputs = built.make_inputs((4, 64), torch.float16, "cpu", "normal")
    # the arguments, then a gradient per output; out: y, lse (float32, as the launcher makes it), dx
    assert len(inputs) == 3 + 2 and inputs[1:3] == (2.0, "log_softmax")
    assert [out.dtype for out in built.make_outputs(inputs)] == [torch.float16, torch.float32, torch.float16]
    # its traffic: x, the gradients of y and lse in; y, lse and dx out (fp32: 4 bytes each)
    assert result["shapes"][0]["dtype"] == "fp32" and result["shapes"][0]["bytes"] == 4 * (3 * 256 + 4 + 4 + 256)


def test_a_broken_backward_fails_as_a_broken_forward_does(tmp_path):
    broken = load(tmp_path, SOFTMAX.replace(*BROKEN_BACKWARD), "broken_backward")
    error = run(spec(broken.softmax))["errors"][0]["error"]
    assert error.startswith("output 2: ")  # the gradient of x
    # a test of the forward alone cannot see it: the loop refuses such steps (kgit.model.coverage)
    assert run(spec(broken.softmax, backward_of=None))["status"] == "pass"


def test_the_scalars_and_strings_reach_the_launcher(tmp_path):
    module = load(tmp_path, SOFTMAX)
    softmax_only = spec(module.softmax, ref=lambda x, temperature, mode: reference(x, temperature, "softmax"))
    assert "output 0" in run(softmax_only)["errors"][0]["error"]  # the launcher took log_softmax


class _Twice(torch.autograd.Function):
    """Two outputs; the backward uses the gradient of the first alone."""

    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, first, second):
        return first * 2


@pytest.mark.parametrize("backward_of, passes", [((0,), True), ((0, 1), False)])
def test_only_the_chosen_outputs_get_a_random_gradient(backward_of, passes):
    built = spec(_Twice.apply, backward_of, arguments=lambda shape, dtype, device, case: (
        harness.rand(shape, dtype, device, case),), ref=lambda x: (x * 2, x * 3), allowed_torch_ops=("mul",))
    result = run(built)
    assert (result["status"] == "pass") is passes, result["errors"]
    if not passes:
        assert result["errors"][0]["error"].startswith("output 2: ")  # the reference's gradient has 3 * second


def test_a_launcher_that_computes_with_torch_is_still_caught(tmp_path):
    def cheat(x, temperature, mode):
        z = x / temperature
        return torch.log_softmax(z.float(), -1).to(x.dtype), torch.logsumexp(z.float(), -1)

    assert "torch ops" in run(spec(cheat, backward_of=None))["errors"][0]["error"]
