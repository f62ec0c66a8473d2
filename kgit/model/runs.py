"""A kernel's records as runs: one loop on one device, from its baseline on. Records of different
devices never share a run (their figures are not comparable), so every table, count and best is a
run's: the log, the README and the pushed summary."""

from __future__ import annotations

from dataclasses import dataclass

from kgit.model.decide import best_record
from kgit.model.record import Record, Status, StopReason


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


@dataclass(frozen=True)
class Summary:
    """One run in numbers, as kgit push and the pre-push hook report it (render.text.summary_row says it)."""

    kernel: str
    gpu: str | None
    cpu_timing: bool
    metric: str | None
    baseline: float | None
    best: float | None
    best_iteration: int | None
    # the gain that kept the best, measured pair by pair against the best before it (None: the baseline)
    best_gain_pct: float | None
    pct_of_peak: float | None
    iterations: int  # the run's steps, as kgit status counts them (two clones may number one alike)
    reverted: int  # as kgit status counts them: a change kept anyway stays on the branch
    target: float | None
    target_met: bool  # as the loop decided it: a record knows its figure, not which way it runs


def summarize(gpu: str | None, records: list[Record]) -> Summary:
    """A run's Summary (records: one run's, sections' values; gpu: its key's)."""
    baseline = next((r for r in records if r.iteration == 0), None)
    best = best_record(records)
    return Summary(
        kernel=records[0].kernel, gpu=gpu, cpu_timing=any(r.cpu_timing for r in records),
        metric=best.metric if best else records[0].metric,
        baseline=baseline.value if baseline else None, best=best.value if best else None,
        best_iteration=best.iteration if best else None,
        best_gain_pct=best.delta_pct if best and best.iteration > 0 else None,
        pct_of_peak=best.pct_of_peak if best else None,
        iterations=len({r.key for r in records if r.status != Status.BASELINE}),
        reverted=sum(not r.status.on_branch for r in records),
        target=best.target if best else None,
        target_met=any(r.stop_reason == StopReason.TARGET_MET for r in records))
