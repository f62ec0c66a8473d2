"""The measurement harness that every skills/kernels/<name>/test_<name>.py uses.

A kernel test describes its kernel with a `Spec` and hands it to `main()`:

    from kgit import bench

    SPEC = bench.Spec(
        name="softmax",
        make_inputs=lambda shape, dtype, device, case: (bench.rand(shape, dtype, device, case),),
        make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
        kernel=lambda inputs, outputs: softmax(inputs[0], out=outputs[0]),
        reference=lambda inputs: (torch.softmax(inputs[0].double(), -1),),
        torch_impl=lambda inputs: torch.softmax(inputs[0], -1),
        metric="gbps",
        check_shapes=[(1, 1), (3, 1023), ...], time_shapes=[(65536, 1024), ...],
        interp_check_shapes=[(3, 33), ...], interp_time_shapes=[(4, 64)],
        cases=("normal", "large", "tiny", "equal", "neginf"),
    )
    if __name__ == "__main__":
        bench.main(SPEC)

Contract of the callables (stable API):
  make_inputs(shape, dtype, device, case) -> tuple of tensors. FRESH random
      values on every call (use bench.rand); `case` names the value regime
      (see CASES). Called many times: inputs are never reused across checks.
  make_outputs(inputs) -> tuple of tensors to write into (torch.empty is fine:
      the harness fills floating outputs with NaN, integer ones with a sentinel,
      before every kernel call).
  kernel(inputs, outputs) -> ignored. Must WRITE every element of `outputs`;
      a kernel that returns a new tensor instead leaves NaN behind and fails.
  reference(inputs) -> tuple of tensors, in higher precision (float64), same
      shapes as outputs.
  torch_impl(inputs) -> anything; the baseline that "speedup" is measured
      against (None: no speedup).
  nbytes(inputs, outputs) -> int, the minimal traffic (default: every input
      read once plus every output written once). flops(inputs, outputs) ->
      float for "tflops" kernels.

What main() does:
  GPU: correctness over check_shapes x dtypes (case "normal") plus
      extreme_shapes x dtypes x the other cases; then, if all passed, timing
      over time_shapes x time_dtypes (default: dtypes) with
      triton.testing.do_bench(return_mode="median") (it clears the L2 before
      each run), repeated `repeats` times so each figure has a spread; the
      same for torch_impl; % of the measured copy bandwidth and of the
      datasheet peak (kgit.gpu).
  Interpreter (TRITON_INTERPRET=1) or CPU: correctness on the tiny interp_*
      shapes only; timing is a perf_counter CPU figure, labelled
      "cpu_timing": true, never compared to a GPU peak.
  Prints ONE JSON line last (the test contract), exit status 0 also when
  correctness fails (status "fail"). `--profile` runs the kernel 3 times at the
  first time shape and exits (no checks, no timing), for ncu.

Anti-cheat (each is exercised by tests/test_bench_harness.py):
  * outputs poisoned with NaN before every call: unwritten elements fail;
    NaN/Inf anywhere in an output fails; every element of every row is compared.
  * two different fresh inputs per check, then new values written IN PLACE into
    the first input's buffers (same pointers, same output buffer): a kernel that
    caches outputs by shape, pointer or call count fails.
  * the same input twice must give bitwise-equal outputs (Spec.deterministic).
  * the torch ops the kernel call dispatches are recorded
    (TorchDispatchMode): anything beyond allocation, views and copies
    (ALLOWED_TORCH_OPS) -- e.g. aten._softmax -- means the kernel called torch
    instead of computing, and fails.
  * a memory-bound figure above 1.2x the measured copy bandwidth at a shape
    whose traffic exceeds the L2 cannot be real work: it fails.

JSON fields: the contract's kernel, gpu, correctness, latency_us, gbps|tflops,
speedup, status; plus spread_pct, pct_of_peak, pct_of_copy, copy_gbps,
headline (what the headline figures are over: the geometric mean over all
timed shape x dtype entries), shapes (per-entry results), backend,
cpu_timing, seed, errors (first failures), checks (count).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from kgit import gpu as _gpu

# ---------------------------------------------------------------------------
# Tolerances: the ONE place they are written down.
#
# An output element passes when |out - ref| <= rtol*|ref| + atol*rowmax + floor,
# where ref is the float64 reference and rowmax = max |ref| over the element's
# row (last dimension; a 1-D output is one row). Keyed by the OUTPUT dtype.
#
# rtol: the kernel computes in fp32 and rounds once to the output dtype, which
#   alone costs up to half an ulp (fp16 2^-11 = 4.9e-4, bf16 2^-8 = 3.9e-3
#   relative); fp32 work adds a few fp32 ulps per op, and exp() of arguments
#   up to ~100 (inputs x1e4) loses |arg| ulps. We allow ~4 output half-ulps:
#   fp16 2e-3, bf16 1.6e-2; fp32 1e-4 (about 100 fp32 ulps: exp2 approximation
#   plus large arguments), in line with AutoKernel's fp16 1e-3 / fp32 1e-5 for
#   softmax but not so tight that rounding to bf16 alone fails.
# atol is relative to the row's largest magnitude, so it scales with the data
#   and never lets a tiny-valued row (softmax at 262144 elements: ~4e-6 each)
#   pass with all zeros. It covers elements far smaller than the row's largest,
#   where absolute error from a shared intermediate (the row max, the mean)
#   dominates; e.g. layernorm of an all-equal fp32 row: (x - mean) is a
#   rounding residue ~6e-8*|x| amplified by rstd = 1/sqrt(eps) ~ 316.
# floor: an absolute allowance of one subnormal spacing of the output dtype
#   (fp16: 2^-24 = 6e-8), where relative precision ends: inputs x1e-6 give
#   fp16 outputs that are subnormal, exact only to that spacing.
# A kernel may override per dtype with Spec.tolerances (e.g. a matmul, whose
# error grows with K).
TOLERANCES = {
    "fp32": {"rtol": 1e-4, "atol": 1e-4, "floor": 1.4e-45},
    "fp16": {"rtol": 2e-3, "atol": 1e-3, "floor": 6e-8},
    "bf16": {"rtol": 1.6e-2, "atol": 8e-3, "floor": 9.2e-41},
    "fp64": {"rtol": 1e-10, "atol": 1e-12, "floor": 5e-324},
}

# Value regimes for inputs (bench.rand):
#   normal: standard normal
#   large:  normal x 1e4 (clamped inside fp16's range): overflow in exp/square
#   tiny:   normal x 1e-6 (fp16 subnormals): underflow, eps dominance
#   equal:  every row one random constant: zero variance, uniform softmax
#   neginf: normal with ~1/8 of entries -inf (never a whole row): masked logits
CASES = ("normal", "large", "tiny", "equal", "neginf")

# aten ops a launcher may dispatch: allocation, views, copies/casts, fills and
# scalar reads. Anything else computes, and a kernel that computes with torch
# is not the kernel under test. (The interpreter itself dispatches new_empty,
# set_, empty and copy_ to move arguments to and from the host.)
ALLOWED_TORCH_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
    "zeros", "zeros_like", "new_zeros", "zero_", "fill_", "full", "full_like",
    "ones", "copy_", "_to_copy", "clone", "set_", "lift_fresh", "detach", "alias",
    "view", "_unsafe_view", "as_strided", "reshape", "t", "transpose", "permute",
    "expand", "select", "slice", "unsqueeze", "squeeze", "flatten", "unflatten",
    "split", "chunk", "unbind", "narrow", "_local_scalar_dense", "item", "sym_size",
    "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size", "record_stream",
})

DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}

# Timing defaults (milliseconds, as do_bench takes them).
WARMUP_MS = 25
REP_MS = 100
REPEATS = 3
# A memory-bound result above this multiple of the measured copy bandwidth, at
# a shape whose traffic is larger than any L2, is not real work.
IMPOSSIBLE_COPY_RATIO = 1.2
L2_SAFE_BYTES = 128 * 2**20


@dataclass
class Spec:
    name: str
    make_inputs: Callable[..., tuple]
    make_outputs: Callable[[tuple], tuple]
    kernel: Callable[[tuple, tuple], Any]
    reference: Callable[[tuple], tuple]
    torch_impl: Callable[[tuple], Any] | None = None
    metric: str = "gbps"  # or "tflops"
    nbytes: Callable[[tuple, tuple], int] | None = None
    flops: Callable[[tuple, tuple], float] | None = None
    dtypes: Sequence[str] = ("fp32", "fp16", "bf16")
    time_dtypes: Sequence[str] | None = None  # default: dtypes
    check_shapes: Sequence[tuple] = ()
    extreme_shapes: Sequence[tuple] | None = None  # default: the first 3 check shapes
    time_shapes: Sequence[tuple] = ()
    interp_check_shapes: Sequence[tuple] = ()
    interp_time_shapes: Sequence[tuple] | None = None  # default: first interp check shape
    cases: Sequence[str] = ("normal", "large", "tiny", "equal")
    tolerances: dict = field(default_factory=dict)  # {"bf16": {"rtol":..,"atol":..}}
    deterministic: bool = True  # two runs on one input must be bitwise equal
    allowed_torch_ops: Sequence[str] = ()
    peak_dtype: str | None = None  # dtype for the "tflops" peak (default: timed dtype)


# ---------------------------------------------------------------------------
# inputs

def torch_dtype(name: str):
    import torch
    return getattr(torch, DTYPE_NAMES.get(name, name))


def dtype_name(dtype) -> str:
    s = str(dtype).replace("torch.", "")
    return {v: k for k, v in DTYPE_NAMES.items()}.get(s, s)


def rand(shape, dtype, device, case: str = "normal"):
    """Fresh random values of `shape` in the regime `case` (see CASES)."""
    import torch
    shape = tuple(shape)
    x = torch.randn(shape, device=device, dtype=torch.float32)
    if case == "large":
        x = x * 1e4
        if dtype == torch.float16:
            x = x.clamp(-6e4, 6e4)
    elif case == "tiny":
        x = x * 1e-6
    elif case == "equal":
        rows = x[..., :1] if x.dim() else x
        x = rows.expand_as(x).contiguous()
    elif case == "neginf":
        mask = torch.rand(shape, device=device) < 0.125
        if x.dim():
            # keep one random entry of every row finite so no row is all -inf
            keep = torch.randint(0, shape[-1], shape[:-1] + (1,), device=device)
            mask.scatter_(-1, keep, False)
        x = x.masked_fill(mask, float("-inf"))
    elif case != "normal":
        raise ValueError(f"unknown case {case!r}")
    return x.to(dtype)


# ---------------------------------------------------------------------------
# checks

def tolerance(spec: Spec, out_dtype) -> dict:
    name = dtype_name(out_dtype)
    return spec.tolerances.get(name) or TOLERANCES.get(name) or TOLERANCES["fp32"]


def poison(outputs):
    import torch
    for o in outputs:
        if o.is_floating_point():
            o.fill_(float("nan"))
        else:
            o.fill_(torch.iinfo(o.dtype).min)
    return outputs


def compare(out, ref, tol: dict) -> str | None:
    """None if `out` matches `ref` within `tol`, else a one-line reason."""
    import torch
    if tuple(out.shape) != tuple(ref.shape):
        return f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    if not out.is_floating_point():
        if torch.equal(out, ref.to(out.dtype)):
            return None
        bad = (out != ref.to(out.dtype)).sum().item()
        return f"{bad} of {out.numel()} integer elements differ"
    if not torch.isfinite(ref).all():
        raise RuntimeError("reference is not finite: the test's inputs are invalid")
    finite = torch.isfinite(out)
    if not finite.all():
        n_nan = torch.isnan(out).sum().item()
        n_bad = (~finite).sum().item()
        rows = (~finite).reshape(-1, out.shape[-1] if out.dim() else 1).any(-1).sum().item()
        return (f"{n_bad} of {out.numel()} elements not finite ({n_nan} NaN: unwritten or "
                f"overflowed), in {rows} rows")
    o = out.double()
    r = ref.double()
    width = r.shape[-1] if r.dim() else 1
    rows = r.reshape(-1, width)
    rowmax = rows.abs().amax(dim=-1, keepdim=True)
    err = (o.reshape(-1, width) - rows).abs()
    allowed = tol["rtol"] * rows.abs() + tol["atol"] * rowmax + tol.get("floor", 0.0)
    bad = err > allowed
    if bad.any():
        n_bad = bad.sum().item()
        n_rows = bad.any(-1).sum().item()
        ratio = (err / allowed.clamp_min(1e-300)).max().item()
        first = bad.nonzero()[0].tolist()
        return (f"{n_bad} of {out.numel()} elements out of tolerance in {n_rows} of {rows.shape[0]} "
                f"rows (first at row {first[0]} col {first[1]}, worst {ratio:.3g}x the allowance, "
                f"max abs err {err.max().item():.3g})")
    return None


def torch_ops_called(fn) -> set:
    """Names of the aten ops `fn()` dispatches."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = set()

    class _Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with _Recorder():
        fn()
    return seen


def _sync():
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _compare_all(spec, outputs, refs) -> str | None:
    if len(outputs) != len(refs):
        return f"{len(outputs)} outputs but {len(refs)} references"
    for i, (o, r) in enumerate(zip(outputs, refs)):
        why = compare(o, r, tolerance(spec, o.dtype))
        if why:
            return f"output {i}: {why}"
    return None


def check_one(spec: Spec, shape, dtype_str: str, case: str, device: str) -> str | None:
    """All checks for one (shape, dtype, case); None if it passes."""
    import torch
    dtype = torch_dtype(dtype_str)
    allowed = ALLOWED_TORCH_OPS | set(spec.allowed_torch_ops)

    # 1. fresh input A, poisoned outputs; record the torch ops the call makes.
    inputs_a = spec.make_inputs(shape, dtype, device, case)
    outs = poison(spec.make_outputs(inputs_a))
    ops = torch_ops_called(lambda: spec.kernel(inputs_a, outs))
    _sync()
    computed = sorted(ops - allowed)
    if computed:
        return f"kernel called torch ops {computed}: it must compute, not call torch"
    why = _compare_all(spec, outs, spec.reference(inputs_a))
    if why:
        return why
    # 2. a second, different input B into a second output buffer.
    inputs_b = spec.make_inputs(shape, dtype, device, case)
    outs_b = poison(spec.make_outputs(inputs_b))
    spec.kernel(inputs_b, outs_b)
    _sync()
    why = _compare_all(spec, outs_b, spec.reference(inputs_b))
    if why:
        return "second input: " + why
    # 3. new values IN PLACE in A's buffers, into A's (re-poisoned) outputs:
    #    same pointers, same shapes, so only a kernel that reads its input passes.
    for t, f in zip(inputs_a, spec.make_inputs(shape, dtype, device, case)):
        t.copy_(f)
    poison(outs)
    spec.kernel(inputs_a, outs)
    _sync()
    why = _compare_all(spec, outs, spec.reference(inputs_a))
    if why:
        return "input rewritten in place (same buffers): " + why
    # 4. determinism: the same input again.
    first = [o.clone() for o in outs]
    poison(outs)
    spec.kernel(inputs_a, outs)
    _sync()
    for i, (o, p) in enumerate(zip(outs, first)):
        if spec.deterministic:
            if not torch.equal(o, p):
                n = (o != p).sum().item()
                return f"output {i}: two runs on the same input differ in {n} elements"
        else:
            why = compare(o, p.double(), {"rtol": 1e-6, "atol": 1e-7})
            if why:
                return f"output {i}: two runs on the same input differ: {why}"
    return None


def run_checks(spec: Spec, shapes, extreme_shapes, device: str) -> tuple[int, list]:
    """Returns (number of checks, list of failure records)."""
    plan = [(s, d, "normal") for s in shapes for d in spec.dtypes]
    plan += [(s, d, c) for s in extreme_shapes for d in spec.dtypes for c in spec.cases if c != "normal"]
    failures = []
    for shape, dt, case in plan:
        try:
            why = check_one(spec, shape, dt, case, device)
        except Exception as e:  # a kernel that crashes on a shape fails that shape
            why = f"raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if why:
            failures.append({"shape": list(shape), "dtype": dt, "case": case, "error": why})
    return len(plan), failures


# ---------------------------------------------------------------------------
# timing

def _default_nbytes(inputs, outputs) -> int:
    return sum(t.numel() * t.element_size() for t in list(inputs) + list(outputs))


def _spread_pct(values) -> float:
    med = statistics.median(values)
    return 0.0 if med <= 0 else 100.0 * (max(values) - min(values)) / med


def time_fn(fn, on_gpu: bool, repeats: int = REPEATS, warmup: int = WARMUP_MS, rep: int = REP_MS) -> list:
    """Per-repeat median times in ms. GPU: do_bench medians (L2 cleared)."""
    if on_gpu:
        from triton.testing import do_bench
        return [do_bench(fn, warmup=warmup, rep=rep, return_mode="median") for _ in range(repeats)]
    fn()  # interpreter: compile/trace once, then a few perf_counter runs
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def time_one(spec: Spec, shape, dtype_str: str, device: str, on_gpu: bool, info: dict,
             copy_gbps: float | None, repeats: int, warmup: int, rep: int) -> dict:
    dtype = torch_dtype(dtype_str)
    inputs = spec.make_inputs(shape, dtype, device, "normal")
    outs = poison(spec.make_outputs(inputs))
    nbytes = (spec.nbytes or _default_nbytes)(inputs, outs)
    flops = spec.flops(inputs, outs) if spec.flops else None
    ms = time_fn(lambda: spec.kernel(inputs, outs), on_gpu, repeats, warmup, rep)
    rec = {"shape": list(shape), "dtype": dtype_str, "bytes": nbytes, "flops": flops,
           "ms_repeats": [round(m, 6) for m in ms]}
    # The timed shape may take a path no check shape took (a tuner's candidate, --quick): check it too.
    poison(outs)
    spec.kernel(inputs, outs)
    _sync()
    wrong = _compare_all(spec, outs, spec.reference(inputs))
    if wrong:
        rec["error"] = "the timed output is wrong: " + wrong
    med = statistics.median(ms)
    rec["latency_us"] = med * 1e3
    rec["spread_pct"] = _spread_pct(ms)
    rec["gbps"] = nbytes / (med * 1e-3) / 1e9
    rec["gbps_repeats"] = [nbytes / (m * 1e-3) / 1e9 for m in ms]
    if flops:
        rec["tflops"] = flops / (med * 1e-3) / 1e12
        rec["tflops_repeats"] = [flops / (m * 1e-3) / 1e12 for m in ms]
    if spec.torch_impl is not None:
        tms = time_fn(lambda: spec.torch_impl(inputs), on_gpu, repeats, warmup, rep)
        tmed = statistics.median(tms)
        rec["torch_latency_us"] = tmed * 1e3
        rec["torch_spread_pct"] = _spread_pct(tms)
        rec["torch_gbps"] = nbytes / (tmed * 1e-3) / 1e9
        if flops:
            rec["torch_tflops"] = flops / (tmed * 1e-3) / 1e12
        rec["speedup"] = tmed / med
        rec["speedup_repeats"] = [t / k for t, k in zip(sorted(tms), sorted(ms))]
    if on_gpu:
        if copy_gbps:
            rec["pct_of_copy"] = 100.0 * rec["gbps"] / copy_gbps
            if spec.torch_impl is not None:
                rec["torch_pct_of_copy"] = 100.0 * rec["torch_gbps"] / copy_gbps
        if spec.metric == "tflops":
            peak = _gpu.peak_for(info["name"], "tflops", spec.peak_dtype or dtype_str)
            rec["pct_of_peak"] = 100.0 * rec["tflops"] / peak if (peak and flops) else None
        else:
            peak = _gpu.peak_for(info["name"], "gbps")
            rec["pct_of_peak"] = 100.0 * rec["gbps"] / peak if peak else None
    # do not keep the (possibly large) tensors alive
    del inputs, outs
    return rec


def _geomean(values) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarize(spec: Spec, records: list, on_gpu: bool, copy_gbps: float | None, info: dict) -> dict:
    """Headline = geometric mean over all timed entries; spread from the repeats."""
    metric = spec.metric
    key_rep = f"{metric}_repeats"
    n_rep = min(len(r[key_rep]) for r in records)
    per_repeat = [_geomean([r[key_rep][k] for r in records]) for k in range(n_rep)]
    head = {
        "latency_us": _geomean([r["latency_us"] for r in records]),
        metric: _geomean([r[metric] for r in records]),
        "spread_pct": _spread_pct(per_repeat),
    }
    if metric != "gbps":
        head["gbps"] = _geomean([r["gbps"] for r in records])
    if all("speedup" in r for r in records):
        head["speedup"] = _geomean([r["speedup"] for r in records])
    else:
        head["speedup"] = None
    head["pct_of_peak"] = None
    head["pct_of_copy"] = None
    if on_gpu:
        if metric == "gbps":
            peak = _gpu.peak_for(info["name"], "gbps")
            head["pct_of_peak"] = 100.0 * head["gbps"] / peak if peak else None
        else:
            pk = [r.get("pct_of_peak") for r in records]
            head["pct_of_peak"] = _geomean(pk) if all(pk) else None
        if copy_gbps:
            head["pct_of_copy"] = 100.0 * head["gbps"] / copy_gbps
    dts = sorted({r["dtype"] for r in records})
    head["headline"] = (f"geometric mean over {len(records)} timed entries "
                        f"({len({tuple(r['shape']) for r in records})} shapes x {','.join(dts)})")
    return head


def _impossible(spec, records, copy_gbps) -> list:
    if spec.metric != "gbps" or not copy_gbps:
        return []
    bad = []
    for r in records:
        if r["bytes"] >= L2_SAFE_BYTES and r["gbps"] > IMPOSSIBLE_COPY_RATIO * copy_gbps:
            bad.append({"shape": r["shape"], "dtype": r["dtype"], "case": "timing",
                        "error": f"{r['gbps']:.0f} GB/s exceeds {IMPOSSIBLE_COPY_RATIO}x the measured "
                                 f"copy ({copy_gbps:.0f} GB/s): the kernel cannot be moving its bytes"})
    return bad


# ---------------------------------------------------------------------------
# entry points

def parse_args(argv=None):
    p = argparse.ArgumentParser(description="kernel test (kgit harness)")
    p.add_argument("--json", action="store_true", help="print one JSON line last (the kgit contract)")
    p.add_argument("--profile", action="store_true",
                   help="run the kernel 3 times at the first time shape and exit (for ncu)")
    p.add_argument("--quick", action="store_true", help="check and time fewer shapes")
    p.add_argument("--repeats", type=int, default=REPEATS, help="do_bench repeats per figure")
    p.add_argument("--no-torch", action="store_true", help="do not time the torch baseline")
    p.add_argument("--check-only", action="store_true", help="correctness only, no timing")
    return p.parse_args(argv)


def _setup(seed: int | None = None) -> tuple[dict, str, bool, int]:
    import torch
    info = _gpu.detect()
    on_gpu = info["backend"] in ("cuda", "hip")
    device = "cuda" if on_gpu else "cpu"
    if seed is None:
        seed = int(os.environ.get("KGIT_SEED") or int.from_bytes(os.urandom(4), "little"))
    torch.manual_seed(seed)
    return info, device, on_gpu, seed


def profile(spec: Spec, shape=None, dtype_str=None, launches: int = 3) -> dict:
    info, device, on_gpu, seed = _setup()
    shape = shape or (spec.time_shapes[0] if on_gpu else (spec.interp_time_shapes or spec.interp_check_shapes)[0])
    dtype_str = dtype_str or (spec.time_dtypes or spec.dtypes)[0]
    inputs = spec.make_inputs(shape, torch_dtype(dtype_str), device, "normal")
    outs = spec.make_outputs(inputs)
    for _ in range(launches):
        spec.kernel(inputs, outs)
    _sync()
    return {"kernel": spec.name, "gpu": info["name"], "profile": True, "launches": launches,
            "shape": list(shape), "dtype": dtype_str, "status": "profiled"}


def run(spec: Spec, quick: bool = False, repeats: int = REPEATS, warmup: int = WARMUP_MS,
        rep: int = REP_MS, time_torch: bool = True, seed: int | None = None,
        time_shapes=None, time_dtypes=None, check: bool = True) -> dict:
    """Check, then time; returns the JSON record (does not print it)."""
    info, device, on_gpu, seed = _setup(seed)
    if on_gpu:
        check_shapes = list(spec.check_shapes)
        extreme = list(spec.extreme_shapes if spec.extreme_shapes is not None else check_shapes[:3])
        tshapes = list(spec.time_shapes if time_shapes is None else time_shapes)
    else:
        check_shapes = list(spec.interp_check_shapes)
        extreme = check_shapes[:2]
        tshapes = list(time_shapes if time_shapes is not None else
                       (spec.interp_time_shapes or check_shapes[:1]))
    tdtypes = list(time_dtypes or spec.time_dtypes or spec.dtypes)
    if quick:  # a few checks; the first, a middle and the last timed shape, in one dtype
        check_shapes, extreme, tdtypes = check_shapes[:3], extreme[:1], tdtypes[:1]
        tshapes = [tshapes[i] for i in sorted({0, len(tshapes) // 2, len(tshapes) - 1})] if tshapes else []
    copy_gbps = _gpu.measured_copy_gbps() if (on_gpu and tshapes) else None

    result = {"kernel": spec.name, "gpu": info["name"], "backend": info["backend"],
              "cpu_timing": not on_gpu, "seed": seed}
    t0 = time.time()
    n_checks, failures = run_checks(spec, check_shapes, extreme, device) if check else (0, [])
    result["checks"] = n_checks
    result["check_s"] = round(time.time() - t0, 2)
    records = []
    if not failures:
        torch_impl = spec.torch_impl if time_torch else None
        s = spec if torch_impl is spec.torch_impl else _replace(spec, torch_impl=None)
        for shape in tshapes:
            for dt in tdtypes:
                records.append(time_one(s, shape, dt, device, on_gpu, info, copy_gbps, repeats, warmup, rep))
        failures += [{"shape": r["shape"], "dtype": r["dtype"], "case": "timing", "error": r["error"]}
                     for r in records if "error" in r]
        failures += _impossible(spec, records, copy_gbps)
    ok = not failures
    result["correctness"] = ok
    result["status"] = "pass" if ok else "fail"
    metric = spec.metric
    if ok and records:
        result.update(summarize(spec, records, on_gpu, copy_gbps, info))
    else:
        result.update({"latency_us": None, metric: None, "speedup": None, "spread_pct": None,
                       "pct_of_peak": None, "pct_of_copy": None, "headline": None})
    result["copy_gbps"] = copy_gbps
    if not on_gpu:
        result["note"] = "interpreter/CPU: tiny shapes, timings are CPU figures, not comparable to a GPU"
    result["errors"] = failures[:10]
    if failures:  # the one line kgit shows for a failed step
        first = failures[0]
        result["reason"] = f"{tuple(first['shape'])} {first['dtype']} {first['case']}: {first['error']}"[:300]
    result["n_errors"] = len(failures)
    result["shapes"] = [{k: _round(v) for k, v in r.items()} for r in records]
    for k in ("latency_us", metric, "gbps", "speedup", "spread_pct", "pct_of_peak", "pct_of_copy"):
        if k in result:
            result[k] = _round(result[k])
    return result


def _replace(spec, **kw):
    import dataclasses
    return dataclasses.replace(spec, **kw)


def _round(v):
    if isinstance(v, float):
        return float(f"{v:.5g}") if math.isfinite(v) else None
    if isinstance(v, list):
        return [_round(x) for x in v]
    return v


def _human(result: dict) -> str:
    lines = [f"{result['kernel']} on {result['gpu']} ({result['backend']}): {result['status']}"
             f" ({result['checks']} checks)"]
    for e in result["errors"]:
        lines.append(f"  FAIL {e['shape']} {e['dtype']} {e['case']}: {e['error']}")
    for r in result["shapes"]:
        line = (f"  {str(tuple(r['shape'])):>18} {r['dtype']:>5} {r['latency_us']:10.2f} us "
                f"±{r['spread_pct']:.1f}% {r['gbps']:8.1f} GB/s")
        if r.get("tflops"):
            line += f" {r['tflops']:7.1f} TFLOPS"
        if r.get("pct_of_copy") is not None:
            line += f" {r['pct_of_copy']:5.1f}% copy"
        if r.get("speedup") is not None:
            line += f"  torch {r['torch_latency_us']:.2f} us  x{r['speedup']:.3f}"
        lines.append(line)
    if result.get("headline"):
        figs = [f"{result[k]} {u}" for k, u in (("gbps", "GB/s"), ("tflops", "TFLOPS"))
                if result.get(k) is not None]
        lines.append(f"  headline ({result['headline']}): {', '.join(figs)}, speedup {result.get('speedup')}")
    return "\n".join(lines)


def main(spec: Spec, argv=None) -> dict:
    """Entry point of a test_<name>.py: parse flags, run, print (JSON last)."""
    args = parse_args(argv)
    if args.profile:
        result = profile(spec)
    else:
        result = run(spec, quick=args.quick, repeats=args.repeats, time_torch=not args.no_torch,
                     time_shapes=[] if args.check_only else None)
        if not args.json:
            print(_human(result))
    print(json.dumps(result), flush=True)
    return result
