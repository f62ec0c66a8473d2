"""Reading a kernel's loop back: which kernel, its log, its best, its status, one iteration."""


def test_best_log_status_show(started):
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "better", "--tier", "1")
    started.set_kernel(METRIC=90.0)
    started.ok("step", "-m", "worse", "--tier", "2")

    best = started.ok("best", "--json").json()
    assert best["iteration"] == 1 and best["value"] == 120.0 and best["pct_of_peak"] == 12.0
    assert best["tag"] == "best/fake" and best["commit"] == best["tag_commit"]
    assert "iteration 1 (better): 120 GBps (12% of peak)" in started.ok("best").stdout
    # which figure that is and when it ran; iteration 2's pairs ran the best again, once
    first = best["started"][:16].replace("T", " ")
    again = best["remeasured"]
    assert (again["value"], again["runs"], again["iteration"]) == (120.0, 1, 2)
    measured = (f"iteration 1's own runs, {first} UTC; measured again: 120 GBps, 1 run in iteration 2's pairs, "
                f"{again['started'][:16].replace('T', ' ')} UTC")
    assert started.ok("best").stdout.splitlines()[1] == f"measured: {measured}"

    log = started.ok("log").stdout
    assert "regressed, reverted" in log and f"Final: 120 GBps (12% of peak; {measured}), 2 iterations, in progress." in log
    assert log.splitlines()[-2].startswith("Metric: the iteration's own median. Delta: against the best run")

    status = started.ok("status", "--json").json()
    assert status["iteration"] == 2 and status["max_iterations"] == 5 and status["reverted"] == 1
    assert status["best"]["value"] == 120.0 and status["stopped"] is None
    assert status["best"]["remeasured"] == again and "remeasured" not in status
    assert f"best           120 GBps (12% of peak): {measured}" in started.ok("status").stdout.splitlines()

    shown = started.ok("show", "2", "--json").json()
    assert shown["status"] == "REGRESSED" and "+METRIC = 90.0" in shown["diff"]
    assert "-METRIC = 120.0" in shown["diff"] and "README" not in shown["diff"]
    assert "+METRIC = 90.0" in started.ok("show", "2").stdout


def test_read_commands_work_off_the_branch(started):
    started.git("checkout", "-q", "main")
    assert started.ok("best", "--json").json()["kernel"] == "fake"
    assert started.ok("log", "fake", "--json").json()["kernel"] == "fake"


def test_a_kept_iteration_that_git_reset_dropped_is_no_longer_the_best(started):
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")
    started.git("reset", "-q", "--hard", "HEAD~1")  # the user drops iteration 1 from the branch
    assert started.ok("best", "--json").json()["iteration"] == 0
    started.set_kernel(METRIC=120.0)
    record = started.ok("step", "-m", "again", "--json").json()
    # judged against the baseline the branch holds, and numbered after every iteration ever made
    assert record["status"] == "IMPROVED" and record["best_before"] == 100.0 and record["iteration"] == 2


def test_a_best_below_its_baseline_reads_right_with_its_legend(ws):
    """A time (better: lower): its best lies below the baseline, and every answer says which way is better."""
    ws.set_kernel(MODE="timed")
    (ws.root / "kgit.yaml").write_text("fake:\n  metric: time_ms\n  better: lower\n")
    ws.git("add", "-A")
    ws.git("commit", "-qm", "a test that prints a time")
    ws.ok("start", "fake")
    ws.set_kernel(METRIC=200.0)  # the fake test's time_ms is 0.1 / METRIC: half the time
    ws.ok("step", "-m", "twice as fast")
    best = ws.ok("best", "--json").json()
    assert best["better"] == "lower" and best["value"] < ws.ok("log", "--json").json()["iterations"][0]["value"]
    assert ws.ok("status", "--json").json()["better"] == "lower"
    assert ws.ok("context", "--json").json()["better"] == "lower"
    assert "(lower is better)" in ws.ok("best").stdout and "(lower is better)" in ws.ok("status").stdout
    ws.git("checkout", "-q", "main")
    (ws.root / "kgit.yaml").unlink()  # a checkout that does not define the kernel: no legend to give
    (ws.root / "skills/kernels/fake").rename(ws.root / "skills/kernels/gone")
    assert ws.ok("best", "fake", "--json").json()["better"] is None


def test_a_commit_named_by_digits_alone_is_a_commit_unless_an_iteration_has_that_number(started, monkeypatch):
    # a commit's short name can be all digits (7758677105 was one in a run of the suite, and 'kgit show' took
    # it for an iteration's number): where no iteration has the number and it names a record's commit, the
    # commit is meant
    import pytest

    from kgit.errors import KgitError
    from kgit.git import read
    from kgit.git.command import find_repo
    from kgit.loop import history

    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "better")
    commit = started.ok("show", "1", "--json").json()["commit"]
    named = {"1234567": commit}
    real_rev = read.rev
    monkeypatch.setattr(read, "rev", lambda repo, name: named.get(name) or real_rev(repo, name))
    repo = find_repo(started.root)
    assert history.show(repo, "fake", "1234567").commit == commit
    assert history.show(repo, "fake", "1").record.action == "better"  # a number an iteration has stays one
    assert history.compare(repo, "fake", "0", "1234567").b[0] == commit
    with pytest.raises(KgitError, match="has no iteration 99"):
        history.show(repo, "fake", "99")
