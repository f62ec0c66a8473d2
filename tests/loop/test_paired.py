"""Paired, interleaved re-measurement on a simulated kernel whose figure draws from a known, seeded
noise distribution: the decisions the issue asks for, over hundreds of simulated steps."""

import json
import math
import random

import pytest

from kgit.config import KernelConfig
from kgit.loop import paired
from kgit.model import decide, noise
from kgit.model.record import Record, Status, to_json
from kgit.model.noise import Prior
from kgit.model.result import TestResult, from_output

SEED = 20261130


class Machine:
    """Runs of a best and a candidate kernel: true speed x lognormal noise x a drift in time."""

    def __init__(self, rng, gain_pct, noise_pct, drift_pct_per_run=0.0):
        self.rng, self.clock, self.calls = rng, 0, []
        self.true = {"best": 100.0, "candidate": 100.0 * (1 + gain_pct / 100)}
        self.sigma, self.drift = math.log1p(noise_pct / 100), drift_pct_per_run / 100

    def run(self, side):
        def once(timing_only):
            self.calls.append((side, timing_only))
            self.clock += 1
            value = self.true[side] * math.exp(self.rng.gauss(0.0, self.sigma)) * (1 - self.drift * self.clock)
            return TestResult(True, True, None, "gbps", value, 0.0, {"gbps": value}, 0.1, "")
        return once


MAX_PAIRS = KernelConfig("k", "k.py", "t.py").max_pairs


def decisions(gain_pct, noise_pct, n=200, drift=0.0, max_pairs=MAX_PAIRS, learn=True, seed=SEED, keep_above_pct=None,
              extend=False):
    """n decisions in a row, each (if learn) with the noise known from the ones before, as a kernel's
    history gives it; returns the statuses and the mean number of test runs per decision. keep_above_pct:
    a tune's level (decide.TUNE_KEEP_ABOVE_PCT), else the floor; extend: past max_pairs (noise.Bound)."""
    rng, statuses, runs, history = random.Random(seed), [], [], []
    for _ in range(n):
        machine = Machine(rng, gain_pct, noise_pct, drift)
        prior = Prior.from_decisions(history) if learn else Prior()
        found = paired.compare(machine.run("best"), machine.run("candidate"), prior, 1.0, max_pairs,
                                warm_best=False, keep_above_pct=keep_above_pct, extend=extend)
        statuses.append(decide.decide(found, None).value)
        runs.append(found.runs)
        history.append(found.log_ratios)
    return statuses, sum(runs) / n


@pytest.mark.parametrize("learn", [True, False])
def test_a_no_op_is_never_kept(learn):
    statuses, _ = decisions(0.0, 1.0, learn=learn)
    assert statuses.count("IMPROVED") == 0, f"seed {SEED}"
    assert statuses.count("REGRESSED") <= 10, f"seed {SEED}: a no-op reads as a loss at most 5% of the time"


def test_a_true_three_percent_gain_under_one_percent_noise_is_kept():
    statuses, _ = decisions(3.0, 1.0)
    assert statuses.count("IMPROVED") >= 190, f"seed {SEED}: {statuses.count('IMPROVED')} of 200"
    assert statuses.count("REGRESSED") == 0
    # the very first decision of a kernel, with no noise known yet, needs more pairs and is kept less often
    first, _ = decisions(3.0, 1.0, learn=False)
    assert statuses.count("IMPROVED") > first.count("IMPROVED") >= 170, f"seed {SEED}"


def test_a_tune_keeps_a_gain_under_the_floor_that_its_pairs_resolve():
    # +1% under 0.5% noise per run: the whole interval rarely clears the 1% floor (4 of 200 on this seed),
    # it clears zero in 192, and in fewer runs: the comparison ends when it does
    floor, floor_runs = decisions(1.0, 0.5)
    tune, tune_runs = decisions(1.0, 0.5, keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT)
    assert floor.count("IMPROVED") <= 10 and tune.count("IMPROVED") >= 180, f"seed {SEED}"
    assert tune_runs < floor_runs / 2, (tune_runs, floor_runs)


def test_a_tune_keeps_a_no_op_at_most_at_the_error_rate_and_a_loss_almost_never():
    # one side of the decision's 5%: 2.5% of no-ops (5 of 200 on this seed); -1.5% at 1% noise, 1 of 200
    assert decisions(0.0, 1.0, keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT)[0].count("IMPROVED") <= 10
    assert decisions(-1.5, 1.0, keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT)[0].count("IMPROVED") <= 2


def test_a_true_three_percent_loss_is_never_kept():
    statuses, _ = decisions(-3.0, 1.0)
    assert statuses.count("IMPROVED") == 0 and statuses.count("REGRESSED") >= 190, f"seed {SEED}"


def test_a_clear_win_or_loss_costs_one_pair_once_the_noise_is_known():
    _, clear_win = decisions(20.0, 1.0, n=50)
    _, clear_loss = decisions(-20.0, 1.0, n=50)
    _, close_call = decisions(2.0, 1.0, n=50)
    assert clear_win < 3.5 and clear_loss < 3.5  # a warm-up and mostly a single pair
    assert close_call > clear_win + 2  # a close call gets more pairs


def test_the_interleaving_cancels_a_drift_of_the_machine():
    # The machine slows by 1% per run, ten times the noise: a no-op is still no gain and no loss.
    statuses, _ = decisions(0.0, 0.1, drift=1.0)
    assert statuses.count("IMPROVED") == 0 and statuses.count("REGRESSED") == 0, f"seed {SEED}"
    # The same drift with every pair in the same order (best first) reads as a steady gain or loss:
    # the alternation is what cancels it.
    rng = random.Random(SEED)
    machine = Machine(rng, 0.0, 0.1, 1.0)
    same_order = [math.log(machine.run("candidate")(True).value / b.value)
                  for b in (machine.run("best")(True) for _ in range(8))]
    assert abs(sum(same_order) / 8) > 0.005


def test_a_failing_rerun_of_the_candidate_is_a_failure():
    results = iter([True, True, False])

    def flaky(timing_only):
        ok = next(results)
        return TestResult(ok, ok, None if ok else "crashed: exit status 1", "gbps", 100.0 if ok else None,
                          0.0, {}, 0.1, "")

    best = Machine(random.Random(SEED), 0.0, 1.0).run("best")
    found = paired.compare(best, flaky, Prior(), 1.0, 8, warm_best=False)
    assert found.failure is not None and found.failed_side == "candidate"
    assert decide.decide(found, None).value == "FAILED"


@pytest.mark.parametrize("warm_best", [True, False])
def test_only_the_candidates_first_run_checks_in_full(warm_best):
    machine = Machine(random.Random(SEED), 0.0, 1.0)
    paired.compare(machine.run("best"), machine.run("candidate"), Prior(), 1.0, 4, warm_best=warm_best)
    assert machine.calls[0] == ("candidate", False)
    assert machine.calls[1:] and all(timing_only for _, timing_only in machine.calls[1:])
    assert machine.calls[1][0] == "best"  # the best's warm-up, or the first pair's best


def test_a_decision_after_noisy_ones_is_decided_on_its_own_quiet_pairs():
    # H200, call 6 of experiments/noise-decisions: two decisions taken while the host was loaded (runs
    # at 1881 to 4062 GB/s) made every later one undecidable for 30 pairs' worth of prior
    rng = random.Random(SEED)
    loaded = [paired.compare(Machine(rng, 2.3, 15.0).run("best"), Machine(rng, 2.3, 15.0).run("candidate"),
                              Prior(), 1.0, MAX_PAIRS, warm_best=False).log_ratios for _ in range(2)]
    machine = Machine(rng, 2.3, 0.2)
    found = paired.compare(machine.run("best"), machine.run("candidate"), Prior.from_decisions(loaded), 1.0,
                            MAX_PAIRS, warm_best=False)
    assert decide.decide(found, None).value == "IMPROVED" and len(found.log_ratios) <= 4, f"seed {SEED}"


def test_a_falling_latency_is_a_gain_when_lower_is_better():
    machine = Machine(random.Random(SEED), -5.0, 0.2)  # the candidate's figure is 5% lower
    found = paired.compare(machine.run("best"), machine.run("candidate"), Prior(), 1.0, MAX_PAIRS,
                            warm_best=False, lower_is_better=True)
    assert decide.decide(found, None).value == "IMPROVED" and found.interval.gain_pct == pytest.approx(5.26, abs=0.3)


def rounded_run(true_value, step):
    """A test that prints its figure rounded to step, as a collection's test does (round(x, 2))."""
    def once(timing_only):
        printed = round(round(true_value / step) * step, 10)
        return from_output(json.dumps({"correctness": True, "gbps": printed}) + "\n", None, None, 0.1, "")
    return once


@pytest.mark.parametrize("best, candidate, step", [
    (0.0149, 0.0151, 0.01),  # +1.3%, printed 0.01 and 0.02: the fused-moe "+100%"
    (0.0151, 0.0149, 0.01),  # -1.3%, printed 0.02 and 0.01
    (100.04, 100.06, 0.1),   # +0.02%, printed 100.0 and 100.1
])
def test_a_figure_rounded_to_a_step_is_never_a_gain_or_loss_beyond_its_rounding(best, candidate, step):
    found = paired.compare(rounded_run(best, step), rounded_run(candidate, step), Prior(), 1.0, MAX_PAIRS,
                            warm_best=False)
    assert decide.decide(found, None).value == "WITHIN_NOISE"
    assert found.interval.low_pct < 0 < found.interval.high_pct  # the interval holds the true gain and no-gain


def test_a_gain_far_beyond_the_rounding_is_still_kept():
    found = paired.compare(rounded_run(100.0, 0.1), rounded_run(110.0, 0.1), Prior(), 1.0, MAX_PAIRS,
                            warm_best=False)
    assert decide.decide(found, None).value == "IMPROVED"
    assert found.rounding == pytest.approx(-math.log(1 - 0.05 / 100) - math.log(1 - 0.05 / 110))
    assert "the test rounds its figure" not in decide.reason(found, decide.Status.IMPROVED, 1.0)


def test_each_pair_reports_the_interval_so_far_and_the_step_prints_it(started):
    rng = random.Random(SEED)
    machine, seen = Machine(rng, gain_pct=0.0, noise_pct=5.0), []
    found = paired.compare(machine.run("best"), machine.run("candidate"), Prior(), 1.0, 4, warm_best=False,
                            on_pair=lambda done, most, interval: seen.append((done, most, interval)))
    assert [(done, most) for done, most, _ in seen] == [(k, 4) for k in range(1, len(found.log_ratios) + 1)]
    assert seen[-1][2] == found.interval
    # kgit step, its stderr not a terminal (an agent's, a log's): one line a pair
    started.set_kernel(METRIC=101.0)
    run = started.kgit("step", "-m", "a change within the noise", "--json")
    assert run.returncode == 0
    pairs = [line for line in run.stderr.splitlines() if ": pair " in line]
    assert pairs and pairs[0].startswith("kgit: step: pair 1 of at most ") and pairs[-1].endswith("] so far")
    assert len(pairs) == len(run.json()["measurement"]["log_ratios"])


# --- kgit's own device time decides on a launch-bound test --------------------------------------

from kgit.model.device_time import DeviceTime  # noqa: E402


class LaunchBound:
    """A collection-style test around a kernel: its own figure (a perf_counter around a loop of
    launches) swings with the host by test_noise_pct, while the kernel's device time moves by
    device_noise_pct only; the candidate's device time is gain_pct faster."""

    def __init__(self, rng, gain_pct, test_noise_pct=30.0, device_noise_pct=0.5, with_device=("best", "candidate")):
        self.rng, self.with_device = rng, with_device
        self.device_us = {"best": 2500.0, "candidate": 2500.0 / (1 + gain_pct / 100)}
        self.test_sigma, self.device_sigma = math.log1p(test_noise_pct / 100), math.log1p(device_noise_pct / 100)

    def run(self, side):
        def once(timing_only):
            gbps = 1000.0 * math.exp(self.rng.gauss(0.0, self.test_sigma))  # mostly Python, the same for both
            us = self.device_us[side] * math.exp(self.rng.gauss(0.0, self.device_sigma))
            device = DeviceTime(us, 250, ("_k",), "cupti", us / 250) if side in self.with_device else None
            return TestResult(True, True, None, "gbps", gbps, None, {"gbps": gbps}, 0.1, "", printed=(gbps,),
                              device=device)
        return once


def launch_bound_decisions(gain_pct, decides_on, n=200, seed=SEED):
    rng, statuses, history = random.Random(seed), [], []
    for _ in range(n):
        test = LaunchBound(rng, gain_pct)
        found = paired.compare(test.run("best"), test.run("candidate"), Prior.from_decisions(history), 1.0,
                                MAX_PAIRS, warm_best=False, decides_on=decides_on)
        statuses.append(decide.decide(found, None).value)
        history.append(found.log_ratios)
    return statuses


def test_on_a_launch_bound_test_the_device_time_keeps_a_five_percent_gain_the_tests_figure_cannot_see():
    by_device = launch_bound_decisions(5.0, paired.DEVICE)
    assert by_device.count("IMPROVED") >= 190, f"seed {SEED}: {by_device.count('IMPROVED')} of 200"
    by_test = launch_bound_decisions(5.0, "test")
    assert by_test.count("IMPROVED") <= 20, f"seed {SEED}: the test's own figure is blind to 5% under 30% noise"


def test_on_a_launch_bound_test_a_no_op_is_never_kept_by_the_device_time():
    statuses = launch_bound_decisions(0.0, paired.DEVICE)
    assert statuses.count("IMPROVED") == 0 and statuses.count("REGRESSED") <= 10, f"seed {SEED}"


def test_the_record_keeps_both_figures_and_says_which_decided():
    test = LaunchBound(random.Random(SEED), 5.0)
    found = paired.compare(test.run("best"), test.run("candidate"), Prior(), 1.0, 4, warm_best=False,
                            decides_on=paired.DEVICE)
    kept = to_json(Record("k", 1, "s", Status.WITHIN_NOISE, measurement=decide.measured(found)))["measurement"]
    assert kept["decided_on"] == paired.DEVICE and len(kept["device_us"]["candidate"]) == len(kept["candidate"])
    # the log-ratios are the device time's (it falls as the kernel gets faster), not the test's figure's
    assert kept["log_ratios"][0] == pytest.approx(math.log(kept["device_us"]["best"][0] / kept["device_us"]["candidate"][0]))
    assert decide.reason(found, decide.decide(found, None), 1.0).split(":")[0].endswith("of device time")


@pytest.mark.parametrize("missing_on", ["best", "candidate"])
def test_a_run_without_device_time_where_it_decides_fails_the_step(missing_on):
    test = LaunchBound(random.Random(SEED), 5.0, with_device=[s for s in ("best", "candidate") if s != missing_on])
    found = paired.compare(test.run("best"), test.run("candidate"), Prior(), 1.0, 4, warm_best=False,
                            decides_on=paired.DEVICE)
    assert found.failure is not None and found.failed_side == missing_on
    assert "recorded no launch" in found.failure.reason


def figures(count):
    def once(timing_only):
        payload = {"correctness": True, "benchmarks": [{"x_tflops": 100.0 + i} for i in range(count)]}
        return from_output(json.dumps(payload) + "\n", None, None, 0.1, "")
    return once


@pytest.mark.parametrize("best, candidate", [(4, 3), (3, 4)])
def test_a_candidate_reporting_another_number_of_figures_is_refused_not_compared(best, candidate):
    found = paired.compare(figures(best), figures(candidate), Prior(), 1.0, 4, warm_best=True)
    assert found.failure is not None and found.failed_side == "candidate"
    assert found.failure.reason == (f"the candidate reports {candidate} figures at benchmarks.x_tflops and the best "
                                    f"{best}: they measure different work, not comparable")
    assert decide.decide(found, None).value == "FAILED"


def test_a_test_whose_figure_changes_name_between_runs_is_not_compared():
    calls = []

    def run(timing_only):
        calls.append(1)
        name = "gbps" if len(calls) % 2 else "tflops"  # alternates, whatever the kernel
        return from_output(json.dumps({"correctness": True, name: 100.0}) + "\n", None, None, 0.1, "")

    found = paired.compare(run, run, Prior(), 1.0, 4, warm_best=True)
    assert found.failure is not None and decide.decide(found, None).value == "FAILED"
    assert found.failure.reason.startswith("the test reported gbps in one run and tflops in another")


def alternating(gain_pct: float, swing_pct: float):
    """(run_best, run_candidate): the best always at 100, the candidate at gain_pct +/- swing_pct in turn,
    pair by pair (its first run, the warm-up, at the gain): after an even number of pairs the estimate is
    gain_pct exactly, and the pairs' spread keeps the interval as wide as swing_pct says."""
    calls = []

    def best(timing_only):
        return TestResult(True, True, None, "gbps", 100.0, 0.0, {"gbps": 100.0}, 0.1, "")

    def candidate(timing_only):
        calls.append(timing_only)
        swing = 0.0 if len(calls) == 1 else math.log1p(swing_pct / 100) * (1 if len(calls) % 2 == 0 else -1)
        value = 100.0 * math.exp(math.log1p(gain_pct / 100) + swing)
        return TestResult(True, True, None, "gbps", value, 0.0, {"gbps": value}, 0.1, "")

    return best, candidate


def tune_compare(gain_pct, swing_pct, extend=True, max_pairs=MAX_PAIRS, on_pair=None):
    return paired.compare(*alternating(gain_pct, swing_pct), Prior(), 1.0, max_pairs, warm_best=False,
                          keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT, extend=extend, on_pair=on_pair)


def test_at_the_bound_an_estimate_just_above_the_floor_takes_more_pairs_and_one_just_below_does_not():
    # at 12 pairs both estimates are exact and the 5% swing keeps both intervals across zero and the floor
    above, below = tune_compare(1.05, 5.0), tune_compare(0.95, 5.0)
    assert below.interval.gain_pct == pytest.approx(0.95) and below.interval.low_pct < 0 < 1 < below.interval.high_pct
    assert (len(below.log_ratios), below.verdict) == (MAX_PAIRS, "noise")
    assert len(above.log_ratios) > MAX_PAIRS
    # without the extension (a hand step's decision) the estimate above the floor stops at the bound too
    assert len(tune_compare(1.05, 5.0, extend=False).log_ratios) == MAX_PAIRS


def test_an_extended_decision_stops_at_twice_max_pairs_and_says_noise_there():
    # a 5% swing never resolves a 1.05% gain: the extension ends at its cap, undecided, as noise
    found = tune_compare(1.05, 5.0)
    assert noise.EXTENDED_PAIRS_FACTOR == 2
    assert (len(found.log_ratios), found.verdict) == (2 * MAX_PAIRS, "noise")
    assert decide.decide(found, None) == Status.WITHIN_NOISE
    seen = []
    tune_compare(1.05, 5.0, on_pair=lambda done, most, found: seen.append((done, most)))
    # the progress line names the bound, then the cap once past it
    assert seen[MAX_PAIRS - 1] == (MAX_PAIRS, MAX_PAIRS) and seen[MAX_PAIRS] == (MAX_PAIRS + 1, 2 * MAX_PAIRS)


def test_an_extension_keeps_a_gain_its_first_max_pairs_left_unresolved():
    # 1.3% +/- 1.5%: the interval still spans zero after 12 pairs, clears it at the 17th
    found, bounded = tune_compare(1.3, 1.5), tune_compare(1.3, 1.5, extend=False)
    assert (len(bounded.log_ratios), bounded.verdict) == (MAX_PAIRS, "noise") and bounded.interval.low_pct < 0
    assert found.verdict == "better" and MAX_PAIRS < len(found.log_ratios) < 2 * MAX_PAIRS
    assert decide.decide(found, None) == Status.IMPROVED


def test_a_decision_that_may_extend_counts_every_look_it_may_take_from_its_first_pair():
    # Bonferroni over the cap's 24 looks, not the bound's 12: each interval of an extendable decision,
    # the first pairs' too, is read at 1 - 5%/24, so the whole decision's error stays at 5%
    found = tune_compare(1.05, 5.0)
    assert found.interval == noise.interval(found.log_ratios, Prior(), looks=2 * MAX_PAIRS)
    # 1.7% +/- 1.5%: kept at the 11th pair read at 1 - 5%/12; read at 1 - 5%/24 the same 11 pairs span
    # zero, and the decision takes two pairs more
    bounded, counted = tune_compare(1.7, 1.5, extend=False), tune_compare(1.7, 1.5)
    assert (bounded.verdict, len(bounded.log_ratios)) == ("better", 11)
    assert noise.interval(bounded.log_ratios, Prior(), looks=2 * MAX_PAIRS).low_pct < 0
    assert (counted.verdict, len(counted.log_ratios)) == ("better", 13)


def test_an_extension_keeps_no_op_at_most_at_the_error_rate():
    # a no-op at 2.5% noise a run: its estimate after 12 pairs lies above the 1% floor often enough that
    # many decisions extend, and the whole decision's false keeps stay within one side of its 5%
    statuses, runs = decisions(0.0, 2.5, n=400, keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT, extend=True)
    _, bounded_runs = decisions(0.0, 2.5, n=400, keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT)
    assert runs > bounded_runs + 0.5, (runs, bounded_runs)  # the extension ran
    assert statuses.count("IMPROVED") <= 10, f"seed {SEED}: {statuses.count('IMPROVED')} of 400"
