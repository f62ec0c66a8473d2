"""The model-based search behind kgit tune: pure functions, no git, no processes.

A configuration is a dict of a template's tunables; the space maps each tunable to its ordered list of
values. What was measured comes in as Points: the configuration, the configuration it was tried from,
whether it was kept, and its figure as a score where higher is better (the log of the value, negated
for figures that fall as the kernel gets faster), or None when it failed (OutOfResources, a wrong
result, a crash).

The model (`propose_model`) is a Gaussian process over the configurations, fitted to every score
measured for this kernel. A tunable whose values are positive numbers is measured in octaves (log2 of
its value): doubling a tile or the warps is the same step whether the space spans two octaves or five,
which is what lets one set of length scales serve every template. Sizes (tiles, num_warps, chunks) vary
over LENGTH_SCALE octaves; num_stages and tunables with a value that is not a positive number (flags)
over LENGTH_SCALE_FLAT. Where FIT_AFTER is set (by default it is not: see the end of this paragraph),
once FIT_AFTER scores ran every length scale is multiplied by one of STRETCHES, and the signal's sd is
one of SIGNALS, whichever pair makes the scores measured likeliest (`fitted`): a plateau with a narrow
peak reads as short scales and a small signal, a row kernel's smooth slopes as long ones. The prior mean may be
a dome (CURVATURE per octave squared below its top at the centre of the space): it served the
project's own spaces, whose best sits near their centre, and lost the spaces whose best is at an edge
or on a plateau. So once DOME_AFTER scores ran, they test it (`fitted`, whether or not the length
scales are fitted): the dome about the centre, the same dome about the best configuration measured, or
none, whichever makes them likeliest. The dome bends the keys measured in octaves alone: a flag's values
are positions in a list, and about the best measured a flip would cost as much as an octave of a tile.
Left out one space at a time, the choice made on the others is
then the dome with fixed length scales, on every measured space; the defaults below are that choice made
on all of them (experiments/tune/leave-one-out/: the mean share over 15 spaces left out 43.8 -> 54.6%).

One length scale per key cannot express a ridge: where what matters is the ratio of two sizes (a row
kernel's elements per thread, BLOCK_SIZE over num_warps), a step of either alone falls off it, and the
process reads the best on it as a hill's top in both keys, whose joint move it expects to fall as well.
So once DOME_AFTER scores ran they also test every pair of sizes against none (`fitted`): a coupled
pair's ratio is one more coordinate of the covariance, over COUPLED_SCALE (half an octave), and where
the scores are likeliest under it the model expects the joint move along the ridge to hold
(experiments/tune/leave-one-out/: the mean share 54.6 -> 60.5%, the coupled ridges 17/45 and 17/36 ->
27/79 and 36/96, no measured space down by more than a point).

A step changes one key, unless the proposal says why it changes more (Proposal.reason, which kgit tune
writes into the iteration's record): two keys the model reads as coupled, a step of more keys that the
model expects JUMP times as much from, a space-filling start (DESIGN_POINTS), another run's best. The
settings were chosen by benchmarks/tune/leave_one_out.py, each space scored with settings chosen on the
others.

A failure is a constraint, not a figure: the process is fitted to what ran, and a logistic model of
failure over the same coordinates weighs each candidate's expected improvement by its chance to run;
the configurations beyond a failure in the direction it moved from its origin (every key that moved,
moved at least as far; every other key unchanged) are proposed only when nothing else is left. A
failure is still a place looked at: it enters the process at the score the process expects there from
what ran, so that its uncertainty stops drawing steps back to its neighbourhood, while no made-up figure
drags the neighbourhood down (a failure scored as the worst figure pushed the search away from the
edge of what fits, where the best often is; experiments/tune/leave-one-out/). A configuration the
template's constraints refuse (CONFIG_CONSTRAINTS, kgit.loop.tune) is never a candidate of any strategy.

numpy and scipy are imported when a proposal is made, never when kgit starts.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

MAX_CANDIDATES = 20000  # a larger space is searched over a seeded sample of it, plus the best's neighbours
LENGTH_SCALE = 2.5  # octaves, for sizes: tiles, num_warps, chunks
LENGTH_SCALE_FLAT = 4.0  # octaves or positions, for num_stages and flags
# CURVATURE and FIT_AFTER as chosen on all 15 spaces of benchmarks/tune/leave_one_out.py, once the scores
# test the dome (experiments/tune/leave-one-out/): a dome they may reject, length scales never fitted
CURVATURE = 0.05  # the prior mean falls by this much log score per octave squared from its top (fitted)
DESIGN_POINTS = 0  # a cold run's first steps that spread over the space instead of following the model
INTERACTION = 0.0  # log score a pair of keys must gain together beyond their single moves to move at once
JUMP = 1.5  # how many times the best step of one or two keys' expected gain a step of more must promise
STRETCHES = (0.25, 0.5, 1.0, 2.0)  # what the length scales may be multiplied by, fitted to the scores (fitted)
SIGNALS = (0.05, 0.1, 0.2, 0.5, 1.0)  # what the signal's sd may be, fitted with them
FIT_AFTER = math.inf  # scores that must have run before the two are fitted to them; SIGNAL_SD and x1 until then
DOME_AFTER = 4  # scores that must have run before they test the dome and the couplings (fitted)
COUPLED_SCALE = 0.5  # octaves, of the ratio of two coupled sizes: a step of either alone leaves their ridge
SIGNAL_SD = 0.5  # of the score (a log figure) about the prior mean: within a factor of 1.6 or so
NOISE_SD = 0.03  # of one recorded score: the few-percent spread of a median on a shared GPU


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
    """Octaves above the key's smallest value where every value is a positive number, its position in the
    list otherwise; keys of one value are left out."""
    out = []
    for name, values in space.items():
        if len(values) < 2:
            continue
        if _numeric(values):
            out.append(math.log2(config[name]) - math.log2(min(values)))
        else:
            out.append(float(values.index(config[name])))
    return out


def length_scales(space: dict) -> list[float]:
    """Per coordinate: LENGTH_SCALE for sizes, LENGTH_SCALE_FLAT for num_stages and flags."""
    return [LENGTH_SCALE_FLAT if name == "num_stages" or not _numeric(values) else LENGTH_SCALE
            for name, values in space.items() if len(values) >= 2]


def sizes(space: dict) -> list[int]:
    """The coordinates (their positions in coordinates' list) of sizes: keys measured over LENGTH_SCALE."""
    return [i for i, scale in enumerate(length_scales(space)) if scale == LENGTH_SCALE]


def centre(space: dict) -> list[float]:
    """The middle of each coordinate's range: where the prior mean's dome has its top."""
    return [(math.log2(max(values)) - math.log2(min(values))) / 2 if _numeric(values) else (len(values) - 1) / 2
            for values in space.values() if len(values) >= 2]


def _numeric(values: list) -> bool:
    return all(type(v) in (int, float) and v > 0 for v in values)


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


class Proposal(NamedTuple):
    config: dict
    reason: str = ""  # why it changes more than one key of the best; empty when it changes one


def single_moves(best: dict, space: dict) -> list[dict]:
    """The configurations that change one key of best, to any other of its values."""
    return [{**best, name: value} for name, values in space.items() for value in values if value != best[name]]


def propose_model(best: dict, space: dict, measured: list[Point], pending: list[dict] = (),
                  seed: int = 0, min_gain: float = 0.01, allowed=None, elsewhere: list[Point] = ()) -> Proposal | None:
    """The next configuration to measure and why it changes more than one key, or None when none is worth it.

    A step changes one key of the best, to the value of the highest expected improvement, weighed by its
    chance to run, with four exceptions, each named in the Proposal's reason (kgit tune writes it into
    the iteration's action, so the record says why the step changed several keys):
    - the first DESIGN_POINTS steps of a cold run are a space-filling design: the configuration farthest
      from everything measured (in length scales) and not far from the centre, so that a plateau around
      the start does not hide the rest of the space;
    - two keys move at once when the model says they interact: the pair's joint move is expected to gain
      more than the two single moves add up to, by INTERACTION (log score), and its expected improvement
      beats every single move's (softmax's BLOCK_SIZE and num_warps at the same elements per thread);
      once DOME_AFTER scores ran (and tested which sizes are coupled), a pair that is not the coupled
      one must also be expected to gain more than its two keys moved one at a time (their expected
      improvements added): where keys add, the improvement of both moves is never more than the sum of
      each one's (max(x + y, 0) <= max(x, 0) + max(y, 0)), so a pair ranked above that sum is ranked
      there by the uncertainty of two keys in one run, not by anything the scores say of the pair
      (on softmax (old), pairs of sd 0.2-0.27 outranked the flip of PERSISTENT at the best, sd 0.12); and
      not one of whose keys already moved alone from the best and ran: that run measured what the key does
      there, so where keys add the pair gains what its other key gains alone plus that, and the model ranks
      it above the other key's own step only by the sd of moving two keys (on the row kernels such pairs beat
      the best in 1-7% of their steps, every other kind of step in 12-41%: experiments/tune/leave-one-out/,
      ninth pass); a single move that failed does not hold its pairs back, since a key that fails alone can
      need another beside it (a larger tile with fewer stages);
    - more keys at once when the model expects JUMP times the expected improvement of the step of one or
      two keys it would take otherwise; so too one key moved past its next value where the prior mean is
      flat along it (no dome, or a flag, which the dome never bends): there a farther value outranks the
      next by its larger sd alone, what was not measured rather than what was
      (experiments/tune/leave-one-out/, fourth pass);
    - another run's best (elsewhere), proposed first while it beats the best here by min_gain.
    When every step of one key was measured, the configuration of the highest expected improvement.

    elsewhere: what other runs of this kernel measured on the same GPU (another clone's, pulled). The
    model learns from them as from its own, but they were not measured here, so none is excluded.

    allowed: config -> bool, the template's constraints: a configuration it refuses is never proposed.

    A failure is a constraint, not a figure: the process is fitted to what ran (and holds each failure at
    the score it expects there), and a logistic model of failure over the same coordinates weighs each
    candidate's gain by its chance to run; a configuration beyond a failure, in the direction it moved
    from its origin, is proposed only when nothing else is left.

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
        return Proposal(_nearest(best, space, pool, failed))

    incumbent = max(p.score for p in here) if here else None
    found = max(there, key=lambda p: p.score, default=None)
    if found and key(found.config) not in exclude and (allowed is None or allowed(found.config)) and (
            incumbent is None or found.score > incumbent + min_gain):
        return Proposal(found.config, "another run's best on this GPU")

    import numpy as np
    from scipy.special import ndtr

    if not there and 0 < len(measured) + len(pending) <= DESIGN_POINTS:
        return Proposal(_spread(space, [p.config for p in measured] + list(pending), pool),
                        f"space-filling start: point {len(measured) + len(pending)} of {DESIGN_POINTS}")

    safe = [c for c in pool if not any(beyond_failure(c, p.config, p.origin, space) for p in failed)]
    pool = safe or pool
    X = np.array([coordinates(p.config, space) for p in ok])
    scores = np.array([p.score for p in ok])
    # the best's single moves, measured or not: what a pair's joint move is compared with
    singles = single_moves(best, space) + [best]
    at = np.array([coordinates(c, space) for c in pool + singles])
    fit = fitted(X, scores, space)  # to what ran alone
    if failed:  # each failure was looked at: the model is as sure there as if it had run at what it expects
        looked = np.array([coordinates(p.config, space) for p in failed])
        believed = _posterior(X, scores, looked, space, *fit)[0]
        mean, sd = _posterior(np.r_[X, looked], np.r_[scores, believed], at, space, *fit)
    else:
        mean, sd = _posterior(X, scores, at, space, *fit)
    mean, sd, single_mean = mean[:len(pool)], sd[:len(pool)], dict(zip(map(key, singles), mean[len(pool):]))
    if incumbent is None:  # the gain is over the best measured here
        incumbent = float(scores.max())
    z = (mean - incumbent) / sd
    gain = (mean - incumbent) * ndtr(z) + sd * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    if failed:
        gain = gain * _chance_to_run(np.array([coordinates(p.config, space) for p in ok + failed]), len(ok),
                                     at[:len(pool)])
    if float(gain.max()) < min_gain and _neighbours_measured(best, space, exclude, allowed):
        return None
    gain = gain + np.random.default_rng(seed + len(measured)).random(len(pool)) * 1e-12  # seeded ties
    changed = [[n for n in space if c[n] != best[n]] for c in pool]
    by_count = {n: [i for i, names in enumerate(changed) if len(names) == n] for n in (1, 2)}
    far = [i for i, names in enumerate(changed) if len(names) > 2]
    if not by_count[1]:  # every step of one key was taken: the model's choice, however many keys it changes
        chosen = int(np.argmax(gain))
        return Proposal(pool[chosen], f"every step of one key was measured: {len(changed[chosen])} keys at once")
    # where the prior mean is flat along a key (no dome, or a flag, which the dome never bends), a value of it
    # farther than the next outranks the next by its larger sd alone: by what was not measured, not by what
    # was; such a step is taken as a jump is (docstring)
    flat_prior = {name for name, values in space.items() if fit[2] == 0 or not _numeric(values)}
    near = [i for i in by_count[1] if changed[i][0] not in flat_prior or _positions_moved(best, pool[i], space) == 1]
    chosen, reason = max(near or by_count[1], key=lambda i: gain[i]), ""
    # one key a step unless the record says otherwise: once the scores have tested which two sizes are
    # coupled, a pair other than those must promise more than its two single moves together (docstring)
    if len(ok) >= DOME_AFTER:
        alone = {key(pool[i]): gain[i] for i in by_count[1]}  # a single move measured or refused: 0 more
        ridge = _coupled_keys(space, fit[4])
        # nor a pair one of whose keys already moved alone from the best and ran: where keys add, the pair
        # gains what its other key gains alone plus what the run measured, and that key is a step of its own;
        # a single move that failed holds nothing back, since a key that fails alone can need another beside
        # it (docstring)
        ran = {key(p.config) for p in measured if p.score is not None}
        by_count[2] = [i for i in by_count[2] if set(changed[i]) == ridge or (gain[i] > sum(
            alone.get(key({**best, name: pool[i][name]}), 0.0) for name in changed[i]) and not any(
            key({**best, name: pool[i][name]}) in ran for name in changed[i]))]
    if by_count[2] and gain[pair := max(by_count[2], key=lambda i: gain[i])] > gain[chosen]:
        a, b = changed[pair]
        c = pool[pair]
        together = mean[pair] - single_mean[key({**best, a: c[a]})] - single_mean[key({**best, b: c[b]})] \
            + single_mean[key(best)]
        if together > INTERACTION:
            # both figures, since the pair is taken for its expected improvement over every step of one
            # key: an interaction of a hundredth of a percent alone would not justify moving two
            chosen, reason = pair, (f"{a} and {b} interact: the model expects them together to gain "
                                    f"{math.expm1(together):.2%} more than each alone, and more of the pair "
                                    f"(an expected gain of {math.expm1(gain[pair]):.2%}) than of any step of "
                                    f"one key ({math.expm1(gain[chosen]):.2%})")
    far += [i for i in by_count[1] if i not in near] if near else []
    if far and gain[jump := max(far, key=lambda i: gain[i])] > JUMP * gain[chosen]:
        # one key moved far is still one key: the reason is for a step of several (Proposal)
        reason = "" if len(changed[jump]) == 1 else (
            f"the model expects {gain[jump] / gain[chosen]:.1f} times the gain of any step of one or two keys "
            f"from {len(changed[jump])} at once")
        chosen = jump
    return Proposal(pool[chosen], reason)


def _positions_moved(best: dict, config: dict, space: dict) -> int:
    """How many places in their lists config's keys lie from best's."""
    return sum(abs(values.index(config[n]) - values.index(best[n])) for n, values in space.items())


def _coupled_keys(space: dict, coupled: tuple | None) -> set:
    """The names of the two coupled coordinates (fitted's), or an empty set."""
    names = [name for name, values in space.items() if len(values) >= 2]
    return {names[i] for i in coupled} if coupled else set()


def _spread(space: dict, measured: list[dict], pool: list[dict]) -> dict:
    """The configuration of pool farthest from everything measured, less 1.25 times its distance from the
    centre (both in length scales): spread over the space, but not into its far corners, which on every
    measured space were the slowest and the ones that fail. Past the centre, a step away from what was
    measured is a step away from the centre too: the 1.25 makes it cost more than it gains, so that the
    choice is never a tie along a line through the centre."""
    import numpy as np

    scale, top = np.array(length_scales(space)), np.array(centre(space))
    at = np.array([coordinates(c, space) for c in pool]) / scale
    seen = np.array([coordinates(c, space) for c in measured]) / scale
    apart = np.sqrt(((at[:, None, :] - seen[None, :, :]) ** 2).sum(axis=2)).min(axis=1)
    off_centre = np.sqrt(((at - top / scale) ** 2).sum(axis=1))
    return pool[int(np.argmax(apart - 1.25 * off_centre))]


def _posterior(X, y, candidates_x, space: dict, stretch: float = 1.0, signal_sd: float | None = None,
               curvature: float | None = None, top: tuple | None = None, coupled: tuple | None = None):
    """The process's mean and standard deviation at candidates_x, given scores y measured at X, with
    every length scale multiplied by stretch, the signal's sd signal_sd (SIGNAL_SD if None), a dome
    of curvature (CURVATURE if None) whose top is at top (the space's centre if None) and coupled, the
    two coordinates whose difference the covariance measures as well (_covariance; None: none)."""
    import numpy as np

    signal = SIGNAL_SD if signal_sd is None else signal_sd
    scale = stretch * np.array(length_scales(space))
    bend, top = CURVATURE if curvature is None else curvature, centre(space) if top is None else top
    dome = _dome(X, bend, top, space, coupled)
    level = float(np.mean(y - dome))  # the dome's top: where the measured scores put it
    chol = np.linalg.cholesky(_covariance(X, X, scale, signal, coupled) + NOISE_SD ** 2 * np.eye(len(X)))
    weights = np.linalg.solve(chol.T, np.linalg.solve(chol, y - level - dome))
    cross = _covariance(candidates_x, X, scale, signal, coupled)
    mean = level + _dome(candidates_x, bend, top, space, coupled) + cross @ weights
    explained = np.linalg.solve(chol, cross.T)
    return mean, np.sqrt(np.maximum(signal ** 2 - (explained ** 2).sum(axis=0), 1e-18))


def _dome(Z, curvature: float, top, space: dict, coupled: tuple | None = None):
    """The prior mean at Z, below its level: curvature per octave squared away from top, in the keys
    measured in octaves alone. A flag's coordinate is a position in its list, not a distance from an
    optimum: about the centre its two values sat at the same height, but about the best measured, a
    flip would cost as much as an octave of a tile (5% at CURVATURE 0.05), more than the whole effect
    of a flag such as PERSISTENT on the measured spaces, and the search would put off the flip.

    Where two sizes are coupled (fitted), a step along their ridge (both an octave: a larger block at the
    same elements per thread) is one octave of one size, and the dome charges it as one: it bends their
    mean octave along the ridge, and their difference across it as before (so one key's octave alone,
    half along and half across, costs three quarters of an octave's). Charged as two octaves (0.1 of log
    score a step from the dome's top at CURVATURE 0.05, more farther out), a step along the synthetic
    ridges, whose best lies at the ridge's end, was expected 23-36% under the best and lost to flips of
    flags (experiments/tune/leave-one-out/, eighth pass)."""
    import numpy as np

    octaves = np.array([_numeric(values) for values in space.values() if len(values) >= 2], dtype=float)
    off = Z - np.array(top)
    if not coupled:
        return -curvature * ((off ** 2) * octaves).sum(axis=1)
    i, j = coupled
    octaves[[i, j]] = 0.0
    along, across = (off[:, i] + off[:, j]) / 2, off[:, i] - off[:, j]
    return -curvature * ((off ** 2 * octaves).sum(axis=1) + along ** 2 + across ** 2 / 2)


def _covariance(A, B, scale, signal: float, coupled: tuple | None = None):
    """Matern 5/2 between the rows of A and of B, over length scales scale, of the signal's sd signal.
    Where two coordinates are coupled, their difference (the octaves of the ratio of two sizes: elements
    per thread, a tile's aspect) is one more coordinate, over COUPLED_SCALE: a step of one of them alone
    changes it by an octave and reaches a configuration the model barely relates to this one, while both
    moved together keep it and stay close. That is a ridge along the pair, which the process with one
    length scale per key cannot express (it reads every ridge as a hill in both keys)."""
    import numpy as np

    if coupled:
        i, j = coupled
        A, B = (np.c_[Z / scale, (Z[:, i] - Z[:, j]) / COUPLED_SCALE] for Z in (A, B))
    else:
        A, B = A / scale, B / scale
    r = np.sqrt(5.0 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2))
    return signal ** 2 * (1 + r + r * r / 3) * np.exp(-r)


def fitted(X, y, space: dict) -> tuple[float, float, float, tuple, tuple | None]:
    """(stretch, signal sd, curvature, top, coupled): the factor of STRETCHES on the length scales, the sd
    of SIGNALS, the prior mean's dome and the two coupled sizes (or None) under which the scores measured
    so far are likeliest (the process's log marginal likelihood). The length scales and the signal are
    (1, SIGNAL_SD) until FIT_AFTER scores ran: a narrow peak on a plateau reads as short length scales, a
    smooth row kernel as long ones.

    The dome (CURVATURE about the space's centre) is a belief that the best lies near the middle, and
    once DOME_AFTER scores ran they test it, whether or not the length scales are fitted: against the
    same dome about the best configuration measured (the best lies near the best seen) and against no
    dome (a plateau, or a best at an edge). Settings chosen on other spaces cannot know which shape this
    one has; its own scores can.

    So too whether two sizes are coupled (_covariance: their ratio is what matters, a ridge along the
    pair), once DOME_AFTER scores ran: every pair of sizes against none, none where they tie. A pair
    whose single moves were measured bad from a best between them reads as a ridge, and the model then
    expects their joint move to stay on it, which the isotropic process never expects."""
    import numpy as np

    middle = tuple(centre(space))
    domes = [(CURVATURE, middle)]
    if CURVATURE and len(y) >= DOME_AFTER:
        domes += [(CURVATURE, tuple(map(float, X[int(np.argmax(y))]))), (0.0, middle)]
    couplings = [None] + (list(itertools.combinations(sizes(space), 2)) if len(y) >= DOME_AFTER else [])
    scales = itertools.product(STRETCHES, SIGNALS) if len(y) >= FIT_AFTER else [(1.0, SIGNAL_SD)]
    return max(((*s, *d, c) for s in scales for d in domes for c in couplings),
               key=lambda fit: _log_likelihood(X, y, space, *fit))


def _log_likelihood(X, y, space: dict, stretch: float, signal: float, curvature: float, top: tuple,
                    coupled: tuple | None = None) -> float:
    """log p(y | X) under the process with its length scales multiplied by stretch, the signal's sd
    signal, a dome of curvature about top and the pair of coordinates coupled (constants dropped), its
    level at the scores' mean as _posterior's."""
    import numpy as np

    scale = stretch * np.array(length_scales(space))
    dome = _dome(X, curvature, top, space, coupled)
    chol = np.linalg.cholesky(_covariance(X, X, scale, signal, coupled) + NOISE_SD ** 2 * np.eye(len(X)))
    residual = y - dome - float(np.mean(y - dome))
    fit = np.linalg.solve(chol, residual)
    return float(-0.5 * fit @ fit - np.log(np.diag(chol)).sum())


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


def _chance_to_run(X, n_ok: int, candidates_x, penalty: float = 0.1):
    """A logistic model of failure over the coordinates, fitted to the first n_ok rows of X (they ran) and
    the rest (they failed); the weights, not the intercept, are held back by penalty * |w|^2 / 2, so that
    two or three failures cannot make a wall of certainty."""
    import numpy as np
    from scipy.special import expit

    failed = np.r_[np.zeros(n_ok), np.ones(len(X) - n_ok)]
    if failed.min() == failed.max():
        return np.ones(len(candidates_x))
    A = np.c_[np.ones(len(X)), X]
    held = penalty * np.diag(np.r_[0.0, np.ones(X.shape[1])])
    w = np.zeros(A.shape[1])
    for _ in range(50):  # Newton's method on a convex loss: a few steps to the optimum
        p = expit(A @ w)
        gradient = A.T @ (p - failed) + held @ w
        hessian = A.T @ (A * (p * (1 - p))[:, None]) + held + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return 1 - expit(np.c_[np.ones(len(candidates_x)), candidates_x] @ w)


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
