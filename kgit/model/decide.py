"""The loop's decisions, in one place: keep or revert a step, which record is the best, when to stop.

Pure functions of records, settings and a test result: no git, no files, no processes.
"""

from __future__ import annotations

import datetime

from kgit import gpu
from kgit.config import KernelConfig
from kgit.model.record import Record, Status, StopReason
from kgit.model.result import TestResult


def decide(result: TestResult, best: Record, target: float | None, min_gain_pct: float) -> Status:
    """The status of a step, from its test result and the best record so far.

    A gain counts only when it is larger than the floor and than the measured spread of both runs:
    a difference inside the noise is not evidence of an improvement.
    """
    if not result.passed:
        return Status.FAILED
    if target is not None and result.value >= target:
        return Status.TARGET_MET
    gain = delta_pct(result.value, best.value)
    if gain > max(min_gain_pct, result.spread_pct, best.spread_pct or 0.0):
        return Status.IMPROVED
    return Status.WITHIN_NOISE if gain > 0 else Status.REGRESSED


def delta_pct(value: float, reference: float) -> float:
    return (value - reference) / reference * 100.0


def best_record(records: list[Record]) -> Record | None:
    """The best kept record: the kept one with the highest value (the earliest of equals)."""
    return max((r for r in records if r.kept), key=lambda r: r.value, default=None)


def last_iteration(records: list[Record]) -> int:
    return max((r.iteration for r in records), default=-1)


def target_value(cfg: KernelConfig, best: Record | None) -> float | None:
    """The target in the metric's unit: target_value, or target_pct_of_peak of the best record's peak."""
    if cfg.target_value is not None:
        return float(cfg.target_value)
    if cfg.target_pct_of_peak is not None and best is not None and best.peak:
        return cfg.target_pct_of_peak * best.peak
    return None


def stop_reason(records: list[Record], cfg: KernelConfig) -> StopReason | None:
    """Why the loop for this kernel is over, judged against the current settings, or None."""
    best = best_record(records)
    target = target_value(cfg, best)
    if best is not None and target is not None and best.value >= target:
        return StopReason.TARGET_MET
    if records and last_iteration(records) >= cfg.max_iterations:
        return StopReason.MAX_ITERATIONS
    return None


def peak_of(result: TestResult) -> float | None:
    """The GPU's peak for the result's metric: from the test's own pct_of_peak, else kgit's table of
    datasheet peaks by the GPU's name (tests written for other collections report no pct_of_peak).

    CPU (interpreter) timings have no peak: comparing them with a GPU's would be meaningless.
    """
    payload = result.payload or {}
    if payload.get("cpu_timing") or not result.passed:
        return None
    pct = payload.get("pct_of_peak")
    if isinstance(pct, (int, float)) and not isinstance(pct, bool) and pct > 0:
        return result.value * 100.0 / pct
    return gpu.peak_for(payload.get("gpu"), result.metric)


def new_record(cfg: KernelConfig, iteration: int, action: str, tier: int | None, result: TestResult,
               status: Status, best: Record | None, started: str, base: str | None) -> Record:
    """The record of a decided iteration."""
    payload = result.payload or {}
    peak = peak_of(result)
    gpu_name = payload.get("gpu")
    stop = None
    if status == Status.TARGET_MET:
        stop = StopReason.TARGET_MET
    elif iteration >= cfg.max_iterations:
        stop = StopReason.MAX_ITERATIONS
    record = Record(
        kernel=cfg.name,
        iteration=iteration,
        action=action,
        status=status,
        started=started,
        tier=tier,
        gpu=gpu_name if isinstance(gpu_name, str) else None,
        cpu_timing=bool(payload.get("cpu_timing")),
        correctness=result.correctness if result.ok else None,
        metric=result.metric,
        value=result.value,
        spread_pct=result.spread_pct if result.passed else None,
        peak=peak,
        pct_of_peak=result.value * 100.0 / peak if peak else None,
        best_before=best.value if best else None,
        delta_pct=delta_pct(result.value, best.value) if best and result.passed else None,
        reason=result.reason,
        stop_reason=stop,
        test=result.payload,
        output_tail=None if result.passed else result.output_tail,
        base=base,
        duration_s=round(result.duration_s, 3),
    )
    return record.replace(target=target_value(cfg, record))


def now() -> str:
    # Microseconds: with kernel, iteration and GPU the start time names a run (two clones, one second).
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")
