"""An entry's figures are of the median of its repeats, not their mean: one slow repeat (another job on
the GPU, a clock dip) must not move the figure. The timer is replaced by one that runs the calls as the
real one does and reports chosen times, so each figure is known exactly."""

import pytest

from kgit.harness import measure
from kgit.harness.timing import Timer

KERNEL_MS = [1.0, 1.0, 7.0]  # median 1, mean 3
TORCH_MS = [2.0, 11.0, 2.0]  # median 2, mean 5
OTHER_MS = [4.0, 4.0, 4.5, 40.0]  # median 4.25, mean 13.125


class ChosenTimes(Timer):
    """Runs fn as the CPU timer does (before() first, one untimed call), then reports the next chosen times."""

    def __init__(self, *times):
        super().__init__(repeats=3)
        object.__setattr__(self, "queue", list(times))

    def times_ms(self, fn, on_gpu, before=None):
        before = before or (lambda: None)
        chosen = self.queue.pop(0)
        for _ in range(len(chosen) + 1):
            before()
            fn()
        return list(chosen)


def test_an_entrys_figures_are_of_the_median_of_its_repeats(softmax_spec, softmax_t):
    spec = softmax_spec(lambda inputs, outputs: softmax_t.softmax(inputs[0], out=outputs[0]),
                        others={"eager": lambda inputs: None})
    entry = measure.time_entry(spec, (6, 40), "fp32", "time", ChosenTimes(KERNEL_MS, TORCH_MS, OTHER_MS), True, None)
    assert "error" not in entry, entry.get("error")
    nbytes = entry["bytes"]
    assert entry["ms_repeats"] == KERNEL_MS
    assert entry["latency_us"] == pytest.approx(1000.0)
    assert entry["gbps"] == pytest.approx(nbytes / 1e-3 / 1e9)
    assert entry["torch_latency_us"] == pytest.approx(2000.0)
    assert entry["torch_gbps"] == pytest.approx(nbytes / 2e-3 / 1e9)
    assert entry["speedup"] == pytest.approx(2.0)  # median over median: the means would say 5/3
    assert entry["eager_latency_us"] == pytest.approx(4250.0)  # an even count: the middle two's mean
    # the spread is the range of the repeats' rates over their median rate
    rates = [nbytes / (t * 1e-3) / 1e9 for t in KERNEL_MS]
    assert entry["spread_pct"] == pytest.approx(100.0 * (max(rates) - min(rates)) / (nbytes / 1e-3 / 1e9))


def test_a_compute_figure_is_of_the_median_too():
    fig = measure._figures("", [3.0, 2.0, 100.0], nbytes=4_000_000, flops=6e9)
    assert fig["latency_us"] == pytest.approx(3000.0)
    assert fig["tflops"] == pytest.approx(6e9 / 3e-3 / 1e12)
    assert fig["gbps"] == pytest.approx(4_000_000 / 3e-3 / 1e9)
    # the spread's base is the median rate (gbps at 3 ms), not the mean of the rates
    assert fig["spread_pct"] == pytest.approx(100.0 * (2.0 - 0.04) / 1.3333333333333333, rel=1e-9)


def test_a_decisions_recorded_figures_are_the_medians_of_its_paired_runs():
    """kgit's side of the same rule: the value a step records for the candidate (and the best's) is the
    median of its counted runs."""
    from kgit.model.noise import Comparison

    found = Comparison(first=None, best=[100.0, 100.0, 160.0], candidate=[110.0, 50.0, 112.0, 111.0],
                       log_ratios=[])
    assert found.best_value() == 100.0  # mean 120
    assert found.candidate_value() == 110.5  # mean 95.75
    assert Comparison(first=None, best=[], candidate=[], log_ratios=[]).candidate_value() is None
