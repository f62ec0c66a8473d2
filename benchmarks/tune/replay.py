"""Replay kgit tune's search on an exhaustively measured space, from every starting configuration.

    python benchmarks/tune/replay.py space.json [space.json ...] [--strategy model descent random]
        [--iterations 8 40] [--bar 0.97] [--min-gain-pct 1] [--starts N] [--markdown replay.md]
        [--ignore-constraints]

Each strategy (kgit.model.search: the model-based search kgit tune uses, coordinate descent as it was
before, a seeded random draw) and the decision and the decision (kgit.model.decide, with the noise rule) are kgit's
own; only the test is replaced by a lookup in the table space.py measured. That answers what one run
on the device cannot: from which starting points does the search get within the bar of the space's
best in so many iterations, and where does it get stuck. Each table entry is one measurement, so the
replay sees each configuration's noise once, where a real run would draw it again.

The template's CONFIG_CONSTRAINTS (read from the triton_template.py beside the table's test) bound
every strategy as they bound kgit tune; a start that breaks one is skipped, as kgit tune refuses it.
--ignore-constraints replays the search without them.
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
sys.path.insert(0, str(ROOT))
from kgit.loop import tune  # noqa: E402
from kgit.model import search  # noqa: E402
from kgit.model import noise  # noqa: E402
from kgit.model.decide import decide  # noqa: E402
from kgit.model.record import Status  # noqa: E402
from kgit.model.result import TestResult  # noqa: E402


def key(config: dict) -> str:
    return json.dumps(config, sort_keys=True)


def result_of(row: dict) -> TestResult:
    return TestResult(True, row["correct"], row["error"], "value", row["value"], row["spread_pct"] or 0.0,
                             None, 0.0, "")


def compared(best: dict, row: dict, min_gain_pct: float) -> noise.Comparison:
    """The table's two figures as one pair, decided with the noise their spreads report (the table
    measured each configuration once, where kgit would measure pairs until the interval decides)."""
    result = result_of(row)
    if not result.passed:
        return noise.Comparison(first=result, best=[], candidate=[], log_ratios=[], failure=result,
                                failed_side="candidate")
    ratios = [math.log(row["value"] / best["value"])]
    sd = noise.test_sd_of(max(best["spread_pct"] or 0.0, row["spread_pct"] or 0.0))
    found = noise.interval(ratios, noise.Prior(sum_squares=sd * sd * 30, df=30))
    return noise.Comparison(first=result, best=[best["value"]], candidate=[row["value"]], log_ratios=ratios,
                            interval=found, verdict=noise.verdict(found, min_gain_pct) or "noise")


def strategy(name: str, seed: int = 0, min_gain_pct: float = 1.0, allowed=None):
    """propose(best, space, points) for a strategy the replay compares; allowed: the template's constraints."""
    if name == "descent":
        return lambda best, space, points: tune.propose(best, space, [(p.config, p.origin, p.kept) for p in points],
                                                        allowed)
    if name == "random":
        return lambda best, space, points: search.propose_random(best, space, points, seed=seed, allowed=allowed)
    if name == "model":
        return lambda best, space, points: search.propose_model(best, space, points, seed=seed,
                                                                min_gain=min_gain_pct / 100, allowed=allowed)
    raise SystemExit(f"unknown strategy {name!r}: model, descent or random")


def replay(table: dict[str, dict], space: dict, start: dict, iterations: int, min_gain_pct: float,
           propose=None, tried: list | None = None) -> list[dict]:
    """The kept best after the baseline and each iteration, as kgit tune would have recorded them.
    tried, if given, receives the row of each configuration measured (the start, then each proposal)."""
    propose = propose or strategy("model")
    best = table[key(start)]
    points = [search.Point(start, start, True, search.score_of(best["value"]))]
    trail = [best]
    if tried is not None:
        tried.append(best)
    for _ in range(iterations):
        candidate = propose(best["config"], space, points)
        if candidate is None:
            break  # SPACE_EXHAUSTED
        row = table[key(candidate)]
        if tried is not None:
            tried.append(row)
        status = decide(compared(best, row, min_gain_pct), None)
        kept = status == Status.IMPROVED
        points.append(search.Point(candidate, best["config"], kept,
                                   search.score_of(row["value"]) if row["correct"] else None))
        if kept:
            best = row
        trail.append(best)
    return trail


def load(path: str) -> tuple[dict, dict, dict]:
    measured = json.loads(Path(path).read_text())
    rows = measured["rows"]
    space = {k: sorted({r["config"][k] for r in rows}) for k in rows[0]["config"]
             if len({repr(r["config"][k]) for r in rows}) > 1}
    return measured, {key(r["config"]): r for r in rows}, space


def constraints(measured: dict):
    """The allows(config) of the template beside the table's test (its CONFIG_CONSTRAINTS), or None."""
    template = ROOT / Path(measured["test"]).parent / "triton_template.py"
    if not template.is_file():
        return None
    tunables = tune.read_tunables(template.read_text(), str(template.relative_to(ROOT)), check_config=False)
    return tunables.allows if tunables.constraints else None


def share_reaching(path: str, name: str, budgets: list[int], bar: float = 0.97, min_gain_pct: float = 1.0,
                   starts: int | None = None, seed: int = 0, use_constraints: bool = True) -> dict:
    """For each budget, the share of correct starting configurations whose kept best reaches bar x the best."""
    measured, table, space = load(path)
    allowed = constraints(measured) if use_constraints else None
    top = measured["best"]["value"]
    rows = [r for r in measured["rows"] if r["correct"] and (allowed is None or allowed(r["config"]))]
    if starts and starts < len(rows):
        rows = random.Random(seed).sample(rows, starts)
    reached, finals = {b: 0 for b in budgets}, {b: [] for b in budgets}
    found, failed = {b: 0 for b in budgets}, {b: 0 for b in budgets}
    for i, row in enumerate(rows):  # each start its own seed: one lucky draw must not count for every start
        tried = []
        trail = replay(table, space, row["config"], max(budgets), min_gain_pct,
                       strategy(name, seed * 100_003 + i, min_gain_pct, allowed), tried)
        for b in budgets:
            kept = trail[: b + 1]
            finals[b].append(kept[-1]["value"] / top)
            reached[b] += any(r["value"] >= bar * top for r in kept)
            # the search's part alone: whether it measured such a configuration, kept or not
            found[b] += any(r["correct"] and r["value"] >= bar * top for r in tried[: b + 1])
            failed[b] += sum(not r["correct"] for r in tried[: b + 1])
    return {"starts": len(rows), "reached": reached, "share": {b: reached[b] / len(rows) for b in budgets},
            "median_final": {b: statistics.median(finals[b]) for b in budgets},
            "measured": found, "failed": failed}


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
    parser.add_argument("--ignore-constraints", action="store_true",
                        help="replay without the templates' CONFIG_CONSTRAINTS")
    args = parser.parse_args()

    lines = [f"| table | strategy | starts | " + " | ".join(f"reach {args.bar:.0%} within {b}" for b in args.iterations)
             + " | " + " | ".join(f"median start ends at ({b})" for b in args.iterations)
             + " | " + " | ".join(f"measured {args.bar:.0%} within {b}" for b in args.iterations)
             + " | " + " | ".join(f"failed runs per start ({b})" for b in args.iterations) + " |",
             "|---|---|---|" + "---|" * (4 * len(args.iterations))]
    for path in args.space_json:
        for name in args.strategy:
            started = time.time()
            got = share_reaching(path, name, args.iterations, args.bar, args.min_gain_pct, args.starts, args.seed,
                                 not args.ignore_constraints)
            lines.append(f"| {Path(path).name} | {name} | {got['starts']} | "
                         + " | ".join(f"{got['reached'][b]} ({got['share'][b]:.0%})" for b in args.iterations)
                         + " | " + " | ".join(f"{got['median_final'][b]:.1%}" for b in args.iterations)
                         + " | " + " | ".join(f"{got['measured'][b]} ({got['measured'][b] / got['starts']:.0%})"
                                              for b in args.iterations)
                         + " | " + " | ".join(f"{got['failed'][b] / got['starts']:.1f}" for b in args.iterations)
                         + " |")
            print(lines[-1], f"({time.time() - started:.0f} s)", flush=True)
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
