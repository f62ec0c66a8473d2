"""The one spread formula and the timer's interpreter path (no timing is asserted)."""

import pytest

from kgit.harness.timing import Timer, spread_pct


@pytest.mark.parametrize("values, expected", [
    ([90.0, 100.0, 110.0], 20.0),       # (110 - 90) / 100
    ([100.0, 100.0, 130.0], 30.0),      # the median, not the mean, is the base
    ([2.0, 4.0, 6.0, 8.0], 120.0),      # (8 - 2) / median 5
    ([42.0], 0.0),
    ([0.0, 0.0, 1.0], 0.0),             # no positive median: no spread
])
def test_spread_is_the_range_in_percent_of_the_median(values, expected):
    assert spread_pct(values) == pytest.approx(expected)


def test_timer_on_the_cpu_calls_once_untimed_then_once_per_repeat():
    calls = []
    times = Timer(repeats=4).times_ms(lambda: calls.append(1), on_gpu=False)
    assert len(times) == 4 and len(calls) == 5 and all(t >= 0 for t in times)


def test_the_warm_up_is_long_first_and_short_after():
    timer = Timer()
    assert (timer.warmup_ms, timer.rewarm_ms, timer.rep_ms, timer.repeats) == (250, 25, 100, 3)
