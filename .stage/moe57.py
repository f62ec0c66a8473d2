"""Issue 52, branch moe57: where moe56's PDL launches and PAIRS_ONLY stores cost, at the two shapes they lost.

    python .stage/moe57.py            (from the repository root; writes $OUT/moe57.txt and $OUT/moe57.jsonl)
    MOE57_DRY=1 TRITON_INTERPRET=1 python .stage/moe57.py   (CPU: tiny shapes, checks only, the script's paths)

Three kernel files: main's (git show main:), moe56's (.stage/fused_moe_moe56.py, a copy of branch moe56's: the
device has main's history only) and this checkout's. Every row runs one forced config (AUTOTUNE off), its flags
set on its module before each call; every output is checked first (poisoned with NaN, against the fp32
reference, kgit's NORM tolerance).

T4096 E64 top 6 (compute-bound; CONFIG: 128-row blocks on two consumers, gate/up 128 wide on 4 stages, down 256 on 4):
  old        main
  new        this branch, its rules: no PDL, whole blocks stored (the layer does not stream its weights)
  m56        moe56 (PDL + PAIRS_ONLY as it ran them: the 11% loss)
  m56-pairs  moe56, PAIRS_ONLY alone (its n_rows: a sorted_ids load on pid_m and a cross-warp sum before each tile)
  new+pairs  this branch, PAIRS_ONLY forced (n_rows from the expert's count, read after the mainloop)
  new+pdl    this branch, PDL forced
  one-cons   this branch's rules, 64-row blocks on one consumer (gate/up 128 wide on 5 stages, down 256 on 5)
Mixtral T512 fp16 (E8 top 2, 128 +- 10 rows an expert; main's streaming rule: 64-row blocks, one consumer,
gate/up 128 wide on 5 stages, down 128 on 8):
  old, new (its rules: PDL + PAIRS_ONLY), m56, m56-pairs, no-pdl, no-pairs (this branch, one switch forced off),
  two-cons   this branch's rules on CONFIG's 128-row blocks, two consumers, down 128 (4 / 4 stages: moe56's autotune pick)
Columns: the layer's median (gpu_median_ms, the L2 cleared before each call), two rounds in opposite orders; %
of the weight-read floor; then torch.profiler's per-kernel device time a call and the route-to-sum span (under
PDL a kernel's time includes its wait for the one before: the span is the layer's GPU time there).
Stops adding rows past MOE57_BUDGET_S (default 80) seconds and says which were skipped.
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
BUDGET_S = float(os.environ.get("MOE57_BUDGET_S", "80"))
DRY = os.environ.get("MOE57_DRY", "") not in ("", "0")
ROOT = os.getcwd()
OUT = os.environ.get("OUT") or tempfile.mkdtemp()
os.makedirs(OUT, exist_ok=True)
sys.path.insert(0, ROOT)
from kgit.harness import NORM  # noqa: E402
from kgit.harness.tolerance import compare  # noqa: E402

TXT = open(os.path.join(OUT, "moe57.txt"), "w")
JSONL = open(os.path.join(OUT, "moe57.jsonl"), "w")


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
text = subprocess.run(["git", "show", f"main:{KERNEL}"], capture_output=True, text=True, check=True).stdout
open(old_path, "w").write(text)
old = load(old_path, "fused_moe_main")
m56 = load(os.path.join(ROOT, ".stage", "fused_moe_moe56.py"), "fused_moe_moe56")
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


RULE = {"PDL_LAUNCH": None, "PAIRS_ONLY": None}  # this branch: the rules decide
M56_ON = {"PDL_LAUNCH": True, "PAIRS_ONLY": True}  # moe56's defaults (on Hopper)


def variants(shape):
    T, E, k, HD, I = shape
    base = {**old.CONFIG, "GLUON": 1, "AUTOTUNE": 0}
    if new.streams_weights(T, E, k):  # Mixtral T512: main's streaming rule's pick, for every file
        cfg = {**base, **old.streaming_config(T, E, k, HD, I, sms)}
        two = {**base, "DOWN_BLOCK_N": 128}  # CONFIG + AUTOTUNE_CONFIGS[0]: moe56's pick at Mixtral T512
        return [("old", old, cfg, {}), ("new", new, cfg, RULE), ("m56", m56, cfg, M56_ON),
                ("m56-pairs", m56, cfg, {**M56_ON, "PDL_LAUNCH": False}),
                ("no-pdl", new, cfg, {**RULE, "PDL_LAUNCH": False}),
                ("no-pairs", new, cfg, {**RULE, "PAIRS_ONLY": False}), ("two-cons", new, two, RULE)]
    one = {**base, "BLOCK_M": 64, "num_stages": new._stages_that_fit(64 + 2 * base["BLOCK_N"], base["BLOCK_N"], 64),
           "DOWN_num_stages": new._stages_that_fit(64 + base["DOWN_BLOCK_N"], base["DOWN_BLOCK_N"] // 2, 64)}
    return [("old", old, base, {}), ("new", new, base, RULE), ("m56", m56, base, M56_ON),
            ("m56-pairs", m56, base, {**M56_ON, "PDL_LAUNCH": False}),
            ("new+pairs", new, base, {**RULE, "PAIRS_ONLY": True}), ("new+pdl", new, base, {**RULE, "PDL_LAUNCH": True}),
            ("one-cons", new, one, RULE)]


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


SHAPES = [((4096, 64, 6, 2048, 1408), "bf16"), ((512, 8, 2, 4096, 14336), "fp16")]
if DRY:  # one shape past the streaming bound (CONFIG), one on it (Mixtral-like: 128 rows an expert)
    SHAPES = [((300, 4, 2, 64, 96), "fp16"), ((256, 4, 2, 64, 96), "fp16")]
skipped = []
for shape, dt in SHAPES:
    T, E, k, HD, I = shape
    args = inputs(T, E, k, HD, I, DTYPES[dt])
    nbytes = sum(t.numel() * t.element_size() for t in args[:4]) + T * HD * args[0].element_size()
    floor_us = nbytes / (copy_gbps * 1e3)
    say(f"\nT{T} E{E} top{k} H{HD} I{I} {dt}  floor {floor_us:.1f} us  streams {new.streams_weights(T, E, k)}  "
        f"expected blocks 64-row {new.expected_row_blocks(T, E, k, 64):.1f}, 128-row "
        f"{new.expected_row_blocks(T, E, k, 128):.1f}")
    ref = new.reference(*args)
    rows = []
    for name, module, cfg, flags in variants(shape):
        if time.time() - T0 > BUDGET_S:
            skipped.append(f"T{T} E{E} {name}")
            continue
        out = torch.full((T, HD), float("nan"), device=dev, dtype=DTYPES[dt])
        run = runner(module, cfg, flags, args, out)
        try:
            run()
            bad = compare(out.float(), ref, NORM[dt])
        except Exception as e:  # one failing variant must not hide the others
            bad = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:160] if str(e).strip() else ''}"
        launched = dict(module.last_config)
        say(f"  {name:9s} {'ok' if bad is None else 'WRONG: ' + bad}  ({brief(launched)}, PDL {launched.get('PDL', 0)}"
            f", PAIRS_ONLY {launched.get('PAIRS_ONLY', int(bool(launched.get('GLUON') and getattr(module, 'PAIRS_ONLY', 0))))})")
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
        per, span = profile(run, clear) if time.time() - T0 < BUDGET_S + 10 else ({}, 0.0)
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
