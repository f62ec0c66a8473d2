"""The loop's decisions, in one place: keep or revert a step, which record is the best, when to stop.

Pure functions of records, settings and a test result: no git, no files, no processes.
"""

from __future__ import annotations

import datetime
import math

from kgit.errors import KgitError
from kgit.model import coverage, peaks
from kgit.model.kernel_config import KernelConfig
from kgit.model.noise import PRIOR_DF_LIMIT, Comparison, Prior, log_sd, never_measured, smallest_keepable_pct
from kgit.model.record import Environment, Measurement, Record, Spread, Status, StopReason, same_environment
from kgit.model.device_time import is_positive_number
from kgit.model.result import DEVICE_METRIC, TestResult, decimals_of, not_run, reported_latency_us, rounding_of, unit_of


# What the whole interval of a tune's configuration must lie above to keep it, in %: zero, not
# min_gain_pct. The floor asks a hand step's change to pay for itself (new code, a lesson for the next
# step); a configuration is no more code than the best's, so any gain its pairs resolve at the run's own
# noise is worth keeping. Traced on the measured spaces (experiments/tune/leave-one-out/, 30 starts of
# each), 27 of the 36 starts that missed 99% of the best within 16 iterations had measured such a
# configuration and not kept it: true gains of 0.5-2.1% that the 1% floor, or an interval that had to
# clear it, did not keep.
TUNE_KEEP_ABOVE_PCT = 0.0

# Whether a tune's comparison whose estimate lies above the floor, undecided at max_pairs, takes more
# pairs (kgit.model.noise.Bound: up to twice max_pairs, every look counted). A tune never measures a
# configuration again (issue 53), so what its pairs leave unresolved is lost for good: gemm's 1.9-2.1%
# gains (experiments/tune/leave-one-out/, the fifth pass). A hand step does not extend (kgit step): the
# person can step the same change again or keep it anyway, and kgit start's smallest keepable change,
# which it tells the person, is that of max_pairs pairs read at max_pairs looks.
TUNE_EXTENDS = True


def decide(comparison: Comparison, target: float | None, lower_is_better: bool = False,
           test_changed: bool = False) -> Status:
    """The status of a step, from its paired comparison with the best (kgit.model.noise).

    IMPROVED only when the whole 95% interval of the gain lies above the floor (min_gain_pct), or above
    the comparison's keep_above_pct where it has one (a tune's configuration: TUNE_KEEP_ABOVE_PCT);
    REGRESSED when it lies below zero; anything else is WITHIN_NOISE, a loss included. One exception:
    a best that gives wrong results under a test changed since it was kept (test_changed) is no longer
    a best, and a candidate that passes that test replaces it (IMPROVED), however fast.
    """
    if comparison.failure is not None:
        return Status.IMPROVED if best_fails_the_new_test(comparison, test_changed) else Status.FAILED
    if target is not None and reaches(comparison.candidate_value(), target, lower_is_better):
        return Status.TARGET_MET
    return {"better": Status.IMPROVED, "worse": Status.REGRESSED}.get(comparison.verdict, Status.WITHIN_NOISE)


def best_fails_the_new_test(comparison: Comparison, test_changed: bool) -> bool:
    """The best gave a wrong result under the test as committed now, which changed since the best was
    kept, and the candidate passed it. A best that crashed or timed out may have met a bad moment:
    that step fails, as any run that fails does."""
    failure = comparison.failure
    return (test_changed and comparison.failed_side == "best" and comparison.first.passed
            and failure.ok and not failure.correctness)


def reason(comparison: Comparison, status: Status, floor_pct: float) -> str | None:
    """Why the decision is what it is, in one line: the interval against the floor, or the failure."""
    if comparison.failure is not None:
        why = comparison.failure.reason or "failed"
        if comparison.failed_side == "candidate":
            return why
        if status == Status.IMPROVED:
            return (f"the test changed since the best, which gives a wrong result under it now ({why}); "
                    f"this kernel passes it and replaces the best, however fast")
        return f"the best failed when measured again: {why}"
    found = comparison.interval
    if found is None:
        return None
    gain = f"{found.gain_pct:+.1f}% [{found.low_pct:+.1f}, {found.high_pct:+.1f}] over {found.pairs} pair"
    gain += "s" if found.pairs != 1 else ""
    if comparison.decided_on == "device":
        gain += " of device time"
    if comparison.rounding >= 0.001:  # below 0.1% the test's rounding is not worth a word
        gain += f" (widened {math.expm1(comparison.rounding) * 100:.1f}% each way: the test rounds its figure)"
    if status == Status.TARGET_MET:
        return f"the target is met; gain {gain}"
    keep = comparison.keep_above_pct
    if keep is None or keep == floor_pct:  # a step's: the floor decided
        above, neither = f"above the {floor_pct:g}% floor", f"neither above the {floor_pct:g}% floor nor below zero"
    else:  # a tune's configuration: kept above keep; the floor is named only where the gain lies under it
        level = "zero" if keep == 0 else f"{keep:g}%"
        above = (f"above the {floor_pct:g}% floor" if found.low_pct > floor_pct else
                 f"above {level}, under the {floor_pct:g}% floor: a tune keeps a configuration its pairs show faster")
        neither = (f"it lies below zero, within the {floor_pct:g}% floor: a loss inside the noise" if found.high_pct < 0
                   else f"it spans {level}")
    return gain + {
        Status.IMPROVED: f": the whole interval is {above}",
        Status.REGRESSED: ": the whole interval is below zero",
    }.get(status, f": {neither}")


def delta_pct(value: float, reference: float, lower_is_better: bool = False) -> float:
    """The gain of value over reference, in %: positive is better, whichever way the figure runs."""
    return (reference / value - 1.0) * 100.0 if lower_is_better else (value - reference) / reference * 100.0


def reaches(value: float, target: float, lower_is_better: bool = False) -> bool:
    return value <= target if lower_is_better else value >= target


def best_record(records: list[Record]) -> Record | None:
    """The best: the latest kept record. Each was shown better than the best before it, measured
    side by side on one machine, so the latest is the best even where figures taken on different
    days or machines would say otherwise."""
    found = best_pair((None, r) for r in records)
    return found[1] if found else None


def best_pair(pairs) -> tuple[str, Record] | None:
    """The best record (best_record's rule) with the commit its note is on, from (commit, record) pairs."""
    return max(((sha, r) for sha, r in pairs if r.kept), key=lambda p: (p[1].iteration, p[1].started or ""),
               default=None)


def target_value(cfg: KernelConfig, best: Record | None) -> float | None:
    """The target in the metric's unit: target_value, or target_pct_of_peak of the best record's peak."""
    if cfg.target_value is not None:
        return float(cfg.target_value)
    if cfg.target_pct_of_peak is not None and best is not None and best.peak:
        return cfg.target_pct_of_peak * best.peak
    return None


# A loop started without a target gets one from the machine's ceiling for the kernel's kind of work:
# a memory-bound kernel can come within 10% of the copy bandwidth measured in the same run (the
# bundled kernels' best reach 90-98% of it on the H200), a compute-bound one within 20% of the peak.
PROPOSED_SHARE = {"gbps": 0.9, "tflops": 0.8}


def proposed_target(baseline: Record) -> tuple[float, str] | None:
    """A target for a loop started without one, and where it comes from; None without a ceiling (CPU)."""
    unit = unit_of(baseline.metric)
    if unit is None or baseline.cpu_timing:
        return None
    share = PROPOSED_SHARE[unit]
    copy = (baseline.test or {}).get("copy_gbps")
    if unit == "gbps" and isinstance(copy, (int, float)) and not isinstance(copy, bool) and copy > 0:
        return share * copy, f"{share:.0%} of the copy bandwidth measured beside it ({copy:.0f} GB/s)"
    peak = peaks.peak_for(baseline.gpu, unit) if baseline.gpu else None  # a GPU kgit knows, not a test's claim
    if peak:
        return share * peak, f"{share:.0%} of the {baseline.gpu}'s datasheet peak ({peak:.0f})"
    return None


# A candidate whose test takes this many times the best's (its first run, compile included) is far
# slower than the best, whatever else it does: it is stopped there, not at test_timeout_s. Never
# sooner than EARLY_STOP_FLOOR_S, so that a fast test's candidate has time to compile.
EARLY_STOP_FACTOR = 10.0
EARLY_STOP_FLOOR_S = 30.0  # a big Triton kernel may take 20 s to compile


def candidate_timeout(cfg: KernelConfig, best: Record | None,
                      environment: Environment | None) -> tuple[float, str | None]:
    """The time a candidate's test may take, and why when it is less than test_timeout_s. Only the best's
    time in this environment counts: on a slower machine than the one that measured it, it would cut
    a sound candidate short."""
    if best is None or not best.duration_s > 0 or not same_environment(best.environment, environment):
        return cfg.test_timeout_s, None
    bound = max(EARLY_STOP_FLOOR_S, EARLY_STOP_FACTOR * best.duration_s)
    if bound >= cfg.test_timeout_s:
        return cfg.test_timeout_s, None
    return bound, (f"far slower than the best: stopped after {bound:g} s, {EARLY_STOP_FACTOR:g}x the "
                   f"{best.duration_s:.1f} s the best's test took (test_timeout_s is {cfg.test_timeout_s:g})")


def stop_reason(records: list[Record], cfg: KernelConfig, last_iteration: int) -> StopReason | None:
    """Why the loop for this kernel is over, judged against the current settings, or None."""
    best = best_record(records)
    target = target_value(cfg, best)
    if best is not None and target is not None and reaches(best.value, target, cfg.lower_is_better):
        return StopReason.TARGET_MET
    if records and last_iteration >= cfg.max_iterations:
        return StopReason.MAX_ITERATIONS
    return None


def peak_of(result: TestResult) -> float | None:
    """The GPU's peak for the result's metric: from the test's own pct_of_peak, else kgit's table of
    datasheet peaks by the GPU's name (tests written for other collections report no pct_of_peak).

    CPU (interpreter) timings have no peak: comparing them with a GPU's would be meaningless.
    """
    payload = result.payload or {}
    unit = unit_of(result.metric)
    if payload.get("cpu_timing") or not result.passed or unit is None:
        return None
    pct = payload.get("pct_of_peak")
    if result.figure is None and isinstance(pct, (int, float)) and not isinstance(pct, bool) and pct > 0:
        return result.value * 100.0 / pct  # the test's own share of peak, of the figure kgit takes
    return peaks.peak_for(payload.get("gpu"), unit)


# Which run a record's `test` holds (Record.test_run). A step keeps its candidate's first run, the one that
# checked correctness (the later runs only time); kgit start keeps the baseline's first counted run.
FIRST_RUN = ("the candidate's first run: it checked correctness and warmed up, and its figures never count "
             "(the counted runs: measurement.candidate; value: their median)")
BASELINE_RUN = ("the baseline's first counted run, which also checked correctness (the counted runs: "
                "measurement.candidate; value: their median)")


# What a record names as its device where a test that names none ran in Triton's interpreter: the name
# kgit's harness gives it (kgit.harness.device), so that both kinds of test group as one device.
INTERPRETER_GPU = "triton-interpreter (CPU)"


def new_record(cfg: KernelConfig, iteration: int, action: str, tier: int | None, result: TestResult,
               status: Status, best: Record | None, started: str, base: str | None,
               comparison: Comparison | None = None, environment: Environment | None = None,
               why: str | None = None, step: int | None = None) -> Record:
    """The record of a decided iteration. result: the candidate's run that speaks for it (its JSON,
    correctness and output); comparison: the pairs that decided it, if it got that far."""
    payload = result.payload or {}
    # A test that ran in Triton's interpreter made CPU timings: it may say so, and one that says
    # nothing (tests written for other collections) is labelled by where kgit ran it.
    said = payload.get("cpu_timing")
    cpu_timing = said if isinstance(said, bool) else environment is not None and environment.device == "cpu"
    peak = None if cpu_timing else peak_of(result)
    value = comparison.candidate_value() if comparison and comparison.candidate else result.value
    measured_best = comparison.best_value() if comparison and comparison.best else None
    best_before = measured_best if measured_best is not None else best.value if best else None
    if comparison and comparison.interval:
        delta = comparison.interval.gain_pct
    else:
        delta = (delta_pct(value, best.value, cfg.lower_is_better) if best and result.passed and value is not None
                 else None)
    gpu_name = payload.get("gpu")
    if gpu_name is None and result.passed:  # a test that names no device (a pytest run): where kgit ran it
        gpu_name = (environment and environment.gpu) or (INTERPRETER_GPU if cpu_timing else None)
    stop = None
    if status == Status.TARGET_MET:
        stop = StopReason.TARGET_MET
    elif (step if step is not None else iteration) >= cfg.max_iterations:  # step: the loop's own count
        stop = StopReason.MAX_ITERATIONS
    record = Record(
        kernel=cfg.name,
        iteration=iteration,
        action=action,
        status=status,
        started=started,
        tier=tier,
        gpu=" ".join(gpu_name.split()) or None if isinstance(gpu_name, str) else None,  # one line, as printed
        cpu_timing=cpu_timing,
        correctness=result.correctness if result.ok else None,
        metric=result.metric or (best.metric if best else None),  # a failed run's unit is the best's
        value=value if result.passed else None,
        spread_pct=result.spread_pct if result.passed else None,
        peak=peak,
        pct_of_peak=value * 100.0 / peak if peak and value else None,
        best_before=best_before,
        delta_pct=delta,
        reason=why if why is not None else result.reason,
        stop_reason=stop,
        test=result.payload,
        test_run=None if result.payload is None else BASELINE_RUN if status == Status.BASELINE else FIRST_RUN,
        output_tail=None if result.passed else result.output_tail,
        base=base,
        duration_s=round(result.duration_s, 3),
        measurement=measured(comparison, result.figure) if comparison else None,
        environment=environment,
    )
    return record.replace(target=target_value(cfg, record))


def step_record(cfg: KernelConfig, iteration: int, action: str, tier: int | None, started: str, base: str | None,
                comparison: Comparison, best: Record | None, environment: Environment | None,
                test_changed: bool = False, keep_anyway: str | None = None, step: int | None = None) -> Record:
    """The record of a step (or of a step that a crash interrupted: a failed comparison), decided from
    its comparison with the best. keep_anyway: the person's reason to keep a change that did not win
    (KEPT_ANYWAY: it stays on the branch, the best stays where it was); a failure is never kept."""
    status = decide(comparison, target_value(cfg, best), cfg.lower_is_better, test_changed)
    why = reason(comparison, status, cfg.min_gain_pct)
    if keep_anyway is not None and status in (Status.WITHIN_NOISE, Status.REGRESSED):
        status, why = Status.KEPT_ANYWAY, f"kept anyway: {keep_anyway} ({why})"
    return new_record(cfg, iteration, action, tier, comparison.first, status, best, started, base, comparison,
                      environment, why, step=step)


def measured(comparison: Comparison, figure: str | None = None) -> Measurement:
    """Every sample, the pairs, the interval and the cost, as the record keeps them."""
    found = comparison.interval
    device = comparison.device_best + comparison.device_candidate
    return Measurement(
        best=comparison.best, candidate=comparison.candidate, log_ratios=comparison.log_ratios,
        runs=comparison.runs, warmups=comparison.warmups, verdict=comparison.verdict,
        gain_pct=found.gain_pct if found else None,
        interval_pct=[found.low_pct, found.high_pct] if found else None,
        sd=found.sd if found else None, rounding=comparison.rounding, df=found.df if found else None,
        decided_on=comparison.decided_on,
        device_us={"best": comparison.device_best, "candidate": comparison.device_candidate} if any(device) else None,
        figure=figure)


def noise_prior(records: list[Record], environment: Environment | None, decides_on: str = "test") -> Prior:
    """The kernel's known noise: the pairs of its earlier decisions on the same figure measured in this
    environment, then the runs of its start there."""
    here = [r for r in records if r.measurement and same_environment(r.environment, environment)]
    prior = Prior.from_decisions([r.measurement.log_ratios for r in here if r.measurement.decided_on == decides_on])
    spread = measured_at_start(here)
    runs = spread and (spread.device_us if decides_on == "device" else spread.test)
    if prior.df < PRIOR_DF_LIMIT and runs and all(is_positive_number(v) for v in runs):
        prior = prior.plus(Prior.from_runs(runs))
    return prior


def decides_on(cfg: KernelConfig, records: list[Record]) -> str:
    """Whose pairs decide this loop's steps: kgit.yaml's decide_on, else what its start chose."""
    if cfg.decide_on != "auto":
        return cfg.decide_on
    spread = measured_at_start(records)
    return spread.decides_on if spread else "test"


def measured_at_start(records: list[Record]) -> Spread | None:
    """What the loop's kgit start measured of the noise among these records; None for a loop started
    before kgit measured it, or whose baseline is not among them."""
    baseline = next((r for r in records if r.status == Status.BASELINE), None)
    return baseline.measurement.spread if baseline and baseline.measurement else None


# kgit start runs the baseline this many times after its warm-up: the spread of its runs tells the
# smallest change a step can keep, and which figure decides.
START_RUNS = 4
# A loop that cannot keep a change this small is told so at its start.
DETECTABLE_WARNING_PCT = 5.0
# A test whose own time of a call is this many times the kernel's device time times mostly Python and
# the launch path (a perf_counter around a loop of small launches).
LAUNCH_BOUND_RATIO = 1.5


def start_spread(cfg: KernelConfig, runs: list[TestResult]) -> Spread:
    """What kgit start's runs of the baseline say of the noise: each figure's runs and spread, which
    decides (the steadier, unless kgit.yaml says), the smallest change a step can keep, and why it is
    large when kgit can tell."""
    test = [r.value for r in runs]
    device = [r.device.total_us if r.device else None for r in runs]
    sd = {"test": log_sd(test), "device": log_sd(device) if all(device) else None}
    choice = cfg.decide_on
    if choice == "device" and sd["device"] is None:
        raise KgitError(f"decide_on: device, but kgit's device timing recorded no launch of the Triton kernels "
                        f"of {cfg.kernel_path} in every run of the baseline",
                        "set decide_on: auto (or test) in kgit.yaml, or check that the test launches the kernel "
                        "file's @triton.jit functions")
    if cfg.figure == DEVICE_METRIC:  # the test's figure is the device time: one figure, not two
        sd, choice = {"device": sd["device"]}, "device"
    elif choice == "auto":
        steadier = sd["device"] is not None and sd["test"] is not None and sd["device"] < sd["test"]
        choice = "device" if steadier else "test"
    rounding = 0.0 if choice == "device" else 2 * rounding_of(runs[-1].printed, decimals_of(runs))
    pair_sd = math.sqrt(2) * (sd[choice] or 0.0)
    keepable = smallest_keepable_pct(pair_sd, cfg.max_pairs, cfg.min_gain_pct, rounding, prior_df=len(runs) - 1)
    return Spread(
        runs=len(runs), test=test, device_us=device if all(device) else None,
        sd_pct={name: round(math.expm1(value) * 100, 3) for name, value in sd.items() if value is not None},
        decides_on=choice, max_pairs=cfg.max_pairs,
        smallest_keepable_pct=round(keepable, 2) if math.isfinite(keepable) else None,
        why=_why_noisy(runs[-1], sd) if keepable > DETECTABLE_WARNING_PCT or choice == "device" else None)


def _why_noisy(run: TestResult, sd: dict) -> str | None:
    """Why the test's figure moves, where kgit can tell: it times far more than the kernel's device time."""
    latency = reported_latency_us(run.payload)
    if latency and run.device and latency[1] > LAUNCH_BOUND_RATIO * run.device.median_launch_us:
        return (f"launch-bound timing: the test times {latency[1]:.4g} us a call ({latency[0]}), of which the "
                f"kernel runs {run.device.median_launch_us:.4g} us on the device; the rest is Python and the "
                "launch path, which vary from run to run")
    if sd.get("device") is not None and sd.get("test") is not None and sd["test"] > 2 * sd["device"]:
        return (f"the test's own figure varies {math.expm1(sd['test']) * 100:.1f}% from run to run, the kernel's "
                f"device time {math.expm1(sd['device']) * 100:.1f}%")
    return None


def now() -> str:
    # Microseconds: with kernel, iteration and GPU the start time names a run (two clones, one second).
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def check_run(change: tuple[str, str] | None, comparison: Comparison, untested: tuple[str, ...] | None,
              allow: bool) -> tuple[tuple[str, ...] | None, Comparison]:
    """A step's check of what its change touches (kgit.model.coverage) by the kernels the candidate's own
    run launched, for what the run of HEAD's kernel could not tell (kgit.loop.steps.check_tested): a
    change to what that run never ran fails, or with allow is recorded as untested."""
    launched = comparison.first.launched if comparison.first is not None else None
    if change is None or not launched or not comparison.first.passed:
        return untested, comparison
    names = [name for name in coverage.untested(*change, set(launched)) if name not in (untested or ())]
    if not names:
        return untested, comparison
    if allow:
        return (*(untested or ()), *names), comparison
    return untested, never_measured(not_run(f"the test never ran {', '.join(names)}, which this change touches: its "
                                            "verdict would say nothing of them (kgit step --allow-untested records such "
                                            "a change as untested)", comparison.first.output_tail))
