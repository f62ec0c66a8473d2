"""What every writing command does first: take the lock, and settle what a killed kgit left.

A kgit killed mid-step leaves its journal (kgit.state.journal), perhaps a test still running and the
user's edits saved aside. The next writing command stops that test, puts the edits back, and then
finishes a decided step or records an undecided one as a step records a run that failed (FAILED,
"interrupted"), by the same decision (kgit.model.decide.step_record) and the same transaction.
"""

from __future__ import annotations

import contextlib

from kgit import config, runner
from kgit.git import notes, read, refs, write
from kgit.git.command import Repo
from kgit.loop import report
from kgit.model import decide
from kgit.model.noise import never_measured
from kgit.model.result import not_run
from kgit.state import journal as journals
from kgit.state import lock, transaction


@contextlib.contextmanager
def locked(repo: Repo):
    """Hold the lock for a command that changes state, an interrupted step settled first.

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
        transaction.finish_start(repo, journal)
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
    # the log is rendered again where the step's commit was not made (the record's own note may be written)
    readme = report.with_record(repo, journal.base, journal.record)[0] if journal.final is None else None
    transaction.finish(repo, journal, readme)
    record = journal.record
    line = f"finished an interrupted step: iteration {record.iteration} of {record.kernel} is {record.status}"
    if not record.status.on_branch:
        line += f", rolled back; the candidate stays at {refs.attempt_ref(record.kernel, record.iteration)}"
    return done + [line]
