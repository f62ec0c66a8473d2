"""Quick check of the decision's extension past max_pairs (kgit.model.noise.Bound): kgit tune's model at
its defaults, 100 seeded starts of each space (leave_one_out.reached), before (replay.EXTEND False) and
after; "97% within 8 / 99% within 16" and the mean pairs a decision. CPU only.

    PYTHONPATH=. python .stage/quick_extend.py [SPACE ...] [--starts 100] [--method model]
"""
import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "tune"))
sys.path.insert(0, str(ROOT))
import leave_one_out as loo  # noqa: E402
import replay  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("spaces", nargs="*")
parser.add_argument("--starts", type=int, default=100)
parser.add_argument("--method", default="model")
parser.add_argument("--only-after", action="store_true")
args = parser.parse_args()
names = args.spaces or list(loo.spaces())
means = {False: [], True: []}
for name in names:
    line = [name]
    for extend in ([True] if args.only_after else [False, True]):
        replay.EXTEND = extend
        started = time.time()
        got = loo.reached(name, args.method, None, args.starts)
        shares = [round(100 * v) for v in got["share"].values()]
        means[extend] += shares
        line.append(f"{'after' if extend else 'before'} {shares[0]}/{shares[1]} pairs {got['pairs']:.2f} "
                    f"({time.time() - started:.0f} s)")
    print(" | ".join(line), flush=True)
for extend, shares in means.items():
    if shares:
        print("after" if extend else "before", "mean of the shares", round(sum(shares) / len(shares), 2))
