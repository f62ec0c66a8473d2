"""Issue 15, session 30: GEMM at 4096^3 reads 0.994-0.999x cuBLAS (bar 1.00). Is the gap the clock?

    python benchmarks/explore/gemm_clocks.py [--out DIR] [--seconds 3] [--rounds 2]

Why: under ncu, which locks the SM clock to its base, the template's kernel kept the tensor pipe busy 89.1%
of the cycles against cuBLAS's 90.2% (session 28), ~1.1% apart; unlocked, kgit's timer reads 0.5-1.1% apart.
An H200 running dense bf16 GEMMs back to back can reach its 700 W limit and lower its clock. cuBLAS moves
fewer bytes (2-CTA clusters multicast the shared operand tile; 20.6% DRAM busy against our 24.9%), so it
may draw less power a flop and hold a higher clock. Here each side runs for --seconds, back to back (no L2
clear between launches: the sustained case) and then as kgit's timer times it (the L2 cleared before each
call: the sweep's figure), while nvidia-smi samples the SM clock, the power draw and the active
clock-throttle reasons every 50 ms; each side is checked against an fp32 product first.
Prediction: if power is the cause, cuBLAS holds a higher median clock (by about the gap) and ours shows the
software power cap (throttle bit 0x4) more often; if both hold the same clock, the gap is the rate within a
tile at the same clock, as ncu said.
Outcome, back to back (experiments/sweep-h200-session30/call1-clocks-sweep/): every side at the power cap in
every sample (689-691 W of 700, reason 0x4 only), the SM clock at 1545-1560 MHz in bf16 and 1470-1485 in
fp16 (1980 the maximum, ncu's lock 1590); the same clock for both sides within nvidia-smi's 15 MHz step
(cuBLAS one step higher in 3 of 4 fp16 pairs); cuBLAS 1.3-2.0% ahead in bf16 and 0.7-1.5% in fp16.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)
from gemm_4096_configs import VARIANTS, square_runs  # noqa: E402  (beside this file)

SIDES = ["CONFIG", "GROUP_M 4, 4 stages"]  # gemm_4096_configs.py's VARIANTS
QUERY = "clocks.sm,power.draw,clocks_throttle_reasons.active"
POWER_CAP = 0x4  # clocks_throttle_reasons: SW power cap


def sampled(run, seconds: float, timer=None) -> dict:
    """Run for about `seconds` while nvidia-smi samples: launches back to back, or, given kgit's timer, its
    timings one after another (the L2 cleared before each call, as the sweep times); the samples' figures."""
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)  # nvidia-smi's first sample comes late; let the kernel's own samples follow
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    launches, timed, t0 = 0, [], time.perf_counter()
    start.record()
    while time.perf_counter() - t0 < seconds:
        if timer is None:
            for _ in range(20):
                run()
            launches += 20
        else:
            timed.append(statistics.median(timer.times_ms(run, on_gpu=True)))
        torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    smi.terminate()
    out, _ = smi.communicate()
    samples = [[field.strip() for field in line.split(",")] for line in out.strip().splitlines()]
    samples = samples[len(samples) // 5:]  # the first fifth: the clock settling, and idle samples
    clocks = [float(s[0]) for s in samples if s[0].replace(".", "").isdigit()]
    power = [float(s[1]) for s in samples if s[1].replace(".", "").isdigit()]
    reasons = [int(s[2], 16) for s in samples if s[2].startswith("0x")]
    ms = statistics.median(timed) if timer is not None else start.elapsed_time(end) / launches
    return {"ms_a_launch": ms, "launches": launches or len(timed), "samples": len(samples),
            "sm_mhz_median": statistics.median(clocks) if clocks else None,
            "sm_mhz_min": min(clocks) if clocks else None,
            "watts_median": statistics.median(power) if power else None,
            "power_capped_share": sum(bool(r & POWER_CAP) for r in reasons) / len(reasons) if reasons else None,
            "reasons_seen": sorted({hex(r) for r in reasons})}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--size", type=int, default=4096)
    args = p.parse_args()
    out, timer, _, results = templates.begin(args.out)
    G = templates.load("gemm")
    n = args.size
    for dtype in (torch.bfloat16, torch.float16):
        ref, c, runs = square_runs(G, n, dtype, {name: VARIANTS[name] for name in SIDES})
        for name, run in runs.items():
            c.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
            if not err < 1e-2:
                sys.exit(f"{name} {dtype}: wrong output, max relative error {err:.3g}")
        for (round_, mode), (name, run) in itertools.product(
                itertools.product(range(args.rounds), ("back to back", "timed")), runs.items()):
            row = {"size": n, "dtype": str(dtype)[6:], "side": name, "round": round_, "mode": mode,
                   **sampled(run, args.seconds, timer if mode == "timed" else None)}
            row["tflops"] = 2 * n ** 3 / row["ms_a_launch"] * 1e-9
            results["rows"].append(row)
            print(f"{n}^3 {row['dtype']} round {round_} {mode:12s} {name:20s} {row['tflops']:6.1f} TFLOP/s, "
                  f"SM {row['sm_mhz_median']} MHz (min {row['sm_mhz_min']}), {row['watts_median']} W, "
                  f"power-capped {row['power_capped_share']}, reasons {row['reasons_seen']}", flush=True)
        (out / "gemm_clocks.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
