"""Does AUTOTUNE pick the fastest candidate, run after run? (issue 15, session 16)

    python benchmarks/explore/autotune_picks.py --out DIR      (GPU, about 2 minutes)

In session 16's sweep (experiments/sweep-h200-session16/call5-sweep/) flash attention's causal S 1024 at
head dim 128 ran CONFIG at 391 TFLOP/s where session 15's ran GLUON 2 at 448: AUTOTUNE picked another
candidate. Its `_fastest` timed each candidate in two rounds and kept each one's better figure. Calls 1-3
found the H200's clock dipping 15-25% for ~0.3 s once 0.8 s into a load (kgit/harness/timing.py), so a
candidate timed in the dip in both rounds reads slow. Hypothesis: the dip decides some picks, and
`median-of-5` (every candidate timed in five interleaved rounds, each one's median kept) would not.
Prediction: `best-of-two` (the templates' `_fastest`) picks a candidate 5-15% off the fastest in some
trials where the candidates are close; `median-of-5` one within ~2% of the fastest every time.
Outcome (experiments/sweep-h200-session16/call6-autotune-picks/): falsified, both pick a slow candidate
at times (16 trials each: best-of-two off by 24% and 8%, median-of-5 by 16%, 24% and 3.6% twice).
Next hypothesis, `timer-of-two` (not run yet): do_bench clears the L2 by writing 256 MB, and the timed
kernel writes those dirty lines back; the harness's Timer, which reads, is the truth here. Prediction:
timed the Timer's way, best-of-two picks within ~2% of the fastest in every trial.

For each shape: every candidate's figure by the harness's Timer (3 repeats, the median; the truth), then
TRIALS trials, each of both pickers in turn after PRELOAD_S of the default kernel's load (as a test's
checks leave the GPU). A pick's cost is its true time over the fastest candidate's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)
from kgit.harness.timing import Timer, gpu_median_ms  # noqa: E402

TRIALS = 4
PRELOAD_S = 0.5


def _runnable(run, candidates):
    """The candidates that run (each runs once here, and compiles), as the templates' `_fastest` finds them."""
    runnable = []
    for cfg in candidates:
        try:
            run(cfg)
        except Exception:
            continue
        runnable.append(cfg)
    return runnable


def best_of_two(run, candidates, timing=None):
    """The templates' `_fastest` (flash attention's do_bench settings): two rounds, each candidate's better
    median; `timing(fn)` in ms instead of do_bench if given."""
    timing = timing or (lambda fn: triton.testing.do_bench(fn, warmup=5, rep=20, return_mode="median"))
    runnable = _runnable(run, candidates)
    best_ms = [float("inf")] * len(runnable)
    for _ in range(2):
        for i, cfg in enumerate(runnable):
            best_ms[i] = min(best_ms[i], timing(lambda: run(cfg)))
    return runnable[best_ms.index(min(best_ms))]


def timer_of_two(run, candidates):
    """best-of-two timed as the harness times (kgit/harness/timing.py: the L2 cleared by a read, which
    leaves no dirty line to write back; do_bench clears it by writing 256 MB)."""
    return best_of_two(run, candidates, lambda fn: gpu_median_ms(fn, warmup_ms=5, rep_ms=20))


def median_of_five(run, candidates):
    """Five interleaved rounds, each candidate's median: a clock change falls on every candidate alike."""
    runnable = _runnable(run, candidates)
    times_ms = [[] for _ in runnable]
    for _ in range(5):
        for i, cfg in enumerate(runnable):
            times_ms[i].append(triton.testing.do_bench(lambda: run(cfg), warmup=2, rep=8, return_mode="median"))
    medians = [statistics.median(t) for t in times_ms]
    return runnable[medians.index(min(medians))]


# Call 6 ran best-of-two and median-of-5. Not yet run: timer-of-two, the next hypothesis (the L2 clear).
PICKERS = {"best-of-two": best_of_two, "median-of-5": median_of_five, "timer-of-two": timer_of_two}


def captured(template, call):
    """The (run, candidates) the template's AUTOTUNE would time for this call."""
    seen = []
    saved, template._fastest = template._fastest, lambda run, candidates: seen.append((run, candidates)) or candidates[0]
    template._TUNED.clear()
    try:
        call()
    finally:
        template._fastest = saved
        template._TUNED.clear()
    return seen[0]


def load(fn, seconds):
    torch.cuda.synchronize()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(4):
            fn()
        torch.cuda.synchronize()


def cases():
    fa = templates.load("flash-attention")
    gemm = templates.load("gemm")
    for B, H, S, D, causal in [(16, 16, 1024, 128, True), (16, 32, 1024, 64, False), (8, 32, 2048, 64, True)]:
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        call = lambda q=q, k=k, v=v, o=o, causal=causal: fa.flash_attention(q, k, v, causal=causal, out=o)  # noqa: E731
        yield f"attention B{B} H{H} S{S} D{D}{' causal' if causal else ''}", fa, call
    for n in (1024,):  # 2048^3 has one candidate (CONFIG): not timed
        a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        yield f"gemm {n}^3 bf16", gemm, lambda a=a, b=b, c=c: gemm.gemm(a, b, out=c)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".")
    parser.add_argument("--pickers", default=",".join(PICKERS), help="comma-separated, from: " + ", ".join(PICKERS))
    parser.add_argument("--trials", type=int, default=TRIALS)
    args = parser.parse_args()
    out = Path(args.out)
    pickers = {name: PICKERS[name] for name in args.pickers.split(",")}
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, template, call in cases():
        run, candidates = captured(template, call)
        truth = []
        for cfg in candidates:
            try:
                truth.append(statistics.median(Timer(repeats=3).times_ms(lambda: run(cfg), on_gpu=True)))
            except Exception:
                truth.append(float("inf"))
        fastest = min(truth)
        print(name, "candidates (ms):", " ".join(f"{t:.4f}" for t in truth), flush=True)
        for trial in range(args.trials):
            for picker_name, picker in pickers.items():
                load(call, PRELOAD_S)
                began = time.perf_counter()
                pick = picker(run, candidates)
                took = time.perf_counter() - began
                index = next(i for i, c in enumerate(candidates) if c == pick)
                row = dict(shape=name, trial=trial, picker=picker_name, pick=index,
                           cost_pct=100 * (truth[index] / fastest - 1), tune_s=took)
                rows.append(row)
                print(f"  trial {trial} {picker_name:11s} picked #{index} (+{row['cost_pct']:.1f}%) in {took:.2f} s",
                      flush=True)
        rows.append(dict(shape=name, truth_ms=truth, candidates=[str(c) for c in candidates]))
    (out / "autotune_picks.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
