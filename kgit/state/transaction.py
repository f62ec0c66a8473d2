"""A start or a step as a transaction that survives kill -9 at any point.

    (locked)   the caller holds the lock, and nothing a killed kgit left waits (kgit.loop.recovery)
    commit     journal 'commit': the candidate (the edited kernel, nothing else) becomes a commit on
               opt/<kernel>, and refs/kgit/attempts/<kernel>/<N> points at it at once
    (test)     journal 'testing': the caller runs the test against that commit
    decide     journal 'decided': the record is written into the journal, then finish applies it
    finish     kept:     a commit with the kernel and the log the caller rendered (experiments/README.md)
                         replaces the candidate on the branch; its note is written; best/<kernel> moves there
                         (not for KEPT_ANYWAY: it stays on the branch, the best stays where it was)
               reverted: the note goes on the candidate (still reachable through its attempt ref) and
                         the branch gets a commit that only updates experiments/README.md

Every phase is written down before it acts and each action is safe to repeat, so the next command
after a crash (kgit.loop.recovery) finishes a decided step or records an undecided one as FAILED
(interrupted) and rolls it back; git never loses the candidate. This module decides nothing and renders
nothing: it writes what the loop hands it, in an order that survives a kill.
"""

from __future__ import annotations

import os
import signal

from kgit import config
from kgit.errors import KgitError
from kgit.git import read, refs, write
from kgit.git.command import GitError, Repo
from kgit.model import decide
from kgit.model.record import Record
from kgit.state import journal as journals
from kgit.state import lock, rendered
from kgit.state.journal import Journal

# Tests kill kgit at a named point of a step to prove that the next command recovers (as git's own
# test suite does with GIT_TEST_* variables). Unset in normal use.
CRASH_ENV = "KGIT_TEST_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _check_open(repo: Repo) -> None:
    """Refuse to begin a start or a step unless this process holds the lock and no interrupted step waits:
    a mistake in kgit's own code, which kgit.loop.recovery.locked prevents."""
    if not lock.is_held(repo) or journals.path(repo).exists():
        raise RuntimeError("a start or a step runs under kgit.loop.recovery.locked")


def commit_candidate(repo: Repo, cfg: config.KernelConfig, iteration: int, action: str, tier: int | None,
                     paths: list[str] | None, base: str) -> Journal:
    """Commit the candidate (these paths, or every modified tracked file) under a journal, on base: HEAD's
    commit, read by the caller under the same lock."""
    _check_open(repo)
    journal = Journal(op="step", phase="commit", kernel=cfg.name, iteration=iteration, action=action,
                      tier=tier, base=base, started=decide.now(), config=cfg.as_dict())
    journals.save(repo, journal)
    crash_point("candidate-journaled")  # recovery finds HEAD at the base: nothing to undo
    subject = refs.iteration_subject(cfg.name, iteration, action)
    try:
        candidate = write.commit_paths(repo, paths, subject) if paths else write.commit_all(repo, subject)
    except GitError:  # nothing was committed (git's index locked, say): no step to finish or roll back
        journals.clear(repo)
        raise
    parent = read.first_parent(repo, candidate)
    if parent != base:
        # a commit landed on the branch between the caller's reads and this commit: the step was decided
        # against a tree it no longer has. The candidate goes back to the working tree, staged.
        write.uncommit(repo, parent)
        journals.clear(repo)
        raise KgitError(f"the branch moved while the step read it (HEAD was {base[:10]}); nothing was measured",
                        "run the step again: the change is staged")
    crash_point("candidate-unpinned")  # HEAD is the candidate, no attempt ref yet: its subject names it
    write.set_ref(repo, refs.attempt_ref(cfg.name, iteration), candidate)
    crash_point("candidate-committed")
    journal.phase, journal.candidate = "testing", candidate
    journals.save(repo, journal)
    return journal


def decided(repo: Repo, journal: Journal, record: Record, readme: dict[str, str], rendered_from: str | None) -> str:
    """Write the decision down, then apply it; the commit that carries the record's note."""
    journal.phase, journal.record = "decided", record
    journals.save(repo, journal)
    crash_point("decided")
    return finish(repo, journal, readme, rendered_from)


def finish(repo: Repo, journal: Journal, readme: dict[str, str] | None, rendered_from: str | None = None) -> str:
    """Apply a decided step: safe to repeat after a crash at any point. Returns the record's commit.

    readme: {path: the log rendered with the record}, for the step's commit (unused once it is made);
    rendered_from: the notes commit whose records it renders, known only to the command that rendered it.
    """
    record, kernel = journal.record, journal.kernel
    _check_branch_tip(repo, kernel, (journal.base, journal.candidate, journal.final))
    if journal.final is None:
        if record.status.on_branch:
            subject = refs.iteration_subject(kernel, journal.iteration, journal.action)
            journal.final = write.commit_with_files(repo, journal.candidate, journal.base, readme, subject)
        else:
            subject = refs.reverted_subject(kernel, journal.iteration, journal.action, record.status.value)
            journal.final = write.commit_with_files(repo, journal.base, journal.base, readme, subject)
        journals.save(repo, journal)
        crash_point("final-committed")
    noted = journal.final if record.status.on_branch else journal.candidate
    write.write_note(repo, noted, record)
    crash_point("noted")
    _remember(repo, journal.final, readme, rendered_from)
    _move_branch(repo, kernel, journal.final)
    crash_point("moved")
    if record.kept:
        write.set_tag(repo, kernel, journal.final)
    if record.status.on_branch:
        write.delete_ref(repo, refs.attempt_ref(kernel, journal.iteration))  # the branch keeps it
    journals.clear(repo)
    return noted


def start(repo: Repo, cfg: config.KernelConfig, head: str, record: Record, readme: dict[str, str],
          rendered_from: str | None) -> Journal:
    """Journal and apply the baseline: a commit on head with the rendered log, its note, branch, tag."""
    _check_open(repo)
    final = write.commit_with_files(repo, head, head, readme, refs.iteration_subject(cfg.name, 0, "baseline"))
    journal = Journal(op="start", phase="decided", kernel=cfg.name, iteration=0, action="baseline", tier=None,
                      base=head, started=record.started, config=cfg.as_dict(), record=record, final=final)
    journals.save(repo, journal)
    crash_point("start-decided")
    finish_start(repo, journal)
    _remember(repo, final, readme, rendered_from)
    return journal


def finish_start(repo: Repo, journal: Journal) -> None:
    """Make the baseline commit real: note, branch, tag, checkout. Safe to repeat."""
    kernel = journal.kernel
    write.write_note(repo, journal.final, journal.record)
    if read.rev(repo, refs.branch_ref(kernel)) is None:
        write.create_branch(repo, kernel, journal.final)
    crash_point("start-branched")
    write.set_tag(repo, kernel, journal.final)
    if read.current_kernel(repo) != kernel:
        write.switch(repo, kernel)
    journals.clear(repo)


def _remember(repo: Repo, commit: str, readme: dict[str, str] | None, rendered_from: str | None) -> None:
    """After a step's note is written: the rendering it committed renders every record now, if that
    note is all that changed since the records it rendered were read."""
    now = rendered.notes_written(repo, rendered_from)
    if now is None or readme is None:  # a recovery's rendering: which notes it rendered is not known
        return
    for path in readme:
        rendered.remember(repo, commit, path, now)


def _check_branch_tip(repo: Repo, kernel: str, expected: tuple[str | None, ...]) -> None:
    """Refuse to go on when opt/<kernel> was moved by someone else (a commit made while the test ran)."""
    tip = read.rev(repo, refs.branch_ref(kernel))
    if tip not in expected:
        candidate = expected[1]
        raise KgitError(
            f"{refs.branch(kernel)} moved while kgit worked on it (now at {tip[:10] if tip else 'nothing'}, "
            f"expected {candidate[:10]}): kgit leaves it alone",
            f"put those commits on another branch, 'git reset --keep {candidate[:10]}' on {refs.branch(kernel)}, "
            "then run kgit again to finish the step")


def _move_branch(repo: Repo, kernel: str, target: str) -> None:
    """Point opt/<kernel> at target; the working tree follows only when that branch is checked out.

    The user may have switched to another branch while the test ran: kgit never resets a checkout of
    another branch, it only moves its own (checked by _check_branch_tip).
    """
    if read.current_kernel(repo) == kernel:
        write.move_head(repo, target)
    else:
        write.set_ref(repo, refs.branch_ref(kernel), target)
