"""Replay kgit tune's search on an exhaustively measured space, from every starting configuration.

    python benchmarks/tune/replay.py space.json [space.json ...] [--strategy model descent random]
        [--iterations 8 40] [--bar 0.97] [--min-gain-pct 1] [--starts N] [--markdown replay.md]
        [--reference TABLE=REMEASURED ...] [--earlier-runs N] [--ignore-constraints] [--set NAME=VALUE ...]

Each strategy (kgit.model.search: the model-based search kgit tune uses, coordinate descent as it was
before, a seeded random draw) and the decision (kgit.loop.paired.compare, the paired runs until the
interval decides, and kgit.model.decide) are kgit's own; only the test is replaced: each run of a
configuration is its figure in the table space.py measured, times a log-normal draw whose spread is the
one the table recorded for it (the range of the test's 3 repeats, as kgit reads it: noise.test_sd_of).
That answers what one run on the device cannot: from which starting points does the search get within
the bar of the space's best in so many iterations, and where does it get stuck. The noise prior carries
over from decision to decision as in kgit tune (noise.Prior.from_decisions).

--reference FILE takes the figures of a re-measurement (space.py --only ... --repeats N, a median of N
runs each) for the configurations it holds: the table's own best is the largest of many single noisy
draws, so the bar "97% of the best" would otherwise be set by its luckiest draw.

--earlier-runs N replays, before each start, N runs of the same length from other starts (seeded), and
gives what they measured to the model as kgit tune gives it another clone's pulled records of the kernel
on the same GPU (search.propose_model's elsewhere): the second run of a team, not the first.

The template's CONFIG_CONSTRAINTS (read from the kernel file beside the table's test, named for its folder) bound
every strategy as they bound kgit tune; a start that breaks one is skipped, as kgit tune refuses it.
--ignore-constraints replays the search without them.

--set LENGTH_SCALE=1.2 replays the model with one of kgit.model.search's settings changed (SETTINGS below):
how much the result depends on them. benchmarks/tune/leave_one_out.py chooses them, one space left out
at a time (experiments/tune/leave-one-out/).
"""

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_PAIRS = 12  # kgit tune's default --max-pairs
# kgit tune's decision extends an estimate above the floor past MAX_PAIRS (kgit.model.noise.Bound);
# --no-extend replays the decision as it was before, for the device time it costs (pairs a decision)
EXTEND = True
SETTINGS = ("LENGTH_SCALE", "LENGTH_SCALE_FLAT", "CURVATURE", "SIGNAL_SD", "NOISE_SD", "DESIGN_POINTS", "INTERACTION", "JUMP")  # what --set may change
sys.path.insert(0, str(ROOT))
from kgit.config import kernel_file  # noqa: E402
from kgit.loop import paired, tune  # noqa: E402
from kgit.model import search  # noqa: E402
from kgit.model import noise  # noqa: E402
from kgit.model.decide import TUNE_KEEP_ABOVE_PCT, decide  # noqa: E402
from kgit.model.record import Status  # noqa: E402
from kgit.model.result import TestResult  # noqa: E402


def key(config: dict) -> str:
    return json.dumps(config, sort_keys=True)


def result_of(row: dict, value: float | None = None) -> TestResult:
    return TestResult(True, row["correct"], row["error"], "value", value or row["value"], row["spread_pct"] or 0.0,
                      None, 0.0, "")


def run_of(row: dict, rng: random.Random):
    """run(timing_only) for kgit's compare: the table's figure times a draw of the noise it recorded."""
    sigma = noise.test_sd_of(row["spread_pct"] or 0.0) / math.sqrt(2)  # of one run, not of a pair's ratio
    return lambda timing_only: result_of(row, row["value"] * math.exp(rng.gauss(0.0, sigma)) if row["correct"]
                                         else None)


def compared(best: dict, row: dict, min_gain_pct: float, history: list[list[float]], rng: random.Random,
             max_pairs: int = MAX_PAIRS) -> noise.Comparison:
    """kgit tune's paired comparison of row against best, on simulated runs (kept above zero, ended as
    noise within min_gain_pct, extended past max_pairs as kgit tune's are); history: the log-ratios of
    the earlier decisions of this run, the prior kgit pools (appended to)."""
    found = paired.compare(run_of(best, rng), run_of(row, rng), noise.Prior.from_decisions(history),
                            min_gain_pct, max_pairs, warm_best=False, keep_above_pct=TUNE_KEEP_ABOVE_PCT,
                            extend=EXTEND)
    if found.log_ratios:
        history.append(found.log_ratios)
    return found


def strategy(name: str, seed: int = 0, min_gain_pct: float = 1.0, allowed=None, elsewhere=()):
    """propose(best, space, points) for a strategy the replay compares; allowed: the template's constraints;
    elsewhere: Points another run measured (the model learns from them, as kgit tune from pulled records)."""
    if name == "descent":
        return lambda best, space, points: tune.propose(best, space, [(p.config, p.origin, p.kept) for p in points],
                                                        allowed)
    if name == "random":
        return lambda best, space, points: search.propose_random(best, space, points, seed=seed, allowed=allowed)
    if name == "model":
        def model(best, space, points):
            found = search.propose_model(best, space, points, seed=seed, min_gain=min_gain_pct / 100,
                                         allowed=allowed, elsewhere=elsewhere)
            return found and found.config
        return model
    raise SystemExit(f"unknown strategy {name!r}: model, descent or random")


def replay(table: dict[str, dict], space: dict, start: dict, iterations: int, min_gain_pct: float,
           propose=None, tried: list | None = None, pairs: list | None = None) -> list[dict]:
    """The kept best after the baseline and each iteration, as kgit tune would have recorded them.
    tried, if given, receives the row of each configuration measured (the start, then each proposal);
    pairs, the number of pairs each decision took (its device time: two runs a pair)."""
    propose = propose or strategy("model")
    best = table[key(start)]
    rng, history = random.Random(json.dumps(start, sort_keys=True)), []
    points = [search.Point(start, start, True, search.score_of(best["value"]))]
    trail = [best]
    if tried is not None:
        tried.append(best)
    for _ in range(iterations):
        candidate = propose(best["config"], space, points)
        if candidate is None:
            break  # SPACE_EXHAUSTED or NO_EXPECTED_GAIN
        row = table[key(candidate)]
        if tried is not None:
            tried.append(row)
        found = compared(best, row, min_gain_pct, history, rng)
        if pairs is not None:
            pairs.append(len(found.log_ratios))
        kept = decide(found, None) == Status.IMPROVED
        value = found.candidate_value() or found.first.value  # what kgit records: the median of its runs
        points.append(search.Point(candidate, best["config"], kept, search.score_of(value) if row["correct"] else None))
        if kept:
            best = row
        trail.append(best)
    return trail


def load(path: str, reference: str | None = None) -> tuple[dict, dict, dict]:
    """The table, its rows by configuration and its space; with reference (a space.py --remeasure file),
    the rows it holds take its figures, and the table's best is the best of the result."""
    return tabulate(json.loads(Path(path).read_text()), reference)


def tabulate(measured: dict, reference: str | None = None) -> tuple[dict, dict, dict]:
    """load's work on a table already read (or made: benchmarks/tune/synthetic.py)."""
    rows = measured["rows"]
    if reference:
        again = {key(r["config"]): r for r in json.loads(Path(reference).read_text())["rows"] if r["correct"]}
        rows = [{**r, "value": again[key(r["config"])]["value"]} if key(r["config"]) in again else r for r in rows]
        measured = {**measured, "rows": rows,
                    "best": max((r for r in rows if r["correct"]), key=lambda r: r["value"])}
    space = {k: sorted({r["config"][k] for r in rows}) for k in rows[0]["config"]
             if len({repr(r["config"][k]) for r in rows}) > 1}
    return measured, {key(r["config"]): r for r in rows}, space


def constraints(measured: dict):
    """The allows(config) of the template beside the table's test (its CONFIG_CONSTRAINTS), or None."""
    folder = (ROOT / (measured.get("test") or "no test")).parent
    template = folder / kernel_file(folder.name)
    if not template.is_file():
        return None
    tunables = tune.read_tunables(template.read_text(), str(template.relative_to(ROOT)), check_config=False)
    return tunables.allows if tunables.constraints else None


def share_reaching(path: str, name: str, budgets: list[int], bar: float = 0.97, min_gain_pct: float = 1.0,
                   starts: int | None = None, seed: int = 0, use_constraints: bool = True,
                   reference: str | None = None, earlier_runs: int = 0) -> dict:
    """For each budget, the share of correct starting configurations whose kept best reaches bar x the best."""
    measured, table, space = load(path, reference)
    allowed = constraints(measured) if use_constraints else None
    top = measured["best"]["value"]
    rows = [r for r in measured["rows"] if r["correct"] and (allowed is None or allowed(r["config"]))]
    if starts and starts < len(rows):
        rows = random.Random(seed).sample(rows, starts)
    reached, finals = {b: 0 for b in budgets}, {b: [] for b in budgets}
    found, failed = {b: 0 for b in budgets}, {b: 0 for b in budgets}
    pairs = []  # of every decision of every start, over the largest budget
    for i, row in enumerate(rows):  # each start its own seed: one lucky draw must not count for every start
        elsewhere = []
        for run in range(earlier_runs):  # what earlier runs from other starts measured, as another clone's records
            other = random.Random(seed * 7919 + i * 31 + run).choice([r for r in rows if r is not row])
            earlier = []
            replay(table, space, other["config"], max(budgets), min_gain_pct,
                   strategy(name, seed * 100_003 + i + 50_000 * (run + 1), min_gain_pct, allowed), earlier)
            elsewhere += [search.Point(r["config"], r["config"], False, search.score_of(r["value"]) if r["correct"]
                                       else None) for r in earlier]
        tried = []
        trail = replay(table, space, row["config"], max(budgets), min_gain_pct,
                       strategy(name, seed * 100_003 + i, min_gain_pct, allowed, elsewhere), tried, pairs)
        for b in budgets:
            kept = trail[: b + 1]
            finals[b].append(kept[-1]["value"] / top)
            reached[b] += any(r["value"] >= bar * top for r in kept)
            # the search's part alone: whether it measured such a configuration, kept or not
            found[b] += any(r["correct"] and r["value"] >= bar * top for r in tried[: b + 1])
            failed[b] += sum(not r["correct"] for r in tried[: b + 1])
    return {"starts": len(rows), "reached": reached, "share": {b: reached[b] / len(rows) for b in budgets},
            "median_final": {b: statistics.median(finals[b]) for b in budgets},
            "measured": found, "failed": failed, "pairs": sum(pairs) / len(pairs) if pairs else 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("space_json", nargs="+")
    parser.add_argument("--strategy", nargs="+", default=["model", "descent", "random"])
    parser.add_argument("--iterations", type=int, nargs="+", default=[8, 40])
    parser.add_argument("--bar", type=float, default=0.97, help="fraction of the space's best to reach")
    parser.add_argument("--min-gain-pct", type=float, default=1.0, help="kgit.yaml min_gain_pct")
    parser.add_argument("--starts", type=int, help="a seeded sample of the correct starts (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--reference", nargs="+", default=[],
                        help="TABLE=REMEASURED: take the re-measured figures for that table's leaders")
    parser.add_argument("--earlier-runs", type=int, default=0,
                        help="before each start, this many runs from other starts whose records the model learns "
                             "from (another clone's, pulled)")
    parser.add_argument("--ignore-constraints", action="store_true",
                        help="replay without the templates' CONFIG_CONSTRAINTS")
    parser.add_argument("--set", nargs="+", default=[], metavar="NAME=VALUE",
                        help="change one of kgit.model.search's settings for this replay")
    parser.add_argument("--no-extend", action="store_true",
                        help="decide as before the extension past max_pairs (kgit.model.noise.Bound)")
    args = parser.parse_args()
    global EXTEND
    EXTEND = not args.no_extend
    for pair in args.set:
        name, value = pair.split("=", 1)
        if name not in SETTINGS:
            raise SystemExit(f"--set {name}: not one of {', '.join(SETTINGS)}")
        setattr(search, name, type(getattr(search, name))(float(value)))
    references = dict(pair.split("=", 1) for pair in args.reference)

    lines = ["| table | strategy | starts | " + " | ".join(f"reach {args.bar:.0%} within {b}" for b in args.iterations)
             + " | " + " | ".join(f"median start ends at ({b})" for b in args.iterations)
             + " | " + " | ".join(f"measured {args.bar:.0%} within {b}" for b in args.iterations)
             + " | " + " | ".join(f"failed runs per start ({b})" for b in args.iterations)
             + f" | pairs a decision ({max(args.iterations)}) |",
             "|---|---|---|" + "---|" * (4 * len(args.iterations) + 1)]
    for path in args.space_json:
        for name in args.strategy:
            started = time.time()
            got = share_reaching(path, name, args.iterations, args.bar, args.min_gain_pct, args.starts, args.seed,
                                 not args.ignore_constraints, references.get(path), args.earlier_runs)
            table = path + (" (reference: re-measured leaders)" if path in references else "")
            table += f" (after {args.earlier_runs} earlier run{'s' * (args.earlier_runs > 1)})" if args.earlier_runs else ""
            lines.append(f"| {table} | {name} | {got['starts']} | "
                         + " | ".join(f"{got['reached'][b]} ({got['share'][b]:.0%})" for b in args.iterations)
                         + " | " + " | ".join(f"{got['median_final'][b]:.1%}" for b in args.iterations)
                         + " | " + " | ".join(f"{got['measured'][b]} ({got['measured'][b] / got['starts']:.0%})"
                                              for b in args.iterations)
                         + " | " + " | ".join(f"{got['failed'][b] / got['starts']:.1f}" for b in args.iterations)
                         + f" | {got['pairs']:.2f} |")
            print(lines[-1], f"({time.time() - started:.0f} s)", flush=True)
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
