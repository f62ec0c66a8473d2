"""The noise rule's prior, pinned in its pooling order: the newest decisions first, up to PRIOR_DF_LIMIT
degrees of freedom (the decision that crosses it counted whole), and the start's runs only while the
decisions have fewer. A prior pooled oldest first, or the start's runs always added, gives another sum
of squares: each test here fails on that mutant."""

import pytest

from kgit.model import decide, noise
from kgit.model.record import Environment, Measurement, Record, Spread, Status

ENV = Environment(host="h", device="nvidia")
START_RUNS = [1000.0, 1100.0, 900.0, 1050.0]  # far noisier than any decision below: its entry shows


def ss_of(ratios):
    mean = sum(ratios) / len(ratios)
    return sum((r - mean) ** 2 for r in ratios)


def decisions(count):
    """count decisions of one degree of freedom each, oldest first, each with its own spread."""
    return [[0.0, 0.001 * (i + 1)] for i in range(count)]


def records(count):
    start = Record("k", 0, "baseline", Status.BASELINE, value=1000.0, environment=ENV,
                   measurement=Measurement(spread=Spread(4, START_RUNS, {}, "test", 12, None)))
    steps = [Record("k", i + 1, f"s{i + 1}", Status.WITHIN_NOISE, environment=ENV,
                    measurement=Measurement(log_ratios=ratios)) for i, ratios in enumerate(decisions(count))]
    return [start, *steps]


def test_the_prior_keeps_the_newest_decisions_when_there_are_more_than_the_limit():
    lists = decisions(noise.PRIOR_DF_LIMIT + 15)
    prior = noise.Prior.from_decisions(lists)
    newest = lists[-noise.PRIOR_DF_LIMIT:]
    assert prior.df == noise.PRIOR_DF_LIMIT
    assert prior.sum_squares == pytest.approx(sum(ss_of(r) for r in newest), rel=1e-12)
    # the oldest 15 would give a smaller sum: pooled oldest first the prior would be quieter than now
    assert prior.sum_squares > sum(ss_of(r) for r in lists[:noise.PRIOR_DF_LIMIT]) * 1.5


def test_the_decision_that_crosses_the_limit_counts_whole_and_the_next_not_at_all():
    # 7 decisions of 7 df: the 5th newest brings the df from 28 to 35; the 6th and 7th stay out
    lists = [[0.0, 0.01 * i, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0] for i in range(1, 8)]
    prior = noise.Prior.from_decisions(lists)
    assert prior.df == 35
    assert prior.sum_squares == pytest.approx(sum(ss_of(r) for r in lists[2:]), rel=1e-12)


def test_a_one_pair_decision_adds_nothing_and_does_not_stop_the_pooling():
    lists = [[0.0, 0.02], [0.5], [0.0, 0.04]]
    assert noise.Prior.from_decisions(lists) == noise.Prior(pytest.approx(ss_of([0.0, 0.02]) + ss_of([0.0, 0.04])), 2)


def test_the_starts_runs_join_the_prior_only_while_the_decisions_are_under_the_limit():
    few = decide.noise_prior(records(5), ENV)
    expected = noise.Prior.from_decisions(decisions(5)).plus(noise.Prior.from_runs(START_RUNS))
    assert few.df == 5 + len(START_RUNS) - 1
    assert few.sum_squares == pytest.approx(expected.sum_squares, rel=1e-12)
    # 29 df of decisions: still under the limit, the start's runs come in
    under = decide.noise_prior(records(noise.PRIOR_DF_LIMIT - 1), ENV)
    assert under.df == noise.PRIOR_DF_LIMIT - 1 + len(START_RUNS) - 1
    # exactly the limit: the decisions alone, the newest, and the start's noisy runs left out
    at = decide.noise_prior(records(noise.PRIOR_DF_LIMIT + 10), ENV)
    newest = decisions(noise.PRIOR_DF_LIMIT + 10)[-noise.PRIOR_DF_LIMIT:]
    assert at.df == noise.PRIOR_DF_LIMIT
    assert at.sum_squares == pytest.approx(sum(ss_of(r) for r in newest), rel=1e-12)


def test_the_prior_decides_the_interval_the_step_sees():
    """The pooled prior is what the interval is computed with: the newest decisions' quiet noise makes a
    small consistent gain 'better' that the old noisy decisions would have left undecided."""
    noisy_old = [[0.0, 0.2]] * noise.PRIOR_DF_LIMIT
    quiet_new = [[0.0, 0.002]] * noise.PRIOR_DF_LIMIT
    prior = noise.Prior.from_decisions(noisy_old + quiet_new)
    gain = [0.02, 0.021]  # two pairs: too few to test the prior's agreement, it is taken as it is
    assert noise.verdict(noise.interval(gain, prior, looks=12), 1.0) == "better"
    assert noise.verdict(noise.interval(gain, noise.Prior.from_decisions(quiet_new + noisy_old), looks=12),
                         1.0) is None
