"""experiments/README.md (or kgit.yaml's report_path): the log of every run, rendered from the records
(never the other way round).

kgit writes only into a file it created, recognised by its MARK. Rendering is lossless: a section of
the previous rendering whose records are not in this clone (they were never fetched) is kept as it
was, and says so.
"""

from __future__ import annotations

from kgit.model.record import Record
from kgit.model.runs import sections
from kgit.render.text import LOG_HEADERS, final_line, gpu_label, log_row, numbered_twice, unit_label, when

MARK = "Rendered by `kgit report` from the records in git notes"
KEPT_NOTE = ("_Kept from an earlier rendering: the records of this run are not in this clone "
             "(`kgit pull` brings them)._")
SECTION = "## Optimization: "
# Every cell is text already: telling tabulate so spares it guessing the type of every cell (1.3 s of a
# step at 10,000 iterations of one kernel), and the iteration column is right-aligned as a number.
_AS_TEXT = {"disable_numparse": True, "colalign": ["right"] + ["left"] * (len(LOG_HEADERS) - 1)}


def is_kgits(text: str) -> bool:
    """Whether a file's text is a rendering of kgit's (its mark in the first lines)."""
    return MARK in "\n".join(text.splitlines()[:5])


def render_readme(records: list[Record], previous: str | None = None) -> str:
    """One section per run of a kernel on a GPU, each with its table, final line and chart; the
    previous rendering's sections that these records cannot render again, kept."""
    rendered = _rendered(records)
    for heading, body in _sections_of(previous or "").items():
        if heading not in rendered:
            rendered[heading] = _kept(body)
    return _joined(rendered)


def render_kernel(kernel: str, records: list[Record], previous: str) -> str:
    """previous with one kernel's sections rendered again from its records (every one of them), the
    other kernels' sections left as they are: render_readme's text, at a cost that grows with this
    kernel's records alone, wherever previous is what render_readme gives for the other kernels'
    records (rendering it again would change nothing of theirs; kgit.render.cache knows when)."""
    rendered = _rendered(records)
    mine = f"{SECTION}{kernel} on "  # a kernel's name has no space: no other kernel's heading starts so
    for heading, body in _sections_of(previous).items():
        if heading not in rendered:
            rendered[heading] = _kept(body) if heading.startswith(mine) else body
    return _joined(rendered)


def _rendered(records: list[Record]) -> dict[str, list[str]]:
    """The sections these records render, by heading, each its lines."""
    from tabulate import tabulate

    rendered = {}
    for (kernel, _, started), section in sections(records).items():
        heading = f"{SECTION}{kernel} on {gpu_label(section)}" + (f", started {when(started)}" if started else "")
        final = max(r.iteration for r in section)
        twice = numbered_twice(section)
        rows = [[cell.replace("|", "\\|") for cell in log_row(r, resumed=r.iteration < final, twice=twice)]
                for r in section]
        rendered[heading] = [heading, "", tabulate(rows, LOG_HEADERS, tablefmt="github", **_AS_TEXT), "",
                             final_line(section), "", *chart(kernel, section)]
    return rendered


def _kept(body: list[str]) -> list[str]:
    """A section of an earlier rendering that no record here renders, marked so once."""
    return body if KEPT_NOTE in body else [body[0], "", KEPT_NOTE, *body[1:]]


def _joined(rendered: dict[str, list[str]]) -> str:
    lines = [
        "# Experiments",
        "",
        f"{MARK} (refs/notes/kgit), those fetched from other clones included; do not edit by hand.",
        "",
    ]
    for heading in sorted(rendered):
        lines += rendered[heading]
    return "\n".join(lines)


def _sections_of(text: str) -> dict[str, list[str]]:
    """A rendering's sections by heading, each its lines (the heading first), as they are: split at
    newlines only, so that a section kept joins again into the same text."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.split("\n"):
        if line.startswith(SECTION):
            current = found.setdefault(line, [line])
        elif current is not None:
            current.append(line)
    return found


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
    unit = unit_label(metric)
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
        _chart_caption(records, measured),
        "",
    ]


def _chart_caption(records: list[Record], bars: list[float]) -> str:
    """What the bars are, with the reverted and failed ones counted: a reverted bar above the line, or a
    failed one at 0 on a chart where lower is better, otherwise reads as a win (a user trial did)."""
    failed = bars.count(0.0)
    reverted = sum(1 for record, bar in zip(records[1:], bars[1:]) if bar and not record.kept)
    parts = ["Bars: each iteration's own measurement"]
    if reverted:
        parts.append(f"{reverted} reverted (a bar past the line did not beat the best beyond the noise)")
    if failed:
        parts.append(f"{failed} failed (0: nothing measured)")
    return "; ".join(parts) + ". Line: the best kept so far."


def _number(value: float) -> str:
    return f"{value:.4g}"
