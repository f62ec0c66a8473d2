"""The loop's decisions, end to end through the command line, on the fake kernel."""

import pytest

from kgit.model.decide import BASELINE_RUN, FIRST_RUN
from workspace import KERNEL


def test_start_records_baseline_branch_tag_and_note(ws):
    run = ws.ok("start", "fake", "--json")
    record = run.json()
    assert record["iteration"] == 0 and record["status"] == "BASELINE"
    assert record["value"] == 100.0 and record["metric"] == "gbps" and record["gpu"] == "Fake GPU"
    assert record["test"]["latency_us"] == 1.0  # the test's raw JSON is kept
    # and which run it is: the first counted one, which checked too (it ran without KGIT_TIMING_ONLY)
    assert record["test_run"] == BASELINE_RUN and record["test"]["timing_only"] is None
    assert ws.git("symbolic-ref", "--short", "HEAD") == "opt/fake"
    assert ws.git("rev-parse", "best/fake") == ws.git("rev-parse", "HEAD")
    assert ws.git("log", "-1", "--format=%s") == "fake: iter 0: baseline"
    ws.check_invariants()


def test_improvement_is_kept_and_moves_the_tag(started):
    started.set_kernel(METRIC=120.0)
    record = started.ok("step", "-m", "BLOCK 1024->2048", "--tier", "1", "--json").json()
    assert record["status"] == "IMPROVED" and record["kept"]
    assert record["delta_pct"] == pytest.approx(20.0) and record["best_before"] == 100.0 and record["tier"] == 1
    assert started.git("rev-parse", "best/fake") == started.git("rev-parse", "HEAD") == record["commit"]
    assert "METRIC = 120.0" in started.kernel_text("HEAD")
    assert started.git("log", "-1", "--format=%s") == "fake: iter 1: BLOCK 1024->2048"
    # the test's JSON kept is the candidate's first run, the one that checked: labelled, as its figure never counts
    assert record["test_run"] == FIRST_RUN and record["test"]["timing_only"] is None
    assert f"test JSON kept (--json: test): {FIRST_RUN}" in started.ok("show", "1").stdout.splitlines()
    started.check_invariants()


def test_regression_is_reverted_and_kept_as_an_attempt(started):
    started.set_kernel(METRIC=90.0)
    record = started.ok("step", "-m", "worse", "--json").json()
    assert record["status"] == "REGRESSED" and not record["kept"]
    assert "METRIC = 100.0" in started.kernel_text("HEAD")  # the working tree is back on the best kernel
    assert "METRIC = 100.0" in started.kernel_text()
    attempt = started.git("rev-parse", "refs/kgit/attempts/fake/1")
    assert attempt == record["commit"] and "METRIC = 90.0" in started.kernel_text(attempt)
    started.check_invariants()


def test_correctness_failure_is_reverted(started):
    started.set_kernel(CORRECT=False, METRIC=500.0)
    record = started.ok("step", "-m", "wrong but fast", "--json").json()
    assert record["status"] == "FAILED" and record["correctness"] is False
    assert record["reason"].startswith("correctness")
    assert "METRIC = 100.0" in started.kernel_text("HEAD")
    started.check_invariants()


def test_gain_inside_the_noise_is_not_kept(started):
    started.set_kernel(METRIC=103.0, SPREAD=4.0)  # +3% measured with a 4% spread
    record = started.ok("step", "-m", "maybe faster", "--json").json()
    assert record["status"] == "WITHIN_NOISE" and not record["kept"]
    assert record["spread_pct"] == 4.0 and record["delta_pct"] == pytest.approx(3.0)  # both are recorded
    low, high = record["measurement"]["interval_pct"]
    assert low < 1.0 < 3.0 < high and record["measurement"]["pairs"] == 12  # a close call: every pair
    started.check_invariants()


def test_gain_below_the_floor_is_not_kept(started):
    started.set_kernel(METRIC=100.5, SPREAD=0.0)  # +0.5% with no spread, under the 1% floor
    assert started.ok("step", "-m", "tiny", "--json").json()["status"] == "WITHIN_NOISE"


def _with_long_rows(ws) -> None:
    kernel = ws.root / KERNEL
    kernel.write_text(kernel.read_text() + "LONG_ROWS = True\n")


def test_a_test_committed_mid_loop_judges_the_best_too_and_replaces_a_best_it_finds_wrong(started):
    # The user strengthens the test by hand on the branch: a check the best kernel fails. The next step
    # runs the best's kernel under that test too; it gives a wrong result there, so the candidate that
    # passes replaces it, at the same speed.
    test = started.root / "skills/kernels/fake/test_fake.py"
    test.write_text(test.read_text().replace(
        "mode = kernel.MODE\n", "mode = kernel.MODE\nkernel.CORRECT = getattr(kernel, 'LONG_ROWS', False)\n"))
    started.git("commit", "-qam", "test: rows longer than a block")
    assert started.ok("status", "--json").json()["test_changed"] is True
    assert "changed since the best (iteration 0): the next step runs the best's kernel" in started.ok("status").stdout
    _with_long_rows(started)
    record = started.ok("step", "-m", "rows longer than a block", "--json").json()
    assert record["status"] == "IMPROVED" and record["kept"] and record["correctness"] is True
    assert record["reason"].startswith("the test changed since the best, which gives a wrong result under it")
    assert started.git("rev-parse", "best/fake") == started.git("rev-parse", "HEAD") == record["commit"]
    assert started.ok("status", "--json").json()["test_changed"] is False  # the best now ran under it
    started.check_invariants()


def test_a_best_that_fails_under_the_same_test_fails_the_step(started):
    # The same judge, stricter in this run only (an environment the best does not pass): no test changed,
    # so a failing best is a bad moment, not a reason to replace it.
    _with_long_rows(started)
    run = started.kgit("step", "-m", "rows longer than a block", "--json", env={"KGIT_FAKE_REQUIRE": "LONG_ROWS"})
    record = run.json()
    assert record["status"] == "FAILED" and not record["kept"]
    assert record["reason"].startswith("the best failed when measured again: correctness")
    assert "LONG_ROWS" not in started.kernel_text("HEAD")
    started.check_invariants()


def test_target_met_stops_the_loop(ws):
    ws.ok("start", "fake", "--target-value", "150")
    ws.set_kernel(METRIC=160.0)
    record = ws.ok("step", "-m", "big win", "--json").json()
    assert record["status"] == "TARGET_MET" and record["stop_reason"] == "TARGET_MET" and record["kept"]
    ws.check_invariants()
    ws.set_kernel(METRIC=170.0)
    assert "stopped (TARGET_MET)" in ws.refused("step", "-m", "more")


def test_target_as_a_fraction_of_peak(ws):
    # The fake test reports pct_of_peak = METRIC / 10, so its peak is 1000 GBps.
    ws.ok("start", "fake", "--target-pct-of-peak", "0.15")
    ws.set_kernel(METRIC=151.0)
    record = ws.ok("step", "-m", "x", "--json").json()
    assert record["status"] == "TARGET_MET" and record["target"] == 150.0


def test_peak_from_the_gpu_table_when_the_test_reports_none(ws):
    ws.set_kernel(MODE="nopeak", METRIC=2400.0)
    ws.git("commit", "-qam", "a test that prints no pct_of_peak")
    record = ws.ok("start", "fake", "--target-pct-of-peak", "0.6", "--gpu", "nvidia", "--json").json()
    assert record["peak"] == 4800.0 and record["pct_of_peak"] == 50.0  # the H200's 4.8 TB/s datasheet figure
    assert record["target"] == 2880.0


def test_max_iterations_ends_on_the_best_kernel(ws):
    ws.ok("start", "fake", "--max-iterations", "2")
    ws.set_kernel(METRIC=120.0)
    ws.ok("step", "-m", "better")
    ws.set_kernel(METRIC=80.0)
    record = ws.ok("step", "-m", "worse", "--json").json()
    assert record["stop_reason"] == "MAX_ITERATIONS"
    assert "METRIC = 120.0" in ws.kernel_text()
    ws.check_invariants()
    ws.set_kernel(METRIC=130.0)
    assert ws.refused("step", "-m", "again") == (
        "kgit: the loop for fake has stopped (MAX_ITERATIONS: 2 iterations of 2): give --max-iterations above 2 "
        "(the loop's total, not a number of more) or set max_iterations in kgit.yaml and commit it, to go on")
    assert "MAX_ITERATIONS" in ws.ok("status", "--json").stdout
    ws.git("checkout", "-q", "--", ".")
    # tune and run on a loop that has stopped do nothing, and say why as step does (they said nothing, exit 0)
    for command in (["run", "fake", "--agent", "true"],):
        assert ws.refused(*command).startswith("kgit: the loop for fake has stopped (MAX_ITERATIONS: 2 iterations")


def test_max_iterations_from_kgit_yaml(ws):
    (ws.root / "kgit.yaml").write_text("fake:\n  max_iterations: 1\n")
    ws.git("add", "kgit.yaml")
    ws.git("commit", "-qm", "config")
    ws.ok("start", "fake")
    ws.set_kernel(METRIC=80.0)
    assert ws.ok("step", "-m", "x", "--json").json()["stop_reason"] == "MAX_ITERATIONS"


def test_a_long_session_keeps_every_invariant(started):
    for i, (metric, correct) in enumerate([(110.0, True), (105.0, True), (200.0, False), (125.0, True)], 1):
        started.set_kernel(METRIC=metric, CORRECT=correct)
        started.ok("step", "-m", f"change {i}", "--tier", str(i))
        started.check_invariants()
    log = started.ok("log", "--json").json()["iterations"]
    assert [r["status"] for r in log] == ["BASELINE", "IMPROVED", "REGRESSED", "FAILED", "IMPROVED"]
    assert [r["delta_pct"] is None for r in log] == [True, False, False, True, False]
    assert log[4]["best_before"] == 110.0


def test_report_rewrites_the_readme_from_notes(started):
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "better")
    started.git("checkout", "-q", "main")
    assert not (started.root / "experiments/README.md").exists()
    started.ok("report")
    readme = (started.root / "experiments/README.md").read_text()
    assert started.ok("report", "--json").json() == {"path": "experiments/README.md", "commit": None}  # up to date
    assert "## Optimization: fake on Fake GPU" in readme and "| better" in readme
    assert started.git("status", "--porcelain") == ""
    assert "up to date" in started.ok("report").stdout


def test_options_override_the_loop_settings(ws):
    ws.ok("start", "fake", "--max-iterations", "1")
    ws.set_kernel(METRIC=120.0)
    assert ws.ok("step", "-m", "x", "--json").json()["stop_reason"] == "MAX_ITERATIONS"
    ws.set_kernel(METRIC=130.0)
    ws.refused("step", "-m", "y")
    assert ws.ok("step", "-m", "y", "--max-iterations", "3", "--json").json()["status"] == "IMPROVED"
    # remembered: the raised limit holds for the next commands, not only for the step it was given to
    assert ws.ok("status", "--json").json()["max_iterations"] == 3
    assert ws.ok("status", "--json").json()["stopped"] is None
    ws.set_kernel(METRIC=140.0)
    assert ws.ok("step", "-m", "z", "--json").json()["stop_reason"] == "MAX_ITERATIONS"


def test_a_slower_change_kept_anyway_stays_on_the_branch_and_the_best_does_not_move(started):
    baseline = started.git("rev-parse", "best/fake")
    started.set_kernel(METRIC=90.0)
    record = started.ok("step", "-m", "split the loop", "--keep-anyway", "it lets the next step fuse",
                        "--json").json()
    assert record["status"] == "KEPT_ANYWAY" and record["reason"].startswith("kept anyway: it lets the next")
    assert "METRIC = 90.0" in started.kernel_text("HEAD") and started.git("rev-parse", "best/fake") == baseline
    assert started.git("for-each-ref", "refs/kgit/attempts/") == ""  # the branch keeps it
    tried = started.ok("context", "--json").json()["tried"][-1]
    assert (tried["status"], tried["kept"], tried["on_branch"]) == ("KEPT_ANYWAY", False, True)  # an agent can tell
    assert "(0 reverted)" in started.ok("status").stdout
    started.set_kernel(METRIC=120.0)
    nxt = started.ok("step", "-m", "fuse", "--json").json()
    assert nxt["status"] == "IMPROVED" and nxt["best_before"] == 100.0  # judged against the best, not HEAD
    assert "kept anyway" in started.ok("log").stdout


def test_keep_anyway_never_keeps_a_wrong_result(started):
    started.set_kernel(METRIC=90.0, CORRECT=False)
    record = started.ok("step", "-m", "wrong", "--keep-anyway", "because", "--json").json()
    assert record["status"] == "FAILED" and "METRIC = 100.0" in started.kernel_text("HEAD")
    started.check_invariants()


def test_every_record_says_where_and_how_it_was_measured(started):
    started.set_kernel(METRIC=120.0)
    record = started.ok("step", "-m", "faster", "--json").json()
    assert record["environment"]["device"] == "cpu" and record["environment"]["torch"]
    found = record["measurement"]
    assert found["runs"] == 2 * found["pairs"] + found["warmups"] and found["best"][0] == 100.0
    assert found["interval_pct"][0] > 1.0 and record["reason"].endswith("above the 1% floor")
    shown = started.ok("show", "1").stdout
    assert f"measured {found['pairs']} pair{'s' if found['pairs'] != 1 else ''} (" in shown  # "1 pair", "3 pairs"
    assert f"environment: {record['environment']['cpu']} on {record['environment']['host']}" in shown


def test_the_log_marks_where_the_environment_changed(started):
    import json

    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "faster")
    note = json.loads(started.git("notes", "--ref=refs/notes/kgit", "show", "HEAD"))
    note["environment"]["host"] = "another-machine"
    started.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", json.dumps(note), "HEAD")
    log = started.ok("log").stdout
    assert f"-- measured elsewhere from here: {note['environment']['cpu']} on another-machine" in log


def test_a_test_run_in_the_interpreter_is_labelled_cpu_timing_even_if_it_does_not_say_so(ws):
    ws.set_kernel(MODE="nopeak")  # prints no cpu_timing, as tests written for other collections
    ws.git("commit", "-qam", "a test that does not say where it ran")
    record = ws.ok("start", "fake", "--gpu", "cpu", "--json").json()
    assert record["cpu_timing"] is True and record["pct_of_peak"] is None
    assert "(CPU)" in ws.ok("log").stdout


def test_a_loop_started_without_a_target_gets_one_proposed_and_a_given_one_replaces_it(ws):
    ws.set_kernel(MODE="h200")  # a GPU test on an H200, without its own share of peak
    ws.git("commit", "-qam", "a test that reports an H200")
    run = ws.ok("start", "fake")
    assert "target: 4320 GBps (target proposed: 90% of the NVIDIA H200's datasheet peak (4800)" in run.stdout
    context = ws.ok("context", "--json").json()
    assert context["target"] == 4320.0 and context["gap"] == 4220.0
    ws.set_kernel(METRIC=120.0)
    assert ws.ok("step", "-m", "x", "--target-value", "110", "--json").json()["status"] == "TARGET_MET"


def test_a_figure_that_falls_as_the_kernel_gets_faster(ws):
    (ws.root / "kgit.yaml").write_text("fake:\n  metric: latency_us\n  better: lower\n")
    ws.git("add", "kgit.yaml")
    ws.git("commit", "-qm", "judge by latency")
    ws.ok("start", "fake", "--target-value", "0.5")  # 100 GBps: 1.0 us
    ws.set_kernel(METRIC=125.0)  # 0.8 us: faster
    record = ws.ok("step", "-m", "faster", "--json").json()
    assert record["status"] == "IMPROVED" and record["delta_pct"] == pytest.approx(25.0)
    assert ws.ok("status", "--json").json()["gap"] == pytest.approx(0.3)
    ws.set_kernel(METRIC=80.0)  # 1.25 us: slower
    assert ws.ok("step", "-m", "slower", "--json").json()["status"] == "REGRESSED"
    ws.set_kernel(METRIC=250.0)  # 0.4 us, under the 0.5 us target
    assert ws.ok("step", "-m", "much faster", "--json").json()["status"] == "TARGET_MET"


def test_a_candidate_far_slower_than_the_best_is_stopped_long_before_the_timeout(started):
    import time

    started.set_kernel(METRIC=500.0)  # would win, if it ever finished
    (started.root / KERNEL).write_text(started.kernel_text() + "SLEEP = 300.0\n")
    begun = time.monotonic()
    record = started.ok("step", "-m", "a pathological config", "--json").json()
    assert time.monotonic() - begun < 60  # not the 600 s of test_timeout_s
    assert record["status"] == "FAILED"
    assert record["reason"].startswith("far slower than the best: stopped after 30 s, 10x the ")
    started.check_invariants()
