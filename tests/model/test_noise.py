"""The statistics of a decision: Student's t, the pooled prior, the interval and the verdict."""

import math

import pytest

from kgit.model import noise


@pytest.mark.parametrize("p, df, expected", [
    (0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 10, 2.228), (0.975, 30, 2.042), (0.995, 2, 9.925),
    (0.999, 5, 5.893), (0.975, 1000, 1.962),
])
def test_t_quantiles_match_the_tables(p, df, expected):
    assert noise.t_quantile(p, df) == pytest.approx(expected, abs=1e-3)


def test_the_prior_pools_each_decisions_own_spread_newest_first_up_to_a_limit():
    assert noise.Prior.from_decisions([]) == noise.Prior(0.0, 0)
    prior = noise.Prior.from_decisions([[0.01, 0.03], [0.5], [0.0, 0.02, 0.04]])
    assert prior.df == 1 + 2 and prior.sum_squares == pytest.approx(2e-4 + 8e-4)  # one pair alone: nothing
    many = noise.Prior.from_decisions([[0.0, 0.1]] * 50)
    assert many.df == noise.PRIOR_DF_LIMIT


def test_the_interval_is_a_t_interval_on_the_mean_log_ratio():
    ratios = [math.log(1.03), math.log(1.01), math.log(1.02)]
    found = noise.interval(ratios, noise.Prior())
    mean = sum(ratios) / 3
    sd = math.sqrt(sum((r - mean) ** 2 for r in ratios) / 2)
    half = noise.t_quantile(0.975, 2) * sd / math.sqrt(3)
    assert found.gain_pct == pytest.approx(math.expm1(mean) * 100)
    assert (found.low_pct, found.high_pct) == (pytest.approx(math.expm1(mean - half) * 100),
                                               pytest.approx(math.expm1(mean + half) * 100))
    assert (found.sd, found.df, found.pairs) == (pytest.approx(sd), 2, 3)


def test_more_looks_widen_the_interval_and_a_prior_narrows_it():
    ratios = [0.02, 0.03]
    once, twelve = noise.interval(ratios, noise.Prior()), noise.interval(ratios, noise.Prior(), looks=12)
    assert twelve.low_pct < once.low_pct and twelve.high_pct > once.high_pct
    known = noise.interval(ratios, noise.Prior(sum_squares=0.0005, df=20))
    assert known.high_pct - known.low_pct < once.high_pct - once.low_pct


def test_one_pair_and_no_prior_is_undecided_and_the_tests_spread_only_widens():
    assert noise.interval([0.05], noise.Prior()) is None
    exact = noise.interval([0.05, 0.05], noise.Prior())
    assert exact.low_pct == exact.high_pct  # no spread at all
    widened = noise.interval([0.05, 0.05], noise.Prior(), test_sd=0.01)
    assert widened.low_pct < exact.low_pct and widened.sd == 0.01
    assert noise.test_sd_of(0.0) == 0.0
    assert noise.test_sd_of(3.38) == pytest.approx(math.sqrt(2) * math.log(1.0338) / 1.69)


def interval(low, high):
    return noise.Interval(gain_pct=(low + high) / 2, low_pct=low, high_pct=high, sd=0.0, df=1, pairs=1)


@pytest.mark.parametrize("low, high, expected", [
    (1.01, 5.0, "better"), (1.0, 5.0, None),        # above the floor: strictly
    (-5.0, -0.01, "worse"), (-5.0, 0.0, None),      # below zero: strictly
    (-1.01, -0.01, "worse"), (-1.0, -0.01, "noise"),  # a loss within the floor is noise, not a loss
    (-1.0, 1.0, "noise"), (-1.01, 1.0, None), (-1.0, 1.01, None),  # within the floor on both sides
])
def test_the_verdict_at_its_boundaries(low, high, expected):
    assert noise.verdict(interval(low, high), 1.0) == expected


@pytest.mark.parametrize("low, high, expected", [
    (0.01, 0.9, "better"), (0.0, 0.9, "noise"),    # above zero, strictly: kept before it reads as noise
    (0.01, 5.0, "better"), (0.0, 5.0, None),       # a gain the floor would still wait on
    (-0.01, 1.0, "noise"), (-0.01, 1.01, None),    # the floor still ends a comparison as noise
    (-5.0, -0.01, "worse"), (-1.0, -0.01, "noise"),  # a loss is judged as before
])
def test_a_tune_keeps_above_zero_and_ends_within_the_floor_as_noise(low, high, expected):
    # kgit tune's level (kgit.model.decide.TUNE_KEEP_ABOVE_PCT) against a 1% floor
    assert noise.verdict(interval(low, high), 1.0, keep_above_pct=0.0) == expected


def test_a_keep_level_left_out_is_the_floor():
    assert noise.verdict(interval(0.5, 0.9), 1.0) == noise.verdict(interval(0.5, 0.9), 1.0, None) == "noise"
    assert noise.verdict(interval(0.5, 0.9), 1.0, keep_above_pct=0.4) == "better"


@pytest.mark.parametrize("x, df1, df2, expected", [(3.33, 5, 10, 0.95), (5.64, 5, 10, 0.99), (0.211, 5, 10, 0.05),
                                                   (1.0, 20, 20, 0.5), (0.0, 3, 3, 0.0)])
def test_f_cdf_matches_the_tables(x, df1, df2, expected):
    assert noise.f_cdf(x, df1, df2) == pytest.approx(expected, abs=2e-3)


def test_a_prior_whose_noise_the_decision_contradicts_is_set_aside():
    noisy_past = noise.Prior(sum_squares=22 * 0.15 ** 2, df=22)  # pairs taken while another job ran
    quiet = [0.023, 0.0225, 0.0235]  # this decision's pairs: sd 0.05%
    assert noise.agrees(noisy_past, 2 * 0.0005 ** 2, 2) is False
    found = noise.interval(quiet, noisy_past, looks=12)
    assert found.df == 2 and found.low_pct > 1.0  # decided on its own pairs
    # pairs too few to judge their own noise take the prior as it is, and an agreeing prior is pooled
    assert noise.agrees(noisy_past, 0.0, 1) is True
    assert noise.interval([0.02, 0.03, 0.025], noise.Prior(22 * 0.005 ** 2, 22)).df == 24
    # the other way round too: a noisy decision does not borrow a quiet past's narrow interval
    assert noise.interval([0.1, -0.2, 0.15], noise.Prior(22 * 0.002 ** 2, 22)).df == 2


def test_the_smallest_keepable_gain_is_the_floor_plus_the_intervals_half_width_at_max_pairs():
    half = noise.t_quantile(1 - 0.05 / 12 / 2, 11 + 3) * 0.02 / math.sqrt(12) + 0.001
    assert noise.smallest_keepable_pct(0.02, 12, 1.0, rounding=0.001, prior_df=3) == pytest.approx(
        (math.exp(math.log(1.01) + half) - 1) * 100)
    # no noise: the floor alone; one pair and no prior: the noise is unknown, nothing can be kept
    assert noise.smallest_keepable_pct(0.0, 12, 1.0) == pytest.approx(1.0)
    assert noise.smallest_keepable_pct(0.01, 1, 1.0) == math.inf


def test_a_prior_from_repeated_runs_is_of_a_pair_twice_one_runs_variance():
    runs = [100.0, 102.0, 99.0, 101.0]
    logs = [math.log(v) for v in runs]
    mean = sum(logs) / 4
    prior = noise.Prior.from_runs(runs)
    assert prior.df == 3 and prior.sum_squares == pytest.approx(2 * sum((x - mean) ** 2 for x in logs))
    assert noise.Prior.from_runs([100.0]) == noise.Prior() and noise.Prior.from_runs([1.0, None]) == noise.Prior()
    assert noise.log_sd([1.0, math.e]) == pytest.approx(math.sqrt(0.5))
