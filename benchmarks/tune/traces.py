"""What kgit tune's search did from each start of one space: every proposal, its figure, whether it was kept.

    python benchmarks/tune/traces.py SPACE [--starts 10] [--iterations 16] [--all]

SPACE is a name of benchmarks/tune/leave_one_out.py ("rmsnorm", "synthetic plateau 1", ...). Each start
is replayed as leave_one_out.py replays it (kgit's decision on runs drawn around the table's figures),
with kgit.model.search's defaults. A start's line gives its figure and the figure it keeps after 8 and
16 iterations (as fractions of the space's best); then, unless it reached both bars or --all, one line
per proposal: K where it was kept, its figure, the keys it changed from the best of the time. The last
line counts, over the starts, those that kept each bar, those that measured a configuration at it
(kept or not: where the two differ, the decision is what missed), and the runs that failed; the line
before it, why each start that missed the 99% bar missed it (cause_of_miss).
"""

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import leave_one_out  # noqa: E402
import replay  # noqa: E402


MIN_GAIN_PCT = 1.0  # the decision's floor the replay runs at (kgit.yaml's default min_gain_pct)


def cause_of_miss(tried: list[dict], trail: list[dict], bar: float, budget: int,
                  min_gain_pct: float = MIN_GAIN_PCT) -> str | None:
    """Why the best kept after budget iterations is under bar (a figure), or None where it is not.
    tried[i] was compared with trail[i - 1], the best of its time. "search": nothing at the bar was
    measured within the budget; "lost": one was kept, then replaced by a slower one the noise showed
    faster; else the decision's, judged by the measured one of the largest true gain over the best it
    was compared with (the table's figures): "under the floor" where that gain is under min_gain_pct,
    which the decision cannot keep, "unresolved" where it is over and its pairs did not show it."""
    kept = trail[: budget + 1]
    if kept[-1]["value"] >= bar:
        return None
    if any(r["value"] >= bar for r in kept):
        return "lost"
    gains = [(r["value"] / trail[i - 1]["value"] - 1) * 100 for i, r in enumerate(tried[1: budget + 1], 1)
             if r["correct"] and r["value"] >= bar]
    if not gains:
        return "search"
    return "under the floor" if max(gains) < min_gain_pct else "unresolved"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("space")
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=16)
    parser.add_argument("--all", action="store_true", help="every start's proposals, not only the misses")
    args = parser.parse_args()
    measured, table, space, allowed = leave_one_out.load(args.space)
    top = measured["best"]["value"]
    rows = [r for r in measured["rows"] if r["correct"] and (allowed is None or allowed(r["config"]))]
    rows = random.Random(0).sample(rows, min(args.starts, len(rows)))
    last = args.iterations
    counts = {"kept 97% at 8": 0, f"kept 99% at {last}": 0, "measured 97% by 8": 0, f"measured 99% by {last}": 0,
              "failed runs": 0}
    causes = {}  # of the misses of the 99% bar: cause_of_miss's
    for i, row in enumerate(rows):
        tried = []
        trail = replay.replay(table, space, row["config"], last, MIN_GAIN_PCT,
                              replay.strategy("model", i, allowed=allowed), tried)
        at = [trail[min(b, len(trail) - 1)]["value"] / top for b in (8, last)]
        counts["kept 97% at 8"] += at[0] >= 0.97
        counts[f"kept 99% at {last}"] += at[1] >= 0.99
        counts["measured 97% by 8"] += any(r["correct"] and r["value"] >= 0.97 * top for r in tried[:9])
        counts[f"measured 99% by {last}"] += any(r["correct"] and r["value"] >= 0.99 * top for r in tried)
        counts["failed runs"] += sum(not r["correct"] for r in tried)
        cause = cause_of_miss(tried, trail, 0.99 * top, last)
        if cause:
            causes[cause] = causes.get(cause, 0) + 1
        print(f"start {i}: {row['value'] / top:.3f}, keeps {at[0]:.3f} at 8, {at[1]:.3f} at {last}"
              + ("" if len(trail) > last else f" (stopped after {len(trail) - 1})")
              + (f"; misses 99%: {cause}" if cause else ""))
        if args.all or at[0] < 0.97 or at[1] < 0.99:
            for step, r in enumerate(tried[1:], 1):
                before = trail[step - 1]["config"]
                kept = step < len(trail) and trail[step] is r
                changed = {k: v for k, v in r["config"].items() if before.get(k) != v}
                figure = f"{r['value'] / top:.3f}" if r["correct"] else "fails"
                print(f"  {step:2d} {'K' if kept else ' '} {figure} {changed}")
    print(f"misses of 99% at {last}: " + (", ".join(f"{k} {v}" for k, v in sorted(causes.items())) or "none"))
    print(f"{args.space}, {len(rows)} starts: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
