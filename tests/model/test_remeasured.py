"""The best as later steps measured it again: the latest step after it on its device that ran it."""

from kgit.model.record import Measurement, Record, Status
from kgit.model.remeasured import Remeasured, latest

BEST = Record("k", 3, "kept", Status.IMPROVED, started="2026-12-06T07:10", gpu="cpu", metric="gbps", value=150.0)


def step(iteration, best_runs, gpu="cpu", status=Status.WITHIN_NOISE, started=None):
    return Record("k", iteration, f"step {iteration}", status, started=started or f"2026-12-06T08:0{iteration}",
                  gpu=gpu, metric="gbps", value=None if status == Status.FAILED else 250.0,
                  measurement=Measurement(best=best_runs))


def test_the_latest_step_after_the_best_that_ran_it_gives_the_median_of_its_runs():
    records = [BEST, step(4, [240.0, 250.0]), step(5, [262.0, 258.0, 270.0])]
    assert latest(records, BEST) == Remeasured(262.0, 3, 5, "2026-12-06T08:05")


def test_no_later_step_that_ran_the_best_is_no_remeasurement():
    assert latest([BEST], BEST) is None
    # a candidate that failed before the pairs ran nothing of the best
    assert latest([BEST, step(4, [], status=Status.FAILED)], BEST) is None
    # the steps before the best ran an older best; another device's steps are another run, and so are the
    # steps of a run of the same kernel started before it (another clone's, pulled)
    earlier = step(2, [100.0], started="2026-12-06T08:00")
    older_run = step(7, [120.0], started="2026-12-05T10:00")
    assert latest([earlier, older_run, BEST, step(4, [300.0], gpu="NVIDIA H200")], BEST) is None


def test_a_failed_step_after_a_later_one_does_not_hide_it():
    records = [BEST, step(4, [240.0, 250.0]), step(5, [], status=Status.FAILED)]
    assert latest(records, BEST) == Remeasured(245.0, 2, 4, "2026-12-06T08:04")


def test_a_note_whose_runs_are_no_figures_is_passed_over():
    for damaged in ("fast", [250.0, "x"], [250.0, -1.0], [True]):
        assert latest([BEST, step(4, [240.0]), step(5, damaged)], BEST).iteration == 4, damaged
