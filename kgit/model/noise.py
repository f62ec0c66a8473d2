"""Is a change better than the best, beyond the noise? Paired ratios and a t-interval on their logs.

kgit measures the best and the candidate alternately on the same device (best, candidate; then
candidate, best; ...): each pair gives one ratio candidate/best, and a drift of the machine that is
linear in time cancels over two pairs. On the logs of the ratios (a ratio of speeds is symmetric
in log space) it takes the mean and a t-interval, with the standard deviation pooled from
this decision's pairs and from the kernel's earlier decisions in the same environment (its known
noise), so that a clear win or loss is decided after one pair and a close call gets more.

Why a t-interval and not a bootstrap: with 1 to 8 pairs a bootstrap has too few points to resample
(it under-covers badly below ~10), while the t-interval's small-sample quantiles are exact for
normal log-ratios, which timing noise of a repeated median is close to.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

# Every decision may look at its interval after each pair, up to max_pairs looks: a 95% interval read
# that many times would be wrong far more often than 5% of the time (a no-op "kept" or "regressed" by
# chance). Each look therefore uses 1 - 5%/max_pairs (Bonferroni), which holds the whole decision's
# error at 5% or less.
ERROR_RATE = 0.05

# The prior keeps the most recent degrees of freedom only: a kernel's noise changes as it changes.
PRIOR_DF_LIMIT = 30

# The machine's noise changes too (another job on the host comes and goes). Once a decision has pairs
# enough to judge its own noise, a prior whose variance differs from it beyond this two-sided F-test
# level describes another machine state and is set aside: pooled, a noisy past would widen a quiet
# decision's interval (or a quiet past narrow a noisy one's) by far more than any gain.
PRIOR_AGREEMENT_LEVEL = 0.001
PRIOR_CHECK_MIN_DF = 2


@functools.lru_cache(maxsize=None)  # a decision asks for the same few quantiles again and again
def t_quantile(p: float, df: int) -> float:
    """The p quantile (p > 0.5) of Student's t with df degrees of freedom, by bisection on its CDF."""
    low, high = 0.0, 1.0
    while _t_cdf(high, df) < p:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


def _t_cdf(t: float, df: int) -> float:
    """P(T <= t) for t >= 0: 1 - I_x(df/2, 1/2) / 2 with x = df / (df + t^2)."""
    return 1.0 - 0.5 * _incomplete_beta(df / 2, 0.5, df / (df + t * t))


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz)."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-14:
            break
    return front * result


@dataclass(frozen=True)
class Prior:
    """What earlier decisions say of the noise of one pair's log-ratio: a sum of squares and its df."""

    sum_squares: float = 0.0
    df: int = 0

    @staticmethod
    def from_decisions(log_ratio_lists: list[list[float]]) -> Prior:
        """Pooled from earlier decisions (newest last); each contributes its within-decision spread."""
        ss, df = 0.0, 0
        for ratios in reversed(log_ratio_lists):
            if len(ratios) < 2:
                continue
            mean = sum(ratios) / len(ratios)
            ss += sum((r - mean) ** 2 for r in ratios)
            df += len(ratios) - 1
            if df >= PRIOR_DF_LIMIT:
                break
        return Prior(ss, df)


    @staticmethod
    def from_runs(values: list[float]) -> Prior:
        """From repeated runs of one kernel (kgit start's): a pair's log-ratio is the difference of two
        runs' logs, so its variance is twice one run's."""
        sd = log_sd(values)
        return Prior(2 * sd * sd * (len(values) - 1), len(values) - 1) if sd is not None else Prior()

    def plus(self, other: Prior) -> Prior:
        return Prior(self.sum_squares + other.sum_squares, self.df + other.df)


# Past the bound on pairs, a tune's decision whose estimate lies above the floor (min_gain_pct: what the
# search judged worth a run) and whose interval still spans the level it must clear takes more pairs, up to
# EXTENDED_PAIRS_FACTOR x max_pairs. Why 2: gemm's unresolved gains (experiments/tune/leave-one-out/, the
# fifth pass) were 1.9-2.1%, about twice the 1% floor, at a pair sd of 0.017 (its 99.8% configuration's
# test-reported spread, which floors the sd); a gain g is resolved with 95% power at n = ((t + 1.645) s /
# log(1 + g))^2 pairs, 21 for g = 2% and t = 3.3 (24 looks), within 2 x 12. The configuration whose runs
# spread 5.5% (s = 0.044) would need about 140: no cap a user's device time can pay resolves it, and 2
# bounds what one decision may cost at twice what it cost before.
EXTENDED_PAIRS_FACTOR = 2


@dataclass(frozen=True)
class Bound:
    """How many pairs a decision may take and after which it reads its interval. Every read is a look,
    and the whole decision's error stays at ERROR_RATE only where each look is read at ERROR_RATE / looks
    (Bonferroni): the looks past max_pairs are counted from the decision's first pair on, so a decision
    that may be extended reads every interval, the first included, at 1 - ERROR_RATE / cap."""

    max_pairs: int
    cap: int  # max_pairs where no extension is allowed

    @property
    def looks(self) -> int:
        return self.cap  # one look after every pair, up to the cap

    @staticmethod
    def of(max_pairs: int, extend: bool) -> Bound:
        return Bound(max_pairs, EXTENDED_PAIRS_FACTOR * max_pairs if extend else max_pairs)

    def goes_on(self, pairs: int, found: Interval | None, floor_pct: float) -> bool:
        """Whether an undecided comparison takes another pair: below max_pairs always; past it, up to the
        cap, only while the estimate lies above the floor (a gain the search judged worth a run, that
        more pairs may resolve; one under it was never worth more than the bound)."""
        if pairs < self.max_pairs:
            return True
        return pairs < self.cap and found is not None and found.gain_pct > floor_pct


@dataclass(frozen=True)
class Interval:
    gain_pct: float  # the estimate: exp(mean log-ratio) - 1, in %
    low_pct: float
    high_pct: float
    sd: float  # of one pair's log-ratio, pooled
    df: int
    pairs: int


def interval(log_ratios: list[float], prior: Prior, test_sd: float = 0.0, looks: int = 1,
             rounding: float = 0.0) -> Interval | None:
    """The interval of the gain from these pairs, at 1 - ERROR_RATE/looks confidence; None while the
    noise is unknown (one pair and no prior). test_sd, the noise of one pair as the test itself
    reported it, can only widen it. rounding, how far the printed figures of a pair may lie from
    those measured (in log terms), widens both ends by as much: no number of pairs averages it away."""
    n = len(log_ratios)
    mean = sum(log_ratios) / n
    own_ss = sum((r - mean) ** 2 for r in log_ratios)
    if not agrees(prior, own_ss, n - 1):
        prior = Prior()
    ss = prior.sum_squares + own_ss
    df = prior.df + n - 1
    if df < 1:
        return None
    sd = max(math.sqrt(ss / df), test_sd)
    half = t_quantile(1 - ERROR_RATE / looks / 2, df) * sd / math.sqrt(n) + rounding
    return Interval(_pct(mean), _pct(mean - half), _pct(mean + half), sd, df, n)


def smallest_keepable_pct(pair_sd: float, max_pairs: int, floor_pct: float, rounding: float = 0.0,
                          prior_df: int = 0) -> float:
    """The smallest true gain, in %, whose interval after max_pairs pairs lies above the floor when the
    pairs average exactly that gain: log(1 + gain) - half = log(1 + floor), with half the interval's
    half-width (as interval() computes it). A smaller one is kept by luck alone, if ever."""
    df = prior_df + max_pairs - 1
    if df < 1:
        return math.inf
    half = t_quantile(1 - ERROR_RATE / max_pairs / 2, df) * pair_sd / math.sqrt(max_pairs) + rounding
    return _pct(math.log1p(floor_pct / 100.0) + half)


def log_sd(values: list[float]) -> float | None:
    """The standard deviation of the logs of these figures (one run's noise); None with fewer than 2."""
    if len(values) < 2 or any(not v or v <= 0 for v in values):
        return None
    logs = [math.log(v) for v in values]
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))


def agrees(prior: Prior, own_ss: float, own_df: int) -> bool:
    """Whether this decision's own spread is consistent with the prior's (a two-sided F-test); a
    decision with too few pairs to judge its noise takes the prior as it is."""
    if prior.df == 0 or own_df < PRIOR_CHECK_MIN_DF:
        return True
    if prior.sum_squares == 0 or own_ss == 0:
        return prior.sum_squares == own_ss
    ratio = (own_ss / own_df) / (prior.sum_squares / prior.df)
    below = f_cdf(ratio, own_df, prior.df)
    return PRIOR_AGREEMENT_LEVEL / 2 < below < 1 - PRIOR_AGREEMENT_LEVEL / 2


def f_cdf(x: float, df1: int, df2: int) -> float:
    """P(F <= x) for Fisher's F with (df1, df2) degrees of freedom."""
    return _incomplete_beta(df1 / 2, df2 / 2, df1 * x / (df1 * x + df2)) if x > 0 else 0.0


def verdict(found: Interval, floor_pct: float, keep_above_pct: float | None = None) -> str | None:
    """'better' when the whole interval lies above keep_above_pct (the floor unless given: a tune gives
    0, kgit.model.decide.TUNE_KEEP_ABOVE_PCT); 'noise' when it lies within the floor on both sides (it
    cannot be better by the floor any more, and a loss smaller than the floor is no lesson: on an
    H100 a renamed variable read -0.44% [-0.53, -0.34], the device time of a test's processes falling
    into two modes 0.4% apart); 'worse' when it lies below zero and reaches below the floor; None:
    undecided, more pairs would tell."""
    if found.low_pct > (floor_pct if keep_above_pct is None else keep_above_pct):
        return "better"
    if -floor_pct <= found.low_pct and found.high_pct <= floor_pct:
        return "noise"
    if found.high_pct < 0:
        return "worse"
    return None


def test_sd_of(spread_pct: float | None) -> float:
    """One pair's log-ratio noise implied by a test's reported spread (the range of its 3 repeats):
    the expected range of 3 normal draws is 1.69 sigma, and a ratio of two runs has sqrt(2) sigma. A test
    that reports none implies none (the pairs measure it)."""
    return math.sqrt(2) * math.log1p(spread_pct / 100.0) / 1.69 if spread_pct else 0.0


def _pct(log_ratio: float) -> float:
    return math.expm1(log_ratio) * 100.0


@dataclass
class Comparison:
    """A candidate measured against the best, pair by pair (kgit.loop.paired fills it)."""

    first: object  # the candidate's first run (a TestResult): its correctness, and a warm-up
    best: list[float]  # the best's counted figures, in the order they were taken
    candidate: list[float]
    log_ratios: list[float]
    interval: Interval | None = None
    verdict: str | None = None  # 'better', 'worse', 'noise'; None when a run failed
    failure: object = None  # the TestResult of a run that failed, if one did
    failed_side: str | None = None  # 'best' or 'candidate'
    runs: int = 0  # every test run, warm-ups included
    warmups: int = 0
    rounding: float = 0.0  # the widest a pair's printed figures may lie from those measured (log terms)
    decided_on: str = "test"  # whose pairs the log-ratios are of: "test" (its figure) or "device" (kgit's)
    # what the whole interval had to lie above to keep the candidate, where not min_gain_pct (a tune's
    # configuration: kgit.model.decide.TUNE_KEEP_ABOVE_PCT)
    keep_above_pct: float | None = None
    # kgit's device time of each counted run (None where none was recorded), beside the test's figures
    device_best: list = field(default_factory=list)
    device_candidate: list = field(default_factory=list)

    def candidate_value(self) -> float | None:
        return _median(self.candidate) if self.candidate else None

    def best_value(self) -> float | None:
        return _median(self.best) if self.best else None


def never_measured(result) -> Comparison:
    """The comparison of a candidate that was never measured: its run failed, or never ran."""
    return Comparison(first=result, best=[], candidate=[], log_ratios=[], failure=result, failed_side="candidate")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
