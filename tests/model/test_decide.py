"""The loop's decisions, pinned at their boundaries: each mutant of a rule fails one of these."""

import pytest

from kgit.config import KernelConfig
from kgit.model import decide
from kgit.model.record import Record, Status, StopReason
from kgit.model.result import TestResult, not_run


def result(value, spread=0.0, correct=True, payload=None):
    return TestResult(True, correct, None, "gbps", value, spread, payload or {"gbps": value}, 1.0, "")


def kept(iteration, value, spread=0.0, status=Status.IMPROVED):
    return Record("k", iteration, f"step {iteration}", status, value=value, spread_pct=spread, metric="gbps")


def cfg(**settings):
    return KernelConfig(name="k", kernel_path="k.py", test_path="t.py", **settings)


BEST = kept(0, 100.0, status=Status.BASELINE)


@pytest.mark.parametrize("value, status", [
    (101.0, Status.WITHIN_NOISE),   # exactly the 1% floor is not more than the floor
    (101.01, Status.IMPROVED),
    (100.0, Status.REGRESSED),      # no gain at all is a loss, not noise
    (100.01, Status.WITHIN_NOISE),
    (99.0, Status.REGRESSED),
])
def test_the_floor_is_a_strict_bound(value, status):
    assert decide.decide(result(value), BEST, None, 1.0) == status


def test_the_candidates_spread_raises_the_bar():
    assert decide.decide(result(103.0, spread=3.0), BEST, None, 1.0) == Status.WITHIN_NOISE
    assert decide.decide(result(103.01, spread=3.0), BEST, None, 1.0) == Status.IMPROVED


def test_the_bests_spread_raises_the_bar_too():
    noisy_best = kept(0, 100.0, spread=5.0, status=Status.BASELINE)
    assert decide.decide(result(104.0), noisy_best, None, 1.0) == Status.WITHIN_NOISE
    assert decide.decide(result(105.5), noisy_best, None, 1.0) == Status.IMPROVED


def test_the_target_is_met_at_equality_and_a_failure_is_never_kept():
    assert decide.decide(result(120.0), BEST, 120.0, 1.0) == Status.TARGET_MET
    assert decide.decide(result(119.9), BEST, 120.0, 1.0) == Status.IMPROVED
    assert decide.decide(result(500.0, correct=False), BEST, 120.0, 1.0) == Status.FAILED
    assert decide.decide(not_run("timeout"), BEST, None, 1.0) == Status.FAILED


def test_delta_is_relative_to_the_reference():
    assert decide.delta_pct(110.0, 100.0) == pytest.approx(10.0)
    assert decide.delta_pct(90.0, 120.0) == pytest.approx(-25.0)


def test_the_best_record_is_the_highest_kept_one_and_the_first_of_equals():
    records = [kept(0, 100.0, status=Status.BASELINE), kept(1, 130.0),
               Record("k", 2, "faster but wrong", Status.FAILED, value=None),
               Record("k", 3, "noise", Status.WITHIN_NOISE, value=131.0), kept(4, 130.0)]
    assert decide.best_record(records).iteration == 1
    assert decide.best_record([]) is None
    assert decide.best_record([Record("k", 1, "x", Status.REGRESSED, value=200.0)]) is None


def test_the_loop_stops_at_max_iterations_not_before():
    records = [kept(0, 100.0, status=Status.BASELINE), kept(1, 101.0), kept(2, 102.0)]
    assert decide.stop_reason(records, cfg(max_iterations=3)) is None
    assert decide.stop_reason(records, cfg(max_iterations=2)) == StopReason.MAX_ITERATIONS


def test_the_target_from_a_fraction_of_peak():
    best = kept(0, 3000.0, status=Status.BASELINE).replace(peak=4000.0)
    assert decide.target_value(cfg(target_pct_of_peak=0.75), best) == 3000.0
    assert decide.stop_reason([best], cfg(target_pct_of_peak=0.75)) == StopReason.TARGET_MET
    assert decide.stop_reason([best], cfg(target_pct_of_peak=0.76)) is None
    assert decide.target_value(cfg(target_value=10.0, target_pct_of_peak=0.5), best) == 10.0


def test_the_peak_comes_from_the_tests_pct_of_peak_else_the_datasheet():
    assert decide.peak_of(result(2000.0, payload={"pct_of_peak": 50.0})) == pytest.approx(4000.0)
    assert decide.peak_of(result(2000.0, payload={"gpu": "NVIDIA H200"})) == 4800
    assert decide.peak_of(result(2000.0, payload={"gpu": "NVIDIA H200", "cpu_timing": True})) is None


def test_a_new_record_carries_its_decision_and_stop_reason():
    record = decide.new_record(cfg(max_iterations=1), 1, "a", 1, result(120.0), Status.IMPROVED, BEST,
                               "2026-11-30T00:00:00.000000+00:00", "b" * 40)
    assert (record.best_before, record.delta_pct) == (100.0, pytest.approx(20.0))
    assert record.stop_reason == StopReason.MAX_ITERATIONS and record.output_tail is None
