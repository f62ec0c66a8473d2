"""Profiles already taken, read back: the latest of a kernel, a metrics file, and the benchmark's
numbers when no profiler ran. Read-only (kgit context and kgit diagnose use it)."""

from __future__ import annotations

import json
from pathlib import Path

from kgit.errors import KgitError
from kgit.git import notes, read
from kgit.git.command import Repo
from kgit.model.record import Record
from kgit.profiling import skillfiles


def profile_dir(repo: Repo, kernel: str) -> Path:
    return repo.kgit_dir / "profiles" / kernel


def head_record(repo: Repo, records: dict[str, Record]) -> tuple[str | None, Record | None]:
    """The kept iteration whose kernel HEAD holds: HEAD's own record, or the nearest first-parent one
    (after a revert HEAD is a log-only commit on top of the last kept kernel)."""
    head = read.rev(repo, "HEAD")
    if head is None:
        return None, None
    for sha in read.first_parents(repo, head):
        record = records.get(sha)
        if record is not None and record.status.on_branch:
            return sha, record
    return None, None


def benchmark_fallback(why: str, record: Record | None, root: Path, kernel: str) -> dict:
    """The profile when no profiler ran: the benchmark's numbers and the declared bottleneck."""
    declared, declared_why = skillfiles.declared_bottleneck(root, kernel)
    test = (record.test if record else None) or {}
    return {
        "tool": None,
        "source": "benchmark",
        "why": why,
        "declared_bottleneck": declared,
        "declared_why": declared_why,
        "metric": record.metric if record else None,
        "value": record.value if record else None,
        "pct_of_peak": test.get("pct_of_peak"),
        "pct_of_copy": test.get("pct_of_copy"),
        "latency_us": test.get("latency_us"),
        "cpu_timing": bool(test.get("cpu_timing")),
        "iteration": record.iteration if record else None,
        "metrics": {},
        "stalls": [],
    }


def latest(repo: Repo, kernel: str) -> dict | None:
    """The last profile of this kernel: .git/kgit/profiles/<kernel>/latest.json, else the newest note's."""
    path = profile_dir(repo, kernel) / "latest.json"
    if path.is_file():
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            pass
    noted = [r for r in notes.kernel_history(repo, kernel).records if r.profile]
    return noted[-1].profile if noted else None


def load_metrics_file(path: Path) -> dict:
    """A metrics.json written by kgit, or a raw ncu CSV (what a user captured by hand)."""
    from kgit.profiling import ncu

    if not path.is_file():
        raise KgitError(f"--metrics: file {path} does not exist")
    text = path.read_text(errors="replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        launches = ncu.parse_csv(text)
        if not launches:
            raise KgitError(f"--metrics: {path} is neither kgit's metrics.json nor an ncu CSV") from None
        return ncu.summarize(launches, None)
    if not isinstance(data, dict) or ("metrics" not in data and "source" not in data):
        raise KgitError(f"--metrics: {path} is not a kgit metrics.json (no 'metrics' key)")
    data.setdefault("source", "profiler")
    return data
