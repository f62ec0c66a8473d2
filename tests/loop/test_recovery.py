"""Recovery of a step killed in its commit phase, before its candidate is pinned by an attempt ref.

The journal says 'commit' from before the candidate's commit until it is pinned. Recovery then tells
three cases apart: HEAD still at the base (killed before the commit: nothing to undo), HEAD a commit
with the iteration's subject that no attempt ref pins yet (killed between the commit and the pin: the
candidate, recorded FAILED and rolled back), and HEAD a commit that is neither (the user's own, made
after the crash: left alone). Two crash points reach these states: candidate-journaled and
candidate-unpinned.
"""

import signal

from workspace import KERNEL


def killed(ws, point, message="edit"):
    run = ws.kgit("step", "-m", message, env={"KGIT_TEST_CRASH_AT": point})
    assert run.returncode == -signal.SIGKILL, run.stderr
    assert (ws.root / ".git/kgit/journal.json").exists()


def test_killed_between_the_candidates_commit_and_its_pin_the_candidate_is_recorded_and_rolled_back(started):
    base = started.git("rev-parse", "HEAD")
    started.set_kernel(METRIC=150.0)
    killed(started, "candidate-unpinned", "bigger   block \n\n and more ")  # git reformats it: still recognised
    candidate = started.git("rev-parse", "HEAD")
    assert candidate != base and started.git("for-each-ref", "refs/kgit/attempts/") == ""
    run = started.ok("doctor", "--fix")
    assert "finished an interrupted step: iteration 1 of fake is FAILED" in run.stdout
    record = started.ok("show", "1", "--json").json()
    assert record["status"] == "FAILED" and record["reason"].startswith("interrupted")
    assert record["action"] == "bigger block and more"
    assert started.git("rev-parse", "refs/kgit/attempts/fake/1") == candidate == record["commit"]
    assert "METRIC = 150.0" in started.kernel_text(candidate)  # the candidate survives, pinned
    assert "METRIC = 100.0" in started.kernel_text("HEAD")  # and the branch is back on the best
    started.check_invariants()
    started.set_kernel(METRIC=200.0)  # the loop goes on from there
    assert started.ok("step", "-m", "next", "--json").json()["iteration"] == 2
    started.check_invariants()


def test_killed_before_the_candidates_commit_nothing_is_recorded_and_the_edit_stays(started):
    base = started.git("rev-parse", "HEAD")
    started.set_kernel(METRIC=150.0)
    killed(started, "candidate-journaled")
    assert started.git("rev-parse", "HEAD") == base
    started.ok("doctor", "--fix")
    assert not (started.root / ".git/kgit/journal.json").exists()
    assert [r["iteration"] for r in started.ok("log", "--json").json()["iterations"]] == [0]
    assert started.git("rev-parse", "HEAD") == base and started.git("for-each-ref", "refs/kgit/attempts/") == ""
    assert "METRIC = 150.0" in (started.root / KERNEL).read_text()  # the edit waits for its step
    assert started.ok("step", "-m", "again", "--json").json()["iteration"] == 1


def test_a_commit_of_the_users_after_the_crash_is_neither_the_candidate_nor_rolled_back(started):
    """HEAD is not the base and no attempt ref pins it, and its subject is not the iteration's: the user
    committed after kgit was killed before its commit. Recovery clears the journal and leaves it."""
    started.set_kernel(METRIC=150.0)
    killed(started, "candidate-journaled")
    (started.root / "NOTES.md").write_text("my notes\n")
    started.git("add", "NOTES.md")
    started.git("commit", "-qm", "my notes")
    mine = started.git("rev-parse", "HEAD")
    run = started.ok("doctor", "--fix")
    assert "iteration 1" not in run.stdout
    assert not (started.root / ".git/kgit/journal.json").exists()
    assert started.git("rev-parse", "HEAD") == mine and started.git("rev-parse", "opt/fake") == mine
    assert started.git("for-each-ref", "refs/kgit/attempts/") == ""
    assert [r["iteration"] for r in started.ok("log", "--json").json()["iterations"]] == [0]
    assert "METRIC = 150.0" in (started.root / KERNEL).read_text()  # the kernel's edit, still uncommitted


def test_a_commit_with_the_iterations_subject_pinned_by_its_attempt_ref_is_the_candidate(started):
    """The crash point after the pin (candidate-committed): HEAD == pinned decides without the subject."""
    started.set_kernel(METRIC=150.0)
    killed(started, "candidate-committed")
    pinned = started.git("rev-parse", "refs/kgit/attempts/fake/1")
    assert started.git("rev-parse", "HEAD") == pinned
    started.ok("doctor", "--fix")
    assert started.ok("show", "1", "--json").json()["commit"] == pinned
    started.check_invariants()


def test_a_start_or_step_outside_the_lock_is_refused_as_kgits_own_mistake(ws):
    """Recovery settles what a killed kgit left before anything is read: a start or a step that some
    caller began without kgit.loop.recovery.locked would judge against a half-finished step."""
    import pytest

    from kgit.git.command import find_repo
    from kgit.loop import steps
    from kgit.loop.recovery import locked

    repo = find_repo(ws.root)
    before = ws.git("rev-parse", "HEAD")
    with pytest.raises(RuntimeError, match="runs under kgit.loop.recovery.locked"):
        steps.start(repo, "fake", {})
    assert ws.git("rev-parse", "HEAD") == before and "opt/fake" not in ws.git("branch", "--list")
    with locked(repo) as recovered:
        assert recovered == []
        steps.start(repo, "fake", {})
    ws.set_kernel(METRIC=150.0)
    with pytest.raises(RuntimeError, match="runs under kgit.loop.recovery.locked"):
        steps.step(repo, "faster", None, {})
    assert ws.git("status", "--porcelain", "--untracked-files=no").strip()  # the edit is still there, uncommitted
