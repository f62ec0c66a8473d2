"""What a kernel's test printed, read by the test contract and validated: a TestResult.

The contract: `<python> <test_path> --json` prints, as its last JSON object on stdout, something like
  {"kernel": "softmax", "gpu": "NVIDIA H200", "correctness": true, "latency_us": 26.4,
   "gbps": 1270.1, "speedup": 1.071, "status": "pass"}
("tflops" instead of "gbps" for compute-bound kernels). The object may also be printed indented over
several lines, as some existing tests do after a `--- JSON ---` line. Optional fields kgit uses when
present: spread_pct (the metric's measured spread, in %), pct_of_peak and cpu_timing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # not a pytest test class, whatever its name

    ok: bool  # the test ran and printed a valid result; says nothing yet about correctness
    correctness: bool
    reason: str | None  # why it is not ok, or why correctness failed
    metric: str | None  # "gbps" or "tflops"
    value: float | None
    spread_pct: float
    payload: dict | None  # the test's JSON, unchanged
    duration_s: float
    output_tail: str

    @property
    def passed(self) -> bool:
        return self.ok and self.correctness


def not_run(reason: str, output_tail: str = "") -> TestResult:
    """The result of a test that never ran or never finished."""
    return TestResult(False, False, reason, None, None, 0.0, None, 0.0, output_tail)


def from_output(stdout: str, failure: str | None, preferred_metric: str | None, duration_s: float,
                output_tail: str) -> TestResult:
    """The result of a test run from what it printed and how it ended (failure: None when exit 0)."""
    payload = None if failure else last_json_object(stdout)
    if failure is None and payload is None:
        failure = "no JSON object on stdout"
    if failure:
        return TestResult(False, False, failure, None, None, 0.0, None, duration_s, output_tail)
    return validate(payload, preferred_metric, duration_s, output_tail)


def validate(payload: dict, preferred_metric: str | None, duration: float, tail: str) -> TestResult:
    def failed(reason: str) -> TestResult:
        return TestResult(False, False, reason, None, None, 0.0, payload, duration, tail)

    correctness = payload.get("correctness")
    if not isinstance(correctness, bool):
        return failed("invalid JSON: 'correctness' must be true or false")
    if not correctness or payload.get("status") == "fail":
        reason = payload.get("error") or payload.get("reason") or "the test reports incorrect results"
        return TestResult(True, False, f"correctness: {reason}", None, None, 0.0, payload, duration, tail)

    candidates = [preferred_metric] if preferred_metric else ["gbps", "tflops"]
    metric = next((m for m in candidates if m in payload), None)
    if metric is None:
        return failed(f"invalid JSON: no {' or '.join(candidates)} field")
    value = payload[metric]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return failed(f"invalid metric: {metric} = {value!r}")
    spread = payload.get("spread_pct", 0.0)
    if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not math.isfinite(spread) or spread < 0:
        return failed(f"invalid JSON: spread_pct = {spread!r}")
    return TestResult(True, True, None, metric, float(value), float(spread), payload, duration, tail)


def last_json_object(stdout: str) -> dict | None:
    """The last JSON object that starts at the beginning of a line (one line or indented over several)."""
    decoder = json.JSONDecoder()
    lines = stdout.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    # Nested objects of an indented dump start after whitespace, so only column-0 braces are candidates.
    for i in range(len(lines) - 1, -1, -1):
        if not lines[i].startswith("{"):
            continue
        try:
            obj, _ = decoder.raw_decode(stdout, offsets[i])
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    return None
