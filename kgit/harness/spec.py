"""What a kernel test declares: a Spec (its callables, metric and tolerance) and two Plans (the shapes
and dtypes checked and timed on a GPU, and the tiny ones run in Triton's interpreter).

Dtypes are named one way everywhere: "fp32", "fp16", "bf16" (and "fp64"), the names of kgit's peak
table (kgit.model.peaks) and of the JSON the tests print.
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
    """What one run checks and times: a Spec has one for a GPU (Spec.gpu) and one for Triton's
    interpreter on a CPU (Spec.interpreter, tiny shapes: it runs about a thousand times slower).

    A shape is a tuple that make_inputs reads as the kernel needs it ((rows, cols) for a row-wise
    kernel, (M, N, K) for a GEMM); a dtype a name of DTYPES ("fp32", "fp16", "bf16", "fp64").

    check_shapes    checked in every dtype of `dtypes` with normal values, four calls each
                    (harness.checks): odd sizes, edges, every code path of the launcher
    time_shapes     timed in every dtype of time_dtypes: the headline, the figure kgit decides on
                    (their geometric mean where there are several)
    dtypes          the dtypes checked (default fp32, fp16, bf16): those the kernel supports
    time_dtypes     the dtypes timed (default: dtypes)
    extreme_shapes  checked in each value regime of Spec.cases but normal (large, tiny, ...), in every
                    dtype of `dtypes`
    sweep_shapes    timed too with --sweep, each reported on its own, never in the headline
    sweep_dtypes    the dtypes of sweep_shapes (default: time_dtypes)
    """

    check_shapes: Sequence[tuple]
    time_shapes: Sequence[tuple]
    dtypes: Sequence[str] = ("fp32", "fp16", "bf16")
    time_dtypes: Sequence[str] | None = None
    extreme_shapes: Sequence[tuple] = ()
    sweep_shapes: Sequence[tuple] = ()
    sweep_dtypes: Sequence[str] | None = None

    def headline_dtypes(self) -> tuple:
        return tuple(self.time_dtypes or self.dtypes)

    def swept_dtypes(self) -> tuple:
        return tuple(self.sweep_dtypes or self.headline_dtypes())


@dataclass(frozen=True)
class Spec:
    """One kernel, as its test_<name>.py describes it to the harness; harness.main(SPEC) checks it, times
    it and prints the JSON kgit reads (harness.contract). `inputs` and `outputs` are the tuples that
    make_inputs and make_outputs return.

    name          the kernel's name in the JSON and the tables
    metric        "gbps" (bytes moved a second: nbytes) or "tflops" (work a second: flops, then required)
    make_inputs   (shape, dtype, device, case) -> a tuple: the kernel's tensors with FRESH random values
                  on every call (harness.rand(shape, dtype, device, case)), and any plain values (a
                  scale, a flag, a size taken from the shape), which ride along: the checks rewrite only
                  the tensors. dtype is a torch dtype; case the value regime (harness.inputs.CASES)
    make_outputs  (inputs) -> a tuple of the tensors the kernel writes; torch.empty is fine: the harness
                  poisons them (NaN, an integer's minimum) before every call
    kernel        (inputs, outputs): one call of the kernel under test; it must write every element of
                  `outputs`, and compute rather than call torch (harness.cheat)
    reference     (inputs) -> a tuple of tensors, one per output, computed with torch in more precision
                  (fp64 or fp32); each output is compared with it under tolerances
    gpu           the Plan run on a GPU
    interpreter   the Plan run in Triton's interpreter, or where there is no GPU: tiny shapes
    torch_impl    (inputs) -> what a user would call instead; timed beside the kernel ("speedup")
    torch_name    what torch_impl is called in the JSON and the tables ("torch")
    others        name -> (inputs) -> more implementations timed beside it, as <name>_<metric> per shape
    nbytes        (inputs, outputs) -> the least traffic of a call (default: every tensor input read once,
                  every output written once)
    flops         (inputs, outputs) -> the floating-point operations of a call; required for "tflops"
    tolerances    output dtype name -> Tolerance: Elementwise (ELEMENTWISE, the default: each element
                  alone, for kernels whose elements are one short computation each) or Norm (NORM: the
                  relative norm of the error, and the worst row's, for long sums: matmul, attention)
    cases         the value regimes the extreme_shapes are checked in besides "normal" (harness.CASES)
    sample        (inputs, outputs) -> (inputs, outputs): the part of a huge problem compared with the
                  reference (every element of every output is still checked finite); None: all of it
    allowed_torch_ops  aten ops the kernel call may dispatch beyond harness.cheat's list (allocation,
                  views, copies, casts, fills)
    label         (shape) -> how a shape reads in tables (default "AxBxC")
    launched      () -> the configuration the kernel's latest launch ran (a template's last_config),
                  recorded with each timed shape: which algorithm served it, where a launcher or its
                  autotune chooses
    """

    name: str
    metric: str
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
