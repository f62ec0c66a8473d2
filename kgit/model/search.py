"""The model-based search behind kgit tune: pure functions, no git, no processes.

A configuration is a dict of a template's tunables; the space maps each tunable to its ordered list of
values. What was measured comes in as Points: the configuration, the configuration it was tried from,
whether it was kept, and its figure as a score where higher is better (the log of the value, negated
for figures that fall as the kernel gets faster), or None when it failed (OutOfResources, a wrong
result, a crash).

The model (`propose_model`) is a Gaussian process over the configurations, fitted to every score
measured for this kernel, with a linear trend so that a direction that paid off is extrapolated. Each
key is placed on [0, 1]: by log2 of its value when every value is a positive number, by its position in
the list otherwise. A failed configuration enters the process as a score well below the worst measured,
and teaches feasibility twice: a logistic model of failure over the same coordinates, and the rule that
the configurations beyond it in the direction it moved from its origin (every key that moved, moved at
least as far; every other key unchanged) fail too. The proposal is the unmeasured configuration of the
highest expected improvement over the best score, weighed by its chance to run. A configuration the
template's constraints refuse (CONFIG_CONSTRAINTS, kgit.loop.tune) is never a candidate of any strategy.

numpy and scikit-learn are imported when a proposal is made, never when kgit starts.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

MAX_CANDIDATES = 20000  # a larger space is searched over a seeded sample of it, plus the best's neighbours


class Point(NamedTuple):
    config: dict
    origin: dict
    kept: bool
    score: float | None  # higher is better; None: the configuration failed; NaN: measured, no figure


def key(config: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in config.items()))


def score_of(value: float | None, lower_is_better: bool = False) -> float | None:
    if value is None or not value > 0:
        return None
    return -math.log(value) if lower_is_better else math.log(value)


def coordinates(config: dict, space: dict) -> list[float]:
    out = []
    for name, values in space.items():
        if len(values) < 2:
            continue
        if all(type(v) in (int, float) and v > 0 for v in values):
            logs = [math.log2(v) for v in values]
            low, high = min(logs), max(logs)
            out.append((math.log2(config[name]) - low) / ((high - low) or 1.0))
        else:
            out.append(values.index(config[name]) / (len(values) - 1))
    return out


def beyond_failure(config: dict, failed: dict, origin: dict, space: dict) -> bool:
    """Whether config lies beyond a failed configuration, in the direction it moved from its origin."""
    moved = False
    for name, values in space.items():
        at, fail, start = values.index(config[name]), values.index(failed[name]), values.index(origin[name])
        if fail == start:
            if at != fail:
                return False
        else:
            moved = True
            if (at - fail) * (fail - start) < 0:
                return False
    return moved


def candidates(best: dict, space: dict, exclude: set, seed: int, allowed=None) -> list[dict]:
    """Every configuration of the space not in exclude (a seeded sample, if the space is very large), and
    allowed (config -> bool: the template's constraints) where given."""
    size = math.prod(len(v) for v in space.values())
    if size <= MAX_CANDIDATES:
        every = ({**best, **dict(zip(space, values))} for values in itertools.product(*space.values()))
        return [c for c in every if key(c) not in exclude and (allowed is None or allowed(c))]
    import random
    rng = random.Random(seed)
    found = {}
    for name, values in space.items():  # the best's neighbours first, then a sample
        i = values.index(best[name])
        for j in (i - 1, i + 1):
            if 0 <= j < len(values):
                found.setdefault(key(c := {**best, name: values[j]}), c)
    while len(found) < MAX_CANDIDATES:
        c = {**best, **{name: rng.choice(values) for name, values in space.items()}}
        found.setdefault(key(c), c)
    return [c for k, c in found.items() if k not in exclude and (allowed is None or allowed(c))]


def propose_model(best: dict, space: dict, measured: list[Point], pending: list[dict] = (),
                  seed: int = 0, fail_penalty: float = 1.0, length_scale: float = 0.5,
                  min_gain: float = 0.01, allowed=None, elsewhere: list[Point] = ()) -> dict | None:
    """The unmeasured configuration of the highest expected improvement, or None when none is worth it.

    elsewhere: what other runs of this kernel measured on the same GPU (another clone's, pulled). The
    model learns from them as from its own, but they were not measured here, so none is excluded. The
    best configuration another run found is proposed first, while it beats the best here by min_gain
    (it is kept only if it wins here too).

    allowed: config -> bool, the template's constraints: a configuration it refuses is never proposed
    (and counts as measured for the rule below).

    None when the space is measured, or when every neighbour of the best (one key, one position) was
    measured and no configuration is expected to gain min_gain (a log ratio; kgit.yaml min_gain_pct /
    100): a gain smaller than that could not be kept anyway. So the search never stops sooner than
    coordinate descent would.
    """
    space = {name: values for name, values in space.items() if name in best}
    exclude = {key(p.config) for p in measured} | {key(c) for c in pending} | {key(best)}
    pool = candidates(best, space, exclude, seed + len(measured), allowed)
    if not pool:
        return None
    here = [p for p in measured if _has_figure(p)]
    there = [p for p in elsewhere if _has_figure(p)]
    ok = here + there
    failed = [p for p in [*measured, *elsewhere] if p.score is None]
    if not ok:  # nothing measured ran: the nearest untried configuration not beyond a failure
        return _nearest(best, space, pool, failed)

    incumbent = max(p.score for p in here) if here else None
    found = max(there, key=lambda p: p.score, default=None)
    if found and key(found.config) in {key(c) for c in pool} and (
            incumbent is None or found.score > incumbent + min_gain):
        return found.config

    import numpy as np
    from scipy.special import ndtr
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, DotProduct, Matern, WhiteKernel

    scores = np.array([p.score for p in ok])
    spread = max(float(scores.max() - scores.min()), 0.05)
    X = np.array([coordinates(p.config, space) for p in ok + failed])
    y = np.r_[scores, np.full(len(failed), scores.min() - fail_penalty * spread)]
    candidates_x = np.array([coordinates(c, space) for c in pool])
    kernel = (ConstantKernel(1.0) * Matern(length_scale=length_scale, nu=2.5) + WhiteKernel(1e-3)
              + ConstantKernel(0.1) * DotProduct(0.1))
    process = GaussianProcessRegressor(kernel, normalize_y=True, optimizer=None).fit(X, y)
    mean, sd = process.predict(candidates_x, return_std=True)
    sd = np.maximum(sd, 1e-9)
    # the gain is over the best measured here: one measured only elsewhere is still worth measuring here
    if incumbent is None:
        incumbent = float(scores.max())
    z = (mean - incumbent) / sd
    gain = (mean - incumbent) * ndtr(z) + sd * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    if failed:
        gain = gain * _chance_to_run(X, len(ok), candidates_x)
        beyond = np.array([any(beyond_failure(c, p.config, p.origin, space) for p in failed) for c in pool])
        gain = np.where(beyond, gain * 0.01, gain)
    if float(gain.max()) < min_gain and _neighbours_measured(best, space, exclude, allowed):
        return None
    ties = np.random.default_rng(seed + len(measured)).random(len(pool)) * 1e-12  # seeded, never by order alone
    return pool[int(np.argmax(gain + ties))]


def _has_figure(point: Point) -> bool:
    return point.score is not None and not math.isnan(point.score)  # None: it failed; NaN: no figure


def _neighbours_measured(best: dict, space: dict, exclude: set, allowed=None) -> bool:
    for name, values in space.items():
        i = values.index(best[name])
        for j in (i - 1, i + 1):
            if 0 <= j < len(values) and key(c := {**best, name: values[j]}) not in exclude and (
                    allowed is None or allowed(c)):
                return False
    return True


def _chance_to_run(X, n_ok: int, candidates_x):
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    labels = np.r_[np.zeros(n_ok), np.ones(len(X) - n_ok)]
    if labels.min() == labels.max():
        return np.ones(len(candidates_x))
    return LogisticRegression(C=10.0).fit(X, labels).predict_proba(candidates_x)[:, 0]


def _nearest(best: dict, space: dict, pool: list[dict], failed: list[Point]) -> dict:
    def distance(c):
        return sum(abs(values.index(c[n]) - values.index(best[n])) for n, values in space.items())
    safe = [c for c in pool if not any(beyond_failure(c, p.config, p.origin, space) for p in failed)] or pool
    return min(safe, key=lambda c: (distance(c), key(c)))


def propose_random(best: dict, space: dict, measured: list[Point], pending: list[dict] = (), seed: int = 0,
                   allowed=None):
    """A seeded uniform draw among the unmeasured (and allowed) configurations: the baseline a model must beat."""
    import random
    exclude = {key(p.config) for p in measured} | {key(c) for c in pending} | {key(best)}
    pool = candidates(best, space, exclude, seed + len(measured), allowed)
    return random.Random(seed * 1_000_003 + len(measured)).choice(pool) if pool else None
