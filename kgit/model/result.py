"""What a kernel's test printed, read by the test contract and validated: a TestResult.

The contract: `<python> <test_path> --json` prints, as its last JSON object on stdout, something like
  {"kernel": "softmax", "gpu": "NVIDIA H200", "correctness": true, "latency_us": 26.4,
   "gbps": 1270.1, "speedup": 1.071, "status": "pass"}
("tflops" instead of "gbps" for compute-bound kernels). The object may also be printed indented over
several lines, as some existing tests do after a `--- JSON ---` line. Optional fields kgit uses when
present: spread_pct (the metric's measured spread, in %), pct_of_peak and cpu_timing.

Where the figure is: kgit.yaml's `metric` names it by a dotted path ("avg_vs_pytorch",
"benchmarks.triton_tflops"; a list on the way is followed into each item, and several figures are
reduced to their geometric mean). Without it, kgit takes a top-level gbps or tflops, else the one
*_gbps or *_tflops field of the items of a top-level list that is not a reference's (torch, pytorch,
reference), e.g. the collection's {"benchmarks": [{"triton_tflops": 642.1, "pytorch_tflops": 695.9}]}.
Either way the record says which figure it used. A result with correctness false is a wrong result,
whatever the exit status; "correct" or "ok" is read as "correctness" where a test prints that instead.
A time (time_ms, latency_us) is never taken on its own, since a smaller one is better: kgit.yaml names
it with `metric` and `better: lower`, and a test that prints one and no throughput is told so.

A figure printed rounded (642.1, 0.02) hides any change smaller than half its last digit, and runs
that print the same rounded number show no noise at all. The rounding is no random noise that more
runs average away: a stable kernel rounds the same way every time. So kgit keeps its bound
(`rounding`: how far, in log terms, the printed figure may lie from the one measured) and widens every
interval by it.
"""

from __future__ import annotations

import decimal
import json
import math
import re
from dataclasses import dataclass

REFERENCES = re.compile(r"^(torch|pytorch|reference|ref|baseline|cublas)_")
# The names a test's verdict goes by: the contract's, and the one other collections' tests print
VERDICTS = ("correctness", "correct", "ok")
LATENCY = re.compile(r"(^|_)(ms|us|ns|s|time|latency|seconds)($|_)", re.IGNORECASE)  # time_ms, latency_us, ms


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # not a pytest test class, whatever its name

    ok: bool  # the test ran and printed a valid result; says nothing yet about correctness
    correctness: bool
    reason: str | None  # why it is not ok, or why correctness failed
    metric: str | None  # "gbps" or "tflops"
    value: float | None
    spread_pct: float | None  # None: the test reported none
    payload: dict | None  # the test's JSON, unchanged
    duration_s: float
    output_tail: str
    figure: str | None = None  # where the value came from, when it is not a top-level field
    rounding: float = 0.0  # the most |log(value / measured value)| that the printed rounding allows

    @property
    def passed(self) -> bool:
        return self.ok and self.correctness


def not_run(reason: str, output_tail: str = "") -> TestResult:
    """The result of a test that never ran or never finished."""
    return TestResult(False, False, reason, None, None, None, None, 0.0, output_tail)


def from_output(stdout: str, failure: str | None, preferred_metric: str | None, duration_s: float,
                output_tail: str) -> TestResult:
    """The result of a test run from what it printed and how it ended (failure: None when exit 0)."""
    payload = last_json_object(stdout)
    wrong = payload is not None and payload.get(_verdict_name(payload)) is False
    if failure and failure.startswith("crashed: exit status") and wrong:
        failure = None  # a wrong result, reported as such, then exit 1 (as the collection's tests do)
    if failure is None and payload is None:
        failure = "no JSON object on stdout"
    if failure:
        return TestResult(False, False, failure, None, None, None, None, duration_s, output_tail)
    return validate(payload, preferred_metric, duration_s, output_tail)


def validate(payload: dict, preferred_metric: str | None, duration: float, tail: str) -> TestResult:
    def failed(reason: str) -> TestResult:
        return TestResult(False, False, reason, None, None, None, payload, duration, tail)

    name = _verdict_name(payload)
    correctness = payload.get(name)
    if not isinstance(correctness, bool):
        return failed(f"invalid JSON: {name} = {json.dumps(correctness)}: the verdict must be true or false" if name
                      else "invalid JSON: no verdict: print \"correctness\": true or false (or \"correct\", \"ok\")")
    if not correctness or payload.get("status") == "fail":
        reason = payload.get("error") or payload.get("reason") or "the test reports incorrect results"
        return TestResult(True, False, f"correctness: {reason}", None, None, None, payload, duration, tail)

    found = find_figure(payload, preferred_metric)
    if isinstance(found, str):
        return failed(found)
    metric, value, figure, rounding = found
    if not math.isfinite(value) or value <= 0:
        return failed(f"invalid metric: {metric} = {value!r}")
    spread = payload.get("spread_pct")
    if spread is not None and (isinstance(spread, bool) or not isinstance(spread, (int, float))
                               or not math.isfinite(spread) or spread < 0):
        return failed(f"invalid JSON: spread_pct = {spread!r}")
    return TestResult(True, True, None, metric, float(value), None if spread is None else float(spread), payload,
                      duration, tail, figure, rounding)


def _verdict_name(payload: dict) -> str | None:
    """The first of VERDICTS the test printed its correctness verdict under; None when it printed none."""
    return next((name for name in VERDICTS if name in payload), None)


def find_figure(payload: dict, path: str | None) -> tuple[str, float, str | None, float] | str:
    """(metric name, value, how it was found when not a plain top-level field, its rounding), or why
    there is none."""
    if path:
        values = _at(payload, path.split("."))
        if not values:
            return f"invalid JSON: no number at {path}"
        if len(values) == 1 and "." not in path:  # the top-level field kgit.yaml names: nothing to explain
            return path, float(values[0]), None, _rounding(values)
        return _reduced(path, values, path)
    for name in ("gbps", "tflops"):
        if name in payload:
            value = payload[name]
            if not _is_number(value):
                return f"invalid metric: {name} = {value!r}"
            return name, float(value), None, _rounding([value])
    spelled = [key for key in payload if re.fullmatch(r"[^a-z]*(gb|tflop)[^a-z]*s", key.lower())]
    if len(spelled) == 1 and _is_number(payload[spelled[0]]):  # "GB/s", "TFLOP/s", "TFLOPS"
        return spelled[0], float(payload[spelled[0]]), spelled[0], _rounding([payload[spelled[0]]])
    for key, items in payload.items():
        if not (isinstance(items, list) and items and all(isinstance(item, dict) for item in items)):
            continue
        names = sorted({name for item in items for name in item
                        if re.search(r"(^|_)(gbps|tflops)$", name) and not REFERENCES.match(name)})
        if len(names) == 1:
            return _reduced(f"{key}.{names[0]}", _at(payload, [key, names[0]]), f"{key}.{names[0]}")
    times = [key for key in payload if _is_number(payload[key]) and LATENCY.search(key) and not REFERENCES.match(key)]
    if times:  # kgit cannot tell on its own that a smaller figure is better: say how to tell it
        return (f"invalid JSON: no gbps or tflops field; {times[0]} looks like a time: name it with "
                f"'metric: {times[0]}' and 'better: lower' for this kernel in kgit.yaml")
    return "invalid JSON: no gbps or tflops field (name the figure with 'metric' in kgit.yaml)"


def unit_of(metric: str | None) -> str | None:
    """"gbps" or "tflops" for a figure named so ("benchmarks.triton_tflops", "GB/s", "TFLOP/s" too),
    else None."""
    last = re.sub(r"[^a-z]", "", (metric or "").rsplit(".", 1)[-1].lower())
    return "gbps" if last.endswith(("gbps", "gbs")) else "tflops" if last.endswith("tflops") else None


def _at(node, keys: list[str]) -> list:
    """The numbers at a dotted path, following lists into each of their items (as parsed: an int
    stays an int, which tells its resolution)."""
    if isinstance(node, list):
        return [value for item in node for value in _at(item, keys)]
    if not keys:
        return [node] if _is_number(node) else []
    return _at(node[keys[0]], keys[1:]) if isinstance(node, dict) and keys[0] in node else []


def _reduced(name: str, values: list, path: str) -> tuple[str, float, str, float] | str:
    if len(values) == 1:
        return name, float(values[0]), path, _rounding(values)
    if any(not math.isfinite(v) or v <= 0 for v in values):
        return f"invalid metric: {path} holds {values!r}"
    mean = math.exp(sum(math.log(v) for v in values) / len(values))
    return name, mean, f"geometric mean of {len(values)} figures at {path}", _rounding(values)


def _rounding(values: list) -> float:
    """How far the log of these figures' geometric mean may lie from the measured one: each printed
    figure x is within half a step of it, so its log within -log(1 - step / 2x) (the larger side)."""
    if any(not math.isfinite(v) or v <= 0 for v in values):
        return 0.0  # an invalid figure is refused anyway
    return sum(-math.log1p(-min(_step(v) / (2 * v), 0.5)) for v in values) / len(values)


def _step(value: int | float) -> float:
    """The last printed digit's step: 1 for 3462, 0.1 for 642.1, 1e-06 for 6e-06 (a float's shortest repr
    is what json.dumps printed)."""
    if isinstance(value, int):
        return 1.0
    return 10.0 ** decimal.Decimal(repr(value)).as_tuple().exponent


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
