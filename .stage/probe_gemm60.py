"""gemm60's probe (issue 52): the 2-CTA cluster kernel that multicasts A's tile, at M = 320-448, on one H100.

    export PYTHONPATH=$PWD && git show main:skills/kernels/gemm/gemm.py > .stage/old_gemm.py
    python .stage/probe_gemm60.py OUT_DIR 210 .stage/old_gemm.py           (under 4 minutes, compiles included)

argv: the output directory, a deadline in seconds (shapes left when it passes are skipped), main's gemm.py.

First a child process (a hang guard: a cluster protocol that deadlocks would hang this process's every later call)
runs the cluster kernel forced on ragged shapes (CHECKS: M 321 and 383, the last tile-row 1 or 127 rows deep; N 384
and 4224, an odd number of 128-wide tile-columns, the last pair's second tile past N; K of 2 and 64 steps), each
output NaN-poisoned and checked against the fp32 product. If it fails or runs past CHECK_S, this process turns the
cluster kernel off (GLUON_CLUSTER_TRITONS = ()) and times the rest, saying so.

Then for each shape, sides, every output NaN-poisoned and checked against the fp32 product (TF32 off) and
torch.matmul before it is timed, timed by kgit's median (gpu_median_ms: the L2 cleared clean before each call) in two
rounds of opposite order:
  old          main's gemm, autotuned            new          this tree's, autotuned (may pick the cluster kernel)
  old:g128     main's one-CTA Gluon 128x128 tile (6 stages, two consumers), forced
  new:g128     the same kernel from this tree (a control: new:g128/old:g128 should read 1.00)
  new:cluster  this tree's cluster kernel, forced (GLUON_CLUSTER_CONFIG)
  torch        cuBLAS
Writes probe_gemm60.txt (what it prints) and probe_gemm60.jsonl (a row a side) under OUT_DIR, line by line.

Predictions (written before any run; the reasoning in .stage/gemm60_notes.md), x cuBLAS unless said:
  shape                  old (main)   new          new:cluster / g128   new:cluster x cuBLAS
  384x4096x4096 bf16     0.79-0.84    0.80-0.86    0.97-1.05            0.79-0.86
  320x4096x4096 bf16     0.80-0.86    0.80-0.88    0.97-1.05            0.79-0.88
  448x4096x4096 bf16     0.86-0.96    0.86-0.97    0.97-1.05            0.85-0.97
  (fp16 rows the same within 3%)
  384x14336x4096 bf16    0.87-0.92    0.87-0.93    0.98-1.06            0.83-0.90
  4096^3 bf16, 128x4096x4096 bf16: new/old 0.98-1.02 (their candidates are unchanged)
What they mean: every SM's 128x128 tile already takes ~26.5 us at M=384 (96 tiles) and ~27.6 at M=512 (128 tiles, 33%
more L2 reads, 4% more time), and cuBLAS's own 1x2 multicast kernel takes 27.0 us at M=512 on the same tile: the
time a tile takes is bounded in the SM, not by the L2's reads, and multicast does not lower what each SM takes in.
If instead the L2's read bandwidth bounds M=384 (the gemm59 reading, 7.4-8.7 TB/s), halving A's reads (192 -> 144 MB)
reads new:cluster/g128 1.12-1.30 and new:cluster 0.93-1.05 x cuBLAS. A cluster/g128 of 1.12 or more at 384 refutes
the SM model; 1.05 or less refutes the L2 one.
"""

import ctypes
import importlib.util
import json
import os
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kgit.harness.timing import gpu_median_ms, spread_pct  # noqa: E402

KERNEL = os.path.join(ROOT, "skills/kernels/gemm/gemm.py")
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
CHECK_S = 150  # the child's checks, compiles included
# (M, N, K, dtype), the most important first, so that a deadline cuts the least; the forced sides only where the
# cluster kernel is a candidate
SHAPES = [(384, 4096, 4096, "bf16"), (320, 4096, 4096, "bf16"), (448, 4096, 4096, "bf16"),
          (384, 14336, 4096, "bf16"), (384, 4096, 4096, "fp16"), (320, 4096, 4096, "fp16"),
          (448, 4096, 4096, "fp16"), (4096, 4096, 4096, "bf16"), (128, 4096, 4096, "bf16")]
UNCHANGED = {(4096, 4096, 4096), (128, 4096, 4096)}
# (M, N, K, dtype): M 321 and 383 (the last tile-row 1 or 127 rows deep), N 384 and 4224 (3 and 33 tile-columns: the
# last pair's second tile past N), K 72 (2 steps on 6 stages: the loader's final waits find stages never used) and
# 4096 (64 steps: 11 laps of the ring); few, for the compiles (each dtype and divisibility of M, K compiles twice)
CHECKS = [(321, 384, 72, "bf16"), (383, 4224, 4096, "bf16"), (383, 4224, 4096, "fp16")]
G128 = {"GLUON": 1, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 6, "PERSISTENT": 0}
PREDICT = {  # (M, N, dtype): side -> x cuBLAS, and "ratio": new:cluster / old:g128
    (384, 4096): {"old": "0.79-0.84", "new": "0.80-0.86", "new:cluster": "0.79-0.86", "ratio": "0.97-1.05"},
    (320, 4096): {"old": "0.80-0.86", "new": "0.80-0.88", "new:cluster": "0.79-0.88", "ratio": "0.97-1.05"},
    (448, 4096): {"old": "0.86-0.96", "new": "0.86-0.97", "new:cluster": "0.85-0.97", "ratio": "0.97-1.05"},
    (384, 14336): {"old": "0.87-0.92", "new": "0.87-0.93", "new:cluster": "0.83-0.90", "ratio": "0.98-1.06"},
}
KEYS = ("BLOCK_M", "BLOCK_N", "num_stages", "GROUP_M", "PERSISTENT", "GLUON", "CLUSTER", "USE_TMA", "TAIL_BLOCK_M",
        "TAIL_BLOCK_N", "EPILOGUE_SUBTILE")


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


def child_checks():
    """The hang guard's process: the cluster kernel forced on CHECKS, each line 'ok' or 'WRONG'; exit 1 if any."""
    new = load("gemm_branch", KERNEL)
    bad = 0
    for M, N, K, dt in CHECKS:
        torch.manual_seed(M + N + K)
        a = torch.randn(M, K, device="cuda").to(DT[dt])
        b = torch.randn(K, N, device="cuda").to(DT[dt])
        c = torch.full((M, N), float("nan"), device="cuda", dtype=DT[dt])
        for call in range(2):  # the second through the plan (_replay)
            c.fill_(float("nan"))
            new.gemm(a, b, out=c, config=new.GLUON_CLUSTER_CONFIG)
            torch.cuda.synchronize()
            why = wrong(c, a, b)
            if not why and new.last_config.get("CLUSTER", 1) != 2:
                why = f"the cluster kernel did not run ({new._CLUSTER_FAILED or 'not offered here'})"
            bad += why is not None
            print(f"check {M}x{N}x{K} {dt} call {call + 1}: ran CLUSTER={new.last_config.get('CLUSTER', 1)} "
                  f"GLUON={new.last_config['GLUON']}: {'WRONG ' + why if why else 'ok'}", flush=True)
    sys.exit(1 if bad else 0)


def max_active_clusters(kernel, sms):
    """cuOccupancyMaxActiveClusters for a compiled cluster kernel: how many clusters of 2 fit on the GPU at once (a
    GPC whose SM count is odd leaves one SM out); None when the driver call fails."""
    class Dim(ctypes.Structure):
        _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]

    class Value(ctypes.Union):
        _fields_ = [("clusterDim", Dim), ("raw", ctypes.c_char * 64)]

    class Attr(ctypes.Structure):
        _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", Value)]

    class Config(ctypes.Structure):
        _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                    ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                    ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                    ("attrs", ctypes.POINTER(Attr)), ("numAttrs", ctypes.c_uint)]
    try:
        kernel._init_handles()
        attr = Attr(id=4, value=Value(clusterDim=Dim(2, 1, 1)))  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        config = Config(2 * (sms // 2), 1, 1, 32 * kernel.metadata.num_warps, 1, 1, kernel.metadata.shared, None,
                        ctypes.pointer(attr), 1)
        count = ctypes.c_int(0)
        rc = ctypes.CDLL("libcuda.so.1").cuOccupancyMaxActiveClusters(ctypes.byref(count),
                                                                     ctypes.c_void_p(kernel.function),
                                                                     ctypes.byref(config))
        return count.value if rc == 0 else None
    except Exception:
        return None


def main(out, deadline_s, old_path):
    t0 = time.time()
    os.makedirs(out, exist_ok=True)
    txt = open(os.path.join(out, "probe_gemm60.txt"), "w")
    rows = open(os.path.join(out, "probe_gemm60.jsonl"), "w")

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
    say(f"gemm60 probe on {torch.cuda.get_device_name()} ({sms} SMs), torch {torch.__version__}, triton "
        f"{new.triton.__version__}; old = {old_path}; deadline {deadline_s} s")
    # the hang guard
    try:
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--check"], capture_output=True, text=True,
                               timeout=CHECK_S, env={**os.environ, "PYTHONPATH": ROOT})
        for line in (child.stdout + child.stderr[-2000:]).strip().splitlines():
            say("  " + line)
        cluster_ok = child.returncode == 0
        verdict = "all ok" if cluster_ok else f"FAILED (exit {child.returncode})"
    except subprocess.TimeoutExpired as e:
        for line in (e.stdout or b"").decode(errors="replace").strip().splitlines():
            say("  " + line)
        cluster_ok, verdict = False, f"HUNG or slow: past {CHECK_S} s"
    say(f"cluster kernel checks (child process, {time.time() - t0:.0f} s): {verdict}")
    row(kind="checks", ok=cluster_ok, verdict=verdict)
    if not cluster_ok:
        new.GLUON_CLUSTER_TRITONS = ()
        say("the cluster kernel is turned off for the rest: new = old's candidates; no new:cluster side")
    torch.backends.cuda.matmul.allow_tf32 = False
    failures = 0
    occupancy = None
    for M, N, K, dt in SHAPES:
        if time.time() - t0 > deadline_s:
            say(f"{M}x{N}x{K} {dt}: skipped (past {deadline_s} s)")
            continue
        shape = f"{M}x{N}x{K}"
        torch.manual_seed(0)
        a = torch.randn(M, K, device="cuda").to(DT[dt])
        b = torch.randn(K, N, device="cuda").to(DT[dt])
        forced = (M, N, K) not in UNCHANGED
        sides = {"old": (old, None), "new": (new, None)}
        if forced:
            sides.update({"old:g128": (old, G128), "new:g128": (new, G128)})
            if cluster_ok:
                sides["new:cluster"] = (new, new.GLUON_CLUSTER_CONFIG)
        outs, ran, calls = {}, {}, {}
        for side, (g, config) in sides.items():
            outs[side] = torch.empty(M, N, device="cuda", dtype=DT[dt])
            start = time.perf_counter()
            for _ in range(2):  # the first autotunes or plans, the second replays the plan
                outs[side].fill_(float("nan"))
                g.gemm(a, b, out=outs[side], config=config)
                torch.cuda.synchronize()
                why = wrong(outs[side], a, b)
                if why:
                    failures += 1
                    say(f"  {shape} {dt} {side}: WRONG {why}")
            ran[side] = " ".join(f"{k}={g.last_config[k]}" for k in KEYS if g.last_config.get(k))
            say(f"{shape} {dt} {side}: first two calls {time.perf_counter() - start:.1f} s; ran {ran[side]}")
            calls[side] = lambda g=g, config=config, c=outs[side]: g.gemm(a, b, out=c, config=config)
        tref = torch.empty(M, N, device="cuda", dtype=DT[dt])
        calls["torch"] = lambda: torch.matmul(a, b, out=tref)
        if "new:cluster" in sides and occupancy is None:
            plan = [p for key, p in new._PLANS.items() if p[1].get("CLUSTER", 1) > 1]
            occupancy = max_active_clusters(plan[0][0][0][2], sms) if plan else None
            say(f"clusters of 2 that fit at once (cuOccupancyMaxActiveClusters): {occupancy}")
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
        predict = PREDICT.get((M, N), {})
        for side, ts in times.items():
            x_torch = mean["torch"] / mean[side]
            against = {"new": "old", "new:g128": "old:g128", "new:cluster": "old:g128"}.get(side)
            vs = mean[against] / mean[side] if against else None
            if (M, N, K) in UNCHANGED and side == "new":
                guess = "new/old 0.98-1.02"
            elif side == "new:cluster":
                guess = f"x torch {predict.get(side, '?')}, /old:g128 {predict.get('ratio', '?')}"
            else:
                guess = f"x torch {predict[side]}" if side in predict else ""
            say(f"  {shape} {dt} {side:11s} {mean[side]:8.2f} us  x torch {x_torch:6.3f}  "
                + (f"{against}/this {vs:6.3f}" if vs else " " * 20)
                + f"  rounds {ts[0]:.2f}/{ts[1]:.2f} (spread {spread_pct(ts):.1f}%)  predicted: {guess}")
            row(kind="time", shape=shape, dtype=dt, side=side, us=mean[side], rounds=ts, x_torch=x_torch,
                vs=vs, against=against, ran=ran.get(side, "cuBLAS"), predicted=guess)
        say(f"  ({time.time() - t0:.0f} s)")
    say(f"done: {failures} wrong outputs, {time.time() - t0:.0f} s; clusters of 2 at once: {occupancy}")
    return failures


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        child_checks()
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    sys.exit(1 if main(sys.argv[1], float(sys.argv[2]), sys.argv[3]) else 0)
