"""Issue 15: why the first timed figure of the fused MoE reads slow. In the run of all eight kernels
(experiments/sweep-h200-session15/, calls 4-5) the MoE's first of six repeats read 6.08 ms and the five
after it 4.88-5.01, and neither a longer warm-up nor a warm-up that clears the L2 as the timed loop does
cured it (it cured gemm's).

Times every call of the harness's loop (a read of 256 MB clears the L2, then the timed call), from an idle
GPU for SECONDS, each call's start and duration from CUDA events, while nvidia-smi samples the SM clock,
the power draw and the temperature every 20 ms. Prints, for each 100 ms of the run, the median call and the
samples' clocks and power, for the MoE at Mixtral's shape and, as a control, a dense GEMM of the same
duration class; writes DIR/first_figure.json.

    python benchmarks/explore/first_figure.py --out DIR [--parts onset,gaps,harness,pauses]
        onset (about 40 s): the timelines above; gaps (about 15 s): the same after idle gaps of 0.1-3 s;
        harness (about 50 s): the Timer's figures with a first warm-up of 250 and of 1500 ms;
        pauses (about 15 s): the Timer's figures after 0.4 s of load, with and without its pause

Hypotheses: (1) the clocks or the power limit: the slow calls coincide with a lower SM clock; (2) the
GPU's state is fine and the slow calls are the MoE's own (its allocations, its routing): the clock is
flat while the calls are slow; (3) they follow AUTOTUNE, which the harness's first figure runs in its
first call (its candidates' other tiles and buffers): slow after AUTOTUNE, not with CONFIG given.
Prediction: (1), the clock ramping or capped in the first 0.3-0.5 s.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.explore import templates  # noqa: E402
from kgit.harness.timing import _l2_clear  # noqa: E402

SECONDS = 1.5
IDLE_S = 3.0  # as between the harness's checks and its timing
GAPS_S = (0.1, 0.3, 1.0, 3.0)
CHECKS_S = 2.0  # the idle GPU while a test checks outputs on the host before it times
PRELOAD_S = 0.4  # the GPU busy before a function is timed


def timeline(fn, seconds):
    """(start ms, duration ms) of every call of fn after a clear of the L2, for `seconds` of GPU time."""
    clear = _l2_clear()
    fn()
    torch.cuda.synchronize()
    origin = torch.cuda.Event(enable_timing=True)
    origin.record()
    events = []
    begun = time.perf_counter()
    while time.perf_counter() - begun < seconds:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        clear()
        start.record()
        fn()
        end.record()
        events.append((start, end))
        if len(events) % 8 == 0:
            torch.cuda.synchronize()  # keep the host within a few calls of the GPU
    torch.cuda.synchronize()
    return [(origin.elapsed_time(s), s.elapsed_time(e)) for s, e in events]


def sampled(fn, seconds, log_path, idle_s=IDLE_S):
    sampler = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                                "--format=csv,noheader,nounits", "-lms", "20"],
                               stdout=open(log_path, "w"), stderr=subprocess.DEVNULL)
    time.sleep(idle_s)
    started = time.time()
    calls = timeline(fn, seconds)
    ended = time.time()
    time.sleep(0.2)
    sampler.terminate()
    sampler.wait()
    samples = []
    for line in open(log_path):
        parts = [p.strip() for p in line.split(",")]
        try:
            stamp = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S"))
            stamp += float("0." + parts[0].split(".")[1]) if "." in parts[0] else 0.0
            samples.append((stamp - started, float(parts[1]), float(parts[2]), float(parts[3])))
        except (ValueError, IndexError):
            continue
    return calls, samples, ended - started


def bins(calls, samples, width_ms=100.0):
    out = []
    for b in range(int(max(c[0] for c in calls) // width_ms) + 1):
        lo, hi = b * width_ms, (b + 1) * width_ms
        durations = [d for t, d in calls if lo <= t < hi]
        near = [s for s in samples if lo / 1e3 <= s[0] < hi / 1e3]
        out.append(dict(from_ms=lo, calls=len(durations),
                        median_ms=round(statistics.median(durations), 3) if durations else None,
                        sm_mhz=round(statistics.mean(s[1] for s in near)) if near else None,
                        watts=round(statistics.mean(s[2] for s in near)) if near else None,
                        celsius=max(s[3] for s in near) if near else None))
    return out


def print_bins(name, rows):
    print(name)
    for row in rows:
        print("  {from_ms:6.0f} ms  {calls:3d} calls  median {median_ms}  SM {sm_mhz} MHz  {watts} W  "
              "{celsius} C".format(**row), flush=True)


def after_gaps(fn, out):
    """Session 15's run found the slow calls 0.8-1.1 s after the load began, from an idle GPU. After a
    shorter idle gap, does the dip come again? A 1.5 s burst heats the GPU, then `gap` s idle, then a
    sampled burst."""
    results = {}
    for i, gap in enumerate(GAPS_S):
        timeline(fn, SECONDS)
        calls, samples, wall = sampled(fn, SECONDS, out / f"gap_{i}.csv", idle_s=gap)
        results[gap] = dict(bins=bins(calls, samples), wall_s=wall)
        print_bins(f"after a {gap} s gap", results[gap]["bins"])
    return results


def timer_ab(fns, field, values, before, **fixed):
    """The harness's Timer (3 repeats) with `field` set to each of `values` in turn, over three rounds;
    before(fn) sets up the GPU's state before each function is timed."""
    from kgit.harness.timing import Timer, spread_pct

    rows = []
    for round_ in range(3):
        for value in values:
            for name, fn in fns:
                before(fn)
                times = Timer(repeats=3, **fixed, **{field: value}).times_ms(fn, on_gpu=True)
                rows.append(dict(round=round_, kernel=name, times_ms=times, median_ms=statistics.median(times),
                                 spread_pct=spread_pct(times), **fixed, **{field: value}))
                print(f"round {round_} {field} {value:4d} {name:12s} repeats "
                      + " ".join(f"{t:.3f}" for t in times) + f"  spread {spread_pct(times):.1f}%", flush=True)
    return rows


def harness_warmups(fns):
    """The Timer as a test runs it (the GPU idle while the checks run on the host, then 3 repeats), its
    first figure warmed up for 250 ms (the harness's) and for 1500 ms; no pause, as in call 2."""
    return timer_ab(fns, "warmup_ms", (250, 1500), lambda fn: time.sleep(CHECKS_S), pause_ms=0)


def harness_pauses(fns):
    """Call 2 found the dip 0.8 s into every load, after any idle gap. A function timed while the GPU
    has been busy for PRELOAD_S (its checks, the function timed before it) then has its figures cross
    the dip, unless the Timer idles first: the Timer's figures with pause_ms 0 and 100 after a preload."""
    return timer_ab(fns, "pause_ms", (0, 100), lambda fn: timeline(fn, PRELOAD_S))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--parts", default="onset", help="comma-separated: onset, gaps, harness, pauses")
    args = p.parse_args()
    parts = args.parts.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    moe = templates.load("fused-moe")
    T, E, K, HD, I = 4096, 8, 2, 4096, 14336
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(T, HD, device="cuda", dtype=torch.bfloat16, generator=g)
    w13 = torch.randn(E, 2 * I, HD, device="cuda", dtype=torch.bfloat16, generator=g) * HD ** -0.5
    w2 = torch.randn(E, HD, I, device="cuda", dtype=torch.bfloat16, generator=g) * I ** -0.5
    logits = torch.randn(T, E, device="cuda", generator=g)
    y = torch.empty_like(x)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    results = {}
    def tuned_moe():  # as the harness's first figure runs it: AUTOTUNE in its first call, then the pick
        return moe.fused_moe(x, w13, w2, logits, K, out=y)

    def config_moe():
        return moe.fused_moe(x, w13, w2, logits, K, out=y, config=moe.CONFIG)

    def dense():
        return torch.matmul(a, b)

    if "gaps" in parts:
        results["gaps"] = after_gaps(config_moe, out)
    if "pauses" in parts:
        results["pauses"] = harness_pauses([("fused_moe", config_moe), ("dense 8192^3", dense)])
    if "harness" in parts:
        results["harness"] = harness_warmups([("fused_moe", config_moe), ("dense 8192^3", dense)])
    # the first call of each timeline is untimed: AUTOTUNE runs in tuned_moe's; CONFIG as given skips it
    for name, fn in [] if "onset" not in parts else [("fused_moe (AUTOTUNE in the first call)", tuned_moe),
                     ("fused_moe (CONFIG, no AUTOTUNE)", lambda: moe.fused_moe(x, w13, w2, logits, K, out=y,
                                                                               config=moe.CONFIG)),
                     ("dense 8192^3 (torch)", lambda: torch.matmul(a, b))]:
        calls, samples, wall = sampled(fn, SECONDS, out / f"smi_{len(results)}.csv")
        results[name] = dict(bins=bins(calls, samples), calls=calls, samples=samples, wall_s=wall)
        print_bins(name, results[name]["bins"])
    (out / "first_figure.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
