"""gemm61's probe (issue 52): the Gluon kernel's wide tiles (128x192 = 128 + 64 wide, 128x160 = 128 + 32) where
CONFIG's 128x256 tiles fill their last wave badly, on one H100.

    export PYTHONPATH=$PWD && git show main:skills/kernels/gemm/gemm.py > .stage/old_gemm.py
    python .stage/probe_gemm61.py OUT_DIR 200 .stage/old_gemm.py    (4-6 minutes, compiles included)

argv: the output directory, a deadline in seconds (shapes left when it passes are skipped), main's gemm.py.

First a child process (a hang guard: a ring protocol that deadlocks would hang this process's every later call) runs
the wide tiles forced on ragged shapes (CHECKS: the last tile-row 2 rows deep, the last tile's second box wholly or
partly past N, K not a multiple of 64), each output NaN-poisoned and checked against the fp32 product. If it fails
or runs past CHECK_S, the wide tiles are turned off (WIDE_TILES = []) and the rest timed, saying so.

Then for each shape, sides, every output NaN-poisoned and checked against the fp32 product (TF32 off) and
torch.matmul before it is timed, and after: timed by kgit's median (gpu_median_ms: the L2 cleared clean before each
call) in two rounds of opposite order:
  old          main's gemm, autotuned (its pick printed)   new   this tree's, autotuned (its pick printed)
  old:config   main's CONFIG forced (128x256 persistent)   new:wide  the wide tile wide_tile picks, forced (at
               2048x5000x4096, where the rule does not fire, 128x160 forced, on B's kept lined copy as B_KEEP reads)
  torch        cuBLAS
Writes probe_gemm61.txt (what it prints) and probe_gemm61.jsonl (a row a side) under OUT_DIR, line by line.

Predictions (written before any run; the reasoning in .stage/gemm61_notes.md), x cuBLAS:
  shape                   old (main)   new          new:wide     new:wide / old:config (time)
  2048x4608x3584 bf16     0.86-0.93    0.95-1.06    0.95-1.06    0.80-0.90
  2048x4608x3584 fp16     0.86-0.93    0.95-1.06    0.95-1.06    0.80-0.90
  384x14336x4096 bf16     0.86-0.93    0.92-1.02    0.92-1.02    0.82-0.95
  2048x5000x4096 bf16     0.85-0.90    = old        0.82-0.95    0.93-1.05  (the rule: 4% predicted, not offered)
  4096^3, 1024^3, 2048x3584x18944, 512x4096x4096 bf16: new/old 0.98-1.02 (their candidates are unchanged)
"""

import importlib.util
import json
import os
import subprocess
import sys
import time

import torch
import triton

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kgit.harness.timing import gpu_median_ms, spread_pct  # noqa: E402

KERNEL = os.path.join(ROOT, "skills/kernels/gemm/gemm.py")
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
CHECK_S = 150  # the child's checks, compiles included
# (M, N, K, dtype), the most important first, so that a deadline cuts the least
SHAPES = [(2048, 4608, 3584, "bf16"), (2048, 5000, 4096, "bf16"), (384, 14336, 4096, "bf16"),
          (2048, 4608, 3584, "fp16"), (4096, 4096, 4096, "bf16"), (2048, 3584, 18944, "bf16"),
          (512, 4096, 4096, "bf16"), (1024, 1024, 1024, "bf16")]
# (M, N, K, dtype, tile): M 130 and 257 (the last tile-row 2 or 1 rows deep); N 400 on 192 (the last tile's first box
# holds 384-399, its second, 512-575, lies wholly past N) and 4296 on 160 (the last tile's second box, 4288-4319, holds
# 4288-4295); K 200 (4 steps, the last 8 deep) and 4136 (65 steps: 13 laps of 5 stages)
CHECKS = [(130, 400, 200, "bf16", (128, 192)), (257, 4296, 4136, "fp16", (128, 160))]
PREDICT = {  # (M, N, K, dtype): side -> x cuBLAS, and "ratio": new:wide / old:config in time
    (2048, 4608, 3584, "bf16"): {"old": "0.86-0.93", "new": "0.95-1.06", "new:wide": "0.95-1.06", "ratio": "0.80-0.90"},
    (2048, 4608, 3584, "fp16"): {"old": "0.86-0.93", "new": "0.95-1.06", "new:wide": "0.95-1.06", "ratio": "0.80-0.90"},
    (384, 14336, 4096, "bf16"): {"old": "0.86-0.93", "new": "0.92-1.02", "new:wide": "0.92-1.02", "ratio": "0.82-0.95"},
    (2048, 5000, 4096, "bf16"): {"old": "0.85-0.90", "new": "new/old 0.98-1.02", "new:wide": "0.82-0.95",
                                 "ratio": "0.93-1.05"},
}
KEYS = ("BLOCK_M", "BLOCK_N", "num_stages", "GROUP_M", "PERSISTENT", "GLUON", "USE_TMA", "TAIL_BLOCK_M",
        "TAIL_BLOCK_N", "EPILOGUE_SUBTILE", "C_PTR", "B_KEEP")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wrong(c, a, b):
    """Why c is wrong against the fp32 product and torch.matmul's, or None."""
    if not torch.isfinite(c).all():
        return "non-finite (an element unwritten)"
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = a.float() @ b.float()
    torch.backends.cuda.matmul.allow_tf32 = prev
    for what, r in (("fp32 product", ref), ("torch.matmul", torch.matmul(a, b).float())):
        err = ((c.float() - r).norm() / r.norm()).item()
        if err > 1e-2:
            return f"relative error {err:.3g} against the {what}"
    return None


def wide_config(g, tile):
    return g.wide_tile_config(tile)


def child_checks():
    """The hang guard's process: the wide tiles forced on CHECKS, each line 'ok' or 'WRONG'; exit 1 if any."""
    new = load("gemm_branch", KERNEL)
    bad = 0
    for M, N, K, dt, tile in CHECKS:
        torch.manual_seed(M + N + K)
        a = torch.randn(M, K, device="cuda").to(DT[dt])
        b = torch.randn(K, N, device="cuda").to(DT[dt])
        c = torch.full((M, N), float("nan"), device="cuda", dtype=DT[dt])
        for call in range(2):  # the second through the plan (_replay)
            c.fill_(float("nan"))
            new.gemm(a, b, out=c, config=wide_config(new, tile))
            torch.cuda.synchronize()
            why = wrong(c, a, b)
            if not why and (new.last_config["GLUON"] != 1 or new.last_config["BLOCK_N"] != tile[1]):
                why = f"the wide tile did not run ({new._GLUON_FAILED or 'not offered here'})"
            bad += why is not None
            print(f"check {M}x{N}x{K} {dt} {tile[0]}x{tile[1]} call {call + 1}: ran GLUON={new.last_config['GLUON']} "
                  f"BLOCK_N={new.last_config['BLOCK_N']}: {'WRONG ' + why if why else 'ok'}", flush=True)
    sys.exit(1 if bad else 0)


def main(out, deadline_s, old_path):
    t0 = time.time()
    os.makedirs(out, exist_ok=True)
    txt = open(os.path.join(out, "probe_gemm61.txt"), "w")
    rows = open(os.path.join(out, "probe_gemm61.jsonl"), "w")

    def say(*parts):
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        txt.write(line + "\n")
        txt.flush()

    def row(**fields):
        rows.write(json.dumps(fields) + "\n")
        rows.flush()

    new = load("gemm_branch", KERNEL)
    old = load("gemm_main", old_path)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    say(f"gemm61 probe on {torch.cuda.get_device_name()} ({sms} SMs), torch {torch.__version__}, triton "
        f"{new.triton.__version__}; old = {old_path}; deadline {deadline_s} s")
    try:  # the hang guard
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--check"], capture_output=True, text=True,
                               timeout=CHECK_S, env={**os.environ, "PYTHONPATH": ROOT})
        for line in (child.stdout + child.stderr[-2000:]).strip().splitlines():
            say("  " + line)
        wide_ok = child.returncode == 0
        verdict = "all ok" if wide_ok else f"FAILED (exit {child.returncode})"
    except subprocess.TimeoutExpired as e:
        for line in (e.stdout or b"").decode(errors="replace").strip().splitlines():
            say("  " + line)
        wide_ok, verdict = False, f"HUNG or slow: past {CHECK_S} s"
    say(f"wide tile checks (child process, {time.time() - t0:.0f} s): {verdict}")
    row(kind="checks", ok=wide_ok, verdict=verdict)
    if not wide_ok:
        new.wide_tile = lambda M, N, K, sms: None
        say("the wide tiles are turned off for the rest (wide_tile None): new = old's candidates; no new:wide side")
    torch.backends.cuda.matmul.allow_tf32 = False
    failures = 0
    for M, N, K, dt in SHAPES:
        if time.time() - t0 > deadline_s:
            say(f"{M}x{N}x{K} {dt}: skipped (past {deadline_s} s)")
            continue
        shape = f"{M}x{N}x{K}"
        torch.manual_seed(0)
        a = torch.randn(M, K, device="cuda").to(DT[dt])
        b = torch.randn(K, N, device="cuda").to(DT[dt])
        predict = PREDICT.get((M, N, K, dt), {})
        large = 2 * triton.cdiv(M, new.CONFIG["BLOCK_M"]) * triton.cdiv(N, new.CONFIG["BLOCK_N"]) >= sms
        rule = new.wide_tile(M, N, K, sms) if large else None  # a small output's candidates never ask it
        say(f"{shape} {dt}: wide_tile {rule if large else 'not asked (small output)'}, "
            f"K-steps CONFIG {new.whole_k_steps(M, N, K, sms, new.CONFIG)}, "
            + ", ".join(f"{t[0]}x{t[1]} {new.wide_tile_k_steps(M, N, K, sms, t):.1f}" for t in new.WIDE_TILES))
        sides = {"old": (old, None), "new": (new, None)}
        if predict:  # the forced sides where a wide tile is in question
            sides["old:config"] = (old, {})
            if wide_ok:
                forced = wide_config(new, rule or (128, 160))
                sides["new:wide"] = (new, forced if rule else {**forced, "B_KEEP": 1})
        outs, ran, calls = {}, {}, {}
        for side, (g, config) in sides.items():
            outs[side] = torch.empty(M, N, device="cuda", dtype=DT[dt])
            start = time.perf_counter()
            for _ in range(3):  # the first autotunes or plans, the others replay the plan (B_KEEP copies on the 2nd)
                outs[side].fill_(float("nan"))
                g.gemm(a, b, out=outs[side], config=config)
                torch.cuda.synchronize()
                why = wrong(outs[side], a, b)
                if why:
                    failures += 1
                    say(f"  {shape} {dt} {side}: WRONG {why}")
            ran[side] = " ".join(f"{k}={g.last_config[k]}" for k in KEYS if g.last_config.get(k))
            say(f"  {side}: first three calls {time.perf_counter() - start:.1f} s; ran {ran[side]}")
            calls[side] = lambda g=g, config=config, c=outs[side]: g.gemm(a, b, out=c, config=config)
        tref = torch.empty(M, N, device="cuda", dtype=DT[dt])
        calls["torch"] = lambda: torch.matmul(a, b, out=tref)
        times = {side: [] for side in calls}
        for order in (list(calls), list(reversed(calls))):
            for side in order:
                times[side].append(gpu_median_ms(calls[side], warmup_ms=5, rep_ms=30) * 1e3)
        for side, (g, config) in sides.items():  # the timed path is the checked path: checked again
            outs[side].fill_(float("nan"))
            g.gemm(a, b, out=outs[side], config=config)
            torch.cuda.synchronize()
            why = wrong(outs[side], a, b)
            if why:
                failures += 1
                say(f"  {shape} {dt} {side} after timing: WRONG {why}")
        mean = {side: sum(ts) / len(ts) for side, ts in times.items()}
        for side, ts in times.items():
            x_torch = mean["torch"] / mean[side]
            against = {"new": "old", "new:wide": "old:config"}.get(side)
            vs = mean[side] / mean[against] if against in mean else None
            if not predict and side == "new":
                guess = "new/old time 0.98-1.02"
            elif side == "new:wide":
                guess = f"x torch {predict.get(side, '?')}, time /old:config {predict.get('ratio', '?')}"
            elif side in predict:
                guess = predict[side] if "/" in predict[side] else f"x torch {predict[side]}"
            else:
                guess = ""
            say(f"  {shape} {dt} {side:10s} {mean[side]:8.2f} us  x torch {x_torch:6.3f}  "
                + (f"time this/{against} {vs:6.3f}" if vs else " " * 26)
                + f"  rounds {ts[0]:.2f}/{ts[1]:.2f} (spread {spread_pct(ts):.1f}%)  predicted: {guess}")
            row(kind="time", shape=shape, dtype=dt, side=side, us=mean[side], rounds=ts, x_torch=x_torch,
                time_vs=vs, against=against, ran=ran.get(side, "cuBLAS"), predicted=guess)
        say(f"  ({time.time() - t0:.0f} s)")
    say(f"done: {failures} wrong outputs, {time.time() - t0:.0f} s")
    return failures


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        child_checks()
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    sys.exit(1 if main(sys.argv[1], float(sys.argv[2]), sys.argv[3]) else 0)
