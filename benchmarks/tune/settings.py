"""How kgit tune's model settings were chosen: a grid over them, replayed on every measured space, and the
choice made with each space left out.

    python benchmarks/tune/settings.py [--jobs 2] [--markdown settings.md]

For each setting of (LENGTH_SCALE, LENGTH_SCALE_FLAT, CURVATURE) in the grid, the share of correct starts
whose kept best reaches 97% of the space's best within 8 iterations (benchmarks/tune/replay.py, a first
run). Then, for each space, the setting that a choice made without it would pick (the best worst share
over the other spaces, then the best sum) and what that setting reads on the space left out: the figure to
expect on a template that was not used to choose.
"""

import argparse
import itertools
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "tune"))
sys.path.insert(0, str(ROOT))
import replay  # noqa: E402
from kgit.model import search  # noqa: E402

H200 = ROOT / "experiments" / "tune" / "h200"
SPACES = {"softmax (old)": (H200 / "space-softmax.json", None),
          "gemm": (H200 / "space-gemm.json", H200 / "remeasured-gemm.json"),
          "softmax": (H200 / "spaces" / "space-softmax.json", None),
          "rmsnorm": (H200 / "spaces" / "space-rmsnorm.json", None),
          "layernorm": (H200 / "spaces" / "space-layernorm.json", None)}
GRID = {"LENGTH_SCALE": [1.0, 1.2, 1.5, 2.0], "LENGTH_SCALE_FLAT": [2.0, 3.0, 4.0, 6.0],
        "CURVATURE": [0.05, 0.075, 0.1, 0.125]}


def shares(setting: tuple) -> list[int]:
    """Percent of starts reaching 97% within 8 iterations on each space, with the model's settings set."""
    for name, value in zip(GRID, setting):
        setattr(search, name, value)
    return [round(100 * replay.share_reaching(str(table), "model", [8], reference=reference and str(reference))
                  ["share"][8]) for table, reference in SPACES.values()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--markdown", help="also write the tables to this file")
    args = parser.parse_args()
    settings = list(itertools.product(*GRID.values()))
    with ProcessPoolExecutor(args.jobs) as pool:
        found = dict(zip(settings, pool.map(shares, settings)))
    names = list(SPACES)
    lines = ["| " + " | ".join(GRID) + " | " + " | ".join(names) + " |", "|---" * (len(GRID) + len(names)) + "|"]
    lines += [f"| {' | '.join(map(str, s))} | {' | '.join(map(str, v))} |" for s, v in found.items()]
    lines += ["", "| space left out | setting chosen on the others | their worst | the space left out |",
              "|---|---|---|---|"]
    for i, name in enumerate(names):
        def on_others(s):
            others = [v for j, v in enumerate(found[s]) if j != i]
            return min(others), sum(others)
        chosen = max(settings, key=on_others)
        lines.append(f"| {name} | {', '.join(map(str, chosen))} | {on_others(chosen)[0]}% | {found[chosen][i]}% |")
    print("\n".join(lines))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
