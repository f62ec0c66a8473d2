"""A kernel's test runs on the committed candidate, in a temporary worktree, registered while it runs."""

import pytest


def test_the_test_runs_on_the_committed_candidate_not_the_working_tree(started):
    started.set_kernel(METRIC=120.0)
    record = started.ok("step", "-m", "faster", "--json").json()
    # a checkout of the candidate commit, so an edit made while the test runs cannot be measured
    assert record["test"]["cwd"].endswith(".git/kgit/worktrees/candidate")
    assert "worktrees/" not in started.git("worktree", "list")


def test_a_running_test_is_registered_and_its_worktree_removed_when_it_ends(ws, tmp_path):
    import threading
    import time

    from kgit import config
    from kgit.git.command import find_repo
    from kgit.loop import testing
    from kgit.state import journal

    ws.set_kernel(MODE="hang")
    ws.git("commit", "-qam", "a kernel whose test hangs")
    repo = find_repo(ws.root)
    cfg = config.for_loop(repo.root, "fake", None, {"test_timeout_s": 2.0})
    results = []
    def run_once():
        with testing.checkouts(repo, cfg, {"test": (ws.git("rev-parse", "HEAD"), None)}, "cpu") as run:
            results.append(run("test"))

    runner = threading.Thread(target=run_once)
    runner.start()
    deadline = time.monotonic() + 10
    while not journal.registered_tests(repo) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert list(journal.registered_tests(repo).values()) == ["skills/kernels/fake/test_fake.py"]
    assert (repo.kgit_dir / "worktrees/test").is_dir()
    runner.join(30)
    assert not results[0].passed and "timeout" in results[0].reason
    assert journal.registered_tests(repo) == {}
    assert not (repo.kgit_dir / "worktrees/test").exists() and "worktrees/test" not in ws.git("worktree", "list")


def test_a_run_may_be_told_it_need_only_time(ws):
    from kgit import config
    from kgit.git.command import find_repo
    from kgit.loop import testing

    repo = find_repo(ws.root)
    cfg = config.for_loop(repo.root, "fake", None, {})
    with testing.checkouts(repo, cfg, {"test": (ws.git("rev-parse", "HEAD"), None)}, "cpu") as run:
        assert run("test").payload["timing_only"] is None
        assert run("test", timing_only=True).payload["timing_only"] == "1"


def test_kgits_own_switches_never_come_from_the_users_environment(ws):
    # a KGIT_TIMING_ONLY=1 left exported must not let the candidate's first run skip its checks
    env = {"KGIT_TIMING_ONLY": "1", "KGIT_DEVICE_TIMES": "/dev/full", "KGIT_RUN_TAG": "forged"}
    ws.ok("start", "fake", env=env)
    ws.set_kernel(METRIC=150.0)
    record = ws.ok("step", "-m", "faster", "--json", env=env).json()
    assert record["test"]["timing_only"] is None  # the candidate's first run, which checks in full
    assert record["status"] == "IMPROVED"


@pytest.mark.parametrize("mode, changed", [
    ("edit-judge", "skills/kernels/fake/test_fake.py"), ("move-tag", "refs/tags/best/fake"),
    ("move-branch", "refs/heads/opt/fake"), ("move-notes", "refs/notes/kgit")])
def test_a_test_that_edits_a_tracked_file_or_moves_the_branch_the_best_tag_or_the_records_fails(started, mode, changed):
    started.set_kernel(MODE=mode, METRIC=200.0)
    record = started.ok("step", "-m", mode, "--json").json()
    assert record["status"] == "FAILED" and f"the test changed {changed} while it ran" in record["reason"]
    assert not (started.root / "skills/kernels/fake/test_fake.py").read_text().endswith("# kinder now\n")
