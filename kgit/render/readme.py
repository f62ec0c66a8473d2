"""experiments/README.md: the log of every run, rendered from the records (never the other way round)."""

from __future__ import annotations

from kgit.model.record import Record, Status
from kgit.render.text import LOG_HEADERS, UNITS, final_line, gpu_label, log_row

README = "experiments/README.md"


def render_readme(records: list[Record]) -> str:
    """One section per run of a kernel on a GPU, each with its table, final line and chart."""
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


def sections(records: list[Record]) -> dict[tuple[str, str | None, str], list[Record]]:
    """The records grouped into runs, each in iteration order, the runs sorted: (kernel, GPU, started).

    A run is one loop from its baseline on: a baseline record opens a run, and a later record of the
    same kernel and GPU belongs to the latest run opened before it (also when another clone made it).
    A run that crashed before printing its result names no GPU: it joins the GPU of the same kernel's
    latest run started before it, the machine its loop was running on.
    """
    ordered = sorted(records, key=lambda r: (r.kernel, r.started or "", r.iteration))
    groups: dict[tuple[str, str | None, str], list[Record]] = {}
    last_gpu: dict[str, str] = {}
    opened: dict[tuple[str, str | None], str] = {}  # (kernel, GPU) -> when its latest run started
    for record in ordered:
        gpu = record.gpu or last_gpu.get(record.kernel)
        if record.gpu:
            last_gpu[record.kernel] = record.gpu
        if record.status == Status.BASELINE or (record.kernel, gpu) not in opened:
            opened[(record.kernel, gpu)] = record.started or ""
        groups.setdefault((record.kernel, gpu, opened[(record.kernel, gpu)]), []).append(record)
    return {
        k: sorted(groups[k], key=lambda r: (r.iteration, r.started or ""))
        for k in sorted(groups, key=lambda k: (k[0], k[1] or "", k[2]))
    }


def chart(kernel: str, records: list[Record]) -> list[str]:
    """A Mermaid xychart of the section's metric per iteration (GitHub and GitLab draw it; no dependency).

    Bars are each iteration's measurement (0 where the run failed and measured nothing); the line is
    the best kept value so far, the curve the loop climbs.
    """
    metric = next((r.metric for r in records if r.metric), None)
    if metric is None:
        return []
    measured, best_so_far, best = [], [], 0.0
    for record in records:
        value = record.value if record.correctness else None
        measured.append(value or 0.0)
        if value is not None and record.kept:
            best = value  # the latest kept is the best (kgit.model.decide.best_record)
        best_so_far.append(best)
    unit = UNITS.get(metric, metric)
    title = f"{kernel}: {unit} per iteration".replace('"', "'")
    return [
        "```mermaid",
        "xychart-beta",
        f'    title "{title}"',
        f"    x-axis \"iteration\" [{', '.join(str(r.iteration) for r in records)}]",
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
