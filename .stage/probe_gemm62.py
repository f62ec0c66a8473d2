"""gemm62's probe: the wide Gluon GEMM tile (128x192 = 128 + 64) on a persistent grid, against main's one tile a
program (gemm61), on one H100.

    export PYTHONPATH=$PWD && git show main:skills/kernels/gemm/gemm.py > .stage/old_gemm.py
    python .stage/probe_gemm62.py OUT_DIR 200 .stage/old_gemm.py    (about 4 minutes, compiles included)

argv: the output directory, a deadline in seconds (shapes left when it passes are skipped), main's gemm.py.

First a child process (a hang guard: a ring whose phases disagree across tiles deadlocks, and would hang this
process's every later call) runs the persistent kernel forced on ragged shapes of more tiles than programs (CHECKS),
each output NaN-poisoned and checked against the fp32 product. If it fails or runs past CHECK_S, the persistent
wide tile is turned off (wide_tile None, no persistent sides) and the rest timed, saying so.

Then for each shape, sides, every output NaN-poisoned and checked against the fp32 product (TF32 off) and
torch.matmul before it is timed, and after: timed by kgit's median (gpu_median_ms: the L2 cleared clean before each
call) in two rounds of opposite order:
  old         main's gemm, autotuned (its pick printed)     new        this tree's, autotuned (its pick printed)
  old:config  main's CONFIG forced (128x256, Triton)        new:wide   128x192 persistent forced (this tree)
  new:wide1   128x192 one tile a program forced (gemm61's kernel, this tree: its SASS is main's)
  new:g256    the persistent Gluon kernel on CONFIG's 128x256 tile, 3 stages (4096^3 only; not offered)
  torch       cuBLAS
At 2048x5000x4096 (B's rows off lines) the forced wide sides read B's kept lined copy (B_KEEP) and are compared with
old (main's pick, B_KEEP there too). Writes probe_gemm62.txt (what it prints) and probe_gemm62.jsonl (a row a side)
under OUT_DIR, line by line. Predictions: .stage/gemm62_notes.md, and beside each row.
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
G256 = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3, "PERSISTENT": 1, "GLUON": 1,
        "EPILOGUE_SUBTILE": 0}
# (M, N, K, dtype, sides besides old, new and torch), the most important first, so that a deadline cuts the least
SHAPES = [(2048, 4608, 3584, "bf16", ("old:config", "new:wide", "new:wide1")),
          (384, 14336, 4096, "bf16", ("old:config", "new:wide", "new:wide1")),
          (2048, 5000, 4096, "bf16", ("new:wide", "new:wide1")),
          (2048, 4608, 3584, "fp16", ("old:config", "new:wide", "new:wide1")),
          (4096, 4096, 4096, "bf16", ("old:config",)),
          (2048, 3584, 18944, "bf16", ())]
# (M, N, K, dtype, config) on 132 SMs: 1000 rows (the last tile-row 104 deep) x 8900 columns on 192 (47 tile-columns,
# the last's first box holding 8832-8899, its second, 8960-9023, wholly past N): 376 tiles, 3 waves, 126 programs of
# 3 or 2; K 1000 (16 steps, the last 40 deep) on 4 stages. 257 x 20000 (the last tile-row 1 row deep; 105
# tile-columns, the last's second box wholly past N): 315 tiles, 105 programs of 3; K 4136 (65 steps: 16 laps of 4
# stages a tile, the laps running on across tiles). 1000 x 5000 x 600: 8 x 27 = 216 tiles, 2 waves, 108 programs of
# 2, the last tile's second box partly inside N (4992-5055 holds 4992-4999). And the one-box 128x256 on 3 stages.
CHECKS = [(257, 20000, 4136, "fp16", "wide"), (1000, 5000, 600, "bf16", "wide")]
PREDICT = {  # (M, N, K, dtype): side -> what is predicted for it
    (2048, 4608, 3584, "bf16"): {"old": "x torch 0.93-0.97", "new": "x torch 0.96-1.04",
                                 "new:wide": "/old:config 0.78-0.86, /new:wide1 0.92-0.99"},
    (2048, 4608, 3584, "fp16"): {"old": "x torch 0.93-0.97", "new": "x torch 0.96-1.04",
                                 "new:wide": "/old:config 0.78-0.86, /new:wide1 0.92-0.99"},
    (384, 14336, 4096, "bf16"): {"old": "x torch 0.92-0.96", "new": "x torch 0.95-0.99",
                                 "new:wide": "/old:config 0.83-0.87, /new:wide1 0.95-0.99"},
    (2048, 5000, 4096, "bf16"): {"old": "x torch ~0.88", "new": "/old 0.98-1.02",
                                 "new:wide": "/old 1.04-1.12, x torch 0.78-0.86, /new:wide1 0.92-0.98",
                                 "new:wide1": "x torch 0.74-0.84"},
    (4096, 4096, 4096, "bf16"): {"new": "/old 0.98-1.02", "new:g256": "x torch 0.94-1.01, /old:config 0.99-1.06"},
    (2048, 3584, 18944, "bf16"): {"new": "/old 0.98-1.02"},
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


def forced(g, side):
    """The config a forced side of this tree runs (None: not this tree's)."""
    if side == "new:wide":
        return g.wide_tile_config((128, 192))
    if side == "new:wide1":
        return g.wide_tile_config((128, 192), persistent=0)
    if side == "new:g256":
        return dict(G256)
    return None


def child_checks():
    """The hang guard's process: the persistent kernel forced on CHECKS, each line 'ok' or 'WRONG'; exit 1 if any."""
    new = load("gemm_branch", KERNEL)
    bad = 0
    for M, N, K, dt, which in CHECKS:
        torch.manual_seed(M + N + K)
        a = torch.randn(M, K, device="cuda").to(DT[dt])
        b = torch.randn(K, N, device="cuda").to(DT[dt])
        c = torch.full((M, N), float("nan"), device="cuda", dtype=DT[dt])
        config = forced(new, "new:wide" if which == "wide" else "new:g256")
        for call in range(2):  # the second through the plan (_replay)
            c.fill_(float("nan"))
            new.gemm(a, b, out=c, config=config)
            torch.cuda.synchronize()
            why = wrong(c, a, b)
            ran = new.last_config
            if not why and (ran["GLUON"] != 1 or ran["BLOCK_N"] != config["BLOCK_N"] or not ran["PERSISTENT"]):
                why = f"the persistent Gluon kernel did not run ({new._GLUON_FAILED or 'not here'})"
            bad += why is not None
            print(f"check {M}x{N}x{K} {dt} 128x{config['BLOCK_N']} persistent call {call + 1}: ran GLUON={ran['GLUON']} "
                  f"BLOCK_N={ran['BLOCK_N']}: {'WRONG ' + why if why else 'ok'}", flush=True)
    sys.exit(1 if bad else 0)


def main(out, deadline_s, old_path):
    t0 = time.time()
    os.makedirs(out, exist_ok=True)
    txt = open(os.path.join(out, "probe_gemm62.txt"), "w")
    rows = open(os.path.join(out, "probe_gemm62.jsonl"), "w")

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
    say(f"gemm62 probe on {torch.cuda.get_device_name()} ({sms} SMs), torch {torch.__version__}, triton "
        f"{new.triton.__version__}; old = {old_path}; deadline {deadline_s} s")
    try:  # the hang guard
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--check"], capture_output=True, text=True,
                               timeout=CHECK_S, env={**os.environ, "PYTHONPATH": ROOT})
        for line in (child.stdout + child.stderr[-2000:]).strip().splitlines():
            say("  " + line)
        persistent_ok = child.returncode == 0
        verdict = "all ok" if persistent_ok else f"FAILED (exit {child.returncode})"
    except subprocess.TimeoutExpired as e:
        for line in (e.stdout or b"").decode(errors="replace").strip().splitlines():
            say("  " + line)
        persistent_ok, verdict = False, f"HUNG or slow: past {CHECK_S} s"
    say(f"persistent Gluon checks (child process, {time.time() - t0:.0f} s): {verdict}")
    row(kind="checks", ok=persistent_ok, verdict=verdict)
    if not persistent_ok:
        new.wide_tile = lambda M, N, K, sms: None
        say("the persistent wide tile is turned off for the rest (wide_tile None): no new:wide or new:g256 side")
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
        say(f"{shape} {dt}: wide_tile {new.wide_tile(M, N, K, sms)}, K-steps CONFIG "
            f"{new.whole_k_steps(M, N, K, sms, new.CONFIG)}, 128x192 persistent "
            f"{new.wide_tile_k_steps(M, N, K, sms, (128, 192)):.1f}")
        lined = new.lined_b_keepable(b)  # B's rows off lines: the forced wide sides read its lined copy, as old's pick
        sides = {"old": (old, None), "new": (new, None)}
        for side in extra:
            if side == "old:config":
                sides[side] = (old, {})
            elif persistent_ok or side == "new:wide1":
                sides[side] = (new, {**forced(new, side), **({"B_KEEP": 1} if lined else {})})
        outs, ran = {}, {}
        calls = {}
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
            against = [o for o in {"new": ["old"], "new:wide": ["old:config", "old", "new:wide1"],
                                   "new:wide1": ["old:config", "old"], "new:g256": ["old:config"]}.get(side, [])
                       if o in mean and not (o == "old" and "old:config" in mean)]
            vs = {o: mean[side] / mean[o] for o in against}
            say(f"  {shape} {dt} {side:10s} {mean[side]:8.2f} us  x torch {mean['torch'] / mean[side]:6.3f}  "
                + " ".join(f"/{o} {v:6.3f}" for o, v in vs.items()).ljust(40)
                + f"  rounds {ts[0]:.2f}/{ts[1]:.2f} (spread {spread_pct(ts):.1f}%)  predicted: {predict.get(side, '')}")
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
