"""The tolerance model: how far an output may be from its reference, and the one compare().

A kernel picks, per output dtype, one of two kinds (Spec.tolerances):

Elementwise(rtol, atol, floor): every element must satisfy
    |out - ref| <= rtol * |ref| + atol * rowmax + floor
  where rowmax is the largest |ref| of the element's row. For kernels whose every element is one
  short computation (softmax, norms, rotary, cross-entropy): a single wrong element fails.
Norm(rel, row_factor): the relative Frobenius error ||out - ref|| / ||ref|| must be <= rel, and the
  worst row's relative error <= row_factor * rel. For kernels that sum long products (matmul,
  attention, MoE), whose elements near zero carry cancellation error no per-element bound can take;
  the worst-row check catches one wrong row that the norm of a large output would dilute.

A row is the last dimension (a 1-D output is one row). Errors are computed in float64.
"""

from __future__ import annotations

from dataclasses import dataclass


def _rows(t):
    return t.reshape(-1, t.shape[-1] if t.dim() else 1)


@dataclass(frozen=True)
class Elementwise:
    rtol: float
    atol: float  # relative to the row's largest |ref|, so it scales with the data
    floor: float  # absolute: one subnormal spacing of the dtype, where relative precision ends

    def violation(self, out, ref) -> str | None:
        o, r = _rows(out), _rows(ref)
        err = (o - r).abs()
        allowed = self.rtol * r.abs() + self.atol * r.abs().amax(dim=-1, keepdim=True) + self.floor
        bad = err > allowed
        if not bad.any():
            return None
        row, col = bad.nonzero()[0].tolist()
        worst = (err / allowed.clamp_min(1e-300)).max().item()
        return (f"{bad.sum().item()} of {out.numel()} elements out of tolerance in {bad.any(-1).sum().item()} "
                f"of {r.shape[0]} rows (first at row {row} col {col}, worst {worst:.3g}x the allowance, "
                f"max abs err {err.max().item():.3g})")


@dataclass(frozen=True)
class Norm:
    rel: float
    row_factor: float = 3.0

    def violation(self, out, ref) -> str | None:
        o, r = _rows(out), _rows(ref)
        diff = o - r
        rel = (diff.norm() / r.norm().clamp_min(1e-30)).item()
        worst_row = (diff.norm(dim=-1) / r.norm(dim=-1).clamp_min(1e-30)).max().item()
        if rel <= self.rel and worst_row <= self.row_factor * self.rel:
            return None
        return (f"relative error {rel:.3g} (worst row {worst_row:.3g}) over tolerance {self.rel:g} "
                f"(rows {self.row_factor:g}x that)")


Tolerance = Elementwise | Norm

# Keyed by the OUTPUT dtype.
# rtol: the kernel computes in fp32 and rounds once to the output dtype, which alone costs up to half
#   an ulp (fp16 2^-11 = 4.9e-4, bf16 2^-8 = 3.9e-3 relative); exp() of arguments up to ~100 (inputs
#   x1e4) loses |arg| fp32 ulps. About 4 output half-ulps: fp16 2e-3, bf16 1.6e-2; fp32 1e-4.
# atol x rowmax covers elements far smaller than their row's largest, where the absolute error of a
#   shared intermediate (the row max, the mean) dominates; it never lets a row of tiny values (softmax
#   over 262144 elements: ~4e-6 each) pass as all zeros.
# floor: one subnormal spacing (fp16 2^-24): inputs x1e-6 give fp16 outputs exact only to that.
ELEMENTWISE = {
    "fp32": Elementwise(rtol=1e-4, atol=1e-4, floor=1.4e-45),
    "fp16": Elementwise(rtol=2e-3, atol=1e-3, floor=6e-8),
    "bf16": Elementwise(rtol=1.6e-2, atol=8e-3, floor=9.2e-41),
    "fp64": Elementwise(rtol=1e-10, atol=1e-12, floor=5e-324),
}

# Accumulation is fp32, so the error is the output's rounding (bf16: at most 2^-9 relative per
# element, about 1.1e-3 rms) plus one more rounding of an intermediate where the algorithm needs one
# (P in attention, the activation between the MoE GEMMs): measured 2e-3 to 4e-3 in bf16, a ~3x margin
# under 1e-2. A wrong 128x128 tile of a 4096^2 output gives ~4e-2, a skipped K block 1e-1. fp16 keeps
# the bf16 bound (errors ~5e-4). fp32: tl.dot on fp32 uses tf32 on the GPU (3e-4 to 1e-3).
NORM = {
    "fp32": Norm(rel=5e-3),
    "fp16": Norm(rel=1e-2),
    "bf16": Norm(rel=1e-2),
}


def not_finite(out) -> str | None:
    """Why a floating output holds NaN or Inf (a NaN is an element left unwritten, or an overflow), or None."""
    import torch

    finite = torch.isfinite(out)
    if finite.all():
        return None
    rows = _rows(~finite).any(-1).sum().item()
    return (f"{(~finite).sum().item()} of {out.numel()} elements not finite ({torch.isnan(out).sum().item()} "
            f"NaN: unwritten or overflowed), in {rows} rows")


def compare(out, ref, tolerance: Tolerance | None) -> str | None:
    """None when `out` matches `ref`, else a one-line reason. NaN or Inf in `out` always fails."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    if not out.is_floating_point():
        differ = (out != ref.to(out.dtype)).sum().item()
        return f"{differ} of {out.numel()} integer elements differ" if differ else None
    if not torch.isfinite(ref).all():
        raise RuntimeError("reference is not finite: the test's inputs are invalid")
    why = not_finite(out)
    if why:
        return why
    if tolerance is None:
        raise RuntimeError(f"the spec has no tolerance for {out.dtype}")
    return tolerance.violation(out.double(), ref.double())
