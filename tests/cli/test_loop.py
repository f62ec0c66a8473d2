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
