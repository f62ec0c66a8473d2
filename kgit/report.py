"""Turns records into words: the experiments/README.md log and the rows of kgit's tables."""

from __future__ import annotations

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
_KEPT = ("BASELINE", "IMPROVED", "TARGET_MET")


def format_metric(value: float | None, metric: str | None, cpu_timing: bool = False) -> str:
    if value is None or metric is None:
        return "-"
    number = f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 1 else f"{value:.3g}"
    text = f"{number} {_UNITS.get(metric, metric)}"
    return text + " (CPU)" if cpu_timing else text


def format_delta(pct: float | None) -> str:
    return "-" if pct is None else f"{pct:+.1f}%"


def status_words(record: dict) -> str:
    words = _STATUS_WORDS.get(record["status"], record["status"])
    if record["status"] == "FAILED" and record.get("reason"):
        reason = record["reason"]  # whole in the note and in `kgit show`; a table row keeps its start
        words += f" ({reason if len(reason) <= 100 else reason[:99] + '…'})"
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
    kept = [r for r in records if r["status"] in _KEPT and r.get("value")]
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
    """experiments/README.md, rendered from every record: one section per kernel and GPU, with a chart."""
    from tabulate import tabulate

    lines = [
        "# Experiments",
        "",
        "Rendered by `kgit report` from the records in git notes (refs/notes/kgit), those fetched from "
        "other clones included; do not edit by hand.",
        "",
    ]
    for (kernel, _, started), section in sections(records).items():
        when = f", started {started[:16].replace('T', ' ')} UTC" if started else ""
        lines += [f"## Optimization: {kernel} on {gpu_label(section)}{when}", ""]
        rows = [[cell.replace("|", "\\|") for cell in log_row(r)] for r in section]
        lines += [tabulate(rows, LOG_HEADERS, tablefmt="github"), "", final_line(section), ""]
        lines += chart(kernel, section)
    return "\n".join(lines)


def sections(records: list[dict]) -> dict[tuple[str, str | None, str], list[dict]]:
    """The records grouped into runs, each in iteration order, the runs sorted: (kernel, GPU, started).

    A run is one loop from its baseline on: a baseline record opens a run, and a later record of the
    same kernel and GPU belongs to the latest run opened before it (also when another clone made it).
    A run that crashed before printing its result names no GPU: it joins the GPU of the same kernel's
    latest run started before it, the machine its loop was running on.
    """
    ordered = sorted(records, key=lambda r: (r["kernel"], r.get("started") or "", r["iteration"]))
    groups: dict[tuple[str, str | None, str], list[dict]] = {}
    last_gpu: dict[str, str] = {}
    opened: dict[tuple[str, str | None], str] = {}  # (kernel, GPU) -> when its latest run started
    for record in ordered:
        gpu = record.get("gpu") or last_gpu.get(record["kernel"])
        if record.get("gpu"):
            last_gpu[record["kernel"]] = record["gpu"]
        if record["status"] == "BASELINE" or (record["kernel"], gpu) not in opened:
            opened[(record["kernel"], gpu)] = record.get("started") or ""
        groups.setdefault((record["kernel"], gpu, opened[(record["kernel"], gpu)]), []).append(record)
    return {
        k: sorted(groups[k], key=lambda r: (r["iteration"], r.get("started") or ""))
        for k in sorted(groups, key=lambda k: (k[0], k[1] or "", k[2]))
    }


def chart(kernel: str, records: list[dict]) -> list[str]:
    """A Mermaid xychart of the section's metric per iteration (GitHub and GitLab draw it; no dependency).

    Bars are each iteration's measurement (0 where the run failed and measured nothing); the line is
    the best kept value so far, the curve the loop climbs.
    """
    metric = next((r["metric"] for r in records if r.get("metric")), None)
    if metric is None:
        return []
    measured, best_so_far, best = [], [], 0.0
    for record in records:
        value = record.get("value") if record.get("correctness") else None
        measured.append(value or 0.0)
        if value is not None and record["status"] in _KEPT:
            best = max(best, value)
        best_so_far.append(best)
    unit = _UNITS.get(metric, metric)
    title = f"{kernel}: {unit} per iteration".replace('"', "'")
    return [
        "```mermaid",
        "xychart-beta",
        f'    title "{title}"',
        f"    x-axis \"iteration\" [{', '.join(str(r['iteration']) for r in records)}]",
        f'    y-axis "{unit}"',
        f"    bar [{', '.join(_number(v) for v in measured)}]",
        f"    line [{', '.join(_number(v) for v in best_so_far)}]",
        "```",
        "",
        "Bars: each iteration's measurement (0: failed, nothing measured). Line: the best kept so far.",
        "",
    ]


def _number(value: float) -> str:
    return f"{value:.4g}"


def summary_row(records: list[dict]) -> list[str]:
    """One kernel on one GPU, as the pre-push hook and `kgit push` print it."""
    kept = [r for r in records if r["status"] in _KEPT and r.get("value")]
    baseline = next((r for r in records if r["iteration"] == 0), None)
    best = max(kept, key=lambda r: r["value"], default=None)
    target = best.get("target") if best else None
    met = any(r.get("stop_reason") == "TARGET_MET" for r in records) or (
        target is not None and best is not None and best["value"] >= target)
    cpu = any(r.get("cpu_timing") for r in records)
    return [
        records[0]["kernel"],
        gpu_names(records) + (" (CPU timings)" if cpu else ""),
        format_metric(baseline.get("value"), baseline.get("metric"), cpu) if baseline else "-",
        format_metric(best["value"], best["metric"], cpu) + f" (iter {best['iteration']})" if best else "-",
        f"{best['pct_of_peak']:.0f}%" if best and best.get("pct_of_peak") else "-",
        str(max(r["iteration"] for r in records)),
        str(sum(r["status"] not in _KEPT for r in records)),
        "met" if met else f"not met ({format_metric(target, best['metric'])})" if target is not None else "none set",
    ]


SUMMARY_HEADERS = ["Kernel", "GPU", "Baseline", "Best", "% of peak", "Iterations", "Reverted", "Target"]


def gpu_names(records: list[dict]) -> str:
    return ", ".join(sorted({r["gpu"] for r in records if r.get("gpu")})) or "an unknown device"


def gpu_label(records: list[dict]) -> str:
    label = gpu_names(records)
    if any(r.get("cpu_timing") for r in records):
        label += " (Triton interpreter on the CPU: timings are CPU timings, not comparable to a GPU)"
    return label
