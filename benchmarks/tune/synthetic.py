"""Synthetic configuration spaces of the shapes that a tuner fitted to smooth spaces gets wrong.

Each is a table in the format benchmarks/tune/space.py writes (rows of config, correct, value,
spread_pct, error), made deterministically from a seed, so that benchmarks/tune/replay.py replays it
as it replays a space measured on the GPU. They are labelled synthetic everywhere they are reported:
their figures were made up, from the shapes measured spaces show, not measured.

- plateau: flash-attention's keys. Most configurations sit on a plateau at 80% of the best (within 2%);
  one narrow peak, where the figure rises only within two steps of it (93% one step away, 86% two).
- failing: a GEMM's tiles and stages. Every configuration whose tiles and stages need more shared memory
  than the seed's budget fails, and so does one with too many accumulator elements per thread (a third
  to a half of the space); the best is a large tile at the edge of what fits.
- coupled: a row kernel's BLOCK_SIZE and num_warps. The figure follows a narrow ridge of constant
  elements per thread (0.6 octave wide), rising gently along it: a single key moved off the ridge
  loses up to half the figure.
- noisy: a smooth, shallow space (every configuration within 15% of the best) whose runs spread by
  8-15%, against 0.1-3% on the measured ones: kgit's paired decision needs many runs to tell neighbours
  apart.
"""

import itertools
import math
import random

SHAPES = ("plateau", "failing", "coupled", "noisy")
PLATEAU_RISE = 2  # steps from the peak within which the plateau's figure rises: the only signal it gives


def table(shape: str, seed: int) -> dict:
    """The whole space of one shape, as space.py's JSON would hold it."""
    rng = random.Random(f"{shape}-{seed}")
    space, figure, spread = {"plateau": _plateau, "failing": _failing, "coupled": _coupled,
                             "noisy": _noisy}[shape](rng)
    rows = []
    for values in itertools.product(*space.values()):
        config = dict(zip(space, values))
        value = figure(config)
        rows.append({"config": config, "correct": value is not None, "value": value,
                     "spread_pct": spread(config) if value is not None else None,
                     "error": None if value is not None else "synthetic failure"})
    best = max((r for r in rows if r["correct"]), key=lambda r: r["value"])
    return {"test": None, "synthetic": f"{shape} (seed {seed})", "space_size": len(rows),
            "configurations": len(rows), "correct": sum(r["correct"] for r in rows), "best": best, "rows": rows}


def _position(space: dict, config: dict) -> list[int]:
    return [values.index(config[name]) for name, values in space.items()]


def _plateau(rng):
    space = {"BLOCK_M": [64, 128], "BLOCK_N": [32, 64, 128], "num_warps": [4, 8], "num_stages": [2, 3, 4],
             "GLUON": [0, 1, 2, 3], "NUM_BUFFERS": [2, 3]}
    peak = _position(space, {name: rng.choice(values) for name, values in space.items()})
    jitter = {}

    def figure(config):
        steps = sum(abs(a - b) for a, b in zip(_position(space, config), peak))
        if steps <= PLATEAU_RISE:
            return 1000.0 * (1.0, 0.93, 0.86)[steps]
        return 800.0 * jitter.setdefault(repr(config), 1 + rng.uniform(-0.02, 0.02))

    return space, figure, lambda config: rng.uniform(0.3, 3.0)


def plateau_ceiling(iterations: int, sizes: list[int] | None = None) -> float:
    """An upper bound on the share of starts from which any search that does not know where the peak lies
    measures the peak (the plateau's only configuration at 97% or more of its best) within `iterations`
    proposals after its start, averaged over the plateau spaces of every seed (the peak is drawn uniformly).

    Before a configuration within PLATEAU_RISE steps of the peak is measured, every figure the search has seen
    is the plateau's, whatever the peak: so from a given start its proposals up to that detection are the same
    for every peak not yet detected. The j-th proposal on that chain detects the peaks at distance 1 or 2 from
    it (or is the peak); those it finds with its n - j proposals left are at most T(n - j) of each group, where
    T(r) = 1 + 3 T(r - 1) counts what r proposals can reach (each measures one configuration, and its figure
    splits what is left three ways: one step from it, two, or further). The start is the peak or detects those
    within two steps of itself, of which its n proposals find at most T(n) a distance. The peaks found from a
    start, summed, are at most those counts, whatever the search.
    sizes: the number of values of each key (default: the plateau's space's)."""
    sizes = sizes or [len(values) for values in _plateau(random.Random(0))[0].values()]
    points = list(itertools.product(*(range(n) for n in sizes)))

    def steps(a, b):
        return sum(abs(x - y) for x, y in zip(a, b))

    def reach(r):
        # a proposal measures one configuration; its figure splits the rest by distance: each rise, or beyond
        return 0 if r == 0 else 1 + (PLATEAU_RISE + 1) * reach(r - 1)

    rises = range(1, PLATEAU_RISE + 1)  # the distances at which a figure says the peak is near
    at = {d: [sum(steps(p, q) == d for q in points) for p in points] for d in rises}
    widest = {d: max(counts) for d, counts in at.items()}  # the most configurations at d steps from one point
    chain = sum(1 + sum(min(widest[d], reach(iterations - j)) for d in rises) for j in range(1, iterations + 1))
    near_start = [1 + sum(min(at[d][i], reach(iterations)) for d in rises) for i in range(len(points))]
    return sum(min(len(points), near + chain) for near in near_start) / len(points) ** 2


def _failing(rng):
    space = {"BLOCK_M": [32, 64, 128, 256], "BLOCK_N": [32, 64, 128, 256], "BLOCK_K": [32, 64, 128],
             "num_warps": [4, 8], "num_stages": [2, 3, 4, 5]}
    budget = rng.choice([65536, 98304, 131072])  # bytes of shared memory a block may use
    reuse, stage_gain, warp_bias = rng.uniform(0.08, 0.14), rng.uniform(0.02, 0.06), rng.choice([-1, 1])

    def figure(c):
        if (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 2 * c["num_stages"] > budget:
            return None  # shared memory
        if c["BLOCK_M"] * c["BLOCK_N"] / (32 * c["num_warps"]) > 128:
            return None  # accumulator registers
        tile = math.log2(c["BLOCK_M"] * c["BLOCK_N"])
        score = (reuse * tile + stage_gain * min(c["num_stages"], 4) + 0.03 * math.log2(c["BLOCK_K"])
                 - 0.05 * (math.log2(c["BLOCK_M"]) - math.log2(c["BLOCK_N"])) ** 2
                 + 0.03 * warp_bias * (c["num_warps"] == 8))
        return 100.0 * math.exp(score)

    return space, figure, lambda config: rng.uniform(0.5, 3.0)


def _coupled(rng):
    space = {"BLOCK_SIZE": [256, 512, 1024, 2048, 4096, 8192, 16384, 32768], "num_warps": [1, 2, 4, 8, 16, 32],
             "num_stages": [1, 2, 3], "PERSISTENT": [0, 1]}
    per_thread, slope = rng.choice([4, 8, 16, 32]), rng.choice([-0.04, 0.04])
    stages, persistent = rng.uniform(-0.02, 0.02), rng.uniform(-0.03, 0.03)

    def figure(c):
        off = math.log2(c["BLOCK_SIZE"] / (32 * c["num_warps"]) / per_thread)
        score = (-0.5 * (off / 0.6) ** 2 * 0.7 + slope * math.log2(c["BLOCK_SIZE"])
                 + stages * c["num_stages"] + persistent * c["PERSISTENT"])
        return 1000.0 * math.exp(max(score, -2.5))

    return space, figure, lambda config: rng.uniform(0.1, 2.0)


def _noisy(rng):
    space = {"BLOCK_SIZE": [1024, 2048, 4096, 8192, 16384, 32768], "num_warps": [2, 4, 8, 16],
             "num_stages": [1, 2, 3], "PERSISTENT": [0, 1]}
    top = {"BLOCK_SIZE": rng.choice(space["BLOCK_SIZE"][1:-1]), "num_warps": rng.choice(space["num_warps"])}

    def figure(c):
        off = (math.log2(c["BLOCK_SIZE"] / top["BLOCK_SIZE"]) ** 2 + math.log2(c["num_warps"] / top["num_warps"]) ** 2)
        return 1000.0 * max(1 - 0.03 * off - 0.01 * (c["num_stages"] - 1) - 0.02 * c["PERSISTENT"], 0.85)

    return space, figure, lambda config: rng.uniform(8.0, 15.0)
