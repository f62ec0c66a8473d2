"""A start or a step as a transaction that survives kill -9 at any point.

    begin      take the lock; finish or roll back whatever a killed kgit left (recover)
    commit     journal 'commit': the candidate (the edited kernel, nothing else) becomes a commit on
               opt/<kernel>, and refs/kgit/attempts/<kernel>/<N> points at it at once
    (test)     journal 'testing': the caller runs the test against that commit
    decide     journal 'decided': the record is written into the journal, then finish applies it
    finish     kept:     a commit with the kernel and the re-rendered experiments/README.md replaces the
                         candidate on the branch; its note is written; best/<kernel> moves there
                         (not for KEPT_ANYWAY: it stays on the branch, the best stays where it was)
               reverted: the note goes on the candidate (still reachable through its attempt ref) and
                         the branch gets a commit that only updates experiments/README.md

Every phase is written down before it acts and each action is safe to repeat, so the next command
after a crash finishes a decided step or records an undecided one as FAILED (interrupted) and rolls
it back; git never loses the candidate.
"""

from __future__ import annotations

import contextlib
import os
import signal

from kgit import config, runner
from kgit.errors import KgitError
from kgit.git import notes, read, refs, write
from kgit.git.command import GitError, Repo
from kgit.model import decide
from kgit.model.noise import never_measured
from kgit.model.record import Record
from kgit.model.result import not_run
from kgit.render.readme import is_kgits, render_kernel, render_readme
from kgit.state import journal as journals
from kgit.state import lock, rendered
from kgit.state.journal import Journal

# Tests kill kgit at a named point of a step to prove that the next command recovers (as git's own
# test suite does with GIT_TEST_* variables). Unset in normal use.
CRASH_ENV = "KGIT_TEST_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def begin(repo: Repo):
    """Hold the lock for a command that changes state; finish an interrupted step first.

    Yields the lines that say what recovery did.
    """
    lock.acquire(repo)
    try:
        yield recover(repo)
    finally:
        lock.release(repo)


def recover(repo: Repo) -> list[str]:
    """Finish or roll back what a killed kgit left; what was done, a line each. Needs the lock."""
    done = []
    for pid, test_path in journals.registered_tests(repo).items():  # left running by a killed kgit
        runner.stop_orphaned_test(pid, test_path)
        journals.unregister_test(repo, pid)
    restored = write.restore_saved_edits(repo)
    if restored.paths:
        done.append(f"restored your uncommitted edits to {', '.join(restored.paths)} after an interrupted kgit")
    if restored.kept_aside:
        paths = " ".join(restored.kept_aside)
        done.append(f"kept your newer edits to {paths}; the ones an interrupted kgit had saved are in "
                    f"{restored.ref} (see them: git diff HEAD {restored.ref} -- {paths}; "
                    f"take them: git restore --source {restored.ref} -- {paths})")
    journal = journals.load(repo)
    if journal is None:
        return done
    if journal.op == "start":
        finish_start(repo, journal)
        return done + [f"finished the interrupted start of {journal.kernel}"]
    if journal.phase == "commit":
        head = read.rev(repo, "HEAD")
        subject = refs.iteration_subject(journal.kernel, journal.iteration, journal.action)
        pinned = read.rev(repo, refs.attempt_ref(journal.kernel, journal.iteration))
        if head == journal.base or (head != pinned and read.subjects(repo, [head])[head] != subject):
            journals.clear(repo)  # killed before the candidate was committed: nothing to undo
            return done
        write.set_ref(repo, refs.attempt_ref(journal.kernel, journal.iteration), head)
        journal.phase, journal.candidate = "testing", head
    if journal.phase == "testing":
        # decided as a step decides a run that failed
        cfg = config.KernelConfig.from_dict(journal.config)
        best = decide.best_record(notes.deciding_history(repo, journal.kernel).records)
        interrupted = never_measured(not_run("interrupted: kgit stopped before the test finished"))
        journal.record = decide.step_record(cfg, journal.iteration, journal.action, journal.tier, journal.started,
                                            journal.base, interrupted, best, None)
        journal.phase = "decided"
        journals.save(repo, journal)
    finish(repo, journal)
    record = journal.record
    line = f"finished an interrupted step: iteration {record.iteration} of {record.kernel} is {record.status}"
    if not record.status.on_branch:
        line += f", rolled back; the candidate stays at {refs.attempt_ref(record.kernel, record.iteration)}"
    return done + [line]


def commit_candidate(repo: Repo, cfg: config.KernelConfig, iteration: int, action: str, tier: int | None,
                     paths: list[str] | None) -> Journal:
    """Commit the candidate (these paths, or every modified tracked file) under a journal."""
    journal = Journal(op="step", phase="commit", kernel=cfg.name, iteration=iteration, action=action,
                      tier=tier, base=read.rev(repo, "HEAD"), started=decide.now(), config=cfg.as_dict())
    journals.save(repo, journal)
    crash_point("candidate-journaled")  # recovery finds HEAD at the base: nothing to undo
    subject = refs.iteration_subject(cfg.name, iteration, action)
    try:
        candidate = write.commit_paths(repo, paths, subject) if paths else write.commit_all(repo, subject)
    except GitError:  # nothing was committed (git's index locked, say): no step to finish or roll back
        journals.clear(repo)
        raise
    crash_point("candidate-unpinned")  # HEAD is the candidate, no attempt ref yet: its subject names it
    write.set_ref(repo, refs.attempt_ref(cfg.name, iteration), candidate)
    crash_point("candidate-committed")
    journal.phase, journal.candidate = "testing", candidate
    journals.save(repo, journal)
    return journal


def decided(repo: Repo, journal: Journal, record: Record) -> str:
    """Write the decision down, then apply it; the commit that carries the record's note."""
    journal.phase, journal.record = "decided", record
    journals.save(repo, journal)
    crash_point("decided")
    return finish(repo, journal)


def finish(repo: Repo, journal: Journal) -> str:
    """Apply a decided step: safe to repeat after a crash at any point. Returns the record's commit."""
    record, kernel = journal.record, journal.kernel
    _check_branch_tip(repo, kernel, (journal.base, journal.candidate, journal.final))
    path = config.report_path(repo.root)
    rendered_from = None  # known only to the command that rendered it (not to a recovery after a crash)
    if journal.final is None:
        text, rendered_from = readme_text(repo, path, journal.base, record)
        readme = {path: text}
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
    _remember(repo, journal.final, path, rendered_from)
    _move_branch(repo, kernel, journal.final)
    crash_point("moved")
    if record.kept:
        write.set_tag(repo, kernel, journal.final)
    if record.status.on_branch:
        write.delete_ref(repo, refs.attempt_ref(kernel, journal.iteration))  # the branch keeps it
    journals.clear(repo)
    return noted


def start(repo: Repo, cfg: config.KernelConfig, head: str, record: Record) -> Journal:
    """Journal and apply the baseline: a commit on head with the rendered log, its note, branch, tag."""
    path = config.report_path(repo.root)
    text, rendered_from = readme_text(repo, path, head, record)
    final = write.commit_with_files(repo, head, head, {path: text}, refs.iteration_subject(cfg.name, 0, "baseline"))
    journal = Journal(op="start", phase="decided", kernel=cfg.name, iteration=0, action="baseline", tier=None,
                      base=head, started=record.started, config=cfg.as_dict(), record=record, final=final)
    journals.save(repo, journal)
    crash_point("start-decided")
    finish_start(repo, journal)
    _remember(repo, final, path, rendered_from)
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


def readme_text(repo: Repo, path: str, base: str, extra: Record | None = None) -> tuple[str, str | None]:
    """The log rendered from every record, with extra (the record being written: its note may already
    be there after a crash) in place of its earlier copy, over the rendering in commit base; and the
    notes commit whose records it renders, extra's note aside (None where extra's run had a note).

    A step's record changes its kernel's sections alone: where the rendering in base is up to date
    with every other kernel's records (kgit.state.rendered), only that kernel's records are read and
    rendered, and the text is the same.
    """
    tip = read.rev(repo, refs.NOTES_REF)
    blob = rendered.blob_at(repo, base, path)
    previous = read.file_at(repo, path, base) if blob else None
    since = rendered.notes_of(repo, blob)
    changed = notes.kernels_changed(repo, since, tip) if since and tip else None
    if extra is not None and changed is not None and changed <= {extra.kernel}:
        records = notes.kernel_history(repo, extra.kernel).records
        text = render_kernel(extra.kernel, _with(records, extra), previous)
    else:
        records = [r for _, r in notes.records_with_commits(repo, notes.read_notes(repo, tip or refs.NOTES_REF))]
        text = render_readme(_with(records, extra), previous)
    fresh = extra is None or all(r.key != extra.key for r in records)
    return text, tip if fresh else None


def _with(records: list[Record], extra: Record | None) -> list[Record]:
    return records if extra is None else [r for r in records if r.key != extra.key] + [extra]


def _remember(repo: Repo, commit: str, path: str, rendered_from: str | None) -> None:
    """After a step's note is written: the rendering it committed renders every record now, if that
    note is all that changed since the records it rendered were read."""
    now = rendered.notes_written(repo, rendered_from)
    if now:
        rendered.remember(repo, commit, path, now)


def commit_report(repo: Repo) -> str | None:
    """Commit a fresh rendering of experiments/README.md on the current branch; None if unchanged."""
    head = read.rev(repo, "HEAD")
    if head is None:
        raise KgitError("the repository has no commit yet")
    path = config.report_path(repo.root)
    if path in read.modified_tracked_files(repo):
        raise KgitError(f"{path} has uncommitted edits; kgit renders it from the notes",
                        "commit or discard them first")
    check_readme_is_ours(repo)
    if read.rev(repo, refs.NOTES_REF) is None:  # rendering nothing would delete every result shown
        raise KgitError(f"no kgit records in this clone ({refs.NOTES_REF} is missing; 'kgit pull' fetches it "
                        f"from a remote): {path} is left as it is")
    text, rendered_from = readme_text(repo, path, head)
    if read.file_at(repo, path) == text:
        rendered.remember(repo, head, path, rendered_from)
        return None
    commit = write.commit_with_files(repo, head, head, {path: text}, refs.report_subject(path))
    write.move_head(repo, commit)
    rendered.remember(repo, commit, path, rendered_from)
    return commit


def check_readme_is_ours(repo: Repo) -> None:
    """Refuse to render the log into a file kgit did not write (it lacks kgit's mark), committed or not."""
    path = config.report_path(repo.root)
    texts = [read.file_at(repo, path, "HEAD")]
    if (repo.root / path).is_file():
        texts.append((repo.root / path).read_text(errors="replace"))
    if any(text is not None and not is_kgits(text) for text in texts):
        raise KgitError(f"{path} was not written by kgit, which never writes over your files",
                        "choose where kgit renders its log with a top-level 'report_path: experiments/kgit.md' "
                        "in kgit.yaml")


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
