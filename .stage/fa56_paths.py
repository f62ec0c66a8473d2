"""Issue 52, flash-attention at causal S 512-768 (branch fa56): GLUON 2 forced, main's file against this branch's
(each tile's Q loaded a tile ahead by a loader of its own, two Q tiles a consumer; four K/V stages at head dim 64),
and this branch's with two stages at head dim 64 (the Q loader alone), and with one Q tile a consumer (branch fa57:
PERSISTENT_Q_SLOTS = 1, main's Q protocol on the Q loader of its own; issue 52's causal fault's bisection), beside
the default SDPA.

    python .stage/fa56_paths.py OLD_FILE      (OLD_FILE: main's flash_attention.py; writes $OUT/fa56_paths.txt,
                                               .jsonl where OUT is set; FA56_BUDGET_S, default 75, skips the rest)
    FA56_CPU=1 TRITON_INTERPRET=1 python .stage/fa56_paths.py OLD_FILE    (tiny shapes on the CPU: a check of
                                               this script's code, where every path runs the Triton kernel)

1. Checks, before any timing: each path forced (config={"GLUON": 2}: no autotune) into a NaN-poisoned output,
   every head against the fp32 reference; the launch must have run GLUON 2 (last_config) and no Gluon failure
   recorded. Shapes: the timed ones, and five more for the persistent kernel's Q ring: ragged S causal and not
   (640, 1000, 197), an odd count of query blocks (384), and 15-16 tiles a program (64x16x256x64 causal: the
   Q slots' parities over eight laps).
   The exit status is 1 where a check failed (the GPU's context may not survive an illegal memory access:
   two Q slots once crashed causal shapes, df8b865:experiments/sweep-h200-session24/call2-attention-q-slots/),
   so that a command's `&&` does not go on to the held-out bench.
2. Timing: kgit's median (the L2 cleared, clean, before each call), two rounds in opposite orders; the table
   gives each round's us, their mean, and SDPA / path.
"""
import json
import os
import sys
import time

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, ROOT)
import bench  # noqa: E402
from kgit.harness.timing import gpu_median_ms  # noqa: E402

OLD = bench.kernel_module("flash-attention", sys.argv[1], "old")
NEW = bench.kernel_module("flash-attention", side="new")
OUT = os.environ.get("OUT")
T0 = time.time()
BUDGET_S = float(os.environ.get("FA56_BUDGET_S", "75"))
LINES, ROWS = [], []
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
TOL = {"bf16": 4e-2, "fp16": 8e-3}  # max |error| against the fp32 reference (randn inputs)
CPU = os.environ.get("FA56_CPU", "") not in ("", "0")
DEV = "cpu" if CPU else "cuda"


def say(line=""):
    print(line, flush=True)
    LINES.append(line)


def two_stage_d64(fn):
    """fn run with the branch's persistent kernel on two K/V stages at head dim 64 (its Q loader alone)."""
    def run():
        keep = NEW.PERSISTENT_BUFFERS
        NEW.PERSISTENT_BUFFERS = {**keep, 64: 2}
        try:
            return fn()
        finally:
            NEW.PERSISTENT_BUFFERS = keep
    return run


def one_q_slot(fn):
    """fn run with the branch's persistent kernel on one Q tile a consumer (PERSISTENT_Q_SLOTS = 1: main's Q protocol,
    each tile's Q once the tile before handed the slot back, on the Q loader of its own): right where two slots are
    wrong puts issue 52's fault in the second slot, wrong too puts it in the third partition."""
    def run():
        keep = NEW.PERSISTENT_Q_SLOTS
        NEW.PERSISTENT_Q_SLOTS = 1
        try:
            return fn()
        finally:
            NEW.PERSISTENT_Q_SLOTS = keep
    return run


def paths(q, k, v, o, causal, D):
    g2 = {"GLUON": 2}
    out = {"old G2": (OLD, lambda: OLD.flash_attention(q, k, v, causal=causal, out=o, config=g2)),
           "new G2": (NEW, lambda: NEW.flash_attention(q, k, v, causal=causal, out=o, config=g2)),
           "new G2 1-slot": (NEW, one_q_slot(lambda: NEW.flash_attention(q, k, v, causal=causal, out=o, config=g2)))}
    if D == 64:
        out["new G2 2-stage"] = (NEW, two_stage_d64(lambda: NEW.flash_attention(q, k, v, causal=causal, out=o,
                                                                                  config=g2)))
    return out


def inputs(B, H, S, D, dtype):
    torch.manual_seed(B * 1000003 + H * 1009 + S * 31 + D)
    if CPU:  # the interpreter: fp16 (it has no bf16 arithmetic), a head of 16 rows
        B, H, S, D, dtype = 1, 2, min(S, 40), 16, "fp16"
    return [torch.randn(B, H, S, D, device=DEV, dtype=DT[dtype]) for _ in range(3)]


def check(B, H, S, D, causal, dtype, which=None):
    q, k, v = inputs(B, H, S, D, dtype)
    o = torch.empty_like(q)
    ref = NEW.reference(q, k, v, causal)
    ok = True
    for name, (mod, fn) in paths(q, k, v, o, causal, D).items():
        if which and name not in which:
            continue
        o.fill_(float("nan"))
        fn()
        sync()
        ran = mod.last_config.get("GLUON")
        nan = bool(torch.isnan(o).any())
        err = float((o.float() - ref).abs().max())
        good = (ran == 2 or CPU) and not nan and err <= TOL[dtype] and not mod._GLUON_FAILED
        ok &= good
        say(f"check {B}x{H}x{S}x{D}{' causal' if causal else ''} {dtype} {name:15s} ran GLUON {ran} nan {nan} "
            f"max|err| {err:.2e} {'ok' if good else 'FAILED ' + str(mod._GLUON_FAILED)}")
        ROWS.append({"kind": "check", "shape": [B, H, S, D, causal], "dtype": dtype, "path": name, "gluon": ran,
                     "nan": nan, "max_err": err, "ok": good})
    del ref
    return ok


def sync():
    if not CPU:
        torch.cuda.synchronize()


def median_us(fn):
    if CPU:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e6
    return gpu_median_ms(fn, warmup_ms=10, rep_ms=40) * 1e3


def tflops(B, H, S, D, causal, us):
    return 4.0 * B * H * S * S * D * (0.5 if causal else 1.0) / (us * 1e6)


TIMED = [(16, 16, 512, 128, True, "bf16"), (8, 16, 512, 64, True, "bf16"), (16, 16, 768, 128, True, "bf16"),
         (32, 16, 512, 128, True, "fp16"), (4, 16, 1024, 128, True, "bf16"), (16, 12, 1024, 64, True, "fp16"),
         (64, 12, 512, 64, False, "bf16"), (4, 32, 3000, 128, True, "bf16")]
EXTRA_CHECKS = [(2, 3, 640, 128, True, "bf16"), (2, 3, 1000, 64, False, "fp16"), (1, 5, 197, 64, True, "bf16"),
                (3, 7, 384, 128, True, "bf16"), (64, 16, 256, 64, True, "fp16")]


def main():
    say(f"{'CPU (a check of the script)' if CPU else torch.cuda.get_device_name()}, torch {torch.__version__}, triton "
        f"{__import__('triton').__version__}; old {sys.argv[1]}")
    all_ok = True
    for shape in EXTRA_CHECKS:
        all_ok &= check(*shape, which=("new G2", "new G2 1-slot"))
    for shape in TIMED:
        all_ok &= check(*shape)
    say(f"checks {'all passed' if all_ok else 'FAILED: nothing timed'} ({time.time() - T0:.0f} s)")
    if not all_ok:
        return False
    say()
    say(f"{'shape':>26s} {'path':15s} {'round 1':>8s} {'round 2':>8s} {'us':>8s} {'TFLOP/s':>8s} {'x SDPA':>7s}")
    for B, H, S, D, causal, dtype in TIMED:
        if time.time() - T0 > BUDGET_S:
            say(f"budget of {BUDGET_S:.0f} s spent: {B}x{H}x{S}x{D} and after skipped")
            break
        q, k, v = inputs(B, H, S, D, dtype)
        o = torch.empty_like(q)
        fns = {name: fn for name, (_, fn) in paths(q, k, v, o, causal, D).items()}
        fns["SDPA"] = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        times = {name: [] for name in fns}
        for order in (list(fns), list(reversed(fns))):
            for name in order:
                times[name].append(median_us(fns[name]))
        sdpa = sum(times["SDPA"]) / 2
        label = f"{B}x{H}x{S}x{D}{' causal' if causal else ''} {dtype}"
        for name, ts in times.items():
            us = sum(ts) / 2
            say(f"{label:>26s} {name:15s} {ts[0]:8.2f} {ts[1]:8.2f} {us:8.2f} {tflops(B, H, S, D, causal, us):8.1f} "
                f"{sdpa / us:7.3f}")
            ROWS.append({"kind": "time", "shape": [B, H, S, D, causal], "dtype": dtype, "path": name,
                         "us_rounds": ts, "us": us, "x_sdpa": sdpa / us})
    say(f"done in {time.time() - T0:.0f} s")
    return True


if __name__ == "__main__":
    ok = False
    try:
        ok = main()
    finally:
        if OUT:
            with open(os.path.join(OUT, "fa56_paths.txt"), "w") as f:
                f.write("\n".join(LINES) + "\n")
            with open(os.path.join(OUT, "fa56_paths.jsonl"), "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in ROWS)
    sys.exit(0 if ok or CPU else 1)  # a failed check stops a device command's && chain
