"""The cheat check: what a kernel call may do besides running the kernel.

A call that computes with torch is not the kernel under test. Every checked call runs under a
recorder of the aten ops it dispatches (Triton launches do not pass through torch's dispatcher); any
op outside ALLOWED_TORCH_OPS (allocation, views, copies and casts, fills, scalar reads) or the
kernel's own Spec.allowed_torch_ops fails the check. A list of allowed ops, not of forbidden ones:
a launcher that computes softmax from exp() and sum() is caught as surely as one that calls softmax.
The other cheats (reused outputs, skipped work) are caught by poisoning the outputs (poison) and by
the checks' fresh and rewritten inputs (harness.checks).
"""

from __future__ import annotations

# (Triton's interpreter itself dispatches new_empty, set_, empty and copy_ to move arguments.)
ALLOWED_TORCH_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
    "zeros", "zeros_like", "new_zeros", "zero_", "fill_", "full", "full_like",
    "ones", "copy_", "_to_copy", "clone", "set_", "lift_fresh", "detach", "alias",
    "view", "_unsafe_view", "as_strided", "reshape", "t", "transpose", "permute",
    "expand", "select", "slice", "unsqueeze", "squeeze", "flatten", "unflatten",
    "split", "chunk", "unbind", "narrow", "_local_scalar_dense", "item", "sym_size",
    "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size", "record_stream",
})


def poison(outputs):
    """Fill floating outputs with NaN and integer ones with their minimum: unwritten elements show."""
    import torch

    for out in outputs:
        out.fill_(float("nan") if out.is_floating_point() else torch.iinfo(out.dtype).min)
    return outputs


def torch_ops_called(fn) -> set[str]:
    """Names of the aten ops `fn()` dispatches."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = set()

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with Recorder():
        fn()
    return seen


def computing_ops(fn, allowed_extra=()) -> list[str]:
    """The ops `fn()` dispatched that compute (sorted); empty for an honest launcher."""
    return sorted(torch_ops_called(fn) - ALLOWED_TORCH_OPS - set(allowed_extra))
