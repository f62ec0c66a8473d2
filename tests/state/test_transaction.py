"""Nothing lost: kill -9 at any point of a step, a second kgit while one runs, Ctrl-C."""

import os
import signal
import subprocess
import sys
import time

import pytest

from kgit.errors import KgitError
from workspace import KERNEL, alive


def spawn_step(ws, tmp_path, *args):
    """Start 'kgit step' on a test that hangs; return the process once the test is running."""
    marker = tmp_path / "test-started"
    ws.set_kernel(MODE="hang", METRIC=150.0)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgit", "step", "-m", "hangs", *args], cwd=ws.root,
        env={**os.environ, "KGIT_FAKE_STARTED": str(marker)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background run inherits it ignored
    )
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text().strip()):  # created, then its pid written
        assert time.monotonic() < deadline, "the test never started"
        time.sleep(0.05)
    return proc, int(marker.read_text())


def test_status_during_a_running_step_says_a_kgit_is_working_and_after_a_kill_that_a_step_is_pending(
        started, tmp_path):
    proc, _ = spawn_step(started, tmp_path)
    try:
        run = started.ok("status")
        assert f"another kgit (pid {proc.pid}) is working in this repository" in run.stdout
        assert "waiting for an edit" not in run.stdout and "interrupted" not in run.stderr
        assert started.ok("status", "--json").json()["working"] == proc.pid
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    run = started.ok("status")
    assert "an interrupted step is pending" in run.stdout and "was interrupted" in run.stderr


def test_kill_during_the_test_rolls_back(started, tmp_path):
    proc, test_pid = spawn_step(started, tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = started.snapshot()
    pending = started.ok("status", "--json")  # a read-only command reports the step and changes nothing
    assert "a step was interrupted" in pending.stderr and started.snapshot() == before
    run = started.ok("doctor", "--fix")
    assert "finished an interrupted step: iteration 1 of fake is FAILED" in run.stdout
    assert not alive(test_pid), "recovery stops the orphaned test"
    record = started.ok("show", "1", "--json").json()
    assert record["status"] == "FAILED" and record["reason"].startswith("interrupted")
    assert "METRIC = 150.0" in started.kernel_text("refs/kgit/attempts/fake/1")  # the candidate survives
    assert "+METRIC = 150.0" in record["diff"]
    started.check_invariants()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP])
def test_kgit_stopped_by_a_signal_stops_its_test_and_the_step_is_recorded(started, tmp_path, stop):
    proc, test_pid = spawn_step(started, tmp_path)
    proc.send_signal(stop)
    out, err = proc.communicate(timeout=30)
    # as on Ctrl-C: the step is recorded and rolled back, and the exit status says it was interrupted
    assert proc.returncode == 130 and "Traceback" not in err.decode()
    assert not alive(test_pid), "the test outlived kgit"
    record = started.ok("show", "1", "--json").json()
    assert record["status"] == "FAILED" and "interrupted" in record["reason"]
    started.check_invariants()
    last = err.decode().strip().splitlines()[-1]
    restore = "git checkout refs/kgit/attempts/fake/1 -- skills/kernels/fake/fake.py"
    assert last == (f"kgit: interrupted: iteration 1 was recorded as FAILED and rolled back; '{restore}' brings "
                    "the change back to step it again")
    started.git(*restore.split()[1:])  # what it says works: the edit is back, ready for the next step
    assert "METRIC = 150.0" in (started.root / "skills/kernels/fake/fake.py").read_text()


def test_a_second_kgit_is_refused_while_the_first_runs(started, tmp_path):
    proc, _ = spawn_step(started, tmp_path)
    try:
        run = started.kgit("step", "-m", "second")
        assert run.returncode == 1 and "another kgit process" in run.stderr
        assert started.ok("log", "--json").json()["iterations"][-1]["iteration"] == 0  # reading still works
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the step is recorded as interrupted and rolled back
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted by the user" in out.decode()
    started.check_invariants()


@pytest.mark.parametrize("point", ["candidate-committed", "decided", "final-committed", "noted", "moved"])
@pytest.mark.parametrize("metric, status", [(150.0, "IMPROVED"), (50.0, "REGRESSED")])
def test_kill_at_any_point_after_the_test(started, point, metric, status):
    started.set_kernel(METRIC=metric)
    run = started.kgit("step", "-m", "edit", env={"KGIT_TEST_CRASH_AT": point})
    assert run.returncode == -signal.SIGKILL
    assert started.ok("doctor", "--fix").returncode == 0
    record = started.ok("show", "1", "--json").json()
    if point == "candidate-committed":  # killed before the test ran: rolled back
        assert record["status"] == "FAILED" and record["reason"].startswith("interrupted")
    else:
        assert record["status"] == status
    assert f"METRIC = {metric}" in started.kernel_text(record["commit"])
    started.check_invariants()
    started.set_kernel(METRIC=500.0)  # the loop goes on from there
    assert started.ok("step", "-m", "next", "--json").json()["iteration"] == 2
    started.check_invariants()


def test_a_message_git_would_reformat_is_still_recognised_after_a_kill(started):
    started.set_kernel(METRIC=120.0)
    message = "bigger   block \n\n and more "
    run = started.kgit("step", "-m", message, env={"KGIT_TEST_CRASH_AT": "candidate-committed"})
    assert run.returncode == -signal.SIGKILL
    started.ok("doctor", "--fix")
    record = started.ok("show", "1", "--json").json()
    assert record["action"] == "bigger block and more" and record["status"] == "FAILED"
    assert "METRIC = 100.0" in started.kernel_text("HEAD")
    started.check_invariants()


@pytest.mark.parametrize("point", ["start-decided", "start-branched"])
def test_kill_during_start(ws, point):
    run = ws.kgit("start", "fake", env={"KGIT_TEST_CRASH_AT": point})
    assert run.returncode == -signal.SIGKILL
    ws.ok("doctor", "--fix")
    assert ws.ok("status", "--json").json()["iteration"] == 0
    assert ws.git("symbolic-ref", "--short", "HEAD") == "opt/fake"
    ws.check_invariants()


def test_recovery_keeps_an_edit_made_after_the_crash(started, tmp_path):
    proc, _ = spawn_step(started, tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    idea = "METRIC = 1.0\nCORRECT = True\nSPREAD = 0.5\nMODE = 'ok'\n# my next idea\n"
    (started.root / KERNEL).write_text(idea)
    started.ok("doctor", "--fix")
    assert (started.root / KERNEL).read_text() == idea  # still there, now on top of the best kernel
    assert "METRIC = 100.0" in started.kernel_text("HEAD")
    assert started.ok("show", "1", "--json").json()["status"] == "FAILED"
    assert started.git("status", "--porcelain") == f"M {KERNEL}"  # unstaged, as the user left it
    assert started.ok("step", "-m", "next idea", "--json").json()["iteration"] == 2


def test_an_edit_made_while_the_test_runs_is_kept(ws, tmp_path):
    (ws.root / "kgit.yaml").write_text("fake:\n  test_timeout_s: 3\n")
    ws.git("add", "kgit.yaml")
    ws.git("commit", "-qm", "config")
    ws.ok("start", "fake")
    proc, _ = spawn_step(ws, tmp_path)
    (ws.root / KERNEL).write_text("METRIC = 2.0\nCORRECT = True\nSPREAD = 0.5\nMODE = 'ok'\n")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "timeout" in out.decode()
    assert "METRIC = 2.0" in (ws.root / KERNEL).read_text()
    assert "METRIC = 100.0" in ws.kernel_text("HEAD")
    assert ws.git("for-each-ref", "refs/kgit/saved-edits") == ""


@pytest.mark.parametrize("setting", [("config", "core.autocrlf", "true"), (".gitattributes", "* text=auto eol=crlf")])
def test_an_edit_made_while_the_test_runs_is_kept_where_git_writes_crlf(ws, tmp_path, setting):
    # the working tree has CRLF where the blobs have LF: written back as edits (not taken for newer ones,
    # left aside under a ref nobody is told of), with the line endings they had on disk
    if setting[0] == "config":
        ws.git(*setting)
    else:
        (ws.root / setting[0]).write_text(setting[1] + "\n")
    (ws.root / "kgit.yaml").write_text("fake:\n  test_timeout_s: 3\n")
    ws.git("add", "-A")
    ws.git("commit", "-qm", "config")
    ws.git("rm", "-q", "--cached", "-r", ".")
    ws.git("reset", "-q", "--hard")  # every file checked out again, with CRLF
    assert b"\r\n" in (ws.root / KERNEL).read_bytes()
    ws.ok("start", "fake")
    proc, _ = spawn_step(ws, tmp_path)
    idea = b"METRIC = 2.0\r\nCORRECT = True\r\nSPREAD = 0.5\r\nMODE = 'ok'\r\n# my next idea\r\n"
    (ws.root / KERNEL).write_bytes(idea)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert (ws.root / KERNEL).read_bytes() == idea
    assert ws.git("for-each-ref", "refs/kgit/saved-edits", "refs/kgit/unrestored-edits") == ""  # nothing aside
    assert "METRIC = 100.0" in ws.kernel_text("HEAD")


def test_saved_edits_are_restored_after_a_crash(started):
    # Simulate a kgit killed between its reset and the write-back: the edits live only in the saved ref.
    (started.root / KERNEL).write_text("METRIC = 3.0\nCORRECT = True\nSPREAD = 0.5\nMODE = 'ok'\n")
    saved = started.git("stash", "create")
    started.git("update-ref", "refs/kgit/saved-edits", saved)
    started.git("reset", "-q", "--hard")
    run = started.ok("doctor", "--fix")
    assert "restored your uncommitted edits" in run.stdout
    assert "METRIC = 3.0" in (started.root / KERNEL).read_text()
    assert started.git("for-each-ref", "refs/kgit/saved-edits") == ""


def test_an_edit_made_after_the_crash_is_never_overwritten_by_the_saved_one(started):
    # Issue 14, case 1: killed after the reset, edit B saved aside; the user then writes C. C stays,
    # B stays reachable under a ref of its own, and the advice given works.
    (started.root / KERNEL).write_text("METRIC = 3.0\nCORRECT = True\nSPREAD = 0.5\nMODE = 'ok'\n")
    saved = started.git("stash", "create")
    started.git("update-ref", "refs/kgit/saved-edits", saved)
    started.git("reset", "-q", "--hard")
    newer = "METRIC = 4.0\nCORRECT = True\nSPREAD = 0.5\nMODE = 'ok'\n"
    (started.root / KERNEL).write_text(newer)
    run = started.ok("doctor", "--fix")
    assert (started.root / KERNEL).read_text() == newer
    assert f"kept your newer edits to {KERNEL}" in run.stdout
    assert started.git("for-each-ref", "--format=%(refname)", "refs/kgit/") == f"refs/kgit/unrestored-edits/{saved}"
    advice = run.stdout.split("take them: ")[1].split(")")[0].split()
    started.git(*advice[1:])  # git restore --source REF -- PATH
    assert "METRIC = 3.0" in (started.root / KERNEL).read_text()


def test_recovery_never_moves_the_branch_the_user_switched_to(started):
    started.set_kernel(METRIC=120.0)
    assert started.kgit("step", "-m", "faster", env={"KGIT_TEST_CRASH_AT": "decided"}).returncode == -signal.SIGKILL
    started.git("checkout", "-q", "main")
    (started.root / "mine.txt").write_text("my work\n")
    started.git("add", "mine.txt")
    started.git("commit", "-qm", "my work on main")
    mine = started.git("rev-parse", "main")
    started.ok("doctor", "--fix")
    assert started.git("rev-parse", "main") == mine and (started.root / "mine.txt").exists()
    assert started.git("log", "-1", "--format=%s", "opt/fake") == "fake: iter 1: faster"
    assert started.git("rev-parse", "best/fake") == started.git("rev-parse", "opt/fake")


def test_recovery_leaves_a_branch_with_foreign_commits_alone(started):
    started.set_kernel(METRIC=120.0)
    assert started.kgit("step", "-m", "faster", env={"KGIT_TEST_CRASH_AT": "decided"}).returncode == -signal.SIGKILL
    started.git("commit", "-q", "--allow-empty", "-m", "someone else's commit")
    tip = started.git("rev-parse", "HEAD")
    message = started.refused("doctor", "--fix")
    assert "opt/fake moved while kgit worked on it" in message
    assert started.git("rev-parse", "HEAD") == tip




def test_a_commit_landing_between_the_steps_reads_and_its_commit_is_refused_and_kept(started):
    from kgit.git.command import find_repo
    from kgit.loop import recovery
    from kgit.loop.history import loop_state
    from kgit.state import transaction

    repo = find_repo(started.root)
    base = started.git("rev-parse", "HEAD")
    started.git("commit", "-q", "--allow-empty", "-m", "a commit of its own")  # after the step read HEAD
    theirs = started.git("rev-parse", "HEAD")
    started.set_kernel(METRIC=120.0)
    with recovery.locked(repo):
        state = loop_state(repo, None, {})
        with pytest.raises(KgitError, match="the branch moved while the step read it"):
            transaction.commit_candidate(repo, state.cfg, 1, "edit", None, paths=[state.cfg.kernel_path], base=base)
    assert started.git("rev-parse", "HEAD") == theirs  # their commit stays the branch's tip
    assert KERNEL in started.git("diff", "--cached", "--name-only")  # the change is staged, not lost
    assert "METRIC = 120.0" in (started.root / KERNEL).read_text()
    started.ok("step", "-m", "again")  # and a step takes it from there
