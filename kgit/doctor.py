"""kgit doctor: find, and with --fix repair, what rewrites, crashes and clones leave behind.

  an interrupted step      a kgit killed mid-step: the loop's recovery finishes it or rolls it back
                           (the lock needs no repair: the kernel releases it when its holder dies)
  notes on lost commits    a note on a commit no branch reaches (attempts are meant to be off-branch):
                           - a copy left by a rebase or amend (its records are on a branch's commit too):
                             removed
                           - a kept iteration rewritten without notes.rewriteRef (a commit of opt/<kernel>
                             has its subject and no note): the note moves there
                           - the only copy, commit gone: reported and kept (a record is never deleted)
                           - the only copy, and no ref at all reaches the commit: pinned by an attempt ref
                             so that gc keeps it
  a best/ tag off its branch   moved to the branch's best kept iteration
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from kgit import loop, store


@dataclass
class Problem:
    problem: str
    fix: str  # what --fix does about it
    repair: Callable[[], None] | None = field(default=None, repr=False)  # None: nothing safe to do


def diagnose(repo: store.Repo) -> list[Problem]:
    problems = []
    unfinished = store.read_journal(repo) is not None or store.rev(repo, store.SAVED_EDITS_REF)
    if unfinished and store.lock_holder(repo) is None:
        problems.append(Problem("an interrupted step (kgit was killed in the middle of it)",
                                "finish or roll it back, as the next kgit command would"))
    return problems + note_problems(repo) + tag_problems(repo)


def fix(repo: store.Repo) -> tuple[list[str], list[Problem]]:
    """Repair what can be repaired, under the lock; what was done, and what is left."""
    done = []
    with loop.session(repo, writes=True) as recovered:  # the session finishes an interrupted step
        done += recovered
        # Notes first: a note moved back onto its rewritten commit puts its record on the branch,
        # where the best/ tag can then find it.
        for find in (note_problems, tag_problems):
            for problem in find(repo):
                if problem.repair is not None:
                    problem.repair()
                    done.append(f"{problem.problem}: {problem.fix}")
        left = note_problems(repo) + tag_problems(repo)
    return done, left


def note_problems(repo: store.Repo) -> list[Problem]:
    """Notes on commits that a rewrite left behind, or that nothing keeps any more."""
    by_commit = store.read_notes(repo)
    present = store.existing(repo, list(by_commit))
    on_branches = store.reachable(repo, present, branches_only=True)
    live = on_branches | store.reachable(repo, present - on_branches)
    keys_on_branches = {store.record_key(r) for c in on_branches for r in by_commit[c]}
    off = sorted(c for c in by_commit if c not in on_branches)
    subjects = store.subjects(repo, [c for c in off if c in present])
    problems = []
    for commit in off:
        records = by_commit[commit]
        what = ", ".join(f"{r['kernel']} iteration {r['iteration']}" for r in records)
        where = f"note on {commit[:10]} ({what})"
        if all(store.record_key(r) in keys_on_branches for r in records):
            problems.append(Problem(f"{where}: a copy left by a rewrite, the record is on a branch's commit",
                                    "remove the stale note", lambda c=commit: store.remove_notes(repo, [c])))
        elif commit not in present:
            problems.append(Problem(f"{where}: the commit is not in this clone",
                                    "none: the note is the only copy of its record and stays "
                                    "('kgit pull' may bring the commit)"))
        elif twin := _rewritten(repo, records, subjects.get(commit, ""), by_commit):
            problems.append(Problem(f"{where}: its commit was rewritten as {twin[:10]} without the note",
                                    f"move the note to {twin[:10]}", lambda c=commit, t=twin: _move_note(repo, c, t)))
        elif commit not in live:
            ref = _free_attempt_ref(repo, records[0], commit)
            problems.append(Problem(f"{where}: no ref reaches the commit and gc would delete it",
                                    f"keep it with {ref}", lambda c=commit, r=ref: store.set_ref(repo, r, c)))
    return problems


def _rewritten(repo: store.Repo, records: list[dict], subject: str, by_commit: dict) -> str | None:
    """For a kept iteration's commit off its branch: the commit of opt/<kernel> with its subject and no
    note, what a rewrite without notes.rewriteRef made of it."""
    kernel = records[0]["kernel"]
    kept = any(r["status"] in loop.KEPT for r in records)
    if not kept or not re.match(rf"{re.escape(kernel)}: iter \d+: ", subject):
        return None
    tip = store.rev(repo, f"refs/heads/{store.branch_name(kernel)}")
    if tip is None:
        return None
    for sha, candidate, _ in store.first_parent_walk(repo, tip):
        if candidate == subject and sha not in by_commit:
            return sha
        if not candidate.startswith(f"{kernel}: iter ") and candidate != loop.REPORT_SUBJECT:
            return None  # past the kernel's commits: the rest is the history it started from
    return None


def _move_note(repo: store.Repo, old: str, new: str) -> None:
    records = store.read_notes(repo)[old]
    store.write_notes(repo, {new: records}, f"kgit doctor: move the note of {old[:10]} to {new[:10]}")
    store.remove_notes(repo, [old])


def _free_attempt_ref(repo: store.Repo, record: dict, commit: str) -> str:
    ref = store.attempt_ref(record["kernel"], record["iteration"])
    return ref if store.rev(repo, ref) is None else f"{ref}-{commit[:10]}"


def tag_problems(repo: store.Repo) -> list[Problem]:
    problems = []
    for kernel in store.kernels_with_branches(repo):
        branch, tag = store.branch_name(kernel), store.tag_name(kernel)
        # the whole chain: a best iteration may lie far below a long run of reverts
        on_branch = set(store.first_parents(repo, f"refs/heads/{branch}", limit=1_000_000))
        mine = [(sha, r) for sha, r in loop.kernel_records(repo, kernel) if sha in on_branch]
        best = loop.best_record([r for _, r in mine])
        if best is None:
            continue
        best_commit = next(sha for sha, r in mine if r is best)
        tagged = store.rev(repo, f"refs/tags/{tag}")
        if tagged == best_commit:
            continue
        state = ("is missing" if tagged is None else "points off its branch" if tagged not in on_branch
                 else "is not on the best kept iteration")
        problems.append(Problem(
            f"{tag} {state}", f"move it to {best_commit[:10]} (iteration {best['iteration']})",
            lambda k=kernel, c=best_commit: store.set_tag(repo, k, c),
        ))
    return problems
