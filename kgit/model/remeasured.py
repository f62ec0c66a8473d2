"""The best as later steps measured it again.

The best's record holds the figure its own step measured. Every later step runs the best again beside
its candidate, pair by pair on one machine, and keeps those runs in its measurement.best. The two can
be far apart (1.75x in one user's trial, on the same machine), and neither replaces the other: the
first is what kept the best, the latest is what it measures now. The best, status and the log show
both, each with when it was measured.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from kgit.model.device_time import is_positive_number
from kgit.model.record import Record


@dataclass(frozen=True)
class Remeasured:
    value: float  # the median of the best's runs in that step's pairs
    runs: int
    iteration: int  # the step whose pairs ran them
    started: str | None  # when that step started


def latest(records: list[Record], best: Record) -> Remeasured | None:
    """The latest re-measurement of `best` in these records: the runs of the best in the pairs of the latest
    step after it on the same device (every step after the best is judged against it); None where no
    later step got as far as running it."""
    later = [r for r in records if r.kernel == best.kernel and r.gpu == best.gpu and r.iteration > best.iteration
             and (r.started or "") >= (best.started or "") and _runs(r)]
    if not later:
        return None
    step = max(later, key=lambda r: (r.iteration, r.started or ""))
    runs = _runs(step)
    return Remeasured(statistics.median(runs), len(runs), step.iteration, step.started)


def _runs(record: Record) -> list[float]:
    """The best's figures in a record's pairs; none where a note holds anything but positive numbers."""
    runs = record.measurement.best if record.measurement else []
    return runs if all(is_positive_number(v) for v in runs) else []
