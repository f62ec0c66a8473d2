"""kgit tune's search judged on spaces it was not tuned on: leave one space out.

    python benchmarks/tune/leave_one_out.py [--jobs 2] [--starts 100] [--choose-starts 30] [--markdown FILE]

The spaces: the five measured on the H200 (experiments/tune/h200/), two on an H100
(experiments/tune/h100/spaces/: cross-entropy's SUBSPACES and flash-attention's whole space) and the
synthetic ones of benchmarks/tune/synthetic.py (two seeds of each shape). For each space, the model's
settings (GRID: kgit.model.search's curvature, whose dome the scores then test; a space-filling start;
what a step of more than two keys must promise; whether its length scales are fitted to the scores,
after 4 of them, or never) are chosen on the other spaces alone, on a seeded sample of their starts
(--choose-starts): the setting of the best mean share over them (a worst-space rule lets the hardest
space choose alone). A space's family is left out with it (both softmax tables; both seeds of a
synthetic shape), so that a sibling cannot choose for it. The chosen setting is then replayed
on the space left out, from every correct start (a seeded sample of --starts where there are more),
beside coordinate descent, a seeded random draw and Optuna's TPE (if optuna is installed: the 'bench'
extra) at the same budget, all through benchmarks/tune/replay.py: kgit's own paired decision on runs
drawn around each configuration's measured figure and spread.

The bar, per space: at least 90% of starts keep a configuration at 97% of the space's best within 8
iterations and at 99% within 16, ahead of TPE and random at the same budget. A start counts by the
table's figure of the configuration it keeps at the budget (not by the figure its runs happened to
show, and not by one it kept earlier and lost to a slower one that the noise made look better).

An oracle (a search that knows the table and proposes its best unmeasured configuration first) is
replayed through the same decision: where even it keeps the bar's configuration from fewer than 90% of
starts, the runs are too noisy for kgit's decision (min_gain_pct 1, at most 12 pairs) to tell the
configurations apart, and the bar is marked undecidable there, beside its verdict, which stands.

Beside the model's shares, the no-information bound (no_information): the share of starts from which a
search that knows nothing of where the best lies measures a configuration at the bar within the budget,
computed exactly from the fraction of the space at the bar. Where it is far under 90% (a plateau with one
narrow peak), a search meets the bar only as far as the space's figures lead it there.
"""

import argparse
import itertools
import json
import math
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "tune"))
sys.path.insert(0, str(ROOT))
import replay  # noqa: E402
import synthetic  # noqa: E402
from kgit.model import search  # noqa: E402

H200 = ROOT / "experiments" / "tune" / "h200"
H100 = ROOT / "experiments" / "tune" / "h100" / "spaces"
MEASURED = {  # name: (family, table, re-measured leaders)
    "softmax (old)": ("softmax", H200 / "space-softmax.json", None),
    "gemm": ("gemm", H200 / "space-gemm.json", H200 / "remeasured-gemm.json"),
    "softmax": ("softmax", H200 / "spaces" / "space-softmax.json", None),
    "rmsnorm": ("rmsnorm", H200 / "spaces" / "space-rmsnorm.json", None),
    "layernorm": ("layernorm", H200 / "spaces" / "space-layernorm.json", None),
    "cross-entropy": ("cross-entropy", H100 / "space-cross-entropy.json", None),
    # filled from its 59 measured representatives by benchmarks/tune/attention_space.py
    "flash-attention": ("flash-attention", H100 / "space-flash-attention-whole.json", None)}
# The part of a table replayed where the whole space was not measured: a product of fewer values, whole
# (experiments/tune/h100/spaces/README.md says why)
SUBSPACES = {"cross-entropy": {"CHUNK": [16384, 131072], "num_stages": [1, 3]}}
SEEDS = (1, 2)
# LENGTH_SCALE is no longer chosen here: every space left out chose 2.5 octaves over 1.0 and 1.5 in the
# two runs before (experiments/tune/leave-one-out/), and FIT_AFTER (inf: never fitted) takes its place
GRID = {"CURVATURE": [0.0, 0.05], "DESIGN_POINTS": [0, 2], "JUMP": [math.inf, 1.5], "FIT_AFTER": [4, math.inf]}
BARS = ((0.97, 8), (0.99, 16))  # (fraction of the space's best, iterations)
METHODS = ("model", "descent", "random", "tpe", "oracle")


def spaces() -> dict[str, str]:
    """Every space's name -> its family."""
    found = {name: family for name, (family, _, _) in MEASURED.items()}
    found.update({f"synthetic {shape} {seed}": f"synthetic {shape}" for shape in synthetic.SHAPES for seed in SEEDS})
    return found


def others(families: dict[str, str], name: str) -> list[str]:
    """The spaces a setting for name is chosen on: every one outside its family."""
    return [n for n, family in families.items() if family != families[name]]


def load(name: str):
    """(measured, table, space, allowed) of a space by name."""
    if name in SUBSPACES:
        measured, table, space = replay.tabulate(within(json.loads(MEASURED[name][1].read_text()), SUBSPACES[name]))
    elif name in MEASURED:
        _, path, reference = MEASURED[name]
        measured, table, space = replay.load(str(path), reference and str(reference))
    else:
        _, shape, seed = name.split()
        measured, table, space = replay.tabulate(synthetic.table(shape, int(seed)))
    return measured, table, space, replay.constraints(measured)


def within(measured: dict, subspace: dict) -> dict:
    """The table's rows inside subspace (key: the values kept), its best among them."""
    rows = [r for r in measured["rows"] if all(r["config"][k] in values for k, values in subspace.items())]
    return {**measured, "rows": rows, "best": max((r for r in rows if r["correct"]), key=lambda r: r["value"])}


def tpe(seed: int, space: dict, allowed):
    """propose(best, space, points) drawn by Optuna's TPE (4 random draws, then its multivariate model),
    told every figure measured so far (a failure as a failed trial). A configuration it draws again, or
    one the constraints refuse, is told its known score (or a failure) without a run, and it draws again;
    after 50 such draws, a seeded random one."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    names = list(space)
    distributions = {n: optuna.distributions.CategoricalDistribution(space[n]) for n in names}
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=4, multivariate=True))
    told, asked = [], []

    def tell(trial, score):
        if score is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, score)

    def propose(best, space, points):
        for p in points[len(told):]:  # the start, then what was measured of the last proposal
            if asked:
                tell(asked.pop(), p.score)
            else:  # the start, or a random draw after 50 repeats: measured without being asked
                failed = p.score is None
                study.add_trial(optuna.trial.create_trial(
                    params={n: p.config[n] for n in names}, distributions=distributions, value=p.score,
                    state=optuna.trial.TrialState.FAIL if failed else optuna.trial.TrialState.COMPLETE))
            told.append(p)
        seen = {search.key({n: p.config[n] for n in names}): p.score for p in points}
        for _ in range(50):
            trial = study.ask(distributions)
            config = {**best, **trial.params}
            k = search.key({n: config[n] for n in names})
            if k not in seen and (allowed is None or allowed(config)):
                asked.append(trial)  # told its figure once it is measured
                return config
            tell(trial, seen.get(k))
        return search.propose_random(best, space, points, seed=seed, allowed=allowed)

    return propose


def oracle(table: dict):
    """propose(best, space, points) of a search that knows the whole table: the best configuration not yet
    measured, whatever keys it changes. It is no rival (the bar compares with TPE and random) but a
    ceiling: where its runs cannot be told apart by kgit's paired decision (noise, min_gain_pct), even
    it does not keep them, and no search could."""
    ranked = sorted((r for r in table.values() if r["correct"]), key=lambda r: -r["value"])

    def propose(best, space, points):
        seen = {search.key(p.config) for p in points}
        return next((r["config"] for r in ranked if search.key(r["config"]) not in seen), None)

    return propose


def reached(name: str, method: str, setting: dict | None = None, starts: int | None = None, seed: int = 0) -> dict:
    """For each bar of BARS, the share of starts (a seeded sample of starts of them) whose kept best reaches
    it; setting: kgit.model.search's settings for the model."""
    for attribute, value in (setting or {}).items():
        setattr(search, attribute, value)
    measured, table, space, allowed = load(name)
    top = measured["best"]["value"]
    rows = [r for r in measured["rows"] if r["correct"] and (allowed is None or allowed(r["config"]))]
    if starts and starts < len(rows):
        rows = random.Random(seed).sample(rows, starts)
    budget = max(b for _, b in BARS)
    got = {bar: 0 for bar in BARS}
    for i, row in enumerate(rows):
        if method == "tpe":
            propose = tpe(seed * 100_003 + i, space, allowed)
        elif method == "oracle":
            propose = oracle(table)
        else:
            propose = replay.strategy(method, seed * 100_003 + i, allowed=allowed)
        trail = replay.replay(table, space, row["config"], budget, 1.0, propose)
        for fraction, iterations in BARS:
            # what the search keeps at the budget, by its figure in the table: a start that kept the bar's
            # configuration, then a slower one the noise made look better, does not count
            got[(fraction, iterations)] += trail[min(iterations, len(trail) - 1)]["value"] >= fraction * top
    return {"starts": len(rows), "share": {bar: n / len(rows) for bar, n in got.items()}}


def no_information(name: str) -> dict:
    """For each bar of BARS, the share of starts from which a search that knows nothing of where the best
    lies measures a configuration at the bar within the budget: every order of visiting the space is then
    as good as a draw without replacement, so the chance is exact. A start at the bar counts; from any
    other, iterations draws among the rest of the configurations the constraints allow (a failure is
    drawn too: such a search cannot know it fails) miss all K at the bar with probability
    C(rest - K, iterations) / C(rest, iterations). What a search reaches beyond it came from the space's
    signal (or a prior that happened to point at its best); where it is under 90%, no search without
    such signal meets the bar."""
    measured, table, _, allowed = load(name)
    top = measured["best"]["value"]
    pool = [r for r in table.values() if allowed is None or allowed(r["config"])]
    starts = [r for r in pool if r["correct"]]
    found = {}
    for fraction, iterations in BARS:
        at_bar = sum(r["correct"] and r["value"] >= fraction * top for r in pool)
        rest = len(pool) - 1
        miss = math.comb(rest - at_bar, iterations) / math.comb(rest, iterations)
        # a start at the bar counts; from one under it, the at_bar others are among the rest
        under = sum(r["value"] < fraction * top for r in starts) / len(starts)
        found[fraction, iterations] = 1 - under * miss
    return found


def reachable(name: str) -> dict | None:
    """For each bar, the most any search that does not know the space's best can reach, where the space's
    shape bounds it (the plateau's: synthetic.plateau_ceiling, its peak the only configuration at either bar);
    None where nothing does."""
    if not name.startswith("synthetic plateau"):
        return None
    return {(fraction, iterations): synthetic.plateau_ceiling(iterations) for fraction, iterations in BARS}


def verdict(share: dict, rivals: list[dict], ceiling: dict, reach: dict | None = None) -> str:
    """The bar's verdict on the model's shares: met when both reach 90% and no rival (TPE, random) does
    better at either; where the oracle's share (ceiling) is under 90%, said to be undecidable beside it,
    and where no search without the best's place can reach 90% (reach), said to be out of reach; the
    verdict stands as the bar reads."""
    ahead = all(share[b] >= r[b] for r in rivals for b in BARS)
    found = "met" if all(share[b] >= 0.9 for b in BARS) and ahead else "**not met**"
    undecidable = [f"{f:.0%} within {b}" for f, b in BARS if ceiling[f, b] < 0.9]
    if undecidable:
        found += f" (undecidable at {' and '.join(undecidable)}: the oracle keeps it from fewer than 90%)"
    out = [(f"{f:.0%} within {b}", reach[f, b]) for f, b in BARS if reach and reach[f, b] < 0.9]
    if out:
        found += (f" (out of reach at {' and '.join(bar for bar, _ in out)}: no search that does not know where the "
                  f"best lies gets there from more than {max(most for _, most in out):.1%} of starts)")
    return found


def _task(args):
    return reached(*args)


def optuna_missing() -> bool:
    import importlib.util
    return importlib.util.find_spec("optuna") is None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--starts", type=int, default=100, help="starts scored per space, a seeded sample")
    parser.add_argument("--choose-starts", type=int, default=30, help="starts per space the settings are chosen on")
    parser.add_argument("--only", nargs="+", help="these spaces alone (the choice still uses every other)")
    parser.add_argument("--markdown", help="also write the tables to this file")
    args = parser.parse_args()
    started = time.time()
    families = spaces()
    settings = [dict(zip(GRID, values)) for values in itertools.product(*GRID.values())]
    methods = [m for m in METHODS if m != "tpe" or not optuna_missing()]
    names = list(families)
    held_out = args.only or names
    with ProcessPoolExecutor(args.jobs) as pool:
        tasks = [(n, "model", s, args.choose_starts) for s in settings for n in names]
        grid = dict(zip([(repr(s), n) for s in settings for n in names], pool.map(_task, tasks)))

        def worth(s, name):  # the bar's two shares together, on one space
            return sum(grid[repr(s), name]["share"].values()) / len(BARS)

        def choice(among):
            return max(settings, key=lambda s: sum(worth(s, n) for n in among))

        chosen = {name: choice(others(families, name)) for name in held_out}
        tasks = [(n, m, chosen[n] if m == "model" else None, args.starts) for n in held_out for m in methods]
        scored = dict(zip([(n, m) for n in held_out for m in methods], pool.map(_task, tasks)))

    head = " | ".join(f"{f:.0%} within {b}" for f, b in BARS)
    lines = ["## Left out, one space at a time", "",
             f"| space left out | setting chosen on the others ({', '.join(GRID)}) | method | starts | {head} | bar "
             f"| no-information bound ({head.replace(' | ', ' / ')}) |",
             "|---|---|---|---|" + "---|" * len(BARS) + "---|---|"]
    for name in held_out:
        rivals = [scored[name, m]["share"] for m in methods if m in ("random", "tpe")]
        for m in methods:
            got = scored[name, m]
            bar = (verdict(got["share"], rivals, scored[name, "oracle"]["share"], reachable(name))
                   if m == "model" else "")
            setting = ", ".join(str(v) for v in chosen[name].values()) if m == "model" else ""
            bound = " / ".join(f"{share:.0%}" for share in no_information(name).values()) if m == "model" else ""
            lines.append(f"| {name} | {setting} | {m} | {got['starts']} | "
                         + " | ".join(f"{got['share'][b]:.0%}" for b in BARS) + f" | {bar} | {bound} |")
    everywhere = choice(names)
    lines += ["", "Chosen on every space (kgit.model.search's defaults): "
              + ", ".join(f"{k} {v}" for k, v in everywhere.items()) + "."]
    lines += ["", f"## Every setting, on {args.choose_starts} starts of each space "
                  f"(the mean of the shares at {head})", "",
              "| " + " | ".join(GRID) + " | " + " | ".join(names) + " |", "|---" * (len(GRID) + len(names)) + "|"]
    lines += [f"| {' | '.join(map(str, s.values()))} | " + " | ".join(f"{worth(s, n):.0%}" for n in names) + " |"
              for s in settings]
    if "tpe" not in methods:
        lines += ["", "Optuna is not installed here (pip install -e '.[bench]'): TPE was not replayed."]
    lines += ["", f"({time.time() - started:.0f} s, {args.jobs} processes)"]
    print("\n".join(lines))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
