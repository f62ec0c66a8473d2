"""The one timer and the one spread.

On a GPU each figure is the median over calls of fn (a mean is skewed by one slow outlier), each call
timed by events right after the L2 has been cleared, so nothing is read from cache: the loop of
triton.testing.do_bench, with one change. do_bench clears the L2 by zeroing a 256 MB buffer, which
leaves the L2 full of dirty lines that the timed kernel then writes back to DRAM. Measured on the H200
(experiments/timing-h200/l2-clear/), that costs a fixed 3 us a call
on copies and 6-8 us on read-only kernels: 11.5% of a 64 us cross-entropy, 0.6% of the 1 GiB copy it
is compared with. Here the L2 is cleared by reading the 256 MB buffer, which leaves it clean. A Timer
takes `repeats` such figures of the same function, so that every figure kgit sees comes with its
spread.

    spread_pct = 100 * (max - min) / median      over the repeats' figures

(the range of the repeated figures in percent of their median: with 3 repeats, how far apart two
measurements of an unchanged kernel land; the keep/revert rule compares a gain against it). The
figures are the kernel's metric (GB/s or TFLOP/s) per repeat; a headline over several entries uses
the geometric mean of the entries per repeat.

Warm-up: the first figure of each function warms up for 250 ms, the next ones for 25 ms. With 25 ms
only, the first small shapes of a process read low and noisy while the GPU's clocks ramp up (H200,
1024^3 GEMM: 61-84 TFLOP/s at 36-80% spread; with 250 ms, 166 at 4%: experiments/tune/README.md);
after the first, the function is compiled and the clocks are up. The warm-up calls follow a clear of
the L2 each, as the timed ones do: warmed up on back-to-back calls, the first figure of 6 of the 14
GEMM shapes read 4-20% slower than the two after it; warmed up as it is timed, none did, and their
spreads fell (8192x1024x8192 bf16: 16.9% -> 1.9%; experiments/timing-h200/warm-up/).

Pause: before a function's first figure the GPU idles for 100 ms, so that every function is timed at
the same point of the GPU's power management. On the H200, from the start of a heavy load (a fused MoE,
a dense 8192^3 GEMM at the 700 W limit), the SM clock falls from 1980 MHz to ~1520 in 200 ms, holds
there, then dips to 1280-1440 MHz from 0.8 to 1.1 s, when calls run 15-25% slower, and recovers to
~1500-1560; after an idle gap of 0.1, 0.3, 1 or 3 s the same dip comes 0.8 s into the load again
(experiments/timing-h200/power-gaps/). A function timed straight after other GPU work
(its checks, another function's figures) could have its first repeat fall in the dip: the MoE's read
6.08 ms against 4.88-5.01 (spread 18-23%). After the pause the three figures take about 0.7 s, in the
settled stretch before the dip, at the clock the GPU sustains after it.

In the interpreter (or without a GPU) a figure is one perf_counter call after one untimed call: a CPU
figure, which the JSON marks "cpu_timing": true and kgit never compares with a GPU.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

L2_CLEAR_BYTES = 256 * 1024 * 1024  # five times the H200's L2, as do_bench's buffer
_CLEAR_BUFFERS = {}


def spread_pct(values) -> float:
    """100 * (max - min) / median of `values`; 0 for one value or a median that is not positive."""
    median = statistics.median(values)
    return 0.0 if median <= 0 else 100.0 * (max(values) - min(values)) / median


@dataclass(frozen=True)
class Timer:
    repeats: int = 3
    warmup_ms: int = 250  # the first figure of a function
    rewarm_ms: int = 25  # the ones after it
    rep_ms: int = 100
    pause_ms: int = 100  # the GPU idles before a function's first figure

    def times_ms(self, fn, on_gpu: bool, before=None) -> list[float]:
        """`repeats` times of fn() in milliseconds: medians over calls on a GPU, perf_counter calls on the CPU.
        before(), if given, runs before every call of fn, outside the time (the outputs' poison)."""
        before = before or (lambda: None)
        if on_gpu:
            clear_l2 = _l2_clear()

            def clear():
                before()  # first: the L2 clear then evicts what it wrote
                clear_l2()

            return [gpu_median_ms(fn, self.warmup_ms if i == 0 else self.rewarm_ms, self.rep_ms, clear,
                                  pause_ms=self.pause_ms if i == 0 else 0)
                    for i in range(self.repeats)]
        before()
        fn()  # compiles (traces) once
        times = []
        for _ in range(self.repeats):
            before()
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
        return times


def gpu_median_ms(fn, warmup_ms: float, rep_ms: float, clear=None, pause_ms: float = 0) -> float:
    """The median time of fn() in ms over about rep_ms of calls, each after clear() (default: a clear
    of the L2 that leaves no dirty line), the warm-up's calls too; do_bench's loop otherwise: an
    estimate from 5 calls sizes the warm-up and the number of timed calls. The GPU idles pause_ms
    after fn's first call (which compiles it), before the load that is timed."""
    import torch

    clear = clear or _l2_clear()
    fn()
    torch.cuda.synchronize()
    if pause_ms:
        time.sleep(pause_ms / 1e3)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        clear()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate_ms = start.elapsed_time(end) / 5
    for _ in range(max(1, int(warmup_ms / estimate_ms))):
        clear()
        fn()
    calls = max(1, int(rep_ms / estimate_ms))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    for i in range(calls):
        clear()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def _l2_clear():
    """A function that reads L2_CLEAR_BYTES of the current GPU's memory into a sum: every line it leaves
    in the L2 is clean."""
    import torch

    device = torch.cuda.current_device()
    if device not in _CLEAR_BUFFERS:
        _CLEAR_BUFFERS[device] = (torch.empty(L2_CLEAR_BYTES // 4, dtype=torch.int32, device="cuda"),
                                  torch.empty((), dtype=torch.int64, device="cuda"))
    buffer, total = _CLEAR_BUFFERS[device]
    return lambda: torch.sum(buffer, dim=0, out=total)
