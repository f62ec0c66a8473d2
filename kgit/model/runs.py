"""A kernel's records as runs: one loop on one device, from its baseline on. Records of different
devices never share a run (their figures are not comparable), so every table, count and best is a
run's: the log, the README and the pushed summary."""

from __future__ import annotations

from kgit.model.record import Record, Status


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
