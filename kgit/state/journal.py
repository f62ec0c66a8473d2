"""The journal of the step in flight, and the registry of the tests kgit has running.

The journal (.git/kgit/journal.json) says how far a start or a step got, so that whichever kgit
command runs next after a crash can finish or roll it back. It is read back as untrusted input: a
damaged journal is a one-line error that says how to set it aside, never a traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from dataclasses import dataclass

from kgit.errors import KgitError
from kgit.git import read, refs
from kgit.git.command import Repo
from kgit.model.record import InvalidRecord, Record, from_json, is_object_id, to_json

PHASES = ("commit", "testing", "decided")


@dataclass
class Journal:
    op: str  # "start" or "step"
    phase: str  # "commit": committing the candidate; "testing": its test runs; "decided": record written
    kernel: str
    iteration: int
    action: str
    tier: int | None
    base: str  # the commit the step started from (for a start: the commit the branch grows from)
    started: str
    config: dict  # the kernel's settings for this step (config.KernelConfig's fields)
    candidate: str | None = None
    record: Record | None = None
    final: str | None = None  # the commit the branch moves to


def pending(repo: Repo) -> bool:
    """Whether a killed kgit left something to finish: a journal, a running test, saved edits."""
    return bool(path(repo).exists() or registered_tests(repo) or read.rev(repo, refs.SAVED_EDITS))


def path(repo: Repo):
    return repo.kgit_dir / "journal.json"


def load(repo: Repo) -> Journal | None:
    try:
        text = path(repo).read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise _damaged(repo, str(e)) from None
    try:
        data = json.loads(text)
        fields = {f.name for f in dataclasses.fields(Journal)}
        if not isinstance(data, dict) or set(data) - fields:
            raise ValueError("not a journal object")
        journal = Journal(**{**data, "record": from_json(data["record"]) if data.get("record") else None})
        _check(journal)
        return journal
    except (ValueError, TypeError, KeyError, InvalidRecord) as e:
        raise _damaged(repo, str(e) or type(e).__name__) from None


def _check(journal: Journal) -> None:
    if journal.op not in ("start", "step") or journal.phase not in PHASES:
        raise ValueError(f"unknown op or phase {journal.op!r} {journal.phase!r}")
    for name in ("base", "candidate", "final"):
        value = getattr(journal, name)
        if value is not None and not is_object_id(value):
            raise ValueError(f"{name} is not an object id")
    if not isinstance(journal.iteration, int) or not isinstance(journal.config, dict):
        raise ValueError("wrong types")
    if journal.phase == "decided" and journal.record is None:
        raise ValueError("a decided step without its record")


def _damaged(repo: Repo, why: str) -> KgitError:
    where = path(repo)
    return KgitError(f"kgit's journal {where} is damaged ({why[:120]})",
                     f"set it aside with 'mv {where} {where}.damaged' and run 'kgit doctor'")


def save(repo: Repo, journal: Journal) -> None:
    repo.kgit_dir.mkdir(exist_ok=True)
    data = dataclasses.asdict(journal)
    data["record"] = to_json(journal.record) if journal.record else None
    tmp = path(repo).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path(repo))  # atomic: a reader sees the old or the new


def clear(repo: Repo) -> None:
    path(repo).unlink(missing_ok=True)


# Every test kgit starts is registered here until it ends: a kgit killed meanwhile leaves the test
# running in its own process group, and the next kgit command stops it.


def register_test(repo: Repo, pid: int, test_path: str) -> None:
    folder = repo.kgit_dir / "running"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / str(pid)).write_text(test_path)


def unregister_test(repo: Repo, pid: int) -> None:
    (repo.kgit_dir / "running" / str(pid)).unlink(missing_ok=True)


@contextlib.contextmanager
def tests_registered(repo: Repo, test_path: str):
    """An on_spawn callback that registers a test's pid until the test ends: the next kgit stops a test
    that a killed one left running (kgit.loop.recovery)."""
    pids = []

    def on_spawn(pid: int) -> None:
        pids.append(pid)
        register_test(repo, pid, test_path)

    try:
        yield on_spawn
    finally:
        for pid in pids:
            unregister_test(repo, pid)


def registered_tests(repo: Repo) -> dict[int, str]:
    """pid -> test path of the tests kgit started and has not seen end."""
    folder = repo.kgit_dir / "running"
    if not folder.is_dir():
        return {}
    return {int(p.name): p.read_text(errors="replace") for p in folder.iterdir() if p.name.isdigit()}
