"""The checks catch cheating kernels and let honest ones pass: memory-bound (softmax, elementwise
tolerance) and compute-bound (gemm, norm tolerance) alike, through the same harness."""

import os

import torch

from kgit import harness
from kgit.harness.checks import check_one


def run(spec):
    return harness.run(spec, timer=harness.Timer(repeats=1))


def first_error(result) -> str:
    assert result["status"] == "fail" and result["correctness"] is False
    return result["errors"][0]["error"]


def test_honest_kernels_pass(softmax_spec, softmax_t, gemm_spec, gemm_t):
    assert run(softmax_spec(lambda i, o: softmax_t.softmax(i[0], out=o[0])))["status"] == "pass"
    assert run(gemm_spec(lambda i, o: gemm_t.gemm(*i, out=o[0])))["status"] == "pass"


def test_calling_torch_is_caught(softmax_spec, gemm_spec):
    softmax = softmax_spec(lambda i, o: o[0].copy_(torch.softmax(i[0].float(), dim=-1)))
    assert "torch ops ['_softmax']" in first_error(run(softmax))
    gemm = gemm_spec(lambda i, o: o[0].copy_(torch.matmul(*i)))
    assert "torch ops ['mm']" in first_error(run(gemm))


def test_computing_with_torch_under_another_name_is_caught(softmax_spec):
    def cheat(inputs, outputs):
        x = inputs[0].float()
        e = (x - x.amax(-1, keepdim=True)).exp()
        outputs[0].copy_(e / e.sum(-1, keepdim=True))

    assert "torch ops ['amax', 'div', 'exp', 'sub', 'sum']" in first_error(run(softmax_spec(cheat)))


def test_caching_outputs_by_shape_is_caught(softmax_spec, softmax_t):
    cache = {}

    def cheat(inputs, outputs):
        key = tuple(inputs[0].shape)
        if key not in cache:
            softmax_t.softmax(inputs[0], out=outputs[0])
            cache[key] = outputs[0].clone()
        outputs[0].copy_(cache[key])

    assert first_error(run(softmax_spec(cheat))).startswith("second input: ")


def test_caching_outputs_by_pointer_is_caught(gemm_spec, gemm_t):
    cache = {}

    def cheat(inputs, outputs):
        key = (inputs[0].data_ptr(), outputs[0].data_ptr())
        if key not in cache:
            gemm_t.gemm(*inputs, out=outputs[0])
            cache[key] = outputs[0].clone()
        outputs[0].copy_(cache[key])

    assert first_error(run(gemm_spec(cheat))).startswith("input rewritten in place (same buffers): ")


def test_unwritten_rows_and_columns_are_caught(softmax_spec, softmax_t, gemm_spec, gemm_t):
    def some_rows(inputs, outputs):
        half = max(1, inputs[0].shape[0] // 2)
        softmax_t.softmax(inputs[0][:half], out=outputs[0][:half])

    assert "NaN: unwritten" in first_error(run(softmax_spec(some_rows)))
    some_cols = gemm_spec(lambda i, o: o[0][:, :-1].copy_(gemm_t.gemm(*i)[:, :-1]))
    assert "NaN: unwritten" in first_error(run(some_cols))


def test_returning_a_new_tensor_leaves_the_outputs_unwritten(softmax_spec, softmax_t):
    assert "NaN" in first_error(run(softmax_spec(lambda i, o: softmax_t.softmax(i[0]))))


def test_nondeterminism_is_caught(softmax_spec, softmax_t):
    # every other call nudges its output by one part in ten million: far inside the tolerance, but
    # the same input no longer gives bitwise the same output (two code paths whose roundings differ
    # in the last bit, as this test first had it, sometimes agree on a random input)
    calls = []

    def cheat(inputs, outputs):
        calls.append(1)
        softmax_t.softmax(inputs[0], out=outputs[0])
        if len(calls) % 2:
            outputs[0].mul_(1 + 1e-7)

    spec = softmax_spec(cheat, interpreter=harness.Plan(check_shapes=[(8, 100)], time_shapes=[(8, 100)],
                                                        dtypes=("fp32",)))
    assert "two runs on the same input differ" in first_error(run(spec))


def test_wrong_values_fail_each_tolerance(softmax_spec, gemm_spec, gemm_t):
    zeros = softmax_spec(lambda i, o: o[0].zero_(), interpreter=harness.Plan(
        check_shapes=[(2, 4096)], time_shapes=[(2, 4096)], dtypes=("fp32",)))
    assert "out of tolerance" in first_error(run(zeros))  # all-zero softmax at long rows: tiny values
    skipped_k = gemm_spec(lambda i, o: gemm_t.gemm(i[0][:, :-4].contiguous(), i[1][:-4].contiguous(), out=o[0]))
    assert "relative error" in first_error(run(skipped_k))  # the last 4 of 16 K: ~50% off


def test_a_kernel_wrong_only_at_the_timed_shape_is_caught(softmax_spec, softmax_t):
    # a tuner's candidate can break a path that only the timed shape takes (e.g. long rows)
    def cheat(inputs, outputs):
        softmax_t.softmax(inputs[0], out=outputs[0])
        if inputs[0].shape[1] == 64:
            outputs[0].zero_()

    spec = softmax_spec(cheat, interpreter=harness.Plan(check_shapes=[(6, 40)], time_shapes=[(4, 64)],
                                                        dtypes=("fp32",)))
    result = run(spec)
    assert result["errors"][0]["case"] == "timing"
    assert result["reason"].startswith("(4, 64) fp32 timing: the timed output is wrong")  # what kgit's log shows


def test_a_crash_fails_its_shape(softmax_spec):
    def crash(inputs, outputs):
        raise RuntimeError("no kernel for this shape\nsecond line")

    # the line of the user's code it came from, after the exception's first line
    assert first_error(run(softmax_spec(crash))) == (
        f"raised RuntimeError: no kernel for this shape (at {os.path.relpath(__file__)}:"
        f"{crash.__code__.co_firstlineno + 1}: "
        "raise RuntimeError(\"no kernel for this shape\\nsecond line\"))")


def test_the_sample_narrows_the_comparison_but_not_the_finite_check(softmax_spec, softmax_t):
    first_row = lambda inputs, outputs: (tuple(t[:1] for t in inputs), tuple(t[:1] for t in outputs))  # noqa: E731

    def rows_after_the_first_wrong(inputs, outputs):
        softmax_t.softmax(inputs[0], out=outputs[0])
        outputs[0][1:] *= 2

    spec = softmax_spec(rows_after_the_first_wrong, sample=first_row, allowed_torch_ops=("mul_",))
    assert check_one(spec, (6, 40), "fp32", "normal") is None

    def last_row_unwritten(inputs, outputs):
        softmax_t.softmax(inputs[0][:-1], out=outputs[0][:-1])

    why = check_one(softmax_spec(last_row_unwritten, sample=first_row), (6, 40), "fp32", "normal")
    assert "not finite" in why


SCALAR_KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def _add_eps(x_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    tl.store(y_ptr + offsets, x + eps.to(tl.float32), mask=offsets < n)


def add_eps(x, eps=1e-5):
    y = torch.empty_like(x)
    _add_eps[(1,)](x, y, x.numel(), eps, BLOCK=64)
    return y
'''


def test_a_kernel_that_fails_in_the_interpreter_shows_its_source_line(tmp_path, monkeypatch):
    # a scalar argument arrives in Triton's interpreter as a Python float: eps.to() raises inside the kernel
    import importlib.util

    (tmp_path / "ops").mkdir()
    (tmp_path / "ops/add_eps.py").write_text(SCALAR_KERNEL)
    found = importlib.util.spec_from_file_location("add_eps_for_tests", tmp_path / "ops/add_eps.py")
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)  # a test runs from the repository's root: the file is shown relative to it
    spec = harness.from_launcher(
        name="add-eps", metric="gbps", launch=module.add_eps, reference=lambda x, eps: x + eps, backward_of=None,
        arguments=lambda shape, dtype, device, case: (harness.rand(shape, dtype, device, case), 1e-5),
        gpu=harness.Plan(check_shapes=[], time_shapes=[]),
        interpreter=harness.Plan(check_shapes=[(1, 8)], time_shapes=[], dtypes=("fp32",)))
    error = first_error(harness.run(spec, timing=False))
    assert error == ("raised AttributeError: 'float' object has no attribute 'to' "
                     "(at ops/add_eps.py:10: tl.store(y_ptr + offsets, x + eps.to(tl.float32), mask=offsets < n))")


def test_a_failure_with_no_frame_of_the_users_code_has_no_line_to_show():
    from kgit.harness.checks import raised

    assert raised(ValueError("bad\nsecond line")) == "raised ValueError: bad"
    assert raised(RuntimeError()) == "raised RuntimeError: "


def test_a_refused_dtype_is_a_side_note_beside_nans(softmax_spec, softmax_t):
    # the plan checks fp16 first: its refusal is found first, the NaNs at fp32 after it
    def nan_at_fp32(inputs, outputs):
        if inputs[0].dtype == torch.float16:
            raise TypeError("fp16 is not supported")
        softmax_t.softmax(inputs[0], out=outputs[0])
        outputs[0][0, 0] = float("nan")

    plan = harness.Plan(check_shapes=[(3, 17)], time_shapes=[], dtypes=("fp16", "fp32"))
    result = harness.run(softmax_spec(nan_at_fp32, interpreter=plan), timing=False)
    assert result["reason"].startswith("(3, 17) fp32 normal: output 0: 1 of 51 elements not finite")
    assert result["reason"].endswith("(+1 more failures)")
    assert [(e["dtype"], e["kind"]) for e in result["errors"]] == [("fp32", "not_finite"), ("fp16", "unsupported")]


def test_what_a_crash_says_tells_a_refusal_from_a_crash():
    from kgit.harness.checks import kind_of_exception

    for declined in (TypeError("fp16 is not supported"), RuntimeError("expected scalar type Float but found Half"),
                     ValueError("unsupported dtype torch.bfloat16"), NotImplementedError("inline asm")):
        assert kind_of_exception(declined) == "unsupported", declined
    for crashed in (TypeError("unsupported operand type(s) for +: 'float' and 'NoneType'"),
                    AttributeError("'float' object has no attribute 'to'"), IndexError("out of range")):
        assert kind_of_exception(crashed) == "crash", crashed
    try:  # the interpreter wraps a kernel's exception: the one it wraps says what happened
        try:
            raise ValueError("fp16 is not supported")
        except ValueError as inner:
            raise RuntimeError("interpreter error") from inner
    except RuntimeError as wrapped:
        assert kind_of_exception(wrapped) == "unsupported"
