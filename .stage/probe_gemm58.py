"""gemm58's probe (issue 52): B_KEEP, a lined copy of B kept across calls, on one H100.

    cd .stage/wt-gemm58 && export PYTHONPATH=$PWD && python .stage/probe_gemm58.py $OUT      (under 4 minutes)
    PROBE_TINY=1 TRITON_INTERPRET=1 python .stage/probe_gemm58.py /tmp/out                   (a CPU dry run)

Three kernels on each shape: main's gemm.py (8efb40c, read with git show), this tree's, and cuBLAS (torch.matmul).
Each gemm autotunes on its first call; every output is NaN-poisoned before its call and checked against the fp32
product (TF32 off) and torch.matmul. Sides, timed by kgit's median (kgit.harness.timing.gpu_median_ms, the L2 cleared
clean before each call) in two rounds of opposite order:
  main         main's gemm, the same A, B and C every call
  new          this tree's: from its second call on (the copy is made there), B read from its kept lined copy
  new:view-B   this tree's on a view of B whose rows are already lined: what the kept copy should reach
  torch        cuBLAS
  main:train, new:train  (N=5000) B changed in place (b.add_(0): a version bump, values unchanged) before every
               call, outside the timed span (then the L2 cleared): a weight in training, never kept
Also: each gemm's first, second and third call's wall time (the first autotunes and compiles, this tree's second
makes the copy), whether this tree's timed calls read the kept copy, and B negated in place on the GPU after the
timing: the next call must read B as it is now (checked), the one after keeps the new B, and back.
Writes probe_gemm58.txt (what it prints) and probe_gemm58.jsonl (a row a side) under argv[1].
PROBE_TINY=1 (with TRITON_INTERPRET=1 on a CPU): tiny fp16 shapes, 32x64 tiles with B_KEEP forced (the interpreter
does not autotune), one wall-clock call a side: it checks this script's paths, not any speed.

Predictions, written before any run (x cuBLAS, one H100; main from misaligned-n/'s held-out figures, new from its
lined views: view:B 0.984 at 3000x5000x2000, 0.880 at 2048x5000x4096):
  shape                        main        new (kept)   new/main     new:train/main:train
  3000x5000x2000 bf16, fp16    0.77-0.80   0.95-1.02    1.20-1.30    0.98-1.02 (noise: the same kernel on B)
  2048x5000x4096 bf16, fp16    0.70-0.74   0.84-0.90    1.15-1.25    0.98-1.02
  4096x5000x4096 bf16, fp16    0.72-0.80   0.88-0.98    1.15-1.30    0.98-1.02
  3000x5120x2000 bf16 (ctrl)   0.94-0.98   the same     0.98-1.02    (rows lined: nothing kept)
  4096^3 bf16 (ctrl)           0.99-1.01   the same     0.98-1.02
  new within 2% of new:view-B at every N=5000 shape. Wall times: first call seconds for both (this tree's ~0.05 s more:
  the pick timed again on a lined copy); this tree's second call ~26 us (3000x5000x2000, 20 MB) or ~52 us (41 MB)
  more than its third: the copy.
What refutes it: new under 0.92 at 3000x5000x2000 while new:view-B reads ~0.98 (the copy not used on timed calls);
new:train more than 2% behind main:train (the keeping's host cost, or a worse pick on B); any wrong output.
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kgit.harness.timing import _l2_clear, gpu_median_ms  # noqa: E402

MAIN_COMMIT = "8efb40c"
KERNEL = "skills/kernels/gemm/gemm.py"
TINY = os.environ.get("PROBE_TINY", "") not in ("", "0")
DEADLINE_S = 200  # shapes left when it passes are skipped: the lead's call has 4 minutes
OUT = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(OUT, exist_ok=True)
TXT = open(os.path.join(OUT, "probe_gemm58.txt"), "w")
ROWS = open(os.path.join(OUT, "probe_gemm58.jsonl"), "w")
T0 = time.time()
DEVICE = "cpu" if TINY else "cuda"
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
# the most important first, so that a deadline cuts the least
SHAPES = ([(70, 104, 40, "fp16"), (70, 128, 40, "fp16")] if TINY else
          [(3000, 5000, 2000, "bf16"), (2048, 5000, 4096, "bf16"), (4096, 5000, 4096, "bf16"),
           (3000, 5120, 2000, "bf16"), (4096, 4096, 4096, "bf16"),
           (3000, 5000, 2000, "fp16"), (2048, 5000, 4096, "fp16"), (4096, 5000, 4096, "fp16")])
CONFIG = {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 16, "B_KEEP": 1} if TINY else None  # main ignores B_KEEP
KEYS = ("BLOCK_M", "BLOCK_N", "num_stages", "GROUP_M", "PERSISTENT", "GLUON", "USE_TMA", "TAIL_BLOCK_M",
        "TAIL_BLOCK_N", "EPILOGUE_SUBTILE", "C_PTR", "B_PAD", "B_KEEP")


def say(*parts):
    line = " ".join(str(p) for p in parts)
    print(line, flush=True)
    TXT.write(line + "\n")
    TXT.flush()


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main_kernel_file():
    """main's gemm.py at MAIN_COMMIT, from this checkout's git, in a temporary file."""
    text = subprocess.run(["git", "show", f"{MAIN_COMMIT}:{KERNEL}"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    handle, path = tempfile.mkstemp(suffix="_gemm_main.py")
    with os.fdopen(handle, "w") as f:
        f.write(text)
    return path


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def name(cfg):
    return " ".join(f"{k}={cfg[k]}" for k in KEYS if k in cfg and (cfg[k] or k in ("BLOCK_M", "BLOCK_N")))


def wrong(c, ref, tref):
    """Why c is wrong against the fp32 product and torch.matmul's, or None."""
    if not torch.isfinite(c).all():
        return "non-finite (an element unwritten)"
    for what, r in (("fp32 product", ref), ("torch.matmul", tref.float())):
        err = ((c.float() - r).norm() / r.norm()).item()
        if err > 1e-2:
            return f"relative error {err:.3g} against the {what}"
    return None


def kept(g, b):
    """Whether this tree's next call on b would read a kept copy made from b as it is now."""
    entry = g._KEPT_B.get(id(b))
    return entry is not None and entry.copy is not None and entry.version == b._version


def time_us(fn, before):
    """Microseconds of fn(), before() run ahead of each call outside the timed span (then the L2 cleared). TINY: one
    call timed by the wall clock after one that is not (as kgit times on a CPU; this tree's kept copy, dropped by a
    training side's change before it, is made again there)."""
    if TINY:
        before()
        fn()
        before()
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e6
    clear_l2 = _l2_clear()
    return gpu_median_ms(fn, warmup_ms=5, rep_ms=25, clear=lambda: (before(), clear_l2())) * 1e3


new = load("gemm_branch", os.path.join(ROOT, KERNEL))
old = load("gemm_main", main_kernel_file())
say(f"gemm58 probe on {torch.cuda.get_device_name() if DEVICE == 'cuda' else 'CPU (PROBE_TINY)'}, torch "
    f"{torch.__version__}, triton {new.triton.__version__}; main = {MAIN_COMMIT}; KEPT_B_BYTES {new.KEPT_B_BYTES}")
torch.backends.cuda.matmul.allow_tf32 = False
failures = 0
for M, N, K, dt in SHAPES:
    if time.time() - T0 > DEADLINE_S:
        say(f"{M}x{N}x{K} {dt}: skipped (past {DEADLINE_S} s)")
        continue
    shape = f"{M}x{N}x{K}"
    torch.manual_seed(0)
    a = torch.randn(M, K, device=DEVICE).to(DT[dt])
    b = torch.randn(K, N, device=DEVICE).to(DT[dt])
    ref = a.float() @ b.float()
    tref = torch.matmul(a, b)
    b_lined = new.padded_rows(b)
    outs = {}

    def checked(side, g, x, y, out, expect=ref, expect_torch=tref):
        """One call of g.gemm, NaN-poisoned first and checked; its wall time in us."""
        global failures
        out.fill_(float("nan"))
        sync()
        start = time.perf_counter()
        g.gemm(x, y, out=out, config=CONFIG)
        sync()
        wall = (time.perf_counter() - start) * 1e6
        why = wrong(out, expect, expect_torch)
        if why:
            failures += 1
            say(f"  {shape} {dt} {side}: WRONG {why}")
        return wall

    walls = {}
    for side, g in (("main", old), ("new", new)):
        outs[side] = torch.empty(M, N, device=DEVICE, dtype=DT[dt])
        walls[side] = [checked(side, g, a, b, outs[side]) for _ in range(3)]
        say(f"{shape} {dt} {side}: calls 1/2/3 {walls[side][0] / 1e3:.1f} ms / {walls[side][1]:.0f} us / "
            f"{walls[side][2]:.0f} us wall; ran {name(g.last_config)}"
            + (f"; B read from its kept copy: {kept(new, b)}" if g is new else ""))
    outs["new:view-B"] = torch.empty(M, N, device=DEVICE, dtype=DT[dt])
    checked("new:view-B", new, a, b_lined, outs["new:view-B"])
    calls = {"main": (lambda: old.gemm(a, b, out=outs["main"], config=CONFIG), lambda: None),
             "new": (lambda: new.gemm(a, b, out=outs["new"], config=CONFIG), lambda: None),
             "new:view-B": (lambda: new.gemm(a, b_lined, out=outs["new:view-B"], config=CONFIG), lambda: None),
             "torch": (lambda: torch.matmul(a, b, out=tref), lambda: None)}
    if (N * a.element_size()) % 128:  # B's rows off lines: a weight in training, changed before every call
        calls["main:train"] = (calls["main"][0], lambda: b.add_(0))
        calls["new:train"] = (calls["new"][0], lambda: b.add_(0))
    times = {side: [] for side in calls}
    read_kept = {}
    for order in (list(calls), list(reversed(calls))):
        for side in order:
            fn, before = calls[side]
            times[side].append(time_us(fn, before))
            if side in ("new", "new:train"):
                read_kept[side] = kept(new, b)  # after its last timed call: what its timed calls read
    # the timed outputs, checked again (the timed path is the checked path)
    for side in ("main", "new"):
        checked(side + " after timing", old if side == "main" else new, a, b, outs[side])
    # B written in place on the GPU: read as it is now, then kept again, then back
    b.neg_()
    negated = [checked(f"new, B negated (call {i})", new, a, b, outs["new"], -ref, -tref) for i in (1, 2)]
    kept_negated = kept(new, b)
    b.neg_()
    checked("new, B negated back", new, a, b, outs["new"])
    say(f"{shape} {dt}: B negated in place: calls {negated[0]:.0f} / {negated[1]:.0f} us wall, the second kept "
        f"the new B: {kept_negated}")
    t_torch = sum(times["torch"]) / 2
    for side, ts in times.items():
        mean = sum(ts) / 2
        against = "main:train" if side == "new:train" else "main"
        ratio = (sum(times[against]) / 2) / mean if side.startswith("new") else None
        say(f"  {shape} {dt} {side:11s} {mean:9.2f} us  x torch {t_torch / mean:6.3f}  "
            + (f"{against}/this {ratio:6.3f}" if ratio else " " * 22)
            + f"  rounds {ts[0]:.2f}/{ts[1]:.2f}" + (f"  read the kept copy: {read_kept[side]}" if side in read_kept
                                                     else ""))
        ROWS.write(json.dumps(dict(shape=shape, dtype=dt, side=side, us=mean, rounds=ts, x_torch=t_torch / mean,
                                   vs_main=ratio, read_kept=read_kept.get(side), walls_us=walls.get(side),
                                   config=name((old if side.startswith("main") else new).last_config)
                                   if side != "torch" else "cuBLAS")) + "\n")
        ROWS.flush()
    say(f"  ({time.time() - T0:.0f} s)")
say(f"done: {failures} wrong outputs, {time.time() - T0:.0f} s")
sys.exit(1 if failures else 0)
