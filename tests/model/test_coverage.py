"""What a test covers of its kernel file: a change to what the test never ran is told from one to what it ran."""

import pytest

from kgit.model.coverage import kernels_reached, parts, ran, untested
from user_kernels import SOFTMAX

FORWARD = {"_softmax_fwd_kernel"}  # what a test of the forward alone launches
BOTH = {"_softmax_fwd_kernel", "_softmax_bwd_kernel"}

# helpers, a jitted device function and module values, each used by one side only
SIDES = '''import triton
import triton.language as tl

FWD_BLOCK = 128
BWD_BLOCK = 256
UNUSED = 1


@triton.jit
def _square(x):
    return x * x


@triton.jit
def _halve(x):
    return x * 0.5


@triton.jit
def _fwd(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr, _square(tl.load(x_ptr)))


@triton.jit
def _bwd(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr, _halve(tl.load(x_ptr)))


def _fwd_grid(n):
    return (n,)


def _bwd_grid(n):
    return (n,)


class Op:
    def forward(self, x):
        _fwd[_fwd_grid(1)](x, BLOCK=FWD_BLOCK)

    def backward(self, x):
        _bwd[_bwd_grid(1)](x, BLOCK=BWD_BLOCK)
        return self.finish(x)

    def finish(self, x):
        return x


def op(x):
    return Op().forward(x)
'''


def test_a_file_is_read_as_its_functions_methods_and_values_with_what_each_uses():
    found = parts(SOFTMAX)
    assert list(found) == ["_block", "_softmax_fwd_kernel", "_softmax_bwd_kernel", "_Softmax.forward",
                           "_Softmax.backward", "softmax"]
    assert [found[n].kind for n in found] == ["function", "kernel", "kernel", "function", "function", "function"]
    assert found["_Softmax.forward"].uses == {"_block", "_softmax_fwd_kernel"}
    assert found["softmax"].uses == {"_Softmax.forward", "_Softmax.backward"}  # the class: all its methods
    assert kernels_reached(found, "softmax") == ["_softmax_fwd_kernel", "_softmax_bwd_kernel"]
    side = parts(SIDES)
    assert side["FWD_BLOCK"].kind == "value" and side["Op.backward"].uses == {"_bwd", "_bwd_grid", "BWD_BLOCK",
                                                                             "Op.finish"}
    assert parts("def f(:\n") is None


def test_a_test_of_the_forward_ran_the_forward_and_what_leads_to_it_only():
    assert ran(parts(SOFTMAX), FORWARD) == {"_softmax_fwd_kernel", "_Softmax.forward", "softmax", "_block"}
    assert ran(parts(SOFTMAX), BOTH) == set(parts(SOFTMAX))
    # a jitted helper runs with the kernel that calls it; a grid helper or a value with the function that uses it
    assert ran(parts(SIDES), {"_fwd"}) == {"_fwd", "_square", "Op.forward", "op", "_fwd_grid", "FWD_BLOCK"}


CHECK = "def _check(mode):\n    return mode\n\n\nclass _Softmax("


@pytest.mark.parametrize("edits, launched, expected", [
    # the case: a test of the forward judged an edit that broke the backward
    ([("dz = y * (dy - tl.sum(dy * y, axis=0))", "dz = y * (dy + tl.sum(dy * y, axis=0))")], FORWARD,
     ["_softmax_bwd_kernel"]),
    ([("return dx.view(dy.shape), None, None", "return dx.view(dy.shape) * 2, None, None")], FORWARD,
     ["_Softmax.backward"]),
    ([("z_max = tl.max(z, axis=0)", "z_max = tl.max(z, axis=0) + 0.0")], FORWARD, []),  # the forward ran
    ([("dz = y * (dy - tl.sum(dy * y, axis=0))", "dz = y * (dy + tl.sum(dy * y, axis=0))")], BOTH, []),
    ([("    dy = tl.load(", "    # one row\n    dy = tl.load(")], FORWARD, []),  # a comment is no change
    ([("    return triton.next_power_of_2(n_cols)", "    return 2 * triton.next_power_of_2(n_cols)")], FORWARD, []),
    # the backward removed (renamed): what the test never ran is gone
    ([("def backward(ctx, dy, dlse):", "def _unused(ctx, dy, dlse):")], FORWARD, ["_Softmax.backward"]),
    # a function added: judged by what uses it
    ([("class _Softmax(", CHECK)], FORWARD, ["_check"]),  # nothing does
    ([("class _Softmax(", CHECK), ("    if mode not in", "    _check(mode)\n    if mode not in")], FORWARD, []),
    ([("class _Softmax(", CHECK), ("(y,) = ctx.saved_tensors", "(y,) = ctx.saved_tensors\n        _check(y)")],
     FORWARD, ["_Softmax.backward", "_check"]),  # the backward, which never ran
])
def test_a_change_is_untested_where_it_touches_what_the_test_never_ran(edits, launched, expected):
    after = SOFTMAX
    for old, new in edits:
        assert old in after
        after = after.replace(old, new)
    assert untested(SOFTMAX, after, launched) == expected


@pytest.mark.parametrize("old, new, expected", [
    ("return x * 0.5", "return x * 0.25", ["_halve"]),  # a jitted helper of the backward's kernel only
    ("return x * x", "return x * x * 1.0", []),  # of the forward's
    ("def _bwd_grid(n):\n    return (n,)", "def _bwd_grid(n):\n    return (n, 1)", ["_bwd_grid"]),
    ("BWD_BLOCK = 256", "BWD_BLOCK = 512", ["BWD_BLOCK"]),  # a value only the backward uses
    ("FWD_BLOCK = 128", "FWD_BLOCK = 64", []),
    ("UNUSED = 1", "UNUSED = 2", []),  # used by no function: not judged (the test or kgit tune may read it)
    ("    def finish(self, x):\n        return x", "    def finish(self, x):\n        return x + 0", ["Op.finish"]),
])
def test_helpers_values_and_methods_count_with_what_uses_them(old, new, expected):
    after = SIDES.replace(old, new)
    assert after != SIDES
    assert untested(SIDES, after, {"_fwd"}) == expected


def test_nothing_is_judged_where_a_version_does_not_parse():
    broken = SOFTMAX.replace("def backward(ctx, dy, dlse):", "def backward(ctx, dy, dlse:")
    assert untested(SOFTMAX, broken, FORWARD) == [] and untested(broken, SOFTMAX, FORWARD) == []
