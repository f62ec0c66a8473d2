"""The loop's decisions, pinned at their boundaries: each mutant of a rule fails one of these."""

import dataclasses
import math

import pytest

from kgit.model import peaks
from kgit.config import KernelConfig
from kgit.model import decide, noise
from kgit.model.record import Environment, Measurement, Record, Spread, Status, StopReason, same_environment
from kgit.model.result import TestResult, not_run


def result(value, spread=0.0, correct=True, payload=None):
    return TestResult(True, correct, None, "gbps", value, spread, payload or {"gbps": value}, 1.0, "")


def kept(iteration, value, spread=0.0, status=Status.IMPROVED):
    return Record("k", iteration, f"step {iteration}", status, value=value, spread_pct=spread, metric="gbps")


def cfg(**settings):
    return KernelConfig(name="k", kernel_path="k.py", test_path="t.py", **settings)


def compared(best, candidate, floor=1.0, prior=noise.Prior(), keep_above_pct=None):
    """A comparison of these paired figures, decided as kgit.loop.paired decides it."""
    ratios = [math.log(c / b) for b, c in zip(best, candidate)]
    found = noise.interval(ratios, prior)
    return noise.Comparison(first=result(candidate[0]), best=best, candidate=candidate, log_ratios=ratios,
                            interval=found, verdict=(found and noise.verdict(found, floor, keep_above_pct)) or "noise",
                            keep_above_pct=keep_above_pct)


BEST = kept(0, 100.0, status=Status.BASELINE)


@pytest.mark.parametrize("candidate, status", [
    ([100.99, 100.99], Status.WITHIN_NOISE),   # just under the 1% floor is not above it
    ([101.02, 101.02], Status.IMPROVED),
    ([100.0, 100.0], Status.WITHIN_NOISE),   # no change at all is noise, not a loss
    ([99.0, 99.0], Status.REGRESSED),
])
def test_the_floor_is_a_strict_bound_on_the_whole_interval(candidate, status):
    assert decide.decide(compared([100.0, 100.0], candidate), None) == status


@pytest.mark.parametrize("candidate, status", [
    ([100.01, 100.01], Status.IMPROVED),       # any gain whose whole interval is above zero
    ([100.0, 100.0], Status.WITHIN_NOISE),     # no change is never kept
    ([100.5, 100.0], Status.WITHIN_NOISE),     # +0.25% whose interval reaches below zero
    ([99.99, 99.99], Status.WITHIN_NOISE),     # a loss within the floor is noise, as for a step
    ([98.99, 98.99], Status.REGRESSED),
])
def test_a_tune_s_configuration_is_kept_when_its_whole_interval_is_above_zero(candidate, status):
    found = compared([100.0, 100.0], candidate, keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT)
    assert decide.TUNE_KEEP_ABOVE_PCT == 0.0 and decide.decide(found, None) == status


def test_a_gain_under_the_floor_is_a_tune_s_to_keep_not_a_step_s():
    # +0.5%, measured exactly: a step's change must clear the 1% floor; a tune's configuration, zero
    step = compared([100.0] * 2, [100.5] * 2)
    tune = compared([100.0] * 2, [100.5] * 2, keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT)
    assert decide.decide(step, None) == Status.WITHIN_NOISE and decide.decide(tune, None) == Status.IMPROVED
    assert decide.reason(tune, Status.IMPROVED, 1.0) == (
        "+0.5% [+0.5, +0.5] over 2 pairs: the whole interval is above zero, under the 1% floor: a tune keeps a "
        "configuration its pairs show faster")
    # over the floor, a tune's gain reads as a step's: the exception is named only where it applied
    clear = compared([100.0] * 2, [103.0] * 2, keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT)
    assert decide.reason(clear, Status.IMPROVED, 1.0).endswith(": the whole interval is above the 1% floor")
    level = compared([100.0] * 3, [100.0, 101.0, 99.5], keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT)
    assert decide.reason(level, Status.WITHIN_NOISE, 1.0).endswith(": it spans zero")
    small_loss = compared([100.0] * 3, [99.6, 99.5, 99.4], keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT)
    assert decide.decide(small_loss, None) == Status.WITHIN_NOISE
    assert decide.reason(small_loss, Status.WITHIN_NOISE, 1.0).endswith(
        ": it lies below zero, within the 1% floor: a loss inside the noise")
    # a comparison kept at the floor itself reads as a step's
    at_floor = compared([100.0] * 3, [102.9, 103.0, 103.1], keep_above_pct=1.0)
    assert decide.reason(at_floor, Status.IMPROVED, 1.0).endswith("the whole interval is above the 1% floor")


def test_the_interval_not_the_estimate_decides():
    # +3% on average, but the pairs disagree: the interval reaches below the floor
    noisy = compared([100.0, 100.0, 100.0], [101.0, 105.0, 103.0])
    assert noisy.interval.gain_pct == pytest.approx(2.98, abs=0.01) and noisy.interval.low_pct < 1.0
    assert decide.decide(noisy, None) == Status.WITHIN_NOISE
    # the same gain measured consistently is kept
    assert decide.decide(compared([100.0] * 3, [102.9, 103.0, 103.1]), None) == Status.IMPROVED
    # a loss inside the noise is not a regression (so it is not banned from being tried again)
    assert decide.decide(compared([100.0] * 3, [90.0, 104.0, 100.0]), None) == Status.WITHIN_NOISE


def test_the_target_is_met_at_equality_and_a_failure_is_never_kept():
    assert decide.decide(compared([100.0, 100.0], [120.0, 120.0]), 120.0) == Status.TARGET_MET
    assert decide.decide(compared([100.0, 100.0], [119.9, 119.9]), 120.0) == Status.IMPROVED
    broken = noise.Comparison(first=not_run("timeout"), best=[], candidate=[], log_ratios=[],
                              failure=not_run("timeout"), failed_side="candidate")
    assert decide.decide(broken, 1.0) == Status.FAILED


WRONG = TestResult(True, False, "correctness: (2, 300) fp32: output 0 out of tolerance", "gbps", 90.0, 0.0, {}, 1.0, "")


@pytest.mark.parametrize("test_changed, failed_side, candidate_first, best_failure, status", [
    (True, "best", result(100.0), WRONG, Status.IMPROVED),  # the judge changed and the best is wrong under it
    (False, "best", result(100.0), WRONG, Status.FAILED),  # same judge: the best's failure is a bad moment
    (True, "best", result(100.0), not_run("timeout: 600 s"), Status.FAILED),  # not a wrong result
    (True, "best", result(100.0), not_run("crashed (exit 3)"), Status.FAILED),
    (True, "candidate", WRONG, WRONG, Status.FAILED),
    (True, "best", result(100.0, correct=False), WRONG, Status.FAILED),  # a candidate that did not pass
])
def test_a_best_wrong_under_a_changed_test_is_replaced_by_a_candidate_that_passes(
        test_changed, failed_side, candidate_first, best_failure, status):
    found = noise.Comparison(first=candidate_first, best=[], candidate=[], log_ratios=[], failure=best_failure,
                             failed_side=failed_side)
    assert decide.decide(found, None, test_changed=test_changed) == status
    why = decide.reason(found, status, 1.0)
    if status == Status.IMPROVED:
        assert why.startswith("the test changed since the best, which gives a wrong result under it now "
                              "(correctness: (2, 300)") and "replaces the best" in why
    elif failed_side == "best":
        assert why.startswith("the best failed when measured again: ")


def test_every_decision_carries_its_reason():
    better = compared([100.0] * 3, [102.9, 103.0, 103.1])
    assert decide.reason(better, Status.IMPROVED, 1.0) == (
        "+3.0% [+2.8, +3.2] over 3 pairs: the whole interval is above the 1% floor")
    worse = compared([100.0] * 2, [95.0, 95.0])
    assert decide.reason(worse, Status.REGRESSED, 1.0).endswith("the whole interval is below zero")
    unclear = compared([100.0] * 3, [101.0, 105.0, 103.0])
    assert "neither above the 1% floor nor below zero" in decide.reason(unclear, Status.WITHIN_NOISE, 1.0)


def test_delta_is_relative_to_the_reference():
    assert decide.delta_pct(110.0, 100.0) == pytest.approx(10.0)
    assert decide.delta_pct(90.0, 120.0) == pytest.approx(-25.0)


def test_the_best_record_is_the_latest_kept_one():
    # iteration 4 was shown better than iteration 1 side by side, on a machine that was slower that day
    records = [kept(0, 100.0, status=Status.BASELINE), kept(1, 130.0),
               Record("k", 2, "faster but wrong", Status.FAILED, value=None),
               Record("k", 3, "noise", Status.WITHIN_NOISE, value=131.0), kept(4, 120.0),
               Record("k", 5, "paves the way", Status.KEPT_ANYWAY, value=110.0)]
    assert decide.best_record(records).iteration == 4
    pairs = [(f"c{r.iteration}", r) for r in records]
    assert decide.best_pair(pairs) == ("c4", records[4]) and decide.best_pair([]) is None
    assert decide.best_record([]) is None
    assert decide.best_record([Record("k", 1, "x", Status.REGRESSED, value=200.0)]) is None


def test_the_loop_stops_at_max_iterations_not_before():
    records = [kept(0, 100.0, status=Status.BASELINE), kept(1, 101.0), kept(2, 102.0)]
    assert decide.stop_reason(records, cfg(max_iterations=3), 2) is None
    assert decide.stop_reason(records, cfg(max_iterations=2), 2) == StopReason.MAX_ITERATIONS
    assert decide.stop_reason(records, cfg(max_iterations=3), 3) == StopReason.MAX_ITERATIONS  # one left out


def test_the_target_from_a_fraction_of_peak():
    best = kept(0, 3000.0, status=Status.BASELINE).replace(peak=4000.0)
    assert decide.target_value(cfg(target_pct_of_peak=0.75), best) == 3000.0
    assert decide.stop_reason([best], cfg(target_pct_of_peak=0.75), 0) == StopReason.TARGET_MET
    assert decide.stop_reason([best], cfg(target_pct_of_peak=0.76), 0) is None
    assert decide.target_value(cfg(target_value=10.0, target_pct_of_peak=0.5), best) == 10.0


def test_the_peak_comes_from_the_tests_pct_of_peak_else_the_datasheet():
    assert decide.peak_of(result(2000.0, payload={"pct_of_peak": 50.0})) == pytest.approx(4000.0)
    assert decide.peak_of(result(2000.0, payload={"gpu": "NVIDIA H200"})) == 4800
    assert decide.peak_of(result(2000.0, payload={"gpu": "NVIDIA H200", "cpu_timing": True})) is None


def test_a_new_record_carries_its_decision_its_samples_and_stop_reason():
    pairs = compared([99.0, 101.0], [118.8, 121.2])
    record = decide.new_record(cfg(max_iterations=1), 1, "a", 1, result(118.0), Status.IMPROVED, BEST,
                               "2026-11-30T00:00:00.000000+00:00", "b" * 40, pairs, Environment(host="h"))
    assert (record.best_before, record.value) == (100.0, 120.0)  # the medians of the counted runs
    assert record.delta_pct == pytest.approx(20.0) and record.measurement.pairs == 2
    assert record.measurement.best == [99.0, 101.0] and record.environment == Environment(host="h")
    assert record.stop_reason == StopReason.MAX_ITERATIONS and record.output_tail is None


def test_a_record_says_which_run_its_test_output_is():
    # the run kept is not the counted one: its figure (130) beside the value (120) is labelled
    pairs = compared([99.0, 101.0], [118.8, 121.2])
    step = decide.new_record(cfg(), 1, "a", 1, result(130.0), Status.IMPROVED, BEST, "t", "b" * 40, pairs)
    assert (step.value, step.test["gbps"], step.test_run) == (120.0, 130.0, decide.FIRST_RUN)
    start = noise.Comparison(first=result(101.0), best=[], candidate=[101.0, 99.0, 100.0, 103.0], log_ratios=[])
    baseline = decide.new_record(cfg(), 0, "baseline", None, result(101.0), Status.BASELINE, None, "t", "b" * 40,
                                 start)
    assert (baseline.value, baseline.test_run) == (100.5, decide.BASELINE_RUN)
    crashed = decide.new_record(cfg(), 1, "a", 1, not_run("crashed: exit status 3"), Status.FAILED, BEST, "t", None)
    assert crashed.test is None and crashed.test_run is None  # no output kept, nothing to label


def test_a_failed_record_keeps_the_unit_of_the_best_it_is_judged_against():
    crashed = not_run("crashed: exit status 3")
    record = decide.new_record(cfg(), 1, "a", 1, crashed, Status.FAILED, BEST, "2026-11-30T00:00:00.000000+00:00",
                               "b" * 40)
    assert (record.metric, record.value, record.best_before) == ("gbps", None, 100.0)
    assert decide.new_record(cfg(), 0, "a", None, crashed, Status.FAILED, None, "t", None).metric is None


def test_only_measurements_of_the_same_environment_are_comparable():
    here = Environment(host="a", device="nvidia", gpu_uuid="GPU-1", driver="580", torch="2.11", triton="3.6",
                       clock_sm_mhz="1980")
    assert same_environment(here, dataclasses.replace(here, clock_sm_mhz="1500"))  # clocks move: not in the key
    for key in ("host", "device", "gpu_uuid", "driver", "torch", "triton"):
        assert not same_environment(here, dataclasses.replace(here, **{key: "other"}))
    assert not same_environment(here, None) and not same_environment(None, here)
    old = kept(1, 100.0).replace(measurement=Measurement(log_ratios=[0.01, -0.01]), environment=here)
    elsewhere = kept(2, 100.0).replace(measurement=Measurement(log_ratios=[0.3, -0.3]),
                                       environment=dataclasses.replace(here, host="b"))
    assert decide.noise_prior([old, elsewhere], here) == noise.Prior(sum_squares=pytest.approx(2e-4), df=1)


def test_a_target_is_proposed_from_the_machines_ceiling():
    base = Record("k", 0, "baseline", Status.BASELINE, metric="gbps", value=2000.0, gpu="NVIDIA H200", peak=4800.0)
    measured_copy = base.replace(test={"copy_gbps": 4200.0})
    assert decide.proposed_target(measured_copy)[0] == pytest.approx(0.9 * 4200.0)
    assert "copy bandwidth" in decide.proposed_target(measured_copy)[1]
    assert decide.proposed_target(base)[0] == pytest.approx(0.9 * 4800.0)  # no copy measured: the datasheet
    compute = base.replace(metric="benchmarks.triton_tflops", value=600.0)
    h200_bf16 = peaks.peak_for("NVIDIA H200", "tflops")
    assert decide.proposed_target(compute)[0] == pytest.approx(0.8 * h200_bf16)  # the dense bf16 peak
    assert decide.proposed_target(base.replace(cpu_timing=True)) is None  # no ceiling on a CPU
    assert decide.proposed_target(base.replace(gpu="Fake GPU")) is None  # a GPU kgit does not know


@pytest.mark.parametrize("best_s, timeout_s, stopped_at", [
    (0.2, 600.0, 30.0),   # a fast test: the floor leaves a candidate time to compile
    (4.2, 600.0, 42.0),   # ten times the best's own time
    (59.9, 600.0, 599.0),
    (60.0, 600.0, None),  # the bound reaches test_timeout_s: the usual timeout
    (3.0, 20.0, None),
])
def test_a_candidate_far_slower_than_the_best_is_stopped_at_ten_times_its_time(best_s, timeout_s, stopped_at):
    cfg = KernelConfig("k", "k.py", "t.py", test_timeout_s=timeout_s)
    here = Environment(host="h", device="nvidia", gpu_uuid="GPU-1", driver="580", torch="2.11", triton="3.6")
    best = Record("k", 0, "baseline", Status.BASELINE, value=100.0, duration_s=best_s, environment=here)
    bound, why = decide.candidate_timeout(cfg, best, here)
    if stopped_at is None:
        assert (bound, why) == (timeout_s, None)
    else:
        assert bound == pytest.approx(stopped_at) and why.startswith(f"far slower than the best: stopped after {bound:g} s")
    assert decide.candidate_timeout(cfg, None, here) == (timeout_s, None)
    elsewhere = dataclasses.replace(here, gpu_uuid="GPU-2")  # its time on another GPU says nothing of this one's
    assert decide.candidate_timeout(cfg, best, elsewhere) == (timeout_s, None)


# --- kgit start's runs: which figure decides, and the smallest change a step can keep ---------------

from kgit.errors import KgitError  # noqa: E402
from kgit.model.device_time import DeviceTime  # noqa: E402


def started(test_figures, device_us=None, latency_us=None):
    runs = []
    for i, value in enumerate(test_figures):
        payload = {"gbps": value, **({"latency_us": latency_us} if latency_us else {})}
        device = (DeviceTime(device_us[i], 250, ("_k",), "cupti", device_us[i] / 250) if device_us else None)
        runs.append(TestResult(True, True, None, "gbps", value, None, payload, 1.0, "", printed=(value,),
                               device=device))
    return runs


NOISY_TEST = [1000.0, 1300.0, 800.0, 1100.0]
QUIET_DEVICE = [2500.0, 2510.0, 2495.0, 2505.0]


def test_the_steadier_figure_decides_and_the_start_says_how_small_a_change_it_can_keep():
    spread = decide.start_spread(cfg(max_pairs=12), started(NOISY_TEST, QUIET_DEVICE, latency_us=30.0))
    assert spread.decides_on == "device" and spread.runs == 4 and spread.max_pairs == 12
    assert spread.test == NOISY_TEST and spread.device_us == QUIET_DEVICE
    sd = noise.log_sd(QUIET_DEVICE)
    assert spread.sd_pct["device"] == round(math.expm1(sd) * 100, 3)
    assert spread.smallest_keepable_pct == round(noise.smallest_keepable_pct(math.sqrt(2) * sd, 12, 1.0,
                                                                         prior_df=3), 2)
    # why the test's own figure moves: it times 30 us a call where the kernel runs 10 us on the device
    assert spread.why.startswith("launch-bound timing: the test times 30 us a call (latency_us), of which the "
                                 "kernel runs 10.02 us on the device")


def test_the_tests_figure_decides_where_it_is_the_steadier_or_the_only_one():
    assert decide.start_spread(cfg(), started(QUIET_DEVICE, NOISY_TEST)).decides_on == "test"
    alone = decide.start_spread(cfg(), started(NOISY_TEST))
    assert alone.decides_on == "test" and alone.device_us is None and "device" not in alone.sd_pct
    # a noisy test and nothing kgit can say why
    assert alone.smallest_keepable_pct > decide.DETECTABLE_WARNING_PCT and alone.why is None


def test_kgit_yaml_chooses_the_figure_and_device_without_a_recording_is_refused():
    assert decide.start_spread(cfg(decide_on="test"), started(NOISY_TEST, QUIET_DEVICE)).decides_on == "test"
    assert decide.start_spread(cfg(decide_on="device"), started(QUIET_DEVICE, NOISY_TEST)).decides_on == "device"
    with pytest.raises(KgitError, match="decide_on: device, but kgit's device timing recorded no launch"):
        decide.start_spread(cfg(decide_on="device"), started(NOISY_TEST))


def baseline(spread, environment=None):
    """A baseline whose start measured this (start_spread's fields; the rest as a start of 4 runs)."""
    start = Spread(**{"runs": 4, "test": [1.0] * 4, "sd_pct": {}, "decides_on": "test", "max_pairs": 12,
                      "smallest_keepable_pct": None, **spread})
    return Record("k", 0, "baseline", Status.BASELINE, value=1.0, measurement=Measurement(spread=start),
                  environment=environment)


def test_a_loop_decides_on_what_its_start_chose_unless_kgit_yaml_says():
    chose_device = baseline({"decides_on": "device"})
    assert decide.decides_on(cfg(), [chose_device]) == "device"
    assert decide.decides_on(cfg(decide_on="test"), [chose_device]) == "test"
    assert decide.decides_on(cfg(), [Record("k", 0, "baseline", Status.BASELINE, value=1.0)]) == "test"  # before
    assert decide.decides_on(cfg(), []) == "test"


def test_the_noise_prior_is_of_the_deciding_figure_and_starts_from_the_starts_runs():
    env = Environment(host="h", device="nvidia")
    start = baseline({"test": NOISY_TEST, "device_us": QUIET_DEVICE}, env)
    on_device = Record("k", 1, "s", Status.WITHIN_NOISE, environment=env,
                       measurement=Measurement(log_ratios=[0.01, 0.03], decided_on="device"))
    on_test = Record("k", 2, "s", Status.WITHIN_NOISE, environment=env,
                     measurement=Measurement(log_ratios=[0.3, -0.3, 0.1]))
    prior = decide.noise_prior([start, on_device, on_test], env, "device")
    assert prior == noise.Prior.from_decisions([[0.01, 0.03]]).plus(noise.Prior.from_runs(QUIET_DEVICE))
    assert decide.noise_prior([start, on_device, on_test], env, "test") == noise.Prior.from_decisions(
        [[0.3, -0.3, 0.1]]).plus(noise.Prior.from_runs(NOISY_TEST))
    assert decide.noise_prior([start], Environment(host="other"), "device") == noise.Prior()  # another machine's noise


@pytest.mark.parametrize("candidate, keep_anyway, status", [
    ([100.0, 100.0], "paves the way for tiling", Status.KEPT_ANYWAY),  # within noise, kept for its reason
    ([90.0, 90.0, 90.0], "paves the way", Status.KEPT_ANYWAY),        # a loss too: the best stays where it was
    ([110.0, 110.0, 110.0], "paves the way", Status.IMPROVED),        # a win needs no reason
    ([100.0, 100.0], None, Status.WITHIN_NOISE),
])
def test_a_steps_record_is_decided_from_its_comparison_and_kept_anyway_only_where_it_did_not_win(
        candidate, keep_anyway, status):
    record = decide.step_record(cfg(), 3, "change", 1, "2026-12-06T10:00:00Z", "abc", compared([100.0] * len(candidate),
                                candidate), BEST, None, keep_anyway=keep_anyway, step=3)
    assert record.status == status
    assert (record.iteration, record.action, record.tier, record.base) == (3, "change", 1, "abc")
    if status == Status.KEPT_ANYWAY:
        assert record.reason.startswith(f"kept anyway: {keep_anyway} (")


def test_a_run_that_never_happened_fails_however_it_is_asked_to_be_kept():
    """What a crash's recovery records (kgit.loop.recovery.recover) is what a step records for a run
    that never ran: the same decision, never a copy of it."""
    record = decide.step_record(cfg(), 4, "change", None, "2026-12-06T10:00:00Z", "abc",
                                noise.never_measured(not_run("interrupted")), BEST, None, keep_anyway="reason")
    assert record.status == Status.FAILED
    assert record.reason == "interrupted"
    assert record.measurement.runs == 0


# --- check_run: what the candidate's own run launched judges what its change touched ---------------

TWO_KERNELS = '''import triton


@triton.jit
def _fwd(x):
    return x


@triton.jit
def _bwd(x):
    return x
'''


def launched_run(kernels, correct=True):
    from kgit.model.device_time import DeviceTime

    run = dataclasses.replace(result(100.0, correct=correct), output_tail="the test's tail")
    return dataclasses.replace(run, device=DeviceTime(10.0, 1, kernels, "cupti", 10.0) if kernels else None)


def measured_with(first):
    return noise.Comparison(first=first, best=[100.0], candidate=[101.0], log_ratios=[math.log(1.01)])


CHANGED_BWD = (TWO_KERNELS, TWO_KERNELS.replace("def _bwd(x):\n    return x", "def _bwd(x):\n    return x + 1"))


@pytest.mark.parametrize("change, first", [
    (None, launched_run(("_fwd",))),                     # a file added or deleted: its test judges it whole
    (CHANGED_BWD, launched_run(None)),                   # the run recorded no launch: nothing to tell from
    (CHANGED_BWD, launched_run(("_fwd",), correct=False)),  # a failed run fails anyway
    (CHANGED_BWD, launched_run(("_fwd", "_bwd"))),       # the run ran what the change touched
])
def test_check_run_lets_through_what_it_cannot_or_need_not_judge(change, first):
    comparison = measured_with(first)
    assert decide.check_run(change, comparison, ("_old",), allow=False) == (("_old",), comparison)


def test_check_run_fails_a_change_to_what_the_run_never_launched_or_records_it_with_allow():
    comparison = measured_with(launched_run(("_fwd",)))
    untested, failed = decide.check_run(CHANGED_BWD, comparison, None, allow=False)
    assert untested is None and not failed.first.passed and failed.candidate == []
    assert failed.first.reason.startswith("the test never ran _bwd, which this change touches")
    assert failed.first.output_tail == "the test's tail"
    # with allow, appended to what check_tested found already, once
    assert decide.check_run(CHANGED_BWD, comparison, ("_old",), allow=True) == (("_old", "_bwd"), comparison)
    assert decide.check_run(CHANGED_BWD, comparison, ("_bwd",), allow=True) == (("_bwd",), comparison)
