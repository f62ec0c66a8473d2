"""Device check of softmax's shared-memory team on 16-bit rows cut at 16-byte boundaries (SMEM_CUT), issue 52.

    python .stage/softmax_cut_check.py [OLD_FILE]      (from the repository root, one GPU; OLD_FILE: main's
                                                        softmax.py, by default `git show main:...`)

1. Correctness, first: every output element of this checkout's softmax() against a float64 softmax, on a
   NaN-poisoned output, rows with planted extremes at each row's own cut (the max at the row's first element,
   at the head's last, at the body's first and last, at the tail's first, at the row's last; a row of -inf but
   its first, its last or a middle element; a row of -inf in its head; a row scaled by 100), at row lengths
   whose successive rows start at every offset 0-7 from a 16-byte boundary, with x and y at the same and at
   different offsets (y of its own stride, x's pointer 3 or 5 elements past 16 bytes, both, an fp32 y).
   Each case runs twice (the team's words must come back unstamped) and prints the path it took.
2. Timing (old = main's file, new = this checkout's, torch, a copy of the same bytes), medians of
   kgit.harness.timing.gpu_median_ms in two rounds of opposite order, on the layouts benchmarks/held_out_bench.py
   cannot make (x or y off their 16-byte boundaries, y of its own stride), and rows of 16385-32768 whose y
   does not share x's cut (the team there instead of the split team: a rule this run tests).
Everything printed is also written to $OUT/softmax_cut_check.txt; shapes past the deadline (110 s) are skipped
and said so. Exit 1 if any output is wrong.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kgit.harness import device  # noqa: E402
from kgit.harness.timing import gpu_median_ms  # noqa: E402

T0 = time.time()
DEADLINE = T0 + float(os.environ.get("CUT_CHECK_SECONDS", "110"))
OUT = os.environ.get("OUT", ".")
LOG = open(os.path.join(OUT, "softmax_cut_check.txt"), "w")
TOL = {torch.bfloat16: (2e-2, 1e-3), torch.float16: (4e-3, 1e-4), torch.float32: (4e-3, 1e-4)}  # held_out_bench's
# the cut check's, by the output's dtype: relative to each element, down to what the output can hold (exp2 flushes
# results under 2^-126 to 0; fp16 rounds those under its subnormals' step), so that an edge element of 1e-6
# written wrong shows (an absolute 1e-3 would hide every element of a 50257-wide row)
ELEMENT_TOL = {torch.bfloat16: (1e-2, 2e-38), torch.float16: (4e-3, 1e-7), torch.float32: (1e-3, 2e-38)}


def say(*parts):
    line = " ".join(str(p) for p in parts)
    print(line, flush=True)
    LOG.write(line + "\n")
    LOG.flush()


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


new = load(os.path.join(ROOT, "skills", "kernels", "softmax", "softmax.py"), "softmax_new")
if len(sys.argv) > 1:
    old_path = sys.argv[1]
else:
    old_path = os.path.join(tempfile.mkdtemp(), "softmax_main.py")
    with open(old_path, "w") as f:
        f.write(subprocess.run(["git", "show", "main:skills/kernels/softmax/softmax.py"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout)
old = load(old_path, "softmax_old")
dev = "cuda"


def layout(M, N, dtype, how):
    """x (M x N, random * 3, as `how` places it) and y (NaN, or None: softmax's own)."""
    x_skew = {"x+3": 3, "x+5,y+5": 5, "x+3,y+3 stride+8": 3}.get(how, 0)
    x_pad = {"x+3,y+3 stride+8": 8}.get(how, 0) + (1 if x_skew else 0)  # x's stride N + x_skew + pad
    big = (torch.randn(M, N + x_skew + x_pad, device=dev) * 3).to(dtype)
    x = big[:, x_skew:x_skew + N]
    if how == "y own stride":
        y = torch.full((M, N + 3), float("nan"), device=dev, dtype=dtype)[:, :N]
    elif how == "x+5,y+5":  # y's rows at x's offsets (same stride, same skew): Y_CUT
        y = torch.full((M, x.stride(0)), float("nan"), device=dev, dtype=dtype)[:, 5:5 + N]
    elif how == "x+3,y+3 stride+8":  # y 8 elements longer a row: its rows still at x's offsets
        y = torch.full((M, x.stride(0) + 8), float("nan"), device=dev, dtype=dtype)[:, 3:3 + N]
    elif how == "y fp32":
        y = torch.full((M, N), float("nan"), device=dev, dtype=torch.float32)
    else:
        y = None
    return x, y


def plant(x):
    """Extremes at each row's own cut: its head [0, h), body [h, N - t), tail [N - t, N), eight rows a feature
    so that a feature meets every offset of a row's start."""
    M, N = x.shape
    start0 = x.data_ptr() // x.element_size()
    features = ["first", "head last", "body first", "body last", "tail first", "last", "inf but first",
                "inf but last", "inf but middle", "inf head", "x100"]
    for f, name in enumerate(features):
        for q in range(8):
            r = f * 8 + q
            if r >= M:
                return
            start = start0 + r * x.stride(0)
            h, t = (-start) % 8, (start + N) % 8
            at = {"first": 0, "head last": max(h - 1, 0), "body first": h, "body last": N - t - 1,
                  "tail first": N - t if t else N - 1, "last": N - 1}.get(name)
            if at is not None:  # the row's max, by one: the other elements keep their weight
                x[r, at] = x[r].float().max() + 1.0
            elif name.startswith("inf but"):
                keep = {"inf but first": 0, "inf but last": N - 1, "inf but middle": N // 2}[name]
                v = x[r, keep].clone()
                x[r] = -float("inf")
                x[r, keep] = v
            elif name == "inf head":
                x[r, :max(h, 1)] = -float("inf")
            else:
                x[r] *= 100


def check(M, N, dtype, how):
    x, y = layout(M, N, dtype, how)
    plant(x)
    ref = new.softmax_ref(x)
    rtol, atol = ELEMENT_TOL[dtype if y is None or y.dtype != torch.float32 else torch.float32]
    ok, worst = True, 0.0
    for attempt in range(2):  # the second launch finds the words the first left
        out = y if y is not None else torch.empty_like(x)
        out.fill_(float("nan"))
        new.softmax(x, out=out)
        torch.cuda.synchronize()
        path = dict(new.last_config)
        excess = (out.double() - ref).abs() / (rtol * ref.abs() + atol)  # over 1: wrong
        worst = max(worst, float(torch.nan_to_num(excess, nan=float("inf")).max()))
        good = worst <= 1 and not bool(out.isnan().any())
        good = good and bool((out[ref == 0] == 0).all())  # -inf in, exactly 0 out
        ok = ok and good
    cut = f"CUT={path.get('CUT')} Y_CUT={path.get('Y_CUT')}" if "CUT" in path else ""
    say(f"  check {M}x{N} {str(dtype)[6:]:8s} {how:18s} {'ok' if ok else 'WRONG'}  worst err/tol {worst:.2f}  "
        f"{path.get('kernel')} {cut}")
    return ok


say(f"softmax cut check on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
    f"triton {__import__('triton').__version__}; old = {old_path}")
say("1. correctness (every element against float64, NaN-poisoned output, twice each)")
CASES = [(600, 50257, torch.bfloat16, "contiguous"), (600, 50257, torch.float16, "contiguous"),
         (600, 50257, torch.bfloat16, "x+3"), (600, 50257, torch.float16, "y own stride"),
         (600, 50257, torch.bfloat16, "x+5,y+5"), (600, 50257, torch.float16, "x+3,y+3 stride+8"),
         (400, 65537, torch.float16, "x+3"), (400, 65537, torch.bfloat16, "contiguous"),
         (300, 100277, torch.bfloat16, "contiguous"), (300, 100277, torch.bfloat16, "y own stride"),
         (700, 30001, torch.bfloat16, "y own stride"), (700, 20001, torch.float16, "x+3"),
         (7, 50257, torch.bfloat16, "contiguous"),  # fewer rows than teams: one row a team
         (200, 32769, torch.bfloat16, "contiguous"), (100, 262143, torch.bfloat16, "contiguous"),
         (200, 49160, torch.float16, "x+3"),  # whole 16-byte groups, not 16-element ones
         (300, 50257, torch.bfloat16, "y fp32")]
wrong = []
for M, N, dtype, how in CASES:
    if time.time() > DEADLINE:
        say(f"  {M}x{N} {dtype} {how}: skipped, out of time")
        continue
    if not check(M, N, dtype, how):
        wrong.append(f"{M}x{N} {dtype} {how}")
    torch.cuda.empty_cache()

say("2. timing (us, median of gpu_median_ms, two rounds opposite order; % of copy bandwidth; x torch)")
copy = device.measured_copy_gbps(refresh=True)
say(f"  copy {copy:.0f} GB/s")
TIMED = [(512, 50257, torch.bfloat16, "x+3"), (512, 50257, torch.float16, "y own stride"),
         (512, 50257, torch.bfloat16, "x+5,y+5"), (1024, 65537, torch.float16, "x+3"),
         (2048, 30001, torch.bfloat16, "y own stride"), (2048, 20001, torch.float16, "x+3"),
         (2048, 30522, torch.bfloat16, "contiguous"),  # the pipelined loop, unmoved (a control)
         (2048, 30522, torch.bfloat16, "team forced")]  # the cut team there, launched by hand: not dispatched
say(f"  {'shape':>12s} {'dtype':8s} {'layout':18s} {'old us':>8s} {'new us':>8s} {'torch':>8s} {'old %':>6s} "
    f"{'new %':>6s} {'new/old':>7s} {'x torch':>7s}  paths (old -> new)")
for M, N, dtype, how in TIMED:
    if time.time() > DEADLINE:
        say(f"  {M}x{N} {dtype} {how}: skipped, out of time")
        continue
    x, y = layout(M, N, dtype, how)
    out = y if y is not None else torch.empty_like(x)
    ref = new.softmax_ref(x)
    paths, good = {}, True
    for name, mod in (("old", old), ("new", new)):
        out.fill_(float("nan"))
        mod.softmax(x, out=out)
        paths[name] = mod.last_config.get("kernel")
        good = good and bool(torch.allclose(out.double(), ref, rtol=TOL[dtype][0], atol=TOL[dtype][1]))
    del ref
    if not good:
        wrong.append(f"{M}x{N} {dtype} {how} (timed)")
    nbytes = 2 * x.numel() * x.element_size()
    calls = {"old": lambda: old.softmax(x, out=out), "new": lambda: new.softmax(x, out=out),
             "torch": lambda: torch.softmax(x, dim=-1)}
    if how == "team forced":  # would the team beat the pipelined loop on rows it could take?
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        calls["new"] = lambda: new._launch_smem_team(x, out, M, N, sms, cut=True)
        out.fill_(float("nan"))
        calls["new"]()
        paths["new"] = "_softmax_smem_team (forced)"
        good = good and bool(torch.allclose(out.double(), new.softmax_ref(x), rtol=TOL[dtype][0], atol=TOL[dtype][1]))
    times = {k: [] for k in calls}
    for order in (list(calls), list(reversed(calls))):
        for k in order:
            times[k].append(gpu_median_ms(calls[k], warmup_ms=10, rep_ms=40) * 1e3)
    us = {k: sum(v) / 2 for k, v in times.items()}
    pct = {k: 100 * nbytes / (us[k] * 1e3) / copy for k in us}
    say(f"  {M:>5d}x{N:<6d} {str(dtype)[6:]:8s} {how:18s} {us['old']:8.1f} {us['new']:8.1f} {us['torch']:8.1f} "
        f"{pct['old']:6.1f} {pct['new']:6.1f} {us['old'] / us['new']:7.3f} {us['torch'] / us['new']:7.3f}  "
        f"{paths['old']} -> {paths['new']}{'' if good else '  WRONG'}  rounds "
        + " ".join(f"{k} {'/'.join(f'{t:.1f}' for t in v)}" for k, v in times.items()))
    del x, y, out
    torch.cuda.empty_cache()

say(f"done in {time.time() - T0:.0f} s; {'WRONG: ' + ', '.join(wrong) if wrong else 'every output right'}")
sys.exit(1 if wrong else 0)
