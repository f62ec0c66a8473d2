"""Replay kgit tune's search on an exhaustively measured space, from every starting configuration.

    python benchmarks/tune/replay.py space.json [--iterations 8] [--bar 0.97] [--min-gain-pct 1]

The search (kgit.loop.tune.propose) and the decision (kgit.model.decide, with the noise rule) are kgit's
own; only the test is replaced by a lookup in the table space.py measured. That answers what one run
on the device cannot: from which starting points does the search get within the bar of the space's
best in so many iterations, and where does it get stuck. Each table entry is one measurement, so the
replay sees each configuration's noise once, where a real run would draw it again.
"""

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kgit.loop import tune  # noqa: E402
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


def replay(table: dict[str, dict], space: dict, start: dict, iterations: int, min_gain_pct: float) -> list[dict]:
    """The kept best after the baseline and each iteration, as kgit tune would have recorded them."""
    best = table[key(start)]
    measured = [(start, start, True)]
    trail = [best]
    for _ in range(iterations):
        candidate = tune.propose(best["config"], space, measured)
        if candidate is None:
            break  # SPACE_EXHAUSTED: every neighbour of the best was measured
        row = table[key(candidate)]
        status = decide(compared(best, row, min_gain_pct), None)
        kept = status == Status.IMPROVED
        measured.append((candidate, best["config"], kept))
        if kept:
            best = row
        trail.append(best)
    return trail


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("space_json")
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--bar", type=float, default=0.97, help="fraction of the space's best to reach")
    parser.add_argument("--min-gain-pct", type=float, default=1.0, help="kgit.yaml min_gain_pct")
    args = parser.parse_args()

    measured = json.loads(Path(args.space_json).read_text())
    rows = measured["rows"]
    table = {key(r["config"]): r for r in rows}
    space = {k: sorted({r["config"][k] for r in rows}) for k in rows[0]["config"]
             if len({repr(r["config"][k]) for r in rows}) > 1}
    top = measured["best"]["value"]
    starts = [r for r in rows if r["correct"]]
    reached, needed, finals = 0, [], []
    for row in starts:
        trail = replay(table, space, row["config"], args.iterations, args.min_gain_pct)
        finals.append(trail[-1]["value"] / top)
        first = next((i for i, r in enumerate(trail) if r["value"] >= args.bar * top), None)
        if first is not None:
            reached += 1
            needed.append(first)
    shipped = measured.get("shipped")
    print(f"{args.space_json}: {len(rows)} configurations, {len(starts)} correct; best {top:.5g}")
    if shipped and shipped["correct"]:
        trail = replay(table, space, shipped["config"], args.iterations, args.min_gain_pct)
        print(f"from the shipped CONFIG ({shipped['value'] / top:.1%} of the best): "
              + " -> ".join(f"{r['value'] / top:.1%}" for r in trail))
    print(f"from each of the {len(starts)} correct configurations, {args.iterations} iterations, noise floor "
          f"{args.min_gain_pct}%: {reached} ({reached / len(starts):.0%}) reach {args.bar:.0%} of the best"
          + (f" (median {statistics.median(needed)} iterations)" if needed else "")
          + f"; the median start ends at {statistics.median(finals):.1%}, the worst at {min(finals):.1%}")


if __name__ == "__main__":
    main()
