"""The loop's decisions, end to end through the command line, on the fake kernel."""

import json



def test_start_records_baseline_branch_tag_and_note(ws):
    run = ws.ok("start", "fake", "--json")
    record = run.json()
    assert record["iteration"] == 0 and record["status"] == "BASELINE"
    assert record["value"] == 100.0 and record["metric"] == "gbps" and record["gpu"] == "Fake GPU"
    assert record["test"]["latency_us"] == 1.0  # the test's raw JSON is kept
    assert ws.git("symbolic-ref", "--short", "HEAD") == "opt/fake"
    assert ws.git("rev-parse", "best/fake") == ws.git("rev-parse", "HEAD")
    assert ws.git("log", "-1", "--format=%s") == "fake: iter 0: baseline"
    ws.check_invariants()


def test_improvement_is_kept_and_moves_the_tag(started):
    started.set_kernel(METRIC=120.0)
    record = started.ok("step", "-m", "BLOCK 1024->2048", "--tier", "1", "--json").json()
    assert record["status"] == "IMPROVED" and record["kept"]
    assert record["delta_pct"] == 20.0 and record["best_before"] == 100.0 and record["tier"] == 1
    assert started.git("rev-parse", "best/fake") == started.git("rev-parse", "HEAD") == record["commit"]
    assert "METRIC = 120.0" in started.kernel_text("HEAD")
    assert started.git("log", "-1", "--format=%s") == "fake: iter 1: BLOCK 1024->2048"
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
    assert record["spread_pct"] == 4.0 and record["delta_pct"] == 3.0  # both numbers are recorded
    started.check_invariants()


def test_gain_below_the_floor_is_not_kept(started):
    started.set_kernel(METRIC=100.5, SPREAD=0.0)  # +0.5% with no spread, under the 1% floor
    assert started.ok("step", "-m", "tiny", "--json").json()["status"] == "WITHIN_NOISE"


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
    record = ws.ok("start", "fake", "--target-pct-of-peak", "0.6", "--json").json()
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
    assert "MAX_ITERATIONS" in ws.refused("step", "-m", "again")
    assert "MAX_ITERATIONS" in ws.ok("status", "--json").stdout


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


def test_best_log_status_show(started):
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "better", "--tier", "1")
    started.set_kernel(METRIC=90.0)
    started.ok("step", "-m", "worse", "--tier", "2")

    best = started.ok("best", "--json").json()
    assert best["iteration"] == 1 and best["value"] == 120.0 and best["pct_of_peak"] == 12.0
    assert best["tag"] == "best/fake" and best["commit"] == best["tag_commit"]
    assert "iteration 1 (better): 120 GBps (12% of peak)" in started.ok("best").stdout

    log = started.ok("log").stdout
    assert "regressed, reverted" in log and "Final: 120 GBps (12% of peak), 2 iterations, in progress." in log

    status = started.ok("status", "--json").json()
    assert status["iteration"] == 2 and status["max_iterations"] == 5 and status["reverted"] == 1
    assert status["best"]["value"] == 120.0 and status["stopped"] is None

    shown = started.ok("show", "2", "--json").json()
    assert shown["status"] == "REGRESSED" and "+METRIC = 90.0" in shown["diff"]
    assert "-METRIC = 120.0" in shown["diff"] and "README" not in shown["diff"]
    assert "+METRIC = 90.0" in started.ok("show", "2").stdout


def test_read_commands_work_off_the_branch(started):
    started.git("checkout", "-q", "main")
    assert started.ok("best", "--json").json()["kernel"] == "fake"
    assert started.ok("log", "fake", "--json").json()["kernel"] == "fake"


def test_report_rewrites_the_readme_from_notes(started):
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "better")
    started.git("checkout", "-q", "main")
    assert not (started.root / "experiments/README.md").exists()
    started.ok("report")
    readme = (started.root / "experiments/README.md").read_text()
    assert "## Optimization: fake on Fake GPU" in readme and "| better" in readme
    assert started.git("status", "--porcelain") == ""
    assert "up to date" in started.ok("report").stdout


def test_json_output_is_one_object(started):
    started.set_kernel(METRIC=120.0)
    for args in (["step", "-m", "x", "--json"], ["best", "--json"], ["log", "--json"], ["status", "--json"],
                 ["show", "1", "--json"]):
        out = started.ok(*args).stdout
        assert out.count("\n") == 1 and isinstance(json.loads(out), dict)


def test_options_override_the_loop_settings(ws):
    ws.ok("start", "fake", "--max-iterations", "1")
    ws.set_kernel(METRIC=120.0)
    assert ws.ok("step", "-m", "x", "--json").json()["stop_reason"] == "MAX_ITERATIONS"
    ws.set_kernel(METRIC=130.0)
    ws.refused("step", "-m", "y")
    assert ws.ok("step", "-m", "y", "--max-iterations", "3", "--json").json()["status"] == "IMPROVED"


def test_the_test_runs_on_the_committed_candidate_not_the_working_tree(started):
    started.set_kernel(METRIC=120.0)
    record = started.ok("step", "-m", "faster", "--json").json()
    # a checkout of the candidate commit, so an edit made while the test runs cannot be measured
    assert record["test"]["cwd"].endswith(".git/kgit/worktrees/test")
    assert "worktrees/test" not in started.git("worktree", "list")


def test_two_runs_of_one_kernel_on_one_gpu_are_two_sections():
    from kgit.model.record import from_json
    from kgit.render import readme

    def record(iteration, status, started, value, gpu="Fake GPU"):
        return from_json({"kernel": "fake", "iteration": iteration, "action": f"step {iteration}", "status": status,
                          "started": started, "value": value, "metric": "gbps", "correctness": True, "gpu": gpu})

    first = [record(0, "BASELINE", "2026-11-01T10:00:00.000001+00:00", 100.0),
             record(1, "IMPROVED", "2026-11-01T10:05:00.000001+00:00", 110.0)]
    second = [record(0, "BASELINE", "2026-11-02T09:00:00.000001+00:00", 200.0),
              record(1, "REGRESSED", "2026-11-02T09:05:00.000001+00:00", 150.0)]
    runs = readme.sections(second + first)
    assert [[r.value for r in section] for section in runs.values()] == [[100.0, 110.0], [200.0, 150.0]]
    text = readme.render_readme(first + second)
    assert "## Optimization: fake on Fake GPU, started 2026-11-01 10:00 UTC" in text
    assert "## Optimization: fake on Fake GPU, started 2026-11-02 09:00 UTC" in text


def test_a_long_failure_reason_is_cut_in_the_log_table_but_kept_in_the_record():
    from kgit.model.record import from_json
    from kgit.render.text import status_words

    def failed(reason):
        return from_json({"kernel": "fake", "iteration": 1, "action": "a", "status": "FAILED", "reason": reason})

    long = "crashed: exit status 1: triton.runtime.errors.OutOfResources: " + "x" * 200
    words = status_words(failed(long))
    assert words.startswith("failed, reverted (crashed: exit status 1: triton") and words.endswith("…)")
    assert len(words) < 130
    assert status_words(failed("short")) == "failed, reverted (short)"
