"""The one spread formula and the timer's interpreter path (no timing is asserted)."""

import itertools

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
    assert (timer.warmup_ms, timer.rewarm_ms, timer.rep_ms, timer.repeats, timer.pause_ms) == (250, 25, 100, 3, 100)


@pytest.fixture
def fake_gpu(monkeypatch):
    """torch.cuda faked on the CPU: each event records its place in the order of operations ("clear",
    "record", "fn", "pause") and reads a clock that fn advances by the next of `durations` (set by the
    test), so the median is known; time.sleep only logs."""
    import torch

    from kgit.harness import timing

    log, clock, durations = [], [0.0], []

    class Event:
        def __init__(self, enable_timing):
            self.at = None

        def record(self):
            self.at = clock[0]
            log.append("record")

        def elapsed_time(self, other):
            return other.at - self.at

    def fn():
        clock[0] += next(durations[0])
        log.append("fn")

    buffer = torch.ones(1000, dtype=torch.int32)
    total = torch.empty((), dtype=torch.int64)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: "fake")
    monkeypatch.setitem(timing._CLEAR_BUFFERS, "fake", (buffer, total))
    monkeypatch.setattr(timing.time, "sleep", lambda s: log.append(("pause", s)))
    real_sum = torch.sum

    def counting_sum(*args, **kwargs):
        log.append("clear")
        return real_sum(*args, **kwargs)

    monkeypatch.setattr(torch, "sum", counting_sum)
    return dict(log=log, fn=fn, durations=durations, buffer=buffer, total=total)


def test_the_gpu_loop_clears_the_l2_by_reading_before_every_timed_call(fake_gpu):
    import torch

    from kgit.harness import timing

    log = fake_gpu["log"]
    fake_gpu["durations"].append(iter([2.0] * 10 + [1.0, 5.0, 3.0, 4.0, 2.0, 9.0, 3.0]))
    # fn's first call compiles; the estimate (5 calls of 2 ms) sizes 8 ms of warm-up at 4 calls and
    # 14 ms of timing at 7 calls
    ms = timing.gpu_median_ms(fake_gpu["fn"], warmup_ms=8, rep_ms=14)
    assert ms == 3.0  # the median of 1, 5, 3, 4, 2, 9, 3
    timed = log[-7 * 4:]
    assert timed == ["clear", "record", "fn", "record"] * 7
    assert log[-7 * 4 - 4 * 2:-7 * 4] == ["clear", "fn"] * 4  # warmed up as it is timed
    assert torch.equal(fake_gpu["buffer"], torch.ones(1000, dtype=torch.int32))  # read, never written
    assert fake_gpu["total"].item() == 1000


def test_the_gpu_idles_once_before_a_functions_figures_after_its_compiling_call(fake_gpu):
    log = fake_gpu["log"]
    fake_gpu["durations"].append(itertools.repeat(1.0))
    times = Timer(repeats=3).times_ms(fake_gpu["fn"], on_gpu=True)
    assert times == [1.0, 1.0, 1.0]
    assert [entry for entry in log if isinstance(entry, tuple)] == [("pause", 0.1)]  # once, 100 ms
    assert log[:3] == ["fn", ("pause", 0.1), "record"]  # compiled, then idle, then the estimate's calls
