"""kgit.model.search: the model-based proposals of kgit tune, on small synthetic spaces (no GPU, no git)."""

import itertools
import math
import re

import pytest

pytest.importorskip("scipy")

from kgit.model import search  # noqa: E402
from kgit.model.search import Point  # noqa: E402

SPACE = {"BLOCK": [256, 512, 1024, 2048, 4096, 8192], "WARPS": [1, 2, 4, 8, 16, 32]}


def coupled(config):
    """Tile size x warps: the best is 4096 x 16 (256 elements per thread); a lone key never reaches it.
    More than 32768 elements per warp-stage does not fit: it fails."""
    block, warps = config["BLOCK"], config["WARPS"]
    if block * warps > 65536:
        return None
    per_thread = block / (warps * 32)
    return 1000.0 * math.exp(-0.5 * math.log2(per_thread / 8) ** 2) * (1 + 0.05 * math.log2(block))


def tune(value_of, start, budget, seed=0, space=SPACE, min_gain=0.01):
    """Each proposal measured and kept when it is better (no noise): the best found after budget steps."""
    best = start
    points = [Point(start, start, True, math.log(value_of(start)))]
    for _ in range(budget):
        proposal = search.propose_model(best, space, points, seed=seed, min_gain=min_gain)
        if proposal is None:
            break
        candidate = proposal.config
        value = value_of(candidate)
        kept = value is not None and value > math.exp(max(p.score for p in points if p.score is not None))
        points.append(Point(candidate, best, kept, None if value is None else math.log(value)))
        if kept:
            best = candidate
    return best, points


def configurations(space=SPACE):
    return [dict(zip(space, values)) for values in itertools.product(*space.values())]


def test_never_proposes_a_measured_or_pending_configuration():
    best, points = tune(coupled, {"BLOCK": 256, "WARPS": 1}, 30, min_gain=0.0)  # no stop before 30
    keys = [search.key(p.config) for p in points]
    assert len(keys) == len(set(keys)) >= 9
    pending = [{"BLOCK": 512, "WARPS": 2}]
    proposal = search.propose_model(best, SPACE, points, pending)
    assert proposal is None or search.key(proposal.config) not in set(keys) | {search.key(pending[0])}
    early = tune(coupled, {"BLOCK": 256, "WARPS": 1}, 3)[1]  # before any stop: a proposal, never a pending one
    proposal = search.propose_model(early[-1].config, SPACE, early, [{"BLOCK": 512, "WARPS": 2}])
    assert proposal is not None and search.key(proposal.config) not in {search.key(p.config) for p in early} | {
        search.key({"BLOCK": 512, "WARPS": 2})}


def test_stops_when_the_space_is_measured():
    small = {"BLOCK": [256, 512], "WARPS": [1, 2]}
    best, points = tune(coupled, {"BLOCK": 256, "WARPS": 1}, 10, space=small, min_gain=0.0)
    assert len(points) == 4 and search.propose_model(best, small, points, min_gain=0.0) is None


def test_gets_near_the_optimum_of_a_coupled_space_from_most_starts():
    top = max(v for c in configurations() if (v := coupled(c)) is not None)
    starts = [c for c in configurations() if coupled(c) is not None]
    found = [coupled(tune(coupled, start, 8)[0]) / top for start in starts]
    # of 33 starts, all get to the ridge's top two (100% and 96.9%) and 32 to the optimum itself, since the
    # scores test whether BLOCK and WARPS are coupled (search.fitted); before (commit a768271), 30 within 90%,
    # 21 at the top two and 14 at the optimum: the process with no coupling reads the ridge as a hill
    assert sum(f >= 0.9 for f in found) >= 30 and sum(f >= 0.965 for f in found) >= 30, sorted(found)


def test_coordinates_are_octaves_for_numbers_and_positions_for_flags():
    space = {"BLOCK": [1024, 2048, 4096, 8192], "num_stages": [1, 2, 4], "PERSISTENT": [0, 1], "GROUP": [8]}
    config = {"BLOCK": 4096, "num_stages": 4, "PERSISTENT": 1, "GROUP": 8}
    assert search.coordinates(config, space) == [2.0, 2.0, 1.0]  # GROUP, of one value, is no coordinate
    assert search.length_scales(space) == [search.LENGTH_SCALE, 4.0, 4.0]  # sizes, then stages and flags
    assert search.centre(space) == [1.5, 1.0, 0.5]


def test_the_posterior_follows_the_dome_far_from_what_was_measured_and_the_data_near_it(monkeypatch):
    np = pytest.importorskip("numpy")
    monkeypatch.setattr(search, "CURVATURE", 0.1)
    monkeypatch.setattr(search, "LENGTH_SCALE", 1.5)
    space = {"BLOCK": [2 ** i for i in range(31)]}  # 30 octaves: the centre is 2^15
    X, y = np.array([[15.0]]), np.array([0.0])  # one score, 0, at the dome's top
    at = np.array([[15.0], [16.5], [0.0]])  # on the point, one length scale away, 15 octaves away
    mean, sd = search._posterior(X, y, at, space)
    shrink = 0.5 ** 2 / (0.5 ** 2 + 0.03 ** 2)  # SIGNAL_SD^2 / (SIGNAL_SD^2 + NOISE_SD^2)
    matern = (1 + math.sqrt(5) + 5 / 3) * math.exp(-math.sqrt(5))  # Matern 5/2 at one length scale
    assert mean[0] == pytest.approx(0.0) and sd[0] == pytest.approx(0.5 * math.sqrt(1 - shrink))
    assert mean[1] == pytest.approx(-0.1 * 1.5 ** 2)  # the data agree with the dome: no pull either way
    assert sd[1] == pytest.approx(0.5 * math.sqrt(1 - matern ** 2 * shrink))
    assert mean[2] == pytest.approx(-0.1 * 15 ** 2) and sd[2] == pytest.approx(0.5)
    y = np.array([0.3])  # measured above the dome: the level rises, and near the point the data hold it
    mean, _ = search._posterior(X, y, at, space)
    assert mean[0] == pytest.approx(0.3) and mean[2] == pytest.approx(0.3 - 0.1 * 15 ** 2)


def test_the_chance_to_run_is_a_logistic_fit_whose_slope_alone_is_held_back():
    np = pytest.importorskip("numpy")
    X = np.array([[0.0], [1.0], [2.0], [3.0], [4.0]])  # the first three ran, the last two failed
    ran = search._chance_to_run(X, 3, np.r_[X, [[10.0], [11.0]]])
    fail = 1 - ran[:5]
    assert np.all(np.diff(ran) < 0)  # the farther out, the likelier to fail
    # at the optimum of the penalised likelihood: the intercept, free, matches the share that failed...
    assert fail.sum() == pytest.approx(2.0, abs=1e-3)
    # ...and the slope w balances the data against the penalty 0.1 * w^2 / 2
    slope = math.log(ran[5] / (1 - ran[5])) - math.log(ran[6] / (1 - ran[6]))  # logit of failing, per unit
    assert ((fail - np.r_[0, 0, 0, 1, 1]) * X[:, 0]).sum() + 0.1 * slope == pytest.approx(0.0, abs=1e-3)
    assert 2 < slope < 20  # finite: three runs and two failures make no wall of certainty


@pytest.mark.parametrize("start", [{"BLOCK": 256, "WARPS": 1}, {"BLOCK": 8192, "WARPS": 32},
                                   {"BLOCK": 256, "WARPS": 32}])
def test_with_a_dome_a_cold_model_moves_a_key_towards_the_middle_not_to_its_far_end(start, monkeypatch):
    # a flat prior mean sends the first proposal to the end farthest from the one point measured: on the
    # H200's spaces the slowest configurations and the ones that fail (experiments/tune/replay.md); the
    # dome is off by default since spaces whose best is at an edge were left out (leave_one_out.py)
    monkeypatch.setattr(search, "CURVATURE", 0.1)
    proposal = search.propose_model(start, SPACE, [Point(start, start, True, math.log(1000.0))])
    moved = [i for i, name in enumerate(SPACE) if proposal.config[name] != start[name]]
    assert len(moved) == 1 and proposal.reason == ""
    x, middle = search.coordinates(proposal.config, SPACE)[moved[0]], search.centre(SPACE)[moved[0]]
    assert abs(x - middle) <= 1.0, proposal


def test_a_failure_teaches_that_its_neighbours_beyond_it_fail():
    start = {"BLOCK": 1024, "WARPS": 4}
    space = {"BLOCK": [1024, 2048, 4096, 8192], "WARPS": [4]}
    gain = {1024: 100.0, 2048: 150.0}  # the trend says bigger is better, and 4096 fails
    points = [Point(start, start, True, math.log(100.0)),
              Point({"BLOCK": 2048, "WARPS": 4}, start, True, math.log(150.0)),
              Point({"BLOCK": 4096, "WARPS": 4}, {"BLOCK": 2048, "WARPS": 4}, False, None)]
    assert gain and search.beyond_failure({"BLOCK": 8192, "WARPS": 4}, points[2].config, points[2].origin, space)
    assert not search.beyond_failure({"BLOCK": 1024, "WARPS": 4}, points[2].config, points[2].origin, space)
    # without the failure the model follows the trend to 8192; with it, it stops (nothing worth it is left)
    assert search.propose_model({"BLOCK": 2048, "WARPS": 4}, space, points[:2] + [
        Point({"BLOCK": 4096, "WARPS": 4}, points[1].config, False, math.log(160.0))]).config == {
            "BLOCK": 8192, "WARPS": 4}
    assert search.propose_model({"BLOCK": 2048, "WARPS": 4}, space, points) is None


def test_failures_steer_the_search_away_from_what_does_not_fit():
    fails = sum(coupled(p.config) is None for start in configurations() if coupled(start)
                for p in tune(coupled, start, 8)[1])
    assert fails <= 2 * len(configurations())  # on average under 2 of 8 steps fail, where 11 of 36 do


def test_deterministic_per_seed():
    start = {"BLOCK": 512, "WARPS": 32}
    runs = [[p.config for p in tune(coupled, start, 6, seed=s)[1]] for s in (3, 3, 4)]
    assert runs[0] == runs[1]


def test_lower_is_better_turns_the_score_around():
    assert search.score_of(2.0, lower_is_better=True) < search.score_of(1.0, lower_is_better=True)
    assert search.score_of(None) is None and search.score_of(0.0) is None


def fits(config):
    """A constraint that cuts the coupled space's best corner (4096 x 16) and everything bigger."""
    return config["BLOCK"] * config["WARPS"] <= 32768


@pytest.mark.parametrize("strategy", ["model", "random", "descent"])
def test_no_strategy_proposes_a_configuration_that_breaks_a_constraint(strategy):
    from kgit.loop.tune import propose

    def proposal(best, points):
        if strategy == "model":
            found = search.propose_model(best, SPACE, points, allowed=fits, min_gain=0.0)  # on to the end
            return found and found.config
        if strategy == "random":
            return search.propose_random(best, SPACE, points, seed=1, allowed=fits)
        return propose(best, SPACE, [(p.config, p.origin, p.kept) for p in points], allowed=fits)

    allowed = [c for c in configurations() if fits(c)]
    assert 0 < len(allowed) < len(configurations())
    proposed = 0
    for start in ({"BLOCK": 256, "WARPS": 1}, {"BLOCK": 2048, "WARPS": 16}, {"BLOCK": 8192, "WARPS": 4}):
        best, points = start, [Point(start, start, True, math.log(coupled(start)))]
        while (candidate := proposal(best, points)) is not None:  # until the search stops
            assert fits(candidate), (strategy, start, candidate)
            value = coupled(candidate)
            kept = value is not None and value > math.exp(max(p.score for p in points if p.score is not None))
            points.append(Point(candidate, best, kept, None if value is None else math.log(value)))
            best = candidate if kept else best
        proposed += len(points) - 1
    assert proposed >= 6
    if strategy != "descent":  # the model and the draw go on until every allowed configuration is measured
        assert len(points) == len(allowed)


def test_what_another_run_measured_is_learnt_from_but_measured_again_here():
    # another clone found 4096 x 16; here only the start was measured: its best is proposed first
    start = {"BLOCK": 1024, "WARPS": 1}
    here = [Point(start, start, True, math.log(coupled(start)))]
    found = {"BLOCK": 4096, "WARPS": 16}
    other = [Point(c, c, True, math.log(coupled(c)))
             for c in ({"BLOCK": 512, "WARPS": 4}, {"BLOCK": 2048, "WARPS": 8}, found, {"BLOCK": 8192, "WARPS": 4})]
    proposal = search.propose_model(start, SPACE, here, seed=3, elsewhere=other)
    assert proposal.config == found and proposal.reason == "another run's best on this GPU"
    assert search.propose_model(start, SPACE, here, seed=3).config != found  # cold, the model does not guess it


def test_another_runs_failures_steer_but_exclude_nothing():
    start = {"BLOCK": 256, "WARPS": 1}
    here = [Point(start, start, True, math.log(coupled(start)))]
    failed = {"BLOCK": 8192, "WARPS": 16}
    other = [Point(failed, {"BLOCK": 4096, "WARPS": 16}, False, None)]
    proposals = set()
    points = list(here)
    for _ in range(40):
        c = search.propose_model(start, SPACE, points, seed=1, elsewhere=other, min_gain=0.0)
        if c is None:
            break
        c = c.config
        proposals.add(search.key(c))
        points.append(Point(c, start, False, None if coupled(c) is None else math.log(coupled(c))))
    assert search.key(failed) in proposals or len(proposals) < 35  # never excluded: reachable when all else is
    assert search.propose_model(start, SPACE, here, seed=1, elsewhere=other).config != failed


# --- one key a step, unless the proposal says why; a space-filling start; failures as constraints -------

def changed(proposal, best):
    return [name for name in best if proposal.config[name] != best[name]]


def test_a_step_changes_one_key_unless_its_reason_says_why():
    several = 0
    for start in [c for c in configurations() if coupled(c)][::3]:
        best, points = start, [Point(start, start, True, math.log(coupled(start)))]
        for _ in range(8):
            proposal = search.propose_model(best, SPACE, points)
            if proposal is None:
                break
            keys = changed(proposal, best)
            assert (len(keys) == 1) == (proposal.reason == ""), (best, proposal)
            assert len(keys) <= 2, proposal  # nothing but the pair of a coupled move, in a space not measured out
            several += len(keys) == 2
            value = coupled(proposal.config)
            kept = value is not None and value > math.exp(max(p.score for p in points if p.score is not None))
            points.append(Point(proposal.config, best, kept, None if value is None else math.log(value)))
            best = proposal.config if kept else best
    assert several >= 1  # the coupled space does call for pairs


def first_move(keys: int, space: dict, value_of, starts: list[dict]):
    """The first state of a search from these starts in which the model moves this many keys at once:
    (best, points, proposal); None when no search of 8 steps from any start did."""
    for start in starts:
        best, points = start, [Point(start, start, True, math.log(value_of(start)))]
        for _ in range(8):
            proposal = search.propose_model(best, space, points)
            if proposal is None:
                break
            if len(changed(proposal, best)) == keys:
                return best, points, proposal
            value = value_of(proposal.config)
            kept = value is not None and value > math.exp(max(p.score for p in points if p.score is not None))
            points.append(Point(proposal.config, best, kept, None if value is None else math.log(value)))
            best = proposal.config if kept else best
    return None


def first_pair():
    """The first state of a search on the coupled space in which the model moves two keys at once."""
    found = first_move(2, SPACE, coupled, [c for c in configurations() if coupled(c)])
    if found is None:
        raise AssertionError("no pair moved")
    return found


def test_two_keys_move_together_when_the_model_reads_them_as_coupled(monkeypatch):
    np = pytest.importorskip("numpy")
    best, points, proposal = first_pair()
    a, b = changed(proposal, best)
    # the reason quotes the interaction: the pair's posterior mean less each single move's, plus the best's
    ran = [p for p in points if p.score is not None]
    at = [proposal.config, {**best, a: proposal.config[a]}, {**best, b: proposal.config[b]}, best]
    mean, _ = search._posterior(np.array([search.coordinates(p.config, SPACE) for p in ran]),
                                np.array([p.score for p in ran]),
                                np.array([search.coordinates(c, SPACE) for c in at]), SPACE)
    together = mean[0] - mean[1] - mean[2] + mean[3]
    assert together > search.INTERACTION
    head = (f"{a} and {b} interact: the model expects them together to gain {math.expm1(together):.2%} more than "
            "each alone, and more of the pair (an expected gain of ")
    assert proposal.reason.startswith(head), proposal.reason
    # then the pair's expected gain and the best single step's, the first the larger (why the pair is taken)
    pair_gain, single_gain = (float(x) for x in re.findall(r"(-?[\d.]+)%", proposal.reason[len(head) - 2:]))
    assert pair_gain >= single_gain >= 0 and proposal.reason.endswith(f" of one key ({single_gain:.2f}%)")
    # with the threshold just above it, the same measurements give a single move
    monkeypatch.setattr(search, "INTERACTION", together + 1e-9)
    alone = search.propose_model(best, SPACE, points)
    assert len(changed(alone, best)) == 1 and alone.reason == ""


def test_a_cold_run_starts_with_a_space_filling_design_then_follows_the_model(monkeypatch):
    monkeypatch.setattr(search, "DESIGN_POINTS", 2)
    start = {"BLOCK": 256, "WARPS": 1}
    best, points = start, [Point(start, start, True, math.log(coupled(start)))]
    reasons = []
    for _ in range(3):
        proposal = search.propose_model(best, SPACE, points)
        reasons.append(proposal.reason)
        value = coupled(proposal.config)
        points.append(Point(proposal.config, best, False, None if value is None else math.log(value)))
    assert reasons[:2] == ["space-filling start: point 1 of 2", "space-filling start: point 2 of 2"]
    assert not reasons[2].startswith("space-filling")
    # the first is just past the middle (centre 2.5, 2.5 octaves), on the side away from the start
    assert search.coordinates(points[1].config, SPACE) == [3.0, 3.0]
    monkeypatch.setattr(search, "DESIGN_POINTS", 0)
    assert search.propose_model(start, SPACE, points[:1]).reason == ""


def test_spread_is_the_farthest_from_what_was_measured_less_its_distance_from_the_centre():
    line = {"BLOCK": [2 ** i for i in range(9)]}  # 8 octaves: the centre is 2^4
    pool = [{"BLOCK": 2 ** i} for i in range(1, 9)]
    # from 2^0, x octaves up scores x - 1.25 |x - 4|: the centre; past it each octave gains 1 and costs 1.25
    assert search._spread(line, [{"BLOCK": 1}], pool) == {"BLOCK": 16}
    # from 2^0 and 2^6: the centre again (2 from both, 0 off centre), not 2^3 (3 apart, 1 off: 1.75)
    assert search._spread(line, [{"BLOCK": 1}, {"BLOCK": 64}], [c for c in pool if c["BLOCK"] != 64]) == {"BLOCK": 16}
    # far from both, 2^8 (2 octaves from 2^6, 4 off centre: -3) loses to 2^2 (2 apart, 2 off: -0.5)
    assert search._spread(line, [{"BLOCK": 1}, {"BLOCK": 64}, {"BLOCK": 16}],
                          [{"BLOCK": 4}, {"BLOCK": 256}]) == {"BLOCK": 4}


def test_a_failure_is_a_constraint_not_a_figure(monkeypatch):
    np = pytest.importorskip("numpy")
    seen, fits = [], []
    real, real_fitted = search._posterior, search.fitted
    monkeypatch.setattr(search, "_posterior", lambda X, y, *rest: seen.append((X, y)) or real(X, y, *rest))
    monkeypatch.setattr(search, "fitted", lambda X, y, space: fits.append(len(y)) or real_fitted(X, y, space))
    start = {"BLOCK": 1024, "WARPS": 4}
    failed = {"BLOCK": 8192, "WARPS": 16}
    points = [Point(start, start, True, math.log(100.0)), Point({"BLOCK": 2048, "WARPS": 4}, start, False, math.log(90.0)),
              Point(failed, start, False, None)]
    proposal = search.propose_model(start, SPACE, points)
    assert fits == [2]  # the process is fitted to what ran alone
    # and the failure is a place looked at, where the model is as sure as if it had run at the score it
    # expects there from what ran: no figure drags its neighbours down, and its uncertainty no longer
    # draws the search back to it
    (ran, scores), (X, y) = seen[-2], seen[-1]
    assert len(ran) == len(scores) == 2 and len(X) == len(y) == 3
    expected = real(ran, scores, np.array([search.coordinates(failed, SPACE)]), SPACE, *real_fitted(ran, scores, SPACE))[0]
    assert list(X[2]) == search.coordinates(failed, SPACE) and y[2] == pytest.approx(expected[0])
    # beyond the failure (both keys at least as far from the start): never proposed while anything else is left
    assert not search.beyond_failure(proposal.config, failed, start, SPACE)


def test_more_than_two_keys_move_only_when_the_model_expects_jump_times_the_gain(monkeypatch):
    import re

    space = {**SPACE, "STAGES": [1, 2, 3]}

    def value_of(c):
        return None if coupled(c) is None else coupled(c) * (1 + 0.05 * c["STAGES"])

    found = first_move(3, space, value_of, [{**c, "STAGES": 1} for c in configurations() if coupled(c)])
    if found is None:
        raise AssertionError("no step of three keys")
    best, points, proposal = found
    said = re.fullmatch(r"the model expects (\d+\.\d) times the gain of any step of one or two keys "
                        r"from 3 at once", proposal.reason)
    assert said and float(said.group(1)) >= search.JUMP, proposal
    monkeypatch.setattr(search, "JUMP", math.inf)  # never: the same measurements give a smaller step
    assert len(changed(search.propose_model(best, space, points), best)) <= 2


# --- the length scales and the signal are fitted to the scores of the space being searched -------------

def line_scores(values):
    np = pytest.importorskip("numpy")
    space = {"BLOCK": [2 ** i for i in range(len(values))]}
    return np.array([[float(i)] for i in range(len(values))]), np.array(values, dtype=float), space


def test_a_narrow_peak_on_a_plateau_fits_short_length_scales_and_a_smooth_trend_long_ones(monkeypatch):
    monkeypatch.setattr(search, "FIT_AFTER", 4)  # fitted after 4 scores, as the leave-one-out grid may choose
    X, y, space = line_scores([0.0, 0.01, -0.01, 0.0, 0.25, 0.0, 0.01, -0.01])  # one octave wide peak
    stretch, signal = search.fitted(X, y, space)[:2]
    assert stretch == min(search.STRETCHES) and signal < search.SIGNAL_SD
    X, y, space = line_scores([0.1 * i for i in range(8)])  # a steady rise: long scales explain it
    assert search.fitted(X, y, space)[0] == max(search.STRETCHES)
    assert search.fitted(X[:3], y[:3], space)[:2] == (1.0, search.SIGNAL_SD)  # too few scores: the defaults


@pytest.mark.parametrize("fit_after", [4, math.inf])  # tested whether or not the length scales are fitted
def test_the_scores_test_the_dome_against_one_about_the_best_measured_and_against_none(fit_after, monkeypatch):
    monkeypatch.setattr(search, "CURVATURE", 0.05)
    monkeypatch.setattr(search, "FIT_AFTER", fit_after)
    X, y, space = line_scores([-0.05 * (i - 3.5) ** 2 for i in range(8)])  # a dome about the middle
    assert search.fitted(X, y, space)[2:4] == (0.05, (3.5,))
    X, y, space = line_scores([-0.05 * (i - 6) ** 2 for i in range(8)])  # the same dome about 6, best measured
    assert search.fitted(X, y, space)[2:4] == (0.05, (6.0,))
    X, y, space = line_scores([0.0, 0.01, -0.01, 0.0, 0.01, -0.01, 0.0, 0.01])  # a plateau to both ends
    assert search.fitted(X, y, space)[2] == 0.0
    X, y, space = line_scores([0.0, 0.01, -0.01, 0.0])  # DOME_AFTER scores: enough to drop it
    assert search.DOME_AFTER == 4 and search.fitted(X, y, space)[2] == 0.0
    X, y, space = line_scores([0.0, 0.01, -0.01])  # one fewer: the prior's dome about the middle stands
    assert search.fitted(X, y, space)[2:4] == (0.05, (1.0,))
    monkeypatch.setattr(search, "CURVATURE", 0.0)  # no dome to test: none about the best either
    assert search.fitted(*line_scores([-0.05 * (i - 6) ** 2 for i in range(8)]))[2] == 0.0


def test_the_posterior_follows_the_dome_about_the_top_it_is_given(monkeypatch):
    np = pytest.importorskip("numpy")
    monkeypatch.setattr(search, "CURVATURE", 0.1)
    space = {"BLOCK": [2 ** i for i in range(31)]}
    X, y, at = np.array([[3.0]]), np.array([0.0]), np.array([[3.0], [18.0]])
    assert search._posterior(X, y, at, space, 1.0, None, None, (3.0,))[0][1] == pytest.approx(-0.1 * 15 ** 2)
    assert search._posterior(X, y, at, space, 1.0, None, 0.0, (3.0,))[0][1] == pytest.approx(0.0)


def test_the_dome_about_the_best_bends_the_sizes_not_a_flag(monkeypatch):
    # one score measured at the best: the mean elsewhere is the dome about it alone. An octave of BLOCK
    # costs CURVATURE; the flag's other value (a position, not an octave) costs nothing, so that the
    # flip is not expected to lose as much as an octave of a tile
    np = pytest.importorskip("numpy")
    monkeypatch.setattr(search, "CURVATURE", 0.05)
    space = {"BLOCK": [256, 512, 1024, 2048], "PERSISTENT": [0, 1], "num_stages": [1, 2, 4]}
    best = {"BLOCK": 512, "PERSISTENT": 1, "num_stages": 2}
    X = np.array([search.coordinates(best, space)])
    at = np.array([search.coordinates(c, space) for c in (
        {**best, "BLOCK": 1024}, {**best, "PERSISTENT": 0}, {**best, "num_stages": 4})])
    mean = search._posterior(X, np.array([0.0]), at, space, 1.0, None, None, tuple(X[0]))[0]
    assert mean == pytest.approx([-0.05, 0.0, -0.05])  # num_stages is measured in octaves: it bends


def test_the_proposal_uses_the_scales_fitted_to_what_was_measured(monkeypatch):
    np = pytest.importorskip("numpy")
    space = {"BLOCK": [2 ** i for i in range(10)], "WARPS": [1, 2]}
    start = {"BLOCK": 2 ** 4, "WARPS": 1}
    figures = {0: 100.0, 2: 101.0, 4: 130.0, 6: 99.0, 8: 100.0}  # a peak on a plateau
    points = [Point({"BLOCK": 2 ** i, "WARPS": 1}, start, i == 4, math.log(v)) for i, v in figures.items()]
    seen = []
    real = search._posterior
    monkeypatch.setattr(search, "_posterior", lambda X, y, at, space, *fit: seen.append(fit) or real(X, y, at, space, *fit))
    search.propose_model(start, space, points, min_gain=0.0)
    X, y = np.array([search.coordinates(p.config, space) for p in points]), np.array([p.score for p in points])
    assert seen[-1] == search.fitted(X, y, space) != (1.0, search.SIGNAL_SD, search.CURVATURE, (4.5, 0.5))


# --- the scores test whether two sizes are coupled: their ratio, not each alone, is what matters ---------

RIDGE_SPACE = {"BLOCK": [2 ** i for i in range(8, 16)], "WARPS": [1, 2, 4, 8, 16, 32]}
RIDGE_BEST = {"BLOCK": 2 ** 13, "WARPS": 4}


def ridge(config):
    """A ridge at 2**3 elements per thread (BLOCK 2**8 counted as 0) that rises along itself; a key moved
    alone falls off it."""
    block, warps = math.log2(config["BLOCK"]) - 8, math.log2(config["WARPS"])
    return 0.04 * block - 0.7 * (block - warps - 3) ** 2


def ridge_points(value_of=ridge):
    """The best on the ridge, then each key's one-position moves from it (all off the ridge)."""
    moves = [{}, {"BLOCK": 2 ** 12}, {"BLOCK": 2 ** 14}, {"WARPS": 2}, {"WARPS": 8}]
    return [Point(c := {**RIDGE_BEST, **m}, RIDGE_BEST, not m, value_of(c)) for m in moves]


def test_sizes_are_the_keys_measured_over_the_length_scale_of_sizes():
    space = {"BLOCK": [256, 512], "num_stages": [1, 2], "ONE": [4], "FLAG": [0, 1], "num_warps": [4, 8]}
    assert search.sizes(space) == [0, 3]  # positions in coordinates(), where ONE, of one value, has none


def test_the_scores_test_whether_two_sizes_are_coupled():
    np = pytest.importorskip("numpy")
    points = ridge_points()
    X = np.array([search.coordinates(p.config, RIDGE_SPACE) for p in points])
    y = np.array([p.score for p in points])
    assert search.fitted(X, y, RIDGE_SPACE)[4] == (0, 1)
    assert search.fitted(X[:search.DOME_AFTER], y[:search.DOME_AFTER], RIDGE_SPACE)[4] == (0, 1)
    assert search.fitted(X[:search.DOME_AFTER - 1], y[:search.DOME_AFTER - 1], RIDGE_SPACE)[4] is None  # too few
    # a hill in each key alone: no coupling explains it better than none
    hill = -0.05 * (X[:, 0] - 5) ** 2 - 0.05 * (X[:, 1] - 2) ** 2
    assert search.fitted(X, hill, RIDGE_SPACE)[4] is None


def test_on_a_ridge_whose_single_moves_fell_the_two_sizes_move_together(monkeypatch):
    proposal = search.propose_model(RIDGE_BEST, RIDGE_SPACE, ridge_points())
    assert proposal.config == {"BLOCK": 2 ** 14, "WARPS": 8}  # up the ridge, one position each
    assert proposal.reason.startswith("BLOCK and WARPS interact")
    # the process with no coupling reads the best as a hill's top: every neighbour measured, nothing to gain
    monkeypatch.setattr(search, "sizes", lambda space: [])
    assert search.propose_model(RIDGE_BEST, RIDGE_SPACE, ridge_points()) is None


def test_along_a_coupled_ridge_the_dome_charges_a_step_as_one_octave_of_one_size(monkeypatch):
    # one score measured at the dome's top: the mean elsewhere is the dome alone. Coupled, the step along the
    # ridge (both keys an octave) costs one octave's CURVATURE, not two; across it (one key up, the other
    # down) as before; one key alone, half along and half across, three quarters
    np = pytest.importorskip("numpy")
    monkeypatch.setattr(search, "CURVATURE", 0.05)
    X = np.array([search.coordinates(RIDGE_BEST, RIDGE_SPACE)])
    at = np.array([search.coordinates(c, RIDGE_SPACE) for c in (
        {"BLOCK": 2 ** 14, "WARPS": 8}, {"BLOCK": 2 ** 14, "WARPS": 2}, {"BLOCK": 2 ** 14, "WARPS": 4})])
    mean = search._posterior(X, np.array([0.0]), at, RIDGE_SPACE, 1.0, None, None, tuple(X[0]), (0, 1))[0]
    assert mean == pytest.approx([-0.05, -0.1, -0.0375])
    uncoupled = search._posterior(X, np.array([0.0]), at, RIDGE_SPACE, 1.0, None, None, tuple(X[0]))[0]
    assert uncoupled == pytest.approx([-0.1, -0.1, -0.05])


def test_from_a_coupled_ridge_the_search_walks_to_its_end_rather_than_flip_flags(monkeypatch):
    """The ridge rises to its end (BLOCK 2**15, 16 warps); num_stages and PERSISTENT move it by a percent.
    With the step along the ridge charged as two octaves, the steps went to the flags: 6 of these 24 starts
    reached the end within 8 steps, against 18."""
    space = {**RIDGE_SPACE, "num_stages": [1, 2, 3], "PERSISTENT": [0, 1]}

    def value_of(config):  # tune() takes a figure, ridge() gives a score
        return math.exp(ridge(config) + 0.01 * (config["num_stages"] - 2) - 0.01 * config["PERSISTENT"])

    starts = [{"BLOCK": 2 ** b, "WARPS": 2 ** (b - 11), "num_stages": s, "PERSISTENT": p}
              for b in (11, 12, 13, 14) for s in (1, 2, 3) for p in (0, 1)]  # on the ridge, below its end
    ends = [tune(value_of, start, 8, space=space)[0] for start in starts]
    assert sum((c["BLOCK"], c["WARPS"]) == (2 ** 15, 16) for c in ends) >= 18


# softmax (old)'s table (experiments/tune/h200/space-softmax.json), one of its replayed starts after 4 steps:
# its recorded scores (log GB/s) and the best of the time, BLOCK_SIZE 4096, 8 warps, 3 stages, PERSISTENT 1
SOFTMAX_SPACE = {"BLOCK_SIZE": [2048, 4096, 8192, 16384, 32768], "num_warps": [4, 8, 16, 32],
                 "num_stages": [1, 2, 3], "PERSISTENT": [0, 1]}
SOFTMAX_RUN = [((8192, 4, 1, 1), 8.014600252576724), ((8192, 16, 1, 1), 8.016373303403551),
               ((8192, 8, 3, 1), 8.09958447298225), ((16384, 8, 3, 0), 7.89220660487583),
               ((4096, 8, 3, 1), 8.138910047035834)]


def test_a_pair_not_read_as_coupled_must_promise_more_than_its_two_keys_one_at_a_time():
    """Before the rule, the model moved num_warps to 16 with PERSISTENT to 0 here: the pair's expected gain beat
    every single move's by the uncertainty of two keys in one run, not the two of its own keys added."""
    np = pytest.importorskip("numpy")
    points = [Point(dict(zip(SOFTMAX_SPACE, values)), dict(zip(SOFTMAX_SPACE, SOFTMAX_RUN[0][0])), True, score)
              for values, score in SOFTMAX_RUN]
    best = points[-1].config
    X = np.array([search.coordinates(p.config, SOFTMAX_SPACE) for p in points])
    assert search.fitted(X, np.array([p.score for p in points]), SOFTMAX_SPACE)[4] is None  # no coupling read
    proposal = search.propose_model(best, SOFTMAX_SPACE, points, seed=1)
    assert len(changed(proposal, best)) == 1 and proposal.reason == "", proposal


# a softmax (old) run, replayed from its H200 table (benchmarks/tune/traces.py's start 10): (BLOCK_SIZE, num_warps,
# num_stages, PERSISTENT), its origin's, kept, the score; num_stages 1 ran from the best (8192, 8, 2, 1)
SOFTMAX_STEPPED = [((4096, 16, 2, 0), (4096, 16, 2, 0), True, 7.951876182361057),
                   ((16384, 16, 2, 0), (4096, 16, 2, 0), False, 7.948159603615099),
                   ((8192, 4, 2, 0), (4096, 16, 2, 0), True, 8.029718175418969),
                   ((8192, 8, 2, 1), (8192, 4, 2, 0), True, 8.105264340595676),
                   ((8192, 8, 1, 1), (8192, 8, 2, 1), False, 8.10962759895923)]


def test_a_pair_one_of_whose_keys_already_moved_alone_from_the_best_and_ran_is_not_taken():
    """Before the rule the model moved BLOCK_SIZE to 4096 with num_stages to 1 here, the pair's expected gain
    above BLOCK_SIZE's alone: num_stages 1 had run from this best, so where keys add the pair gains what
    BLOCK_SIZE alone gains plus a loss already measured, and only the isotropic kernel's sd for two keys
    ranked it higher."""
    points = [Point(dict(zip(SOFTMAX_SPACE, values)), dict(zip(SOFTMAX_SPACE, origin)), kept, score)
              for values, origin, kept, score in SOFTMAX_STEPPED]
    best = points[3].config
    proposal = search.propose_model(best, SOFTMAX_SPACE, points, seed=10)
    assert sorted(changed(proposal, best)) != ["BLOCK_SIZE", "num_stages"], proposal
    assert not proposal.reason.startswith("BLOCK_SIZE and num_stages interact"), proposal


TILE_SPACE = {"BLOCK_M": [32, 64, 128, 256], "BLOCK_N": [32, 64, 128, 256], "BLOCK_K": [32, 64, 128],
              "num_warps": [4, 8], "num_stages": [2, 3, 4, 5]}
# a run on benchmarks/tune/synthetic.py's failing shape (seed 1, start 14): (BLOCK_M, BLOCK_N, BLOCK_K, num_warps,
# num_stages), its origin's, the score (None: it failed); the first two kept; BLOCK_M 128 alone failed from the best
TILE_STEPPED = [((64, 32, 64, 4, 5), (64, 32, 64, 4, 5), 6.321490517341208),
                ((64, 128, 64, 4, 5), (64, 32, 64, 4, 5), 6.5861833336856055),
                ((128, 128, 64, 8, 5), (64, 128, 64, 4, 5), None),
                ((64, 128, 32, 4, 2), (64, 128, 64, 4, 5), 6.492032231206864),
                ((64, 128, 128, 4, 2), (64, 128, 64, 4, 5), 6.552542193912192),
                ((32, 128, 64, 8, 3), (64, 128, 64, 4, 5), 6.303628685939595),
                ((128, 128, 64, 4, 5), (64, 128, 64, 4, 5), None)]


def test_a_pair_whose_single_move_failed_from_the_best_may_still_be_taken():
    """A key that fails alone can need another beside it (a larger tile, fewer stages to fit its shared
    memory): a single move that failed does not hold its pairs back, as one that ran does."""
    points = [Point(dict(zip(TILE_SPACE, values)), dict(zip(TILE_SPACE, origin)), i < 2, score)
              for i, (values, origin, score) in enumerate(TILE_STEPPED)]
    best = points[1].config
    proposal = search.propose_model(best, TILE_SPACE, points, seed=14)
    assert proposal.config == {**best, "BLOCK_M": 128, "num_stages": 2}, proposal
    assert proposal.reason.startswith("BLOCK_M and num_stages interact"), proposal


def test_the_pair_the_scores_read_as_coupled_moves_at_once_without_promising_more_than_its_keys_alone(monkeypatch):
    best, points = tune(coupled, {"BLOCK": 512, "WARPS": 16}, 5)  # up to 2048 x 8, on the ridge
    assert best == {"BLOCK": 2048, "WARPS": 8} and len(points) == 6
    proposal = search.propose_model(best, SPACE, points)
    assert proposal.config == {"BLOCK": 4096, "WARPS": 16} and proposal.reason.startswith("BLOCK and WARPS interact")
    # held to the sum of its two keys' expected gains, as a pair not read as coupled is, it gives way to one key
    monkeypatch.setattr(search, "_coupled_keys", lambda space, coupled: set())
    assert len(changed(search.propose_model(best, SPACE, points), best)) == 1



# --- where the prior mean is flat along a key, a step goes to its next value, not where only the sd is larger ---

def test_with_no_dome_a_key_steps_to_its_next_value_unless_a_farther_one_promises_jump_times_more(monkeypatch):
    """A flat prior mean ranks a key's far end above its next value by the far end's larger sd alone."""
    monkeypatch.setattr(search, "CURVATURE", 0.0)
    monkeypatch.setattr(search, "JUMP", math.inf)  # a farther value never promises enough
    space = {"BLOCK": [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]}
    best = {"BLOCK": 2048}
    points = [Point(best, best, True, math.log(100.0))]
    assert search.propose_model(best, space, points).config["BLOCK"] in (1024, 4096)
    monkeypatch.setattr(search, "JUMP", 1.0)  # a farther value taken wherever it promises more than the next
    assert search.propose_model(best, space, points).config["BLOCK"] not in (1024, 4096)


def test_a_flag_steps_to_its_next_value_under_the_dome(monkeypatch):
    """The dome bends sizes, never a flag: along a flag the prior mean is flat, dome or not."""
    monkeypatch.setattr(search, "CURVATURE", 0.05)
    monkeypatch.setattr(search, "JUMP", math.inf)
    space = {"MODE": ["a", "b", "c", "d"]}
    best = {"MODE": "a"}
    points = [Point(best, best, True, math.log(100.0))]
    assert search.propose_model(best, space, points).config == {"MODE": "b"}
    monkeypatch.setattr(search, "JUMP", 1.0)
    assert search.propose_model(best, space, points).config["MODE"] in ("c", "d")
