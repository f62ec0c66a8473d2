"""gemm63's probe: 2048x5000x4096 in one persistent Gluon launch of mixed tiles (128x256 over C[:, :4096], 128x128
past it), against main's pick and cuBLAS, on one H100.

    export PYTHONPATH=$PWD && git show main:skills/kernels/gemm/gemm.py > .stage/old_gemm.py
    python .stage/probe_gemm63.py OUT_DIR 420 .stage/old_gemm.py    (about 3-5 minutes, compiles included)

argv: the output directory, a deadline in seconds (shapes left when it passes are skipped), main's gemm.py.

First a child process (a hang guard: a ring whose phases or byte counts disagree between the two kinds of tile
deadlocks, and would hang this process's every later call) runs the mixed launch, the all-wide variant and the
one-box 128x256 forced on ragged shapes (CHECKS), each output NaN-poisoned and checked against the fp32 product. If
it fails or runs past CHECK_S, the mixed launch is turned off (mixed_tile False, no forced Gluon sides) and the rest
timed, saying so.

Then for each shape, sides, every output NaN-poisoned and checked against the fp32 product (TF32 off) and
torch.matmul before it is timed, and after: timed by kgit's median (gpu_median_ms: the L2 cleared clean before each
call) in two rounds of opposite order (old, new, the forced sides, cuBLAS; then the reverse):
  old         main's gemm, autotuned (its pick printed)     new          this tree's, autotuned (its pick printed)
  old:config  main's CONFIG forced (128x256, Triton)        new:g256     the persistent Gluon kernel on CONFIG's
  new:mixed   the mixed launch forced (mixed_tile_config)                128x256 tile, one 256-wide box, 3 stages,
  new:mixed0  the mixed kernel with every tile 128x256                   every tile 128x256 (no tail)
              (two 128-wide boxes; N_BIG past N)            torch        cuBLAS
Where B's rows are off lines (N=5000) the forced sides read B's kept lined copy (B_KEEP), as the autotunes' picks do,
but new:mixed-B: the mixed launch on B as it is, as the autotune's first pass times its candidates (the pick is then
timed against itself on the lined copy): if it loses there to CONFIG's candidates, new never picks it.
Writes probe_gemm63.txt (what it prints) and probe_gemm63.jsonl (a row a side) under OUT_DIR, line by line.
Predictions: .stage/gemm63_notes.md, and beside each row.
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
CHECK_S = 200  # the child's checks, compiles included
G256 = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3, "PERSISTENT": 1, "GLUON": 1,
        "EPILOGUE_SUBTILE": 0}
# (M, N, K, dtype, sides besides old, new and torch), the most important first, so that a deadline cuts the least
SHAPES = [(2048, 5000, 4096, "bf16", ("old:config", "new:g256", "new:mixed", "new:mixed0", "new:mixed-B")),
          (2048, 5000, 4096, "fp16", ("new:g256", "new:mixed")),
          (8192, 1600, 6400, "bf16", ("new:mixed",)),
          (4096, 4096, 4096, "bf16", ("new:g256", "new:mixed")),
          (2048, 4608, 3584, "bf16", ("new:g256", "new:mixed")),
          (384, 14336, 4096, "bf16", ("new:g256", "new:mixed")),
          (3000, 5000, 2000, "bf16", ("new:g256", "new:mixed"))]
# (M, N, K, dtype, side) on 132 SMs. 1000 x 5000 x 600 mixed: the cut at 3328, 8 x 13 = 104 tiles of 128x256 then
# 8 x 14 = 112 of 128x128 (the last holding columns 4992-4999), the last tile-row 104 deep, on 108 programs (one of
# each, or two narrow); 10 k-steps (the last 24 deep) on 3 stages. 257 x 20000 x 4136 mixed: the cut at 19968, 3 x 78
# wide tiles and 3 narrow ones (19968-19999), the last tile-row 1 row deep, 65 k-steps a tile, on 119 programs. The
# headline shape mixed. 1000 x 5000 x 600 all wide (mixed0: 8 x 20 tiles, the last's second box wholly past N) and
# one-box 128x256 (g256).
CHECKS = [(1000, 5000, 600, "bf16", "new:mixed"), (257, 20000, 4136, "fp16", "new:mixed"),
          (2048, 5000, 4096, "bf16", "new:mixed"), (1000, 5000, 600, "fp16", "new:mixed0"),
          (1000, 5000, 600, "bf16", "new:g256")]
PREDICT = {  # (M, N, K, dtype): side -> what is predicted for it (.stage/gemm63_notes.md)
    (2048, 5000, 4096, "bf16"): {"old": "x torch 0.87-0.89", "new": "picks mixed: x torch 0.90-1.01, /old 0.88-0.98",
                                 "new:g256": "x torch 0.83-0.90, /old:config 0.95-1.03",
                                 "new:mixed": "x torch 0.90-1.01, /new:g256 0.85-0.96",
                                 "new:mixed0": "/new:g256 0.97-1.03", "new:mixed-B": "x torch 0.68-0.80"},
    (2048, 5000, 4096, "fp16"): {"old": "x torch 0.87-0.89", "new": "picks mixed: x torch 0.90-1.01, /old 0.88-0.98",
                                 "new:g256": "x torch 0.83-0.90",
                                 "new:mixed": "x torch 0.90-1.01, /new:g256 0.85-0.96"},
    (8192, 1600, 6400, "bf16"): {"old": "x torch ~1.015", "new": "/old 0.92-1.01",
                                 "new:mixed": "x torch 0.97-1.10, /old 0.92-1.08"},
    (3000, 5000, 2000, "bf16"): {"new": "/old 0.98-1.02", "new:g256": "x torch 0.90-0.98",
                                 "new:mixed": "x torch 0.90-0.98"},
    (2048, 4608, 3584, "bf16"): {"new": "/old 0.98-1.02", "new:g256": "x torch 0.79-0.86",
                                 "new:mixed": "x torch 0.83-0.92"},
    (4096, 4096, 4096, "bf16"): {"new": "/old 0.98-1.02", "new:g256": "x torch 0.95-1.02",
                                 "new:mixed": "x torch 0.90-0.97"},
    (384, 14336, 4096, "bf16"): {"new": "/old 0.98-1.02", "new:g256": "x torch 0.78-0.85",
                                 "new:mixed": "x torch 0.88-0.97"},
}
# each side's time against these others' (time ratios: under 1 is faster)
AGAINST = {"new": ["old"], "new:g256": ["old:config", "old"], "new:mixed": ["old", "new:g256"],
           "new:mixed0": ["new:g256"], "new:mixed-B": ["new:mixed"]}
KEYS = ("BLOCK_M", "BLOCK_N", "num_stages", "GROUP_M", "PERSISTENT", "GLUON", "MIXED_TILES", "USE_TMA",
        "TAIL_BLOCK_M", "TAIL_BLOCK_N", "EPILOGUE_SUBTILE", "C_PTR", "B_KEEP")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def all_wide(g):
    """g with the mixed launch's plan replaced: every tile 128x256 in two boxes (N_BIG past N: no narrow tile), on
    persistent_programs' grid (mixed0)."""
    def plan(M, N, K, sms):
        wide = triton.cdiv(M, 128) * triton.cdiv(N, 256)
        return 0.0, triton.cdiv(N, 256) * 256, g.persistent_programs(wide, sms)
    g.mixed_tile_plan = plan
    return g


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


def forced(g, side):
    """The config a forced side of this tree runs."""
    return dict(G256) if side == "new:g256" else g.mixed_tile_config()


def child_checks():
    """The hang guard's process: each CHECKS side forced, two calls (the second through the plan), each line 'ok' or
    'WRONG'; exit 1 if any."""
    new = load("gemm_branch", KERNEL)
    wide0 = all_wide(load("gemm_all_wide", KERNEL))
    bad = 0
    for M, N, K, dt, side in CHECKS:
        torch.manual_seed(M + N + K)
        a = torch.randn(M, K, device="cuda").to(DT[dt])
        b = torch.randn(K, N, device="cuda").to(DT[dt])
        c = torch.full((M, N), float("nan"), device="cuda", dtype=DT[dt])
        g = wide0 if side == "new:mixed0" else new
        config = forced(g, side)
        for call in range(2):
            c.fill_(float("nan"))
            g.gemm(a, b, out=c, config=config)
            torch.cuda.synchronize()
            why = wrong(c, a, b)
            ran = g.last_config
            if not why and (ran["GLUON"] != 1 or ran.get("MIXED_TILES") != config.get("MIXED_TILES")):
                why = f"the Gluon kernel did not run as forced ({g._GLUON_FAILED or 'not here'})"
            bad += why is not None
            print(f"check {M}x{N}x{K} {dt} {side} call {call + 1}: ran GLUON={ran['GLUON']} "
                  f"MIXED_TILES={ran.get('MIXED_TILES')}: {'WRONG ' + why if why else 'ok'}", flush=True)
    sys.exit(1 if bad else 0)


def main(out, deadline_s, old_path):
    t0 = time.time()
    os.makedirs(out, exist_ok=True)
    txt = open(os.path.join(out, "probe_gemm63.txt"), "w")
    rows = open(os.path.join(out, "probe_gemm63.jsonl"), "w")

    def say(*parts):
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        txt.write(line + "\n")
        txt.flush()

    def row(**fields):
        rows.write(json.dumps(fields) + "\n")
        rows.flush()

    new = load("gemm_branch", KERNEL)
    wide0 = all_wide(load("gemm_all_wide", KERNEL))
    old = load("gemm_main", old_path)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    say(f"gemm63 probe on {torch.cuda.get_device_name()} ({sms} SMs), torch {torch.__version__}, triton "
        f"{triton.__version__}; old = {old_path}; deadline {deadline_s} s")
    try:  # the hang guard
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--check"], capture_output=True, text=True,
                               timeout=CHECK_S, env={**os.environ, "PYTHONPATH": ROOT})
        for line in (child.stdout + child.stderr[-2000:]).strip().splitlines():
            say("  " + line)
        gluon_ok = child.returncode == 0
        verdict = "all ok" if gluon_ok else f"FAILED (exit {child.returncode})"
    except subprocess.TimeoutExpired as e:
        for line in (e.stdout or b"").decode(errors="replace").strip().splitlines():
            say("  " + line)
        gluon_ok, verdict = False, f"HUNG or slow: past {CHECK_S} s"
    say(f"mixed / 128x256 Gluon checks (child process, {time.time() - t0:.0f} s): {verdict}")
    row(kind="checks", ok=gluon_ok, verdict=verdict)
    if not gluon_ok:
        new.mixed_tile = lambda M, N, K, sms: False
        say("the mixed launch is turned off for the rest (mixed_tile False): no forced Gluon side")
    torch.backends.cuda.matmul.allow_tf32 = False
    failures = 0
    for M, N, K, dt, extra in SHAPES:
        if time.time() - t0 > deadline_s:
            say(f"{M}x{N}x{K} {dt}: skipped (past {deadline_s} s)")
            continue
        shape = f"{M}x{N}x{K}"
        torch.manual_seed(0)
        a = torch.randn(M, K, device="cuda").to(DT[dt])
        b = torch.randn(K, N, device="cuda").to(DT[dt])
        predict = PREDICT.get((M, N, K, dt), {})
        plan = new.mixed_tile_plan(M, N, K, sms)
        say(f"{shape} {dt}: K-steps CONFIG {new.whole_k_steps(M, N, K, sms, new.CONFIG)}, wide_tile "
            f"{new.wide_tile(M, N, K, sms)}, mixed plan (K-steps, N_BIG, programs) "
            f"{plan and (round(plan[0], 1), *plan[1:])}, offered {new.mixed_tile(M, N, K, sms)}")
        lined = {"B_KEEP": 1} if new.lined_b_keepable(b) else {}  # forced sides read B's lined copy, as the picks
        sides = {"old": (old, None), "new": (new, None)}
        for side in extra:
            if side == "old:config":
                sides[side] = (old, dict(lined))
            elif gluon_ok:
                g = wide0 if side == "new:mixed0" else new
                sides[side] = (g, {**forced(g, side), **({} if side == "new:mixed-B" else lined)})
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
            vs = {o: mean[side] / mean[o] for o in AGAINST.get(side, []) if o in mean}
            say(f"  {shape} {dt} {side:10s} {mean[side]:8.2f} us  x torch {mean['torch'] / mean[side]:6.3f}  "
                + " ".join(f"/{o} {v:6.3f}" for o, v in vs.items()).ljust(36)
                + f"  rounds {ts[0]:.2f}/{ts[1]:.2f} (spread {spread_pct(ts):.1f}%)"
                + f"  predicted: {predict.get(side, '')}")
            row(kind="time", shape=shape, dtype=dt, side=side, us=mean[side], rounds=ts,
                x_torch=mean["torch"] / mean[side], time_vs=vs, ran=ran.get(side, "cuBLAS"),
                predicted=predict.get(side, ""))
        say(f"  ({time.time() - t0:.0f} s)")
    say(f"done: {failures} wrong outputs, {time.time() - t0:.0f} s")
    return failures


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        child_checks()
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    sys.exit(1 if main(sys.argv[1], float(sys.argv[2]), sys.argv[3]) else 0)
