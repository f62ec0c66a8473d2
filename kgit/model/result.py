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
kgit.yaml's `verdict` reads any other verdict: a key and the value that means pass ({key: passed,
pass: true}), or `exit_status` (exit 0 passes: a pytest or make run). A test that prints no JSON may
print its figure as text, read by `metric_pattern` (a regular expression whose first group is the
number), or none at all: `metric: device_us` takes kgit's own device time of the kernel file's kernels
(kgit.model.device_time) as the figure.
A time (time_ms, latency_us) is never taken on its own, since a smaller one is better: kgit.yaml names
it with `metric` and `better: lower`, and a test that prints one and no throughput is told so.

A figure printed rounded (642.1, 0.02) hides any change smaller than half its last digit, and runs
that print the same rounded number show no noise at all. The rounding is no random noise that more
runs average away: a stable kernel rounds the same way every time. So kgit keeps its bound (how far,
in log terms, the printed figure may lie from the one measured) and widens every interval by it. The
step is read from every printed value of the figure over the decision's runs and from the test's other
rounded figures, never from one value's digits: 0.004 is what round(x, 4) prints for 0.00401, so a
figure printed as 0.0043 in another run, or beside figures of 4 decimals, is rounded to 4, not 3.
"""

from __future__ import annotations

import decimal
import json
import math
import re
from dataclasses import dataclass

from kgit.errors import shown
from kgit.model.device_time import DeviceTime, is_number

DEVICE_METRIC = "device_us"  # kgit's own device time of the kernel file's kernels (kgit.model.device_time)
REFERENCES = re.compile(r"^(torch|pytorch|reference|ref|baseline|cublas)_")
# The names a test's verdict goes by: the contract's, and the one other collections' tests print
VERDICTS = ("correctness", "correct", "ok")
LATENCY = re.compile(r"(^|_)(ms|us|ns|s|time|latency|seconds)($|_)", re.IGNORECASE)  # time_ms, latency_us, ms


@dataclass(frozen=True)
class Reading:
    """How to read a test's output: kgit.yaml's metric, verdict and metric_pattern of the kernel."""

    figure: str | None = None  # a dotted path in the JSON, or DEVICE_METRIC; None: kgit finds it
    verdict: str | dict | None = None  # None: the JSON's correctness; "exit_status"; {"key", "pass"}
    pattern: str | None = None  # a regular expression whose first group is the figure, in plain text


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
    printed: tuple = ()  # the figure's numbers as printed (an int stays an int): their digits tell the rounding
    other_decimals: int | None = None  # the fewest decimals of the test's other rounded figures
    device: DeviceTime | None = None  # kgit's own device time of the kernel file's kernels in this run

    @property
    def rounding(self) -> float:
        """The most |log(value / measured value)| that the printed rounding allows, from this run alone."""
        return rounding_of(self.printed, decimals_of([self]))

    @property
    def passed(self) -> bool:
        return self.ok and self.correctness

    @property
    def launched(self) -> tuple[str, ...] | None:
        """The kernel file's kernels this run launched, as kgit's device timing recorded them."""
        return self.device.kernels if self.device else None


def not_run(reason: str, output_tail: str = "") -> TestResult:
    """The result of a test that never ran or never finished."""
    return TestResult(False, False, reason, None, None, None, None, 0.0, output_tail)


def from_output(stdout: str, failure: str | None, reading: Reading | None, duration_s: float,
                output_tail: str, device: DeviceTime | None = None) -> TestResult:
    """The result of a test run from what it printed and how it ended (failure: None when exit 0)."""
    reading = reading or Reading()
    payload = last_json_object(stdout)
    exited_nonzero = failure is not None and failure.startswith("crashed: exit status")
    if exited_nonzero and reading.verdict == "exit_status":  # a failing pytest or make run: a wrong result
        return TestResult(True, False, f"correctness: the test failed ({failure.removeprefix('crashed: ')})",
                          None, None, None, payload, duration_s, output_tail, device=device)
    if exited_nonzero and payload is not None and _passes(payload, _verdict_name(payload, reading), reading) is False:
        failure = None  # a wrong result, reported as such, then exit 1 (as the collection's tests do)
    if failure is None and payload is None and reading.verdict != "exit_status":
        failure = "no JSON object on stdout"
    if failure:
        return TestResult(False, False, failure, None, None, None, None, duration_s, output_tail)
    return validate(payload, reading, duration_s, output_tail, device, stdout)


def validate(payload: dict | None, reading: Reading | None, duration: float, tail: str,
             device: DeviceTime | None = None, stdout: str = "") -> TestResult:
    reading = reading or Reading()

    def failed(reason: str) -> TestResult:
        return TestResult(False, False, reason, None, None, None, payload, duration, tail)

    if reading.verdict != "exit_status":
        name = _verdict_name(payload, reading)
        correctness = _passes(payload, name, reading) if name else None
        if name is None:
            return failed(_no_verdict(reading))
        if correctness is None:
            return failed(f"invalid JSON: {name} = {json.dumps(payload.get(name))}: the verdict must be true or false")
        if not correctness or (reading.verdict is None and payload.get("status") == "fail"):
            reason = payload.get("error") or payload.get("reason") or "the test reports incorrect results"
            return TestResult(True, False, f"correctness: {reason}", None, None, None, payload, duration, tail,
                              device=device)

    found = _figure(payload, reading, device, stdout)
    if isinstance(found, str):
        return failed(found)
    metric, value, figure, printed = found
    if not math.isfinite(value) or value <= 0:
        return failed(f"invalid metric: {metric} = {_shown(value)}")
    spread = (payload or {}).get("spread_pct")
    if spread is not None and (not is_number(spread) or not math.isfinite(spread) or spread < 0):
        return failed(f"invalid JSON: spread_pct = {_shown(spread)}")
    return TestResult(True, True, None, metric, float(value), None if spread is None else float(spread), payload,
                      duration, tail, figure, tuple(printed), _other_decimals(payload, metric, figure), device)


def _no_verdict(reading: Reading) -> str:
    if isinstance(reading.verdict, dict):
        return f"invalid JSON: no {reading.verdict['key']} in the test's JSON (kgit.yaml's verdict names it)"
    return ("invalid JSON: no verdict: print \"correctness\": true or false (or \"correct\", \"ok\"), or say in "
            "kgit.yaml what the test's verdict is: 'verdict: {key: passed, pass: true}' or 'verdict: exit_status'")


def _verdict_name(payload: dict | None, reading: Reading) -> str | None:
    """The key the test printed its correctness verdict under; None when it printed none."""
    if payload is None:
        return None
    if isinstance(reading.verdict, dict):
        return reading.verdict["key"] if reading.verdict["key"] in payload else None
    return next((name for name in VERDICTS if name in payload), None)


def _passes(payload: dict, name: str, reading: Reading) -> bool | None:
    """True or False: the verdict at name; None when it is no verdict (the contract's must be a bool)."""
    if name is None:
        return None
    value = payload.get(name)
    if isinstance(reading.verdict, dict):
        wanted = reading.verdict["pass"]
        return value == wanted and isinstance(value, bool) == isinstance(wanted, bool)  # true is not 1
    return value if isinstance(value, bool) else None


def _figure(payload: dict | None, reading: Reading, device: DeviceTime | None,
            stdout: str) -> tuple[str, float, str | None, list] | str:
    """(metric name, value, where it came from when not a plain top-level field, the printed numbers),
    or why there is none."""
    if reading.figure == DEVICE_METRIC:
        if device is None:
            return (f"no figure: kgit recorded no launch of the kernel file's Triton kernels ({DEVICE_METRIC} "
                    "is the device time of the @triton.jit functions the kernel file defines)")
        return DEVICE_METRIC, device.total_us, None, []  # measured, never rounded
    if reading.pattern:
        matches = re.findall(reading.pattern, stdout)
        if not matches:
            return f"no figure: metric_pattern {reading.pattern!r} matches nothing the test printed"
        text = matches[-1] if isinstance(matches[-1], str) else matches[-1][0]
        try:
            number = json.loads(text.strip())
        except json.JSONDecodeError:
            number = None
        if not is_number(number):
            return f"invalid metric: metric_pattern {reading.pattern!r} matched {text!r}, not a number"
        return "metric_pattern", float(number), f"the last match of {reading.pattern}", [number]
    if payload is None:
        return ("no figure: the test prints no JSON; read one with 'metric_pattern' in kgit.yaml, or decide "
                f"on kgit's device time with 'metric: {DEVICE_METRIC}'")
    return find_figure(payload, reading.figure)


def find_figure(payload: dict, path: str | None) -> tuple[str, float, str | None, list] | str:
    """(metric name, value, how it was found when not a plain top-level field, the printed numbers), or
    why there is none."""
    if path:
        values = _at(payload, path.split("."))
        if not values:
            return f"invalid JSON: no number at {path}"
        if len(values) == 1 and "." not in path:  # the top-level field kgit.yaml names: nothing to explain
            return path, float(values[0]), None, values
        return _reduced(path, values, path)
    for name in ("gbps", "tflops"):
        if name in payload:
            value = payload[name]
            if not is_number(value):
                return f"invalid metric: {name} = {_shown(value)}"
            return name, float(value), None, [value]
    spelled = [key for key in payload if re.fullmatch(r"[^a-z]*(gb|tflop)[^a-z]*s", key.lower())]
    if len(spelled) == 1 and is_number(payload[spelled[0]]):  # "GB/s", "TFLOP/s", "TFLOPS"
        return spelled[0], float(payload[spelled[0]]), spelled[0], [payload[spelled[0]]]
    for key, items in payload.items():
        if not (isinstance(items, list) and items and all(isinstance(item, dict) for item in items)):
            continue
        names = sorted({name for item in items for name in item
                        if re.search(r"(^|_)(gbps|tflops)$", name) and not REFERENCES.match(name)})
        if len(names) == 1:
            return _reduced(f"{key}.{names[0]}", _at(payload, [key, names[0]]), f"{key}.{names[0]}")
    times = [key for key in payload if is_number(payload[key]) and LATENCY.search(key) and not REFERENCES.match(key)]
    if times:  # kgit cannot tell on its own that a smaller figure is better: say how to tell it
        return (f"invalid JSON: no gbps or tflops field; {times[0]} looks like a time: name it with "
                f"'metric: {times[0]}' and 'better: lower' for this kernel in kgit.yaml")
    return "invalid JSON: no gbps or tflops field (name the figure with 'metric' in kgit.yaml)"


_TIME_UNITS_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6, "seconds": 1e6}


def reported_latency_us(payload: dict | None) -> tuple[str, float] | None:
    """The time of one call of the kernel as the test reports it (latency_us, time_ms, triton_us ...), in
    microseconds, with its key; None when it reports none with a unit kgit can read."""
    for key, value in (payload or {}).items():
        if not is_number(value) or value <= 0 or REFERENCES.match(key) or not LATENCY.search(key):
            continue
        unit = next((u for u in re.split(r"[^a-z]+", key.lower()) if u in _TIME_UNITS_US), None)
        if unit:
            return key, value * _TIME_UNITS_US[unit]
    return None


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
        return [node] if is_number(node) else []
    return _at(node[keys[0]], keys[1:]) if isinstance(node, dict) and keys[0] in node else []


def _reduced(name: str, values: list, path: str) -> tuple[str, float, str, list] | str:
    if not values:
        return f"invalid JSON: no number at {path}"
    if len(values) == 1:
        return name, float(values[0]), path, values
    if any(not math.isfinite(v) or v <= 0 for v in values):
        return f"invalid metric: {path} holds {_shown(values)}"
    mean = math.exp(sum(math.log(v) for v in values) / len(values))
    return name, mean, f"geometric mean of {len(values)} figures at {path}", values


# A float printed with this many significant digits or more was not rounded by the test (Python prints
# a measured double with 15 to 17): it says nothing of how the test rounds.
_UNROUNDED_DIGITS = 12


def rounding_of(printed: tuple | list, decimals: int | None) -> float:
    """How far the log of these printed figures' geometric mean may lie from the measured one: each
    printed figure x is within half a step of it (step 10^-decimals; 1 for an int printed as such), so
    its log within -log(1 - step / 2x), the larger side. decimals None: the figure is not rounded."""
    if not printed or decimals is None or any(not math.isfinite(v) or v <= 0 for v in printed):
        return 0.0  # an invalid figure is refused anyway
    step = 10.0 ** -decimals
    return sum(-math.log1p(-min(step / (2 * v), 0.5)) for v in printed) / len(printed)


def decimals_of(results) -> int | None:
    """The decimals a figure is rounded to, from every value of it printed in these runs:
    the most any showed, since a rounded figure drops its trailing zeros (round(x, 4) prints 0.004 for
    0.00401), and at least as many as the test's least precise other figure shows (the most any run
    showed of it). None: not rounded."""
    values = [v for r in results for v in r.printed]
    if not values or any(isinstance(v, float) and _significant_digits(v) >= _UNROUNDED_DIGITS for v in values):
        return None
    own = max(_decimals(v) for v in values)
    others = [r.other_decimals for r in results if r.other_decimals is not None]
    return max(own, max(others)) if others else own


def _decimals(value: int | float) -> int:
    """The decimals printed: 0 for 3462, 1 for 642.1, 6 for 6e-06 (a float's shortest repr is what
    json.dumps printed); negative for 1e+20."""
    if isinstance(value, int):
        return 0
    return -decimal.Decimal(repr(value)).as_tuple().exponent


def _significant_digits(value: float) -> int:
    return len(decimal.Decimal(repr(value)).normalize().as_tuple().digits)


def _other_decimals(payload: dict | None, metric: str, figure: str | None) -> int | None:
    """The fewest decimals among the test's other figures that look rounded (top-level floats other than
    the one taken): a test that prints round(x, 4) everywhere rounds its figure to 4 too."""
    if not payload:
        return None
    taken = {metric, (figure or "").split(".")[0]}
    counts = [_decimals(v) for k, v in payload.items() if k not in taken and isinstance(v, float)
              and math.isfinite(v) and v != 0 and _significant_digits(v) < _UNROUNDED_DIGITS]
    return min(counts) if counts else None


def _shown(value) -> str:
    return shown(value, limit=60)


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
        except (ValueError, RecursionError):  # malformed, an integer of thousands of digits, nested too deep
            continue
        if isinstance(obj, dict):
            return obj
    return None
