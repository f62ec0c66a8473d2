"""What kgit tune's search did from each start of one space: every proposal, its figure, whether it was kept.

    python benchmarks/tune/traces.py SPACE [--starts 10] [--iterations 16] [--all]

SPACE is a name of benchmarks/tune/leave_one_out.py ("rmsnorm", "synthetic plateau 1", ...). Each start
is replayed as leave_one_out.py replays it (kgit's decision on runs drawn around the table's figures),
with kgit.model.search's defaults. A start's line gives its figure and the figure it keeps after 8 and
16 iterations (as fractions of the space's best); then, unless it reached both bars or --all, one line
per proposal: K where it was kept, its figure, the keys it changed from the best of the time. The last
line counts, over the starts, those that kept each bar, those that measured a configuration at it
(kept or not: where the two differ, the decision is what missed), and the runs that failed.
"""

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import leave_one_out  # noqa: E402
import replay  # noqa: E402


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
    for i, row in enumerate(rows):
        tried = []
        trail = replay.replay(table, space, row["config"], last, 1.0,
                              replay.strategy("model", i, allowed=allowed), tried)
        at = [trail[min(b, len(trail) - 1)]["value"] / top for b in (8, last)]
        counts["kept 97% at 8"] += at[0] >= 0.97
        counts[f"kept 99% at {last}"] += at[1] >= 0.99
        counts["measured 97% by 8"] += any(r["correct"] and r["value"] >= 0.97 * top for r in tried[:9])
        counts[f"measured 99% by {last}"] += any(r["correct"] and r["value"] >= 0.99 * top for r in tried)
        counts["failed runs"] += sum(not r["correct"] for r in tried)
        print(f"start {i}: {row['value'] / top:.3f}, keeps {at[0]:.3f} at 8, {at[1]:.3f} at {last}"
              + ("" if len(trail) > last else f" (stopped after {len(trail) - 1})"))
        if args.all or at[0] < 0.97 or at[1] < 0.99:
            for step, r in enumerate(tried[1:], 1):
                before = trail[step - 1]["config"]
                kept = step < len(trail) and trail[step] is r
                changed = {k: v for k, v in r["config"].items() if before.get(k) != v}
                figure = f"{r['value'] / top:.3f}" if r["correct"] else "fails"
                print(f"  {step:2d} {'K' if kept else ' '} {figure} {changed}")
    print(f"{args.space}, {len(rows)} starts: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
