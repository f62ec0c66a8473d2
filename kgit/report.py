"""Turns records into words: the experiments/README.md log and the rows of kgit's tables."""

from __future__ import annotations

from collections import defaultdict

README = "experiments/README.md"

LOG_HEADERS = ["Iter", "Action", "Tier", "Correctness", "Metric", "Delta", "Status"]

_STATUS_WORDS = {
    "BASELINE": "baseline",
    "IMPROVED": "improved",
    "TARGET_MET": "TARGET_MET",
    "REGRESSED": "regressed, reverted",
    "WITHIN_NOISE": "within noise, reverted",
    "FAILED": "failed, reverted",
}
_UNITS = {"gbps": "GBps", "tflops": "TFLOPS"}


def format_metric(value: float | None, metric: str | None, cpu_timing: bool = False) -> str:
    if value is None or metric is None:
        return "-"
    digits = 0 if value >= 100 else 1 if value >= 1 else 3
    text = f"{value:.{digits}f} {_UNITS.get(metric, metric)}"
    return text + " (CPU)" if cpu_timing else text


def format_delta(pct: float | None) -> str:
    return "-" if pct is None else f"{pct:+.1f}%"


def status_words(record: dict) -> str:
    words = _STATUS_WORDS.get(record["status"], record["status"])
    if record["status"] == "FAILED" and record.get("reason"):
        words += f" ({record['reason']})"
    if record.get("stop_reason") == "MAX_ITERATIONS":
        words += "; MAX_ITERATIONS"
    return words


def log_row(record: dict) -> list[str]:
    correctness = {True: "PASS", False: "FAIL", None: "-"}[record.get("correctness")]
    return [
        str(record["iteration"]),
        record["action"],
        f"T{record['tier']}" if record.get("tier") is not None else "-",
        correctness,
        format_metric(record.get("value"), record.get("metric"), record.get("cpu_timing", False)),
        format_delta(record.get("delta_pct")),
        status_words(record),
    ]


def final_line(records: list[dict]) -> str:
    kept = [r for r in records if r["status"] in ("BASELINE", "IMPROVED", "TARGET_MET") and r.get("value")]
    if not kept:
        return "Final: no successful run yet."
    best = max(kept, key=lambda r: r["value"])
    last = max(records, key=lambda r: r["iteration"])
    text = f"Final: {format_metric(best['value'], best['metric'], best.get('cpu_timing', False))}"
    if best.get("pct_of_peak"):
        text += f" ({best['pct_of_peak']:.0f}% of peak)"
    iterations = last["iteration"]
    text += f", {iterations} iteration{'s' if iterations != 1 else ''}"
    if any(r.get("stop_reason") == "TARGET_MET" for r in records):
        return text + ", target met."
    if last.get("stop_reason") == "MAX_ITERATIONS":
        return text + ", target not met (stopped at max_iterations)." if best.get("target") else text + ", done (max_iterations)."
    return text + ", in progress."


def render_readme(records: list[dict]) -> str:
    """experiments/README.md, rendered from every record: one section per kernel."""
    from tabulate import tabulate

    groups = defaultdict(list)
    for record in records:
        groups[record["kernel"]].append(record)
    lines = [
        "# Experiments",
        "",
        "Rendered by `kgit report` from the records in git notes (refs/notes/kgit); do not edit by hand.",
        "",
    ]
    for kernel in sorted(groups):
        kernel_records = sorted(groups[kernel], key=lambda r: (r["iteration"], r.get("started", "")))
        lines += [f"## Optimization: {kernel} on {gpu_label(kernel_records)}", ""]
        rows = [[cell.replace("|", "\\|") for cell in log_row(r)] for r in kernel_records]
        lines += [tabulate(rows, LOG_HEADERS, tablefmt="github"), "", final_line(kernel_records), ""]
    return "\n".join(lines)


def gpu_label(records: list[dict]) -> str:
    gpus = {r["gpu"] for r in records if r.get("gpu")}
    label = ", ".join(sorted(gpus)) or "an unknown device"
    if any(r.get("cpu_timing") for r in records):
        label += " (Triton interpreter on the CPU: timings are CPU timings, not comparable to a GPU)"
    return label
