"""A launcher read from its kernel file: its call, its parameters, its autograd.Function, its returns, its kernels."""

import ast

from kgit.model.signature import read
from user_kernels import RMSNORM, SOFTMAX

PARAMS = '''from typing import Literal, Optional

import torch
import triton


@triton.jit
def _kernel(x_ptr):
    pass


@triton.jit
def _other_kernel(x_ptr):
    pass


def launch(x, weight, norm_bias, out=None, eps=1e-5, block=(64, 2), *, mode: Literal["fast", "exact"],
           flag: bool, count: int = 4, scale: float, name: str, dtype: torch.dtype, dim,
           offsets: Optional[torch.Tensor] = None, lengths: "torch.Tensor | None" = None, epsilon,
           clip: Optional[float] = None):
    _kernel[(1,)](x)
    return x


def split(x: torch.Tensor):
    if x.numel() > 4:
        return x, x
    return x
'''


def launcher(source, name):
    return read(source, ast.parse(source), name)


def test_a_launcher_behind_an_autograd_function_runs_its_backward_and_returns_its_tuple():
    found = launcher(SOFTMAX, "softmax")
    assert (found.call, found.imported, found.autograd) == ("softmax", "softmax", "_Softmax")
    assert found.shown == "softmax(x: torch.Tensor, temperature: float=1.0, mode: str='softmax')"
    assert [(p.name, p.kind, p.value, p.check) for p in found.params] == [
        ("x", "tensor", None, False), ("temperature", "value", "1.0", False), ("mode", "value", "'softmax'", False)]
    assert found.returns == ("y", "lse")  # through _Softmax.apply, from its forward
    assert found.backward_of == (0,)  # the backward reads dy, never dlse
    assert found.kernels == ("_softmax_fwd_kernel", "_softmax_bwd_kernel") and found.left_out == ()


def test_the_autograd_function_itself_and_an_alias_of_its_apply_are_called_through_apply():
    direct = launcher(SOFTMAX, "_Softmax")
    assert (direct.call, direct.imported, direct.autograd) == ("_Softmax.apply", "_Softmax", "_Softmax")
    assert direct.shown == "_Softmax.forward(ctx, x, temperature, mode)"
    # its forward's parameters, ctx left out; with no annotation or default nothing says they are no tensors
    assert [(p.name, p.kind, p.check) for p in direct.params] == [
        ("x", "tensor", True), ("temperature", "tensor", True), ("mode", "tensor", True)]
    assert launcher(SOFTMAX, "_Softmax.apply").call == "_Softmax.apply"
    aliased = SOFTMAX + "\n\nsoftmax_fn = _Softmax.apply\n"
    alias = launcher(aliased, "softmax_fn")
    assert (alias.call, alias.imported, alias.autograd, alias.returns) == ("softmax_fn", "softmax_fn", "_Softmax",
                                                                          ("y", "lse"))
    assert launcher(SOFTMAX, "nothing") is None


def test_each_parameter_is_read_from_its_annotation_then_its_default_then_its_name():
    params = {p.name: p for p in launcher(PARAMS, "launch").params}
    shown = {name: (p.kind, p.value, p.check, p.keyword) for name, p in params.items()}
    assert shown == {
        "x": ("tensor", None, True, False),  # nothing says otherwise: a tensor, to check
        "weight": ("vector", None, True, False),  # over the last dimension, by its name
        "norm_bias": ("vector", None, True, False),
        "out": ("value", "None", True, False),  # None, its default: a tensor would run more of the code
        "eps": ("value", "1e-05", False, False),
        "block": ("value", "(64, 2)", False, False),
        "mode": ("value", "'fast'", False, True),  # the first of its Literal choices
        "flag": ("value", "False", True, True),
        "count": ("value", "4", False, True),
        "scale": ("value", "1.0", True, True),
        "name": ("value", "''", True, True),
        "dtype": ("value", "None", True, True),  # an annotation that is no plain value: to fill in
        "dim": ("value", "-1", True, True),  # by its name
        "offsets": ("tensor", None, False, True),  # Optional[torch.Tensor]: a tensor, which runs more code
        "lengths": ("tensor", None, False, True),
        "epsilon": ("value", "1e-06", True, True),
        "clip": ("value", "None", False, True),  # its default, None, as its users call it
    }


def test_a_plain_launcher_has_no_backward_and_leaves_out_the_kernels_it_does_not_lead_to():
    found = launcher(PARAMS, "launch")
    assert found.autograd is None and found.backward_of is None
    assert found.kernels == ("_kernel",) and found.left_out == ("_other_kernel",)
    assert found.returns is None  # one tensor
    assert launcher(PARAMS, "split").returns is None  # a tuple on one path, a tensor on another


def test_the_held_out_rmsnorm_reads_as_its_author_wrote_it():
    found = launcher(RMSNORM, "rms_norm")
    assert [(p.name, p.kind, p.value) for p in found.params] == [
        ("x", "tensor", None), ("weight", "vector", None), ("residual", "tensor", None), ("eps", "value", "1e-06")]
    assert (found.autograd, found.returns, found.backward_of) == ("_RMSNormFn", ("y", "rstd"), (0,))
    assert found.kernels == ("_add_kernel", "_rms_fwd", "_rms_bwd")
