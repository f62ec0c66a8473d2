"""Every ref name and commit subject kgit writes, and their parsing back: the one place that spells them.

  refs/heads/opt/<kernel>              the kept iterations, one commit each (plus log commits for reverts)
  refs/tags/best/<kernel>              the best kept iteration
  refs/kgit/attempts/<kernel>/<N>      every reverted attempt, so that gc never loses it
  refs/notes/kgit                      one JSON record per iteration, on its commit
  refs/kgit/saved-edits                uncommitted edits kgit saved across a reset, until they are back
  refs/kgit/unrestored-edits/<sha>     saved edits kgit did not write back over newer ones (yours to take)
  refs/kgit/remotes/<remote>/...       what kgit last saw of a remote's tags, notes and attempts
  refs/kgit/quarantine/<remote>        the notes kgit pull refused, and why (kgit.share.screen)
  refs/remotes/<remote>/opt/<kernel>   a remote's branches, where git keeps them

Commit subjects:
  <kernel>: iter <N>: <action>                       a kept iteration (0: the baseline)
  <kernel>: iter <N>: <action> (reverted: <STATUS>)  the log-only commit of a reverted iteration
  kgit: render <report path>                        a `kgit report` (report_path, experiments/README.md by default)
  <kernel>: the best of opt/<kernel>, iteration <N>: <action>   `kgit finish`'s one commit on the branch
                                                    the loop started from (no iteration's: no ': iter ')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NOTES_REF = "refs/notes/kgit"
ATTEMPTS = "refs/kgit/attempts"
OUTGOING_NOTES = "refs/kgit/outgoing-notes"  # what kgit push last sent as refs/notes/kgit, when not all of it
SAVED_EDITS = "refs/kgit/saved-edits"
UNRESTORED_EDITS = "refs/kgit/unrestored-edits"
QUARANTINE = "refs/kgit/quarantine/"
FORKS = "refs/kgit/forks"  # a line of a kernel that a join left behind a fork, kept from gc
BRANCH_PREFIX = "opt/"
TAG_PREFIX = "best/"
BRANCHES = "refs/heads/" + BRANCH_PREFIX
TAGS = "refs/tags/" + TAG_PREFIX

_REPORT_SUBJECT_PREFIX = "kgit: render "
_ITERATION_SUBJECT = re.compile(
    r"(?P<kernel>[^:]+): iter (?P<iteration>\d+): (?P<action>.*?)(?: \(reverted: (?P<status>[A-Z_]+)\))?"
)


def report_subject(report_path: str) -> str:
    return _REPORT_SUBJECT_PREFIX + report_path


def is_report_subject(subject: str) -> bool:
    return subject.startswith(_REPORT_SUBJECT_PREFIX)


def branch(kernel: str) -> str:
    return BRANCH_PREFIX + kernel


def branch_ref(kernel: str) -> str:
    return BRANCHES + kernel


def tag(kernel: str) -> str:
    return TAG_PREFIX + kernel


def tag_ref(kernel: str) -> str:
    return TAGS + kernel


def attempt_ref(kernel: str, iteration: int) -> str:
    return f"{ATTEMPTS}/{kernel}/{iteration}"


def kernel_of_branch(name: str | None) -> str | None:
    """The kernel of a branch name (short, or a full refs/heads/ name), or None for another branch."""
    if name is None:
        return None
    name = name.removeprefix("refs/heads/")
    return name[len(BRANCH_PREFIX):] if name.startswith(BRANCH_PREFIX) else None


def remote_snapshot(remote: str, name: str) -> str:
    """Where kgit keeps what it last saw of a remote's ref (name: best/<k>, notes/kgit, attempts/...)."""
    return f"refs/kgit/remotes/{remote}/{name}"


def remote_branch_ref(remote: str, kernel: str) -> str:
    return f"refs/remotes/{remote}/{BRANCH_PREFIX}{kernel}"


def iteration_subject(kernel: str, iteration: int, action: str) -> str:
    return f"{kernel}: iter {iteration}: {action}"


def finish_subject(kernel: str, iteration: int, action: str) -> str:
    return f"{kernel}: the best of {branch(kernel)}, iteration {iteration}: {action}"


def reverted_subject(kernel: str, iteration: int, action: str, status: str) -> str:
    return f"{iteration_subject(kernel, iteration, action)} (reverted: {status})"


@dataclass(frozen=True)
class Subject:
    kernel: str
    iteration: int
    action: str
    reverted: str | None  # the status of a reverted iteration's log commit, else None


def parse_subject(subject: str) -> Subject | None:
    """What a kgit iteration's commit subject says, or None for any other subject."""
    match = _ITERATION_SUBJECT.fullmatch(subject)
    if match is None:
        return None
    return Subject(match["kernel"], int(match["iteration"]), match["action"], match["status"])
