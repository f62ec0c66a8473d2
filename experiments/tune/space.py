"""Measure every configuration of a kernel template's CONFIG_SPACE: the reference for kgit tune's bar.

    python experiments/tune/space.py skills/kernels/softmax/test_softmax.py [--quick] [--json OUT] [--limit N]

One process: for each configuration the template's CONFIG is replaced in place and the kernel's own
test objective runs (kgit.bench.run: the checks, then the timing), so each figure is the same headline
number `test_<name>.py --json [--quick]` prints and kgit tune decides on. For a fair comparison run
kgit tune with the same objective (kgit.yaml: `test_args: [--quick]` when --quick is given here).
Only for tests built on kgit.bench (the memory-bound kernels).
"""

import argparse
import itertools
import json
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from kgit import bench, sweep  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("test_path")
    parser.add_argument("--quick", action="store_true", help="the test's --quick objective")
    parser.add_argument("--json", help="write every configuration's result here")
    parser.add_argument("--limit", type=int, help="only the first N configurations (a smoke run)")
    args = parser.parse_args()

    test, template = sweep.load_test("space", args.test_path)
    metric = test.SPEC.metric
    shipped = dict(template.CONFIG)
    space = template.CONFIG_SPACE
    configs = [dict(zip(space, values)) for values in itertools.product(*space.values())][: args.limit]
    rows = []
    for i, config in enumerate(configs, 1):
        template.CONFIG.clear()
        template.CONFIG.update({**shipped, **config})
        try:
            result = bench.run(test.SPEC, quick=args.quick)
            row = {"config": config, "correct": result["correctness"], metric: result.get(metric),
                   "spread_pct": result.get("spread_pct"), "errors": result["errors"][:1]}
        except Exception as e:  # a configuration the compiler or the GPU refuses is a result too
            row = {"config": config, "correct": False, metric: None, "spread_pct": None, "errors": [repr(e)[:300]]}
        rows.append(row)
        print(f"[{i}/{len(configs)}] {config}: {row[metric]} {metric} (spread {row['spread_pct']}%)"
              + ("" if row["correct"] else f" FAILED {row['errors']}"), flush=True)

    measured = sorted((r for r in rows if r["correct"] and r[metric]), key=lambda r: -r[metric])
    shipped_row = next((r for r in rows if r["config"] == {k: shipped[k] for k in space}), None)
    summary = {"test": args.test_path, "quick": args.quick, "metric": metric, "configurations": len(rows),
               "correct": len(measured), "best": measured[0] if measured else None, "shipped": shipped_row,
               "rows": rows}
    print(f"best of {len(measured)} correct configurations: {summary['best']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
