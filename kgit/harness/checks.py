"""Correctness before any timing counts: the checks every shape, dtype and value regime goes through.

For one (shape, dtype, case):
  1. fresh input A into poisoned outputs (NaN: an unwritten element fails); the first call is not
     under the cheat check, because it may compile and autotune (timing loops under a dispatch
     recorder read wrong); compared with the reference;
  2. A again, into re-poisoned outputs: bitwise equal to 1 (a race, or state left from the last call);
  3. a second fresh input B into new outputs: a kernel that caches its outputs by shape fails;
  4. new values written IN PLACE into A's buffers (same pointers, same shapes): a kernel that caches
     by pointer or call count fails.
Calls 2-4 run under the cheat check (harness.cheat). After timing, a timed shape goes through step 4
once more (recheck): the timed path must be the checked path.

Each failure has a kind, in the order it matters (KINDS): wrong values first (a wrong element, a race,
a cheat), then values not finite (NaN, Inf), then a crash, then a complaint about what the kernel does
not support (a dtype it refuses, NotImplementedError). The failing run's one line names the first
failure of the kind that matters most: an fp16 the kernel declines is a side note beside NaNs at fp32.
"""

from __future__ import annotations

import os
import re
import sysconfig
import traceback

from kgit.harness import cheat, device
from kgit.harness.spec import Spec, dtype_name, torch_dtype
from kgit.harness.tolerance import compare, not_finite


def wrong_outputs(spec: Spec, inputs, outputs) -> str | None:
    """Why the outputs do not match the reference (or the spec's sample of it), or None."""
    if spec.sample is not None:
        for i, out in enumerate(outputs):
            why = not_finite(out) if out.is_floating_point() else None
            if why:
                return f"output {i}: {why}"
        inputs, outputs = spec.sample(inputs, outputs)
    refs = spec.reference(inputs)
    if len(outputs) != len(refs):
        return f"{len(outputs)} outputs but {len(refs)} references"
    for i, (out, ref) in enumerate(zip(outputs, refs)):
        why = compare(out, ref, spec.tolerances.get(dtype_name(out.dtype)))
        if why:
            return f"output {i}: {why}"
    return None


def guarded_call(spec: Spec, inputs, outputs) -> str | None:
    """Poison the outputs and run the kernel under the cheat check; why it cheated, or None."""
    cheat.poison(outputs)
    computed = cheat.computing_ops(lambda: spec.kernel(inputs, outputs), spec.allowed_torch_ops)
    device.sync()
    return f"kernel called torch ops {computed}: it must compute, not call torch" if computed else None


def recheck(spec: Spec, inputs, outputs, shape, dtype: str, case: str = "normal") -> str | None:
    """New values in place in `inputs`, one guarded call, compared: why it fails, or None."""
    fresh = spec.make_inputs(shape, torch_dtype(dtype), device.detect()["device"], case)
    for tensor, values in zip(inputs, fresh):
        if hasattr(tensor, "copy_"):  # plain values (a flag, a count) stay as they are
            tensor.copy_(values)
    return guarded_call(spec, inputs, outputs) or wrong_outputs(spec, inputs, outputs)


def check_one(spec: Spec, shape, dtype: str, case: str) -> str | None:
    """Steps 1-4 of the module docstring for one (shape, dtype, case); why it fails, or None."""
    where = device.detect()["device"]
    inputs = spec.make_inputs(shape, torch_dtype(dtype), where, case)
    outputs = cheat.poison(spec.make_outputs(inputs))
    spec.kernel(inputs, outputs)
    device.sync()
    why = wrong_outputs(spec, inputs, outputs)
    if why:
        return why
    first = [out.clone() for out in outputs]
    why = guarded_call(spec, inputs, outputs)
    if why:
        return why
    for i, (out, before) in enumerate(zip(outputs, first)):
        if not out.equal(before):
            differ = (out != before).sum().item()
            return f"output {i}: two runs on the same input differ in {differ} elements"
    other = spec.make_inputs(shape, torch_dtype(dtype), where, case)
    other_outputs = spec.make_outputs(other)
    why = guarded_call(spec, other, other_outputs) or wrong_outputs(spec, other, other_outputs)
    if why:
        return "second input: " + why
    why = recheck(spec, inputs, outputs, shape, dtype, case)
    return "input rewritten in place (same buffers): " + why if why else None


KINDS = ("wrong", "not_finite", "crash", "unsupported")  # a failure's kind, in the order it matters
# What a crash says when the kernel refuses a dtype rather than computing it wrong: "fp16 not supported",
# "expected scalar type Float but found Half", "unsupported dtype torch.bfloat16"
_DTYPE_WORDS = re.compile(r"\b(dtypes?|float16|bfloat16|half|bf16|fp16|float8\w*|fp8\w*)\b", re.IGNORECASE)


def kind_of(why: str) -> str:
    """The kind (KINDS) of a check's reason that no exception raised."""
    return "not_finite" if "not finite" in why else "wrong"


def kind_of_exception(error: BaseException) -> str:
    """"unsupported" for an exception that declines (NotImplementedError, a message naming a dtype),
    else "crash"."""
    inner = _chain(error)[-1]  # the interpreter's wrapper says nothing of its own
    declined = isinstance(inner, NotImplementedError) or _DTYPE_WORDS.search(str(inner))
    return "unsupported" if declined else "crash"


def run_checks(spec: Spec, plan: list[tuple]) -> list[dict]:
    """check_one over every (shape, dtype, case) of `plan`; one failure record per failing entry."""
    failures = []
    for shape, dtype, case in plan:
        try:
            why = check_one(spec, shape, dtype, case)
            kind = kind_of(why) if why else None
        except Exception as e:  # a kernel that crashes on a shape fails that shape
            why, kind = raised(e), kind_of_exception(e)
        if why:
            failures.append({"shape": list(shape), "dtype": dtype, "case": case, "error": why, "kind": kind})
    return failures


# Where the code a user wrote does not live: the Python library, the packages installed beside it, kgit
_NOT_THE_USERS = tuple(os.path.realpath(p) + os.sep for p in {
    *(sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))})
MESSAGE_CHARS, LINE_CHARS = 120, 100  # a failure's one line: the contract keeps 300 characters of it


def raised(error: BaseException) -> str:
    """A kernel's exception in one line, with the line of the user's code it came from: in Triton's
    interpreter a kernel runs as Python, so a failure inside one (a scalar argument that arrives as a
    Python float: eps.to(tl.float32)) has a line of the kernel's source. The interpreter wraps it in an
    InterpreterError: the exception it wraps is the one shown."""
    chain = _chain(error)
    inner = chain[-1]
    message = str(inner).splitlines()[0] if str(inner).strip() else ""
    text = f"raised {type(inner).__name__}: {message[:MESSAGE_CHARS]}"
    for found in reversed(chain):  # the innermost exception with a frame of the user's code
        frames = [f for f in traceback.extract_tb(found.__traceback__) if _users(f.filename)]
        if frames:
            where = frames[-1]
            shown = os.path.relpath(where.filename) if _under_cwd(where.filename) else where.filename
            return f"{text} (at {shown}:{where.lineno}: {(where.line or '').strip()[:LINE_CHARS]})"
    return text


def _chain(error: BaseException) -> list[BaseException]:
    """The exception and those it was raised from, outermost first (ten at most)."""
    chain = [error]
    while chain[-1].__cause__ is not None and len(chain) < 10:
        chain.append(chain[-1].__cause__)
    return chain


def _users(filename: str) -> bool:
    path = os.path.realpath(filename)
    return os.path.isfile(path) and not path.startswith(_NOT_THE_USERS)


def _under_cwd(filename: str) -> bool:
    return os.path.realpath(filename).startswith(os.path.realpath(os.getcwd()) + os.sep)
