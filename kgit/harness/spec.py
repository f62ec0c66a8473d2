"""What a kernel test declares: a Spec (its callables, metric and tolerance) and two Plans (the shapes
and dtypes checked and timed on a GPU, and the tiny ones run in Triton's interpreter).

Dtypes are named one way everywhere: "fp32", "fp16", "bf16" (and "fp64"), the names of kgit's peak
table (kgit.gpu) and of the JSON the tests print.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from kgit.harness.tolerance import ELEMENTWISE, Tolerance

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}


def torch_dtype(name: str):
    import torch

    return getattr(torch, DTYPES[name])


def dtype_name(dtype) -> str:
    """The short name of a torch dtype ("torch.bfloat16" -> "bf16"); other dtypes keep torch's name."""
    torch_name = str(dtype).replace("torch.", "")
    return next((short for short, long in DTYPES.items() if long == torch_name), torch_name)


@dataclass(frozen=True)
class Plan:
    """What one run checks and times.

    check_shapes x dtypes are checked with normal values; extreme_shapes x dtypes also with every
    other value regime of Spec.cases. time_shapes x time_dtypes make the headline (the figures kgit
    decides on); sweep_shapes x sweep_dtypes are timed too with --sweep, never in the headline.
    """

    check_shapes: Sequence[tuple]
    time_shapes: Sequence[tuple]
    dtypes: Sequence[str] = ("fp32", "fp16", "bf16")
    time_dtypes: Sequence[str] | None = None  # default: dtypes
    extreme_shapes: Sequence[tuple] = ()
    sweep_shapes: Sequence[tuple] = ()
    sweep_dtypes: Sequence[str] | None = None  # default: time_dtypes

    def headline_dtypes(self) -> tuple:
        return tuple(self.time_dtypes or self.dtypes)

    def swept_dtypes(self) -> tuple:
        return tuple(self.sweep_dtypes or self.headline_dtypes())


@dataclass(frozen=True)
class Spec:
    """One kernel, as its test_<name>.py describes it to the harness.

    make_inputs(shape, dtype, device, case) -> tuple of tensors, FRESH random values on every call
        (use harness.rand); `case` names the value regime (harness.inputs.CASES). Plain values (a
        flag, a count taken from the shape) may ride along; the checks rewrite only the tensors.
    make_outputs(inputs) -> tuple of tensors the kernel writes (torch.empty is fine: the harness
        poisons them before every call).
    kernel(inputs, outputs): must write every element of `outputs`.
    reference(inputs) -> tuple of tensors, one per output, in higher precision (fp64 or fp32).
    sample(inputs, outputs) -> (inputs, outputs): the part of a huge problem compared with the
        reference (every element of every output is still checked finite); None: all of it.
    torch_impl(inputs): what a user would call instead; timed beside the kernel ("speedup").
    others: more implementations timed beside it, reported as <name>_<metric> per shape.
    nbytes(inputs, outputs) -> minimal traffic (default: every input read once, every output written
        once); flops(inputs, outputs) -> work, required for metric "tflops".
    tolerances: output dtype -> Tolerance; the per-kernel choice between ELEMENTWISE and NORM.
    allowed_torch_ops: aten ops this kernel's launcher may dispatch beyond harness.cheat's list.
    label(shape) -> how a shape reads in tables (default "AxBxC").
    launched(): the configuration the kernel's latest launch ran (a template's last_config), recorded
        with each timed shape: which algorithm served it, where a launcher or its autotune chooses.
    """

    name: str
    metric: str  # "gbps" or "tflops"
    make_inputs: Callable[..., tuple]
    make_outputs: Callable[[tuple], tuple]
    kernel: Callable[[tuple, tuple], Any]
    reference: Callable[[tuple], tuple]
    gpu: Plan
    interpreter: Plan
    torch_impl: Callable[[tuple], Any] | None = None
    torch_name: str = "torch"
    others: Mapping[str, Callable[[tuple], Any]] = field(default_factory=dict)
    nbytes: Callable[[tuple, tuple], int] | None = None
    flops: Callable[[tuple, tuple], float] | None = None
    tolerances: Mapping[str, Tolerance] = field(default_factory=lambda: dict(ELEMENTWISE))
    cases: Sequence[str] = ("normal",)
    sample: Callable[[tuple, tuple], tuple] | None = None
    allowed_torch_ops: Sequence[str] = ()
    label: Callable[[tuple], str] | None = None
    launched: Callable[[], Mapping] | None = None

    def __post_init__(self):
        if self.metric not in ("gbps", "tflops"):
            raise ValueError(f"{self.name}: metric must be 'gbps' or 'tflops', not {self.metric!r}")
        if self.metric == "tflops" and self.flops is None:
            raise ValueError(f"{self.name}: a 'tflops' kernel needs flops(inputs, outputs)")

    def shape_label(self, shape) -> str:
        return self.label(shape) if self.label else "x".join(str(s) for s in shape)

    def tolerance(self, out_dtype) -> Tolerance:
        return self.tolerances[dtype_name(out_dtype)]
