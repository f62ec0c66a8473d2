"""Timing one (shape, dtype) entry: the kernel, torch's version and the spec's others, in one process,
on the same inputs; its rates, % of peak and of the measured copy; then the checks a figure must pass.
"""

from __future__ import annotations

import random
import statistics

from kgit.harness import cheat, checks, device
from kgit.harness.spec import Spec, torch_dtype
from kgit.harness.timing import Timer, spread_pct
from kgit.model import peaks

# A memory-bound figure above COPY_CEILING x the measured copy, at a shape whose traffic no L2 holds,
# or a compute-bound figure above PEAK_CEILING x the datasheet peak, is not real work.
COPY_CEILING = 1.2
L2_SAFE_BYTES = 128 * 2**20
PEAK_CEILING = 1.05
# The timed calls write these many output buffers in turn, each poisoned just before its call: a kernel
# that skips its work when its output already holds a result leaves the poison. Before a buffer is
# poisoned again, its result is checked for this share of the calls, at most MOST_CHECKED times an entry
# (a reference can be slow: a float64 GEMM), and every buffer after the last call.
ROTATED_OUTPUTS = 3
CHECKED_SHARE = 0.05
MOST_CHECKED = 3


def default_nbytes(inputs, outputs) -> int:
    """Every input read once and every output written once."""
    return sum(t.numel() * t.element_size() for t in (*inputs, *outputs) if hasattr(t, "numel"))


def rate(metric: str, amount: float, ms: float) -> float:
    """GB/s from bytes or TFLOP/s from flops, over `ms` milliseconds."""
    return amount / (ms * 1e-3) / (1e9 if metric == "gbps" else 1e12)


def _figures(prefix: str, times_ms: list[float], nbytes: int, flops: float | None) -> dict:
    median = statistics.median(times_ms)
    fig = {f"{prefix}latency_us": median * 1e3, f"{prefix}gbps": rate("gbps", nbytes, median),
           f"{prefix}spread_pct": spread_pct([rate("gbps", nbytes, t) for t in times_ms])}
    if flops:
        fig[f"{prefix}tflops"] = rate("tflops", flops, median)
    return fig


def impossible(spec: Spec, entry: dict, gpu_name: str, copy_gbps: float | None) -> str | None:
    """Why the entry's figure cannot be real work, or None."""
    if spec.metric == "gbps" and copy_gbps and entry["bytes"] >= L2_SAFE_BYTES \
            and entry["gbps"] > COPY_CEILING * copy_gbps:
        return (f"{entry['gbps']:.0f} GB/s exceeds {COPY_CEILING}x the measured copy ({copy_gbps:.0f} GB/s): "
                "the kernel cannot be moving its bytes")
    peak = peaks.peak_for(gpu_name, "tflops", entry["dtype"]) if spec.metric == "tflops" else None
    if peak and entry["tflops"] > PEAK_CEILING * peak:
        return f"{entry['tflops']:.0f} TFLOP/s exceeds the {peak:.0f} datasheet peak: not real work"
    return None


def rotating(spec: Spec, inputs, output_sets: list, rng: random.Random):
    """(call, before, wrong) for the timer: each call writes the next output set, which before() poisons
    first, after checking the result it held for CHECKED_SHARE of the calls; wrong() is why a checked
    result, or the last result of any set, was wrong (None when none was)."""
    turn, checked, found, written = [-1], [0], [], set()

    def before():
        turn[0] += 1
        index = turn[0] % len(output_sets)
        if index in written and not found and checked[0] < MOST_CHECKED and rng.random() < CHECKED_SHARE:
            checked[0] += 1
            device.sync()
            why = checks.wrong_outputs(spec, inputs, output_sets[index])
            if why:
                found.append(f"a timed call: {why}")
        cheat.poison(output_sets[index])

    def call():
        index = turn[0] % len(output_sets)
        written.add(index)
        spec.kernel(inputs, output_sets[index])

    def wrong():
        device.sync()
        last = (checks.wrong_outputs(spec, inputs, output_sets[i]) for i in sorted(written))
        return found[0] if found else next(filter(None, last), None)

    return call, before, wrong


def time_entry(spec: Spec, shape, dtype: str, role: str, timer: Timer, time_torch: bool,
               copy_gbps: float | None) -> dict:
    """One entry of the JSON's "shapes": figures of the kernel (and torch, others), and "error" if wrong."""
    info = device.detect()
    on_gpu = device.on_gpu()
    inputs = spec.make_inputs(shape, torch_dtype(dtype), info["device"], "normal")
    output_sets = [cheat.poison(spec.make_outputs(inputs)) for _ in range(ROTATED_OUTPUTS)]
    outputs = output_sets[0]
    nbytes = (spec.nbytes or default_nbytes)(inputs, outputs)
    flops = spec.flops(inputs, outputs) if spec.flops else None
    entry = {"shape": list(shape), "label": spec.shape_label(shape), "dtype": dtype, "role": role,
             "bytes": nbytes, "flops": flops}
    call, before, timed_wrong = rotating(spec, inputs, output_sets, random.Random())
    times = timer.times_ms(call, on_gpu, before)
    entry["ms_repeats"] = times
    if spec.launched is not None:
        entry["config"] = dict(spec.launched())
    entry.update(_figures("", times, nbytes, flops))
    if time_torch and spec.torch_impl is not None:
        torch_times = timer.times_ms(lambda: spec.torch_impl(inputs), on_gpu)
        entry["baseline"] = spec.torch_name
        entry.update(_figures("torch_", torch_times, nbytes, flops))
        entry["speedup"] = statistics.median(torch_times) / statistics.median(times)
    for name, impl in spec.others.items():
        entry.update(_figures(f"{name}_", timer.times_ms(lambda: impl(inputs), on_gpu), nbytes, flops))
    if on_gpu:
        if spec.metric == "gbps":
            peak = peaks.peak_for(info["name"], "gbps")
            if copy_gbps:
                entry["pct_of_copy"] = 100.0 * entry["gbps"] / copy_gbps
                if "torch_gbps" in entry:
                    entry["torch_pct_of_copy"] = 100.0 * entry["torch_gbps"] / copy_gbps
        else:
            peak = peaks.peak_for(info["name"], "tflops", dtype)
        entry["pct_of_peak"] = 100.0 * entry[spec.metric] / peak if peak else None
    wrong = timed_wrong() or checks.recheck(spec, inputs, outputs, shape, dtype)
    if wrong:
        entry["error"] = "the timed output is wrong: " + wrong
    else:
        why = impossible(spec, entry, info["name"], copy_gbps)
        if why:
            entry["error"] = why
    return entry
