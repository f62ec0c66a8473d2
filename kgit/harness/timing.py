"""The one timer and the one spread.

On a GPU each figure is one triton.testing.do_bench median (return_mode="median": its default, the
mean, is skewed by one slow outlier; it clears the L2 before every launch, so nothing is read from
cache). A Timer takes `repeats` such figures of the same function, so that every figure kgit sees
comes with its spread.

    spread_pct = 100 * (max - min) / median      over the repeats' figures

(the range of the repeated figures in percent of their median: with 3 repeats, how far apart two
measurements of an unchanged kernel land; the keep/revert rule compares a gain against it). The
figures are the kernel's metric (GB/s or TFLOP/s) per repeat; a headline over several entries uses
the geometric mean of the entries per repeat.

Warm-up: the first do_bench of each function warms up for 250 ms, the next ones for 25 ms. With 25 ms
only, the first small shapes of a process read low and noisy while the GPU's clocks ramp up (H200,
1024^3 GEMM: 61-84 TFLOP/s at 36-80% spread; with 250 ms, 166 at 4%: experiments/tune/README.md);
after the first, the function is compiled and the clocks are up.

In the interpreter (or without a GPU) a figure is one perf_counter call after one untimed call: a CPU
figure, which the JSON marks "cpu_timing": true and kgit never compares with a GPU.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass


def spread_pct(values) -> float:
    """100 * (max - min) / median of `values`; 0 for one value or a median that is not positive."""
    median = statistics.median(values)
    return 0.0 if median <= 0 else 100.0 * (max(values) - min(values)) / median


@dataclass(frozen=True)
class Timer:
    repeats: int = 3
    warmup_ms: int = 250  # the first do_bench of a function
    rewarm_ms: int = 25  # the ones after it
    rep_ms: int = 100

    def times_ms(self, fn, on_gpu: bool) -> list[float]:
        """`repeats` times of fn() in milliseconds: do_bench medians on a GPU, perf_counter calls on the CPU."""
        if on_gpu:
            from triton.testing import do_bench

            return [do_bench(fn, warmup=self.warmup_ms if i == 0 else self.rewarm_ms, rep=self.rep_ms,
                             return_mode="median") for i in range(self.repeats)]
        fn()  # compiles (traces) once
        times = []
        for _ in range(self.repeats):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
        return times
