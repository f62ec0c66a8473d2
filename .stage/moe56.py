"""Issue 52, branch moe56: what each change does to the memory-bound 64-expert layer, one variant at a time.

    python .stage/moe56.py            (from the repository root; writes $OUT/moe56.txt and $OUT/moe56.jsonl)
    MOE56_DRY=1 TRITON_INTERPRET=1 python .stage/moe56.py   (CPU: tiny shapes, checks only, the script's paths)

Rows (every one checked first: output poisoned with NaN, against the fp32 reference, kgit's NORM tolerance):
  old        main's fused_moe.py (git show main:), main's streaming_config forced (its rule's pick; AUTOTUNE off)
  new        this checkout's, its streaming_config forced: PDL launches + PAIRS_ONLY stores (+ two consumers at T1024)
  no-pdl     new with PDL_LAUNCH False (gather, GEMMs, sum launched as before)
  no-pairs   new with PAIRS_ONLY False (whole 64-row halves of h and y stored)
  one-cons   (two-consumer shapes: T1024) new's flags, main's one-consumer 64-row layout (main's rule's config)
  2c-128w    (two-consumer shapes) two consumers, gate/up 128 wide (4 stages), down 256 (4)
Columns: the layer's median (kgit.harness.timing.gpu_median_ms, the L2 cleared before each call), two rounds in
opposite orders; % of the weight-read floor (x, w13, w2, logits read once, out written once, over the measured copy
bandwidth); then torch.profiler's per-kernel device time a call (5 calls, L2 cleared before each) and the span from
the route kernel's start to the sum kernel's end. Under PDL a kernel's time includes its wait for the one before:
the span, not the sum of kernels, is the layer's GPU time there.
Shapes: T512, T1024, T64 on 64 experts, top 6 (bf16). Stops adding rows once ~95 s have passed (says which were
skipped): the Gluon compiles (one a GEMM a variant) are most of the time.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

T0 = time.time()
BUDGET_S = float(os.environ.get("MOE56_BUDGET_S", "95"))
DRY = os.environ.get("MOE56_DRY", "") not in ("", "0")
ROOT = os.getcwd()
OUT = os.environ.get("OUT") or tempfile.mkdtemp()
os.makedirs(OUT, exist_ok=True)
sys.path.insert(0, ROOT)
from kgit.harness import NORM  # noqa: E402
from kgit.harness.tolerance import compare  # noqa: E402

TXT = open(os.path.join(OUT, "moe56.txt"), "w")
JSONL = open(os.path.join(OUT, "moe56.jsonl"), "w")


def say(line=""):
    print(line, flush=True)
    TXT.write(line + "\n")
    TXT.flush()


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


KERNEL = "skills/kernels/fused-moe/fused_moe.py"
old_path = os.path.join(tempfile.mkdtemp(), "fused_moe_main.py")
try:
    text = subprocess.run(["git", "show", f"main:{KERNEL}"], capture_output=True, text=True, check=True).stdout
except (subprocess.CalledProcessError, FileNotFoundError):
    text = open(os.path.join(ROOT, ".stage", "fused_moe_main.py")).read()
open(old_path, "w").write(text)
old = load(old_path, "fused_moe_main")
new = load(os.path.join(ROOT, KERNEL), "fused_moe_new")
dev = "cpu" if DRY else "cuda"
if DRY:
    copy_gbps, sms = 1.0, 4
else:
    from kgit.harness import device
    from kgit.harness.timing import _l2_clear, gpu_median_ms
    copy_gbps = device.measured_copy_gbps()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    say(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {new.triton.__version__}, "
        f"copy {copy_gbps:.0f} GB/s, {sms} SMs")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def inputs(T, E, k, HD, I, dtype):
    g = torch.Generator(device="cpu").manual_seed(T * 7 + E)
    r = lambda *s, scale=1.0: (torch.randn(*s, generator=g) * scale).to(dev)
    x = r(T, HD).to(dtype)
    w13 = r(E, 2 * I, HD, scale=HD ** -0.5).to(dtype)
    w2 = r(E, HD, I, scale=I ** -0.5).to(dtype)
    logits = r(T, E)
    return x, w13, w2, logits, k


def variants(shape):
    T, E, k, HD, I = shape
    main_rule = {**old.CONFIG, **old.streaming_config(T, E, k, HD, I, sms), "AUTOTUNE": 0}
    new_rule = {**new.CONFIG, **new.streaming_config(T, E, k, HD, I, sms), "AUTOTUNE": 0}
    on = {"PDL_LAUNCH": True, "PAIRS_ONLY": True}
    rows = [("old", old, main_rule, {}), ("new", new, new_rule, on)]
    if new.streaming_consumers(T, E, k) == 2:
        two_128 = {**new_rule, "BLOCK_M": 128, "BLOCK_N": 128, "num_stages": new._stages_that_fit(384, 128, 64, 2),
                   "DOWN_BLOCK_N": 256, "DOWN_num_stages": new._stages_that_fit(384, 128, 64, 2)}
        rows += [("one-cons", new, main_rule, on), ("2c-128w", new, two_128, on)]
    rows += [("no-pdl", new, new_rule, {**on, "PDL_LAUNCH": False}),
             ("no-pairs", new, new_rule, {**on, "PAIRS_ONLY": False})]
    return rows


def runner(module, cfg, flags, args, out):
    def run():
        for name, value in flags.items():
            setattr(module, name, value)
        module.fused_moe(*args, out=out, config=cfg)
    return run


def brief(cfg):
    return (f"BM {cfg['BLOCK_M']} N {cfg['BLOCK_N']}/{cfg['DOWN_BLOCK_N']} st {cfg['num_stages']}/"
            f"{cfg['DOWN_num_stages']} G{cfg['GLUON']}")


def profile(run, clear, calls=5):
    """Per-kernel device time a call and the route-to-sum span a call, by torch.profiler."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    run()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            clear()
            run()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
    per, spans, start, gemm = {}, [], None, 0
    for e in kernels:
        name = e.name
        if name.startswith("moe_route"):
            start, gemm = e.time_range.start, 0
        if name.startswith("moe_gemm_gluon") or name.startswith("moe_gate_up") or name.startswith("moe_down"):
            name = ("gate/up", "down")[min(gemm, 1)]
            gemm += 1
        elif name.startswith("moe_"):
            name = name[4:].replace("_kernel", "")
        else:
            continue
        per.setdefault(name, []).append(e.time_range.end - e.time_range.start)
        if name == "sum" and start is not None:
            spans.append(e.time_range.end - start)
    return {name: sum(v) / calls for name, v in per.items()}, (sorted(spans)[len(spans) // 2] if spans else 0.0)


# T64 E64 takes T512's configs (no compile of its own) and has the most padding rows (3712 of 4096)
SHAPES = [((512, 64, 6, 2048, 1408), "bf16"), ((1024, 64, 6, 2048, 1408), "bf16"), ((64, 64, 6, 2048, 1408), "bf16")]
if DRY:
    SHAPES = [((40, 8, 2, 64, 96), "fp16"), ((150, 4, 3, 64, 96), "fp16")]
skipped = []
for shape, dt in SHAPES:
    T, E, k, HD, I = shape
    args = inputs(T, E, k, HD, I, DTYPES[dt])
    nbytes = sum(t.numel() * t.element_size() for t in args[:4]) + T * HD * args[0].element_size()
    floor_us = nbytes / (copy_gbps * 1e3)
    say(f"\nT{T} E{E} top{k} H{HD} I{I} {dt}  floor {floor_us:.1f} us  expected blocks 64-row "
        f"{new.expected_row_blocks(T, E, k, 64):.1f}, 128-row {new.expected_row_blocks(T, E, k, 128):.1f}")
    ref = new.reference(*args)
    rows = []
    for name, module, cfg, flags in variants(shape):
        if time.time() - T0 > BUDGET_S:
            skipped.append(f"T{T} {name}")
            continue
        out = torch.full((T, HD), float("nan"), device=dev, dtype=DTYPES[dt])
        run = runner(module, cfg, flags, args, out)
        run()
        bad = compare(out.float(), ref, NORM[dt])
        launched = dict(module.last_config)
        say(f"  {name:9s} {'ok' if bad is None else 'WRONG: ' + bad}  ({brief(launched)}, PDL {launched.get('PDL', 0)}"
            f", PAIRS_ONLY {int(getattr(module, 'PAIRS_ONLY', False))})")
        if bad is None:
            rows.append((name, run))
    if DRY or not rows:
        continue
    clear = _l2_clear()
    times = {name: [] for name, _ in rows}
    for order in (rows, rows[::-1]):
        for name, run in order:
            times[name].append(1e3 * gpu_median_ms(run, warmup_ms=25, rep_ms=100, clear=clear))
    say(f"  {'':9s} layer us (2 rounds)  % floor | span us | gate/up   down  gather  sum  route  align")
    for name, run in rows:
        per, span = profile(run, clear) if time.time() - T0 < BUDGET_S + 5 else ({}, 0.0)
        us = sum(times[name]) / 2
        cells = "  ".join(f"{per.get(key, 0):6.1f}" for key in ("gate/up", "down", "gather", "sum", "route", "align"))
        say(f"  {name:9s} {times[name][0]:8.1f} / {times[name][1]:8.1f}  {100 * floor_us / us:6.1f} | {span:7.1f} | "
            f"{cells}")
        JSONL.write(json.dumps({"shape": [T, E, k, HD, I], "dtype": dt, "variant": name, "rounds_us": times[name],
                                "pct_floor": 100 * floor_us / us, "span_us": span, "kernels_us": per}) + "\n")
        JSONL.flush()
    base = sum(times["old"]) / 2 if "old" in times else None
    if base:
        say("  " + "  ".join(f"{name}/old {base / (sum(times[name]) / 2):.3f}" for name, _ in rows if name != "old"))
say(f"\nskipped (past {BUDGET_S:.0f} s): {', '.join(skipped) or 'none'}; done in {time.time() - T0:.0f} s")
