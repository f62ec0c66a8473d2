"""Numbers, statuses and table rows as kgit writes them everywhere: terminal, README, hook."""

from __future__ import annotations

import math

from kgit.errors import clipped
from kgit.model.decide import best_record
from kgit.model.doubts import GAIN_OVER_2X, ONE_SIGNIFICANT_DIGIT, doubts
from kgit.model import remeasured
from kgit.model.record import Record, Status, StopReason, to_json
from kgit.model.remeasured import Remeasured
from kgit.model.result import DEVICE_METRIC, unit_of

LOG_HEADERS = ["Iter", "Action", "Tier", "Correctness", "Metric", "Delta", "Status"]
SUMMARY_HEADERS = ["Kernel", "GPU", "Baseline", "Best", "% of peak", "Iterations", "Reverted", "Target"]

_STATUS_WORDS = {
    Status.BASELINE: "baseline",
    Status.IMPROVED: "improved",
    Status.TARGET_MET: "TARGET_MET",
    Status.REGRESSED: "regressed, reverted",
    Status.WITHIN_NOISE: "within noise, reverted",
    Status.FAILED: "failed, reverted",
    Status.KEPT_ANYWAY: "kept anyway",
}
UNITS = {"gbps": "GBps", "tflops": "TFLOPS"}


def metric(value: float | None, name: str | None, cpu_timing: bool = False) -> str:
    if value is None or name is None:
        return "-"
    number = f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 1 else f"{value:.3g}"
    text = f"{number} {unit_label(name)}"
    return text + " (CPU)" if cpu_timing else text


def unit_label(name: str) -> str:
    """How a figure's unit reads: GBps or TFLOPS for a figure named so (a path too), "us on the device"
    for kgit's device time, else its name."""
    if name == DEVICE_METRIC:
        return "us on the device"
    unit = unit_of(name)
    return UNITS[unit] if unit else name


def delta(pct: float | None) -> str:
    return "-" if pct is None else f"{pct:+.1f}%"


def gain(record: Record) -> str:
    """The gain over the best with its 95% interval when pairs measured it: '+3.4% [+2.9, +3.9]'."""
    interval = record.measurement.interval_pct if record.measurement else None
    if record.delta_pct is None or not interval:
        return delta(record.delta_pct)
    return f"{record.delta_pct:+.1f}% [{interval[0]:+.1f}, {interval[1]:+.1f}]"


# An interval wider than this each way (percentage points) says nothing a person can use: after a pair or
# two, the t quantile at 1 or 2 degrees of freedom turns a clear gain into [-100.0, +4756706.8].
MEANINGFUL_HALF_WIDTH_PCT = 100.0


def interval_so_far(found) -> str:
    """A step's gain after each pair (a kgit.model.noise.Interval, or None while there is none): shown once
    it is finite and narrower than +-MEANINGFUL_HALF_WIDTH_PCT, else "measuring…"."""
    if (found is None or not (math.isfinite(found.low_pct) and math.isfinite(found.high_pct))
            or found.high_pct - found.low_pct > 2 * MEANINGFUL_HALF_WIDTH_PCT):
        return "measuring…"
    return f"{found.gain_pct:+.1f}% [{found.low_pct:+.1f}, {found.high_pct:+.1f}] so far"


def pct_of_peak(record: Record | None) -> str:
    return f" ({record.pct_of_peak:.0f}% of peak)" if record and record.pct_of_peak else ""


def when(started: str | None) -> str:
    """A record's start time to the minute: '2026-12-06 07:10 UTC' (records keep it in UTC); '' if none."""
    return f"{started[:16].replace('T', ' ')} UTC" if started else ""


def best_measured(best: Record, again: Remeasured | None) -> str:
    """Which runs the best's figure is and when they ran, and the latest re-measurement of it beside it:
    "iteration 3's own runs, 2026-12-06 07:10 UTC; measured again: 262 GBps, 4 runs in iteration 5's
    pairs, 2026-12-06 08:02 UTC"."""
    text = f"iteration {best.iteration}'s own runs" + (f", {when(best.started)}" if best.started else "")
    if again:
        text += (f"; measured again: {metric(again.value, best.metric, best.cpu_timing)}, {again.runs} "
                 f"run{'s' if again.runs != 1 else ''} in iteration {again.iteration}'s pairs"
                 + (f", {when(again.started)}" if again.started else ""))
    return text


def status_words(record: Record, reason_chars: int | None = 100, resumed: bool = False) -> str:
    """resumed: iterations came after this one (its loop stopped here, then its limit was raised)."""
    words = _STATUS_WORDS[record.status]
    if record.status in (Status.FAILED, Status.KEPT_ANYWAY) and record.reason:
        reason = record.reason  # whole in the note and in `kgit show`; a table row keeps its start
        reason = reason.removeprefix("kept anyway: ")  # the status says it already
        if reason_chars is not None:
            reason = clipped(reason, reason_chars)
        words += f" ({reason})"
    if record.untested:
        words += f"; UNTESTED: {', '.join(record.untested)}"
    if record.stop_reason == StopReason.MAX_ITERATIONS:
        words += "; MAX_ITERATIONS" + (", raised later" if resumed else "")
    return words


def verdict(record: Record) -> str:
    """An iteration's decision in a few words, with the gain that decided it when pairs measured it:
    'within noise, reverted: +0.3% [-1.1, +1.7] over 3 pairs'."""
    words = status_words(record, reason_chars=100)
    pairs = record.measurement.pairs if record.measurement else 0
    if record.delta_pct is not None and pairs:
        words += f": {gain(record)} over {pairs} pair{'s' if pairs != 1 else ''}"
    return words


_DOUBT_WORDS = {GAIN_OVER_2X: "gain over 2x", ONE_SIGNIFICANT_DIGIT: "one significant digit"}


def doubt_lines(record: Record) -> list[str]:
    """What in the record a person should check before trusting it (kgit.model.doubts), a line each."""
    lines = []
    for code in doubts(record):
        if code == GAIN_OVER_2X:
            lines.append(f"check this: a gain over 2x is often a broken measurement (a kernel that skips work or "
                         f"reuses an output, a test that times something else): read the change and the test's "
                         f"output ('kgit show {record.iteration}') before trusting it")
        else:
            lines.append(f"check this: the test prints its figure with one significant digit "
                         f"({metric(record.value, record.metric, record.cpu_timing)}): a change smaller than a "
                         f"step of that digit cannot show, and kgit widens every interval by it; print more "
                         f"digits (round(x, 4), or none)")
    return lines


def doubts_json(record: Record) -> list[dict]:
    """The same, for --json: each check's code and its line."""
    return [{"check": code, "message": line} for code, line in zip(doubts(record), doubt_lines(record))]


def numbered_twice(records: list[Record]) -> set[int]:
    """The iteration numbers two of these runs share: two clones stepped one kernel at once."""
    first, twice = {}, set()
    for record in records:
        if first.setdefault(record.iteration, record.key) != record.key:
            twice.add(record.iteration)
    return twice


def run_name(record: Record, twice: set[int] = frozenset()) -> str:
    """An iteration's name: its number, and where another clone's run has the same number, where and when
    it ran (the host, the start to the millisecond), which tells the two apart in the log and the README."""
    if record.iteration not in twice:
        return str(record.iteration)
    host = (record.environment and record.environment.host) or "unknown host"
    return f"{record.iteration} ({host}, {(record.started or '')[:23].replace('T', ' ')})"


def log_row(record: Record, resumed: bool = False, twice: set[int] = frozenset()) -> list[str]:
    correctness = {True: "PASS", False: "FAIL", None: "-"}[record.correctness]
    return [
        run_name(record, twice),
        record.action,
        f"T{record.tier}" if record.tier is not None else "-",
        correctness,
        metric(record.value, record.metric, record.cpu_timing),
        gain(record),
        status_words(record, resumed=resumed) + "".join(f"; check: {_DOUBT_WORDS[c]}" for c in doubts(record)),
    ]


def final_line(records: list[Record]) -> str:
    best = best_record(records)
    if best is None:
        return "Final: no successful run yet."
    last = max(records, key=lambda r: r.iteration)
    peak = f"{best.pct_of_peak:.0f}% of peak; " if best.pct_of_peak else ""
    text = (f"Final: {metric(best.value, best.metric, best.cpu_timing)} ({peak}"
            f"{best_measured(best, remeasured.latest(records, best))})")
    text += f", {last.iteration} iteration{'s' if last.iteration != 1 else ''}"
    if any(r.stop_reason == StopReason.TARGET_MET for r in records):
        return text + ", target met."
    if last.stop_reason == StopReason.MAX_ITERATIONS:
        return text + (", target not met (stopped at max_iterations)." if best.target else ", done (max_iterations).")
    return text + ", in progress."


def summary_row(summary) -> list[str]:
    """One run (a model.runs.Summary), as the pre-push hook and `kgit push` print it."""
    cpu = summary.cpu_timing
    return [
        summary.kernel,
        " ".join((summary.gpu or "an unknown device").split()) + (" (CPU timings)" if cpu else ""),
        metric(summary.baseline, summary.metric, cpu),
        _best_cell(summary),
        f"{summary.pct_of_peak:.0f}%" if summary.pct_of_peak else "-",
        str(summary.iterations),
        str(summary.reverted),
        "met" if summary.target_met else f"not met ({metric(summary.target, summary.metric)})"
        if summary.target is not None else "none set",
    ]


def _best_cell(summary) -> str:
    if summary.best is None:
        return "-"
    kept_by = f", kept at {summary.best_gain_pct:+.1f}%" if summary.best_gain_pct is not None else ""
    return f"{metric(summary.best, summary.metric, summary.cpu_timing)} (iter {summary.best_iteration}{kept_by})"


# Under a summary table whose best was kept on a gain: Baseline and Best are medians taken at different
# times (a clone stepping beside another doubles the load of both), the gain pairs taken side by side.
SUMMARY_LEGEND = ("Baseline and Best: each iteration's own median, measured at different times; a step is kept "
                  "on its gain over the best before it, measured pair by pair ('kept at'; 'kgit log' shows each)")


def gpu_names(records: list[Record]) -> str:
    # one line whatever a test printed (a name with a newline would split a README heading in two)
    return ", ".join(sorted({" ".join(r.gpu.split()) for r in records if r.gpu})) or "an unknown device"


def gpu_label(records: list[Record]) -> str:
    label = gpu_names(records)
    if any(r.cpu_timing for r in records):
        label += " (Triton interpreter on the CPU: timings are CPU timings, not comparable to a GPU)"
    return label


def record_json(record: Record, commit: str | None = None, **more) -> dict:
    """The record as its note holds it, with what a person should check before trusting it ("checks":
    doubts_json, empty when nothing): what --json prints of a record."""
    data = {**to_json(record), "checks": doubts_json(record)}
    if commit is not None:
        data["commit"] = commit
    return {**data, **more}
