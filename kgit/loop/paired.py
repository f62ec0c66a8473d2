"""Paired, interleaved re-measurement: the best and the candidate run alternately until the evidence
says better, worse or noise (kgit.model.noise), or the bound on pairs is reached.

    candidate (warm-up: it compiles, and its correctness gates the rest)
    best      (warm-up, only where this environment has not run the best yet)
    best, candidate   candidate, best   best, candidate ...   one ratio per pair

A first run of a commit fills compile caches and never counts. The order alternates pair by pair,
so a drift of the machine that is linear in time cancels over two pairs. Only the candidate's first
run must check correctness in full: every later run is told it may time only (runner.TIMING_ONLY),
since its commit passed the checks already, and nothing is checked twice without reason.
"""

from __future__ import annotations

import math
from typing import Callable

from kgit.model.noise import Bound, Comparison, Prior, interval, test_sd_of, verdict
from kgit.model.result import TestResult, decimals_of, not_run, rounding_of

Run = Callable[[bool], TestResult]  # run(timing_only)
DEVICE = "device"  # the pairs of kgit's own device time decide, not the test's figure


def compare(run_best: Run, run_candidate: Run, prior: Prior, floor_pct: float, max_pairs: int,
            warm_best: bool, lower_is_better: bool = False, on_pair=None, decides_on: str = "test",
            keep_above_pct: float | None = None, extend: bool = False) -> Comparison:
    """The pairs' log-ratios are of the gain: candidate over best, or best over candidate when the
    figure falls as the kernel gets faster, of the test's figure or (decides_on DEVICE) of the device
    time, which always falls. on_pair(pairs so far, the most it may take now, the interval or None
    while there is none yet) follows each pair. keep_above_pct: what the interval must lie above to
    keep, where not floor_pct (noise.verdict). extend (kgit tune's configurations): an estimate above
    the floor still undecided at max_pairs takes more pairs, up to noise.Bound's cap, every look
    counted (noise.Bound)."""
    first = run_candidate(False)
    found = Comparison(first=first, best=[], candidate=[], log_ratios=[], runs=1, warmups=1, decided_on=decides_on,
                       keep_above_pct=keep_above_pct)
    if not first.passed:
        found.failure, found.failed_side = first, "candidate"
        return found
    seen = {"best": [], "candidate": [first]}  # the passing runs: their digits tell how the test rounds
    if warm_best and not _counted(found, "best", run_best(True), seen, warmup=True):
        return found
    test_sd = test_sd_of(first.spread_pct) if decides_on != DEVICE else 0.0
    bound = Bound.of(max_pairs, extend)
    for pair in range(bound.cap):
        sides = (("best", run_best), ("candidate", run_candidate))
        for side, run in sides if pair % 2 == 0 else reversed(sides):
            if not _counted(found, side, run(True), seen):
                return found
        if decides_on == DEVICE:
            ratio, lower = found.device_candidate[-1] / found.device_best[-1], True
        else:
            ratio, lower = found.candidate[-1] / found.best[-1], lower_is_better
            # this pair's two printed figures' bounds, with the rounding read from every run so far
            decimals = decimals_of(seen["best"] + seen["candidate"])
            pair_rounding = sum(rounding_of(seen[side][-1].printed, decimals) for side in ("best", "candidate"))
            found.rounding = max(found.rounding, pair_rounding)
        found.log_ratios.append(-math.log(ratio) if lower else math.log(ratio))
        found.interval = interval(found.log_ratios, prior, test_sd, looks=bound.looks, rounding=found.rounding)
        found.verdict = verdict(found.interval, floor_pct, keep_above_pct) if found.interval else None
        if on_pair:
            on_pair(pair + 1, max_pairs if pair + 1 <= max_pairs else bound.cap, found.interval)
        if found.verdict:
            return found
        if not bound.goes_on(pair + 1, found.interval, floor_pct):
            break
    found.verdict = "noise"  # the bound on pairs: neither better nor worse beyond the noise
    return found


def _counted(found: Comparison, side: str, result: TestResult, seen: dict, warmup: bool = False) -> bool:
    """Record one run; False (and the failure noted) when it did not pass or cannot be compared."""
    found.runs += 1
    if result.passed:
        result, side = _comparable(found, side, result, seen)
    if not result.passed:
        found.failure, found.failed_side = result, side
        return False
    seen[side].append(result)
    if warmup:
        found.warmups += 1
        return True
    getattr(found, side).append(result.value)
    getattr(found, f"device_{side}").append(result.device.total_us if result.device else None)
    return True


def _comparable(found: Comparison, side: str, result: TestResult, seen: dict) -> tuple[TestResult, str]:
    """The result and its side, or a failure where it cannot be set beside the other side's: another
    number of figures (a shape dropped is no speed-up: the candidate's fault, whichever side showed
    it), or no device time where it decides."""
    if found.decided_on == DEVICE and result.device is None:
        return not_run("kgit's device timing recorded no launch of the kernel file's kernels in this run, and "
                       "device time decides this loop", result.output_tail), side
    first = (seen["candidate"] + seen["best"])[0]
    if result.metric != first.metric:  # a test whose output changes from run to run: no pair to take
        return not_run(f"the test reported {first.metric} in one run and {result.metric} in another: its runs "
                       "cannot be set beside each other", result.output_tail), side
    others = seen["best" if side == "candidate" else "candidate"]
    if others and len(others[0].printed) != len(result.printed):
        count = {side: len(result.printed), ("best" if side == "candidate" else "candidate"): len(others[0].printed)}
        return not_run(f"the candidate reports {count['candidate']} figures at {result.metric} and "
                       f"the best {count['best']}: they measure different work, not comparable",
                       result.output_tail), "candidate"
    return result, side
