"""A Spec for a launcher as its users call it: its arguments in, what it returns out (a tensor or a
tuple), and, where it runs through a torch.autograd.Function, its backward too (kgit init writes tests
on it).

    SPEC = harness.from_launcher(name="softmax", metric="gbps", launch=softmax, arguments=arguments,
                                 reference=reference, backward_of=(0,), gpu=..., interpreter=...)

arguments(shape, dtype, device, case) -> the launcher's arguments: FRESH random tensors (harness.rand)
    and the plain values (a float, a mode string) it takes.
reference(*arguments) -> what the launcher returns, computed with torch: it is given the same
    arguments, each floating tensor as a float64 copy.
backward_of: None, or the indices of the outputs that get a random gradient (the others get zero):
    the launcher's outputs are then followed by the gradients of its floating tensor arguments, from
    its backward through autograd, and the reference's from autograd through reference(): a broken
    backward fails its checks as a broken forward does.

The harness's inputs are the arguments, then one gradient per output of the reference (drawn for its
shape); its outputs, the launcher's tensors, then the gradients. A launcher allocates what it returns:
the kernel copies it into the harness's outputs, whose shapes and dtypes come from one call of the
launcher per shape of its arguments.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from kgit.harness.spec import Spec


class _Inputs(tuple):
    """The launcher's arguments, then the gradients given to the outputs (none without a backward)."""

    arguments: int


def from_launcher(name: str, metric: str, launch: Callable, arguments: Callable[..., Sequence],
                  reference: Callable, backward_of: Sequence[int] | None, **spec: Any) -> Spec:
    """A Spec that calls launch(*arguments) (the module docstring); spec: Spec's other fields."""
    shapes = {}  # the outputs' shapes, dtypes and devices, by the shapes of the arguments

    def make_inputs(shape, dtype, device, case):
        import torch

        given = tuple(arguments(shape, dtype, device, case))
        gradients = ()
        if backward_of is not None:
            with torch.no_grad():
                expected = _tensors(reference(*_float64(given, False)))
            gradients = tuple(_random(out.shape, dtype, device) if i in backward_of else
                              torch.zeros(out.shape, dtype=dtype, device=device)
                              for i, out in enumerate(expected))
        inputs = _Inputs(given + gradients)
        inputs.arguments = len(given)
        return inputs

    def run(inputs):
        given, gradients = inputs[:inputs.arguments], inputs[inputs.arguments:]
        if backward_of is None:
            return _tensors(launch(*given))
        given = tuple(_leaf(a) for a in given)
        import torch

        with torch.enable_grad():
            outs = _tensors(launch(*given))
            return _with_gradients(outs, given, gradients, backward_of)

    def make_outputs(inputs):
        import torch

        key = tuple((tuple(a.shape), a.dtype) if hasattr(a, "shape") else repr(a) for a in inputs)
        if key not in shapes:
            shapes[key] = [(out.shape, out.dtype, out.device) for out in run(inputs)]
        return tuple(torch.empty(s, dtype=d, device=where) for s, d, where in shapes[key])

    def kernel(inputs, outputs):
        for out, value in zip(outputs, run(inputs)):
            out.copy_(value)

    def expected(inputs):
        import torch

        given, gradients = inputs[:inputs.arguments], inputs[inputs.arguments:]
        given = _float64(given, backward_of is not None)
        with torch.enable_grad():
            outs = _tensors(reference(*given))
            if backward_of is None:
                return outs
            return _with_gradients(outs, given, gradients, backward_of)

    return Spec(name=name, metric=metric, make_inputs=make_inputs, make_outputs=make_outputs, kernel=kernel,
                reference=expected, **spec)


def _tensors(returned) -> tuple:
    """What a launcher (or its reference) returned, as a tuple of its tensors."""
    items = returned if isinstance(returned, (tuple, list)) else (returned,)
    return tuple(item for item in items if hasattr(item, "copy_"))


def _floating(value) -> bool:
    return hasattr(value, "is_floating_point") and value.is_floating_point()


def _leaf(value):
    """A floating tensor as a new leaf that autograd follows; any other value as it is."""
    return value.detach().requires_grad_() if _floating(value) else value


def _float64(given: tuple, track: bool) -> tuple:
    import torch

    return tuple((value.detach().to(torch.float64).requires_grad_(track) if _floating(value) else value)
                 for value in given)


def _random(shape, dtype, device):
    from kgit.harness.inputs import rand

    return rand(shape, dtype, device)


def _with_gradients(outs: tuple, given: tuple, gradients: tuple, backward_of: Sequence[int]) -> tuple:
    """outs, detached, then the gradients of the floating arguments for these gradients of the chosen
    outputs (zero where an argument gets none)."""
    import torch

    wrt = [value for value in given if _floating(value)]
    chosen = [(out, grad) for i, (out, grad) in enumerate(zip(outs, gradients))
              if i in backward_of and out.requires_grad]
    found = [None] * len(wrt)
    if chosen and wrt:
        found = torch.autograd.grad([out for out, _ in chosen], wrt, [grad.to(out.dtype) for out, grad in chosen],
                                    allow_unused=True)
    return (tuple(out.detach() for out in outs)
            + tuple(torch.zeros_like(value) if grad is None else grad for value, grad in zip(wrt, found)))
