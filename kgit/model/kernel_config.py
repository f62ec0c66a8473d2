"""A kernel's loop settings, as kgit.yaml and the command line give them (kgit.config reads and checks
them): plain data that the loop's decisions read (kgit.model.decide)."""

from __future__ import annotations

from dataclasses import dataclass

from kgit.model.result import Reading


@dataclass(frozen=True)
class KernelConfig:
    name: str
    kernel_path: str  # relative to the repository root, with forward slashes
    test_path: str
    target_metric: str | None = None  # None: whichever of gbps / tflops the test reports
    metric: str | None = None  # a dotted path to the figure in the test's JSON; None: found by kgit
    better: str = "higher"  # "lower" for a figure that falls as the kernel gets faster (a latency)
    target_value: float | None = None
    target_pct_of_peak: float | None = None  # a fraction: 0.9 is 90% of the GPU's peak
    max_iterations: int = 5
    gpu: str = "auto"
    test_timeout_s: float = 600.0
    # A kept change must gain more than this, and more than the measured spread of both runs.
    min_gain_pct: float = 1.0
    # A step runs the best and the candidate alternately, a pair at a time, until the interval of the
    # gain decides or this many pairs were run (kgit.loop.paired). 12 is the fewest with which a true
    # +3% under 1% noise per run is kept in 95% of simulated decisions (tests/loop/test_paired.py).
    max_pairs: int = 12
    test_args: tuple[str, ...] = ()  # passed to the test after --json, e.g. ["--quick"]
    # A command that runs the test instead of 'python <test_path> --json' (pytest, make, a script
    # without --json), by sh in the checkout's root; test_path still names the file that judges.
    test_command: str | None = None
    verdict: str | dict | None = None  # None: the JSON's correctness; "exit_status"; {"key": K, "pass": V}
    metric_pattern: str | None = None  # a regular expression whose first group is the figure, in plain text
    # Which figure's pairs decide a step: "auto" (the steadier of the test's and kgit's device time, as
    # measured by 'kgit start'), "test" or "device".
    decide_on: str = "auto"

    @property
    def lower_is_better(self) -> bool:
        return self.better == "lower"

    @property
    def reading(self) -> Reading:
        """How to read the test's output."""
        return Reading(self.figure, self.verdict, self.metric_pattern)

    @property
    def figure(self) -> str | None:
        """Where the test's figure is: the metric's path, else the target's metric, else kgit finds it."""
        return self.metric or self.target_metric

    def as_dict(self) -> dict:
        return {**self.__dict__, "test_args": list(self.test_args)}

    @staticmethod
    def from_dict(data: dict) -> KernelConfig:
        return KernelConfig(**{**data, "test_args": tuple(data.get("test_args", ()))})
