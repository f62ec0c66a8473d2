"""The commands that change the loop, as parsed: their options' refusals, their human and JSON answers."""

import pytest


@pytest.mark.parametrize("gpus", ["0,0", ",", "a", "0;1", "-1"])
def test_a_bad_gpu_list_is_refused_before_anything_runs(started, gpus):
    line = started.refused("tune", "fake", "--gpus", gpus)
    assert line.startswith(f"kgit: --gpus {gpus!r}: give distinct GPU numbers")


def test_step_options_are_checked(started):
    started.set_kernel(METRIC=120.0)
    assert "--tier" in started.refused("step", "-m", "x", "--tier", "6")
    assert "--gpu" in started.refused("step", "-m", "x", "--gpu", "tpu")
    assert "--message" in started.refused("step")


def test_start_and_step_answer_a_person_and_a_program(ws):
    human = ws.ok("start", "fake").stdout
    assert human.startswith("fake: baseline 100 GBps (10% of peak) on Fake GPU; branch opt/fake, tag best/fake at ")
    ws.set_kernel(METRIC=120.0)
    step = ws.ok("step", "-m", "faster", "--json").json()
    assert step["kept"] is True and step["commit"] == ws.git("rev-parse", "HEAD")
    ws.set_kernel(METRIC=90.0)
    human = ws.ok("step", "-m", "slower").stdout.splitlines()
    assert human[0].startswith("iteration 2: REGRESSED  90.0 GBps (9% of peak)  -25.0% [")
    assert human[0].endswith("] vs best 120 GBps")
    assert human[1].startswith("reason: -25.0% [") and human[1].endswith("the whole interval is below zero")
    assert human[2] == "reverted; the attempt stays at refs/kgit/attempts/fake/2"
    # log and show say what step said: kept or not, for an agent reading the history later
    assert [(r["iteration"], r["kept"]) for r in ws.ok("log", "--json").json()["iterations"]] == \
        [(0, True), (1, True), (2, False)]
    assert ws.ok("show", "2", "--json").json()["kept"] is False


def test_a_gain_over_2x_is_kept_and_flagged_for_a_look_in_step_log_and_json(started):
    started.set_kernel(METRIC=250.0)
    run = started.ok("step", "-m", "suspiciously fast")
    flag = "check this: a gain over 2x is often a broken measurement"
    assert run.stdout.splitlines()[0].startswith("iteration 1: IMPROVED") and flag in run.stdout
    checks = started.ok("log", "--json").json()["iterations"][1]["checks"]
    assert [c["check"] for c in checks] == ["gain_over_2x"] and checks[0]["message"].startswith(flag)
    assert started.ok("log", "--json").json()["iterations"][0]["checks"] == []  # the baseline: nothing to check
    row = next(line for line in started.ok("log").stdout.splitlines() if "suspiciously fast" in line)
    assert "improved; check: gain over 2x" in row
    assert flag in started.ok("show", "1").stdout
    assert started.ok("context", "--json").json()["tried"][0]["checks"] == ["gain_over_2x"]
    assert started.git("show", "HEAD:experiments/README.md").count("check: gain over 2x") == 1
    started.set_kernel(METRIC=255.0)
    assert "check this" not in started.ok("step", "-m", "a little more").stdout  # +2%: nothing to check


def test_a_figure_of_one_significant_digit_is_flagged_at_the_start(ws):
    ws.set_kernel(METRIC=0.02)
    ws.git("commit", "-qam", "a test that rounds its figure to one digit")
    run = ws.ok("start", "fake")
    assert "check this: the test prints its figure with one significant digit (0.02 GBps)" in run.stdout
    assert [c["check"] for c in ws.ok("best", "--json").json()["checks"]] == ["one_significant_digit"]
