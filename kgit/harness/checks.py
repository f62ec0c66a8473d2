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
"""

from __future__ import annotations

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


def run_checks(spec: Spec, plan: list[tuple]) -> list[dict]:
    """check_one over every (shape, dtype, case) of `plan`; one failure record per failing entry."""
    failures = []
    for shape, dtype, case in plan:
        try:
            why = check_one(spec, shape, dtype, case)
        except Exception as e:  # a kernel that crashes on a shape fails that shape
            why = f"raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if why:
            failures.append({"shape": list(shape), "dtype": dtype, "case": case, "error": why})
    return failures
