"""The test contract: the JSON a kernel test prints last, its headline, and the rule for failures.

kgit runs `python test_<name>.py --json [args]` and reads the LAST JSON object on stdout:
  kernel, gpu, backend, cpu_timing, seed    what ran where ("cpu_timing": true: interpreter figures)
  correctness (bool), status                "pass" or "fail"
  gbps or tflops                            the Spec's metric, never both at the top level
  latency_us, speedup, spread_pct, pct_of_peak, pct_of_copy, copy_gbps
  headline                                  what the top-level figures are over
  checks, check_s, errors, n_errors, reason the checks run; the failures (the first 10), each with its
                                            kind, those that matter most first (checks.KINDS); how many;
                                            the first in one line
  shapes                                    one object per timed entry
The headline is the Plan's time_shapes x time_dtypes ("role": "headline"): with one entry, that
entry's own figures under its own label; with several, their geometric mean. Entries added by --sweep
("role": "sweep") never enter it.

The failure rule, the same for every kernel: any failed check or timed entry makes correctness false
and status "fail", and sets every headline figure (latency_us, the metric, speedup, spread_pct,
pct_of_peak, pct_of_copy) to null: a failed run has no figure, and 0.0 would read as a measurement.
The test still exits 0: the JSON says what happened.
"""

from __future__ import annotations

import json
import math

from kgit.errors import clipped
from kgit.harness import checks
from kgit.harness.measure import rate
from kgit.harness.spec import Spec
from kgit.harness.timing import spread_pct


REASON_CHARS = 300  # the one line of a failed run
# Triton's interpreter does not compute on bf16 (its debugging guide: cast to float32 first): a kernel that
# multiplies bf16 values as loaded fails there and passes on a GPU.
INTERPRETER_BF16 = ("only bf16 failed, in Triton's interpreter, which does not compute on bf16 values: cast them "
                    "to float32 in the kernel, or check bf16 on a GPU")


def geomean(values) -> float | None:
    values = list(values)
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def describe(spec: Spec, entries: list[dict]) -> str:
    if len(entries) == 1:
        return f"{entries[0]['label']} {entries[0]['dtype']}"
    shapes = len({e["label"] for e in entries})
    dtypes = ",".join(sorted({e["dtype"] for e in entries}))
    return f"geometric mean over {len(entries)} timed entries ({shapes} shapes x {dtypes})"


def headline(spec: Spec, entries: list[dict]) -> dict:
    """The top-level figures from the headline entries; the spread from their per-repeat geometric means."""
    head = [e for e in entries if e["role"] == "headline"]
    metric = spec.metric
    amount = "bytes" if metric == "gbps" else "flops"
    repeats = min(len(e["ms_repeats"]) for e in head)
    per_repeat = [geomean(rate(metric, e[amount], e["ms_repeats"][k]) for e in head) for k in range(repeats)]
    return {
        "latency_us": geomean(e["latency_us"] for e in head),
        metric: geomean(e[metric] for e in head),
        "speedup": geomean(e.get("speedup") for e in head),
        "spread_pct": spread_pct(per_repeat),
        "pct_of_peak": geomean(e.get("pct_of_peak") for e in head),
        "pct_of_copy": geomean(e.get("pct_of_copy") for e in head),
        "headline": describe(spec, head),
    }


def failed_headline(spec: Spec) -> dict:
    return {key: None for key in ("latency_us", spec.metric, "speedup", "spread_pct", "pct_of_peak",
                                  "pct_of_copy", "headline")}


def _round(value):
    if isinstance(value, float):
        return float(f"{value:.5g}") if math.isfinite(value) else None
    if isinstance(value, list):
        return [_round(v) for v in value]
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    return value


def build(spec: Spec, info: dict, seed: int, n_checks: int, check_s: float, failures: list[dict],
          entries: list[dict], copy_gbps: float | None) -> dict:
    """The contract's JSON object (not printed)."""
    failures = failures + [{"shape": e["shape"], "dtype": e["dtype"], "case": "timing", "error": e["error"],
                            "kind": checks.kind_of(e["error"])} for e in entries if "error" in e]
    failures = sorted(failures, key=lambda f: checks.KINDS.index(f["kind"]))  # stable: in order within a kind
    ok = not failures
    result = {"kernel": spec.name, "gpu": info["name"], "backend": info["backend"],
              "cpu_timing": info["backend"] not in ("cuda", "hip"), "seed": seed,
              "correctness": ok, "status": "pass" if ok else "fail"}
    has_headline = ok and any(e["role"] == "headline" for e in entries)
    result.update(headline(spec, entries) if has_headline else failed_headline(spec))
    result.update(copy_gbps=copy_gbps, checks=n_checks, check_s=round(check_s, 2), errors=failures[:10],
                  n_errors=len(failures), shapes=entries)
    if failures:  # the one line kgit shows for a failed step: the failure that matters most
        first = failures[0]
        reason = f"{tuple(first['shape'])} {first['dtype']} {first['case']}: {first['error']}"
        if len(failures) > 1:
            reason += f" (+{len(failures) - 1} more failures)"
        if result["cpu_timing"] and all(f["dtype"] == "bf16" for f in failures):
            reason = f"{clipped(reason, 150)}; {INTERPRETER_BF16}"
        result["reason"] = clipped(reason, REASON_CHARS)
    if result["cpu_timing"]:
        result["note"] = "interpreter/CPU: tiny shapes, timings are CPU figures, not comparable to a GPU"
    return _round(result)


def human(result: dict, metric: str) -> str:
    lines = [f"{result['kernel']} on {result['gpu']} ({result['backend']}): {result['status']} "
             f"({result['checks']} checks)"]
    for e in result["errors"]:
        lines.append(f"  FAIL {e['shape']} {e['dtype']} {e['case']}: {e['error']}")
    if INTERPRETER_BF16 in result.get("reason", ""):
        lines.append(f"  ({INTERPRETER_BF16})")
    unit = "GB/s" if metric == "gbps" else "TFLOP/s"
    for e in result["shapes"]:
        line = (f"  {e['label']:>24} {e['dtype']:>4} {e['role']:>8} {e['latency_us']:10.2f} us "
                f"{e[metric]:9.1f} {unit} ±{e['spread_pct']:.1f}%")
        if e.get("pct_of_copy") is not None:
            line += f" {e['pct_of_copy']:5.1f}% copy"
        if e.get("pct_of_peak") is not None:
            line += f" {e['pct_of_peak']:5.1f}% peak"
        if e.get("speedup") is not None:
            line += f"  {e['baseline']} {e['torch_latency_us']:.2f} us  x{e['speedup']:.3f}"
        lines.append(line)
    if result.get("headline"):
        lines.append(f"  headline ({result['headline']}): {result[metric]} {unit} ±{result['spread_pct']}%, "
                     f"speedup {result['speedup']}")
    return "\n".join(lines)


def emit(result: dict, metric: str, human_text: bool) -> None:
    """Print the human lines (unless --json), then the JSON object last, as the contract wants."""
    if human_text:
        print(human(result, metric))
    print(json.dumps(result), flush=True)
