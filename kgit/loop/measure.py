"""Paired, interleaved re-measurement: the best and the candidate run alternately until the evidence
says better, worse or noise (kgit.model.noise), or the bound on pairs is reached.

    candidate (warm-up: it compiles, and its correctness gates the rest)
    best      (warm-up, only where this environment has not run the best yet)
    best, candidate   candidate, best   best, candidate ...   one ratio per pair

A first run of a commit fills compile caches and never counts. The order alternates pair by pair,
so a drift of the machine that is linear in time cancels over two pairs. Only the candidate's first
run must check correctness in full: every later run is told it may time only (testing.TIMING_ONLY),
since its commit passed the checks already, and nothing is checked twice without reason.
"""

from __future__ import annotations

import math
from typing import Callable

from kgit.model.noise import Comparison, Prior, interval, test_sd_of, verdict
from kgit.model.result import TestResult

Run = Callable[[bool], TestResult]  # run(timing_only)


def compare(run_best: Run, run_candidate: Run, prior: Prior, floor_pct: float, max_pairs: int,
            warm_best: bool, lower_is_better: bool = False, on_pair=None) -> Comparison:
    """The pairs' log-ratios are of the gain: candidate over best, or best over candidate when the
    figure falls as the kernel gets faster. on_pair(pairs so far, max_pairs, the interval or None while
    there is none yet) follows each pair."""
    first = run_candidate(False)
    found = Comparison(first=first, best=[], candidate=[], log_ratios=[], runs=1, warmups=1)
    if not first.passed:
        found.failure, found.failed_side = first, "candidate"
        return found
    if warm_best and not _counted(found, "best", run_best(True), warmup=True):
        return found
    test_sd = test_sd_of(first.spread_pct)
    for pair in range(max_pairs):
        sides = (("best", run_best), ("candidate", run_candidate))
        rounding = 0.0  # this pair's: its two printed figures' bounds
        for side, run in sides if pair % 2 == 0 else reversed(sides):
            result = run(True)
            if not _counted(found, side, result):
                return found
            rounding += result.rounding
        ratio = found.candidate[-1] / found.best[-1]
        found.log_ratios.append(-math.log(ratio) if lower_is_better else math.log(ratio))
        found.rounding = max(found.rounding, rounding)
        found.interval = interval(found.log_ratios, prior, test_sd, looks=max_pairs, rounding=found.rounding)
        found.verdict = verdict(found.interval, floor_pct) if found.interval else None
        if on_pair:
            on_pair(pair + 1, max_pairs, found.interval)
        if found.verdict:
            return found
    found.verdict = "noise"  # the bound on pairs: neither better nor worse beyond the noise
    return found


def _counted(found: Comparison, side: str, result: TestResult, warmup: bool = False) -> bool:
    """Record one run; False (and the failure noted) when it did not pass."""
    found.runs += 1
    if not result.passed:
        found.failure, found.failed_side = result, side
        return False
    if warmup:
        found.warmups += 1
    else:
        getattr(found, side).append(result.value)
    return True
