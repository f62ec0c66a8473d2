"""moe59 device probe (one H100): the fused-moe layer with the padding half-tiles skipped and the tiles claimed.

    PYTHONPATH=$PWD python .stage/probe_moe59.py OUT_DIR .stage/old_fused_moe.py 330

run from the worktree's root; .stage/old_fused_moe.py is main's file (git show main:skills/kernels/fused-moe/fused_moe.py).
Rows per shape, each checked against fused_moe.reference (fp32) before timing and the new file's again after:
  old          main's file, autotuned (its pick)
  new          this branch's file, autotuned (its pick)
  old:CONFIG   main's file, CONFIG forced (two consumers, 128-row blocks)
  new:CONFIG   this branch's, CONFIG forced: halves of padding alone skipped, tiles claimed (CLAIM 1)
  new:dealt    this branch's, CONFIG forced, CLAIM_TILES False: the skip alone, tiles dealt every 132nd as main
  dense        the dense GEMM pair of the same flops (fused_moe.dense_equivalent on the test's operands)
Timed by kgit.harness.timing.gpu_median_ms (L2 cleared before each call, medians), two rounds in opposite orders;
each row prints both rounds, the better, their spread, / old, x dense and the prediction (.stage/moe59_notes.md).
Then, while the deadline allows, each kernel's device time in the new file's autotuned call (torch.profiler).
Results go to OUT_DIR/probe_moe59.txt line by line (flushed), so a cut-off run leaves what it had.
MOE59_DRY=1 TRITON_INTERPRET=1: the probe's flow on the CPU at two tiny shapes (wall-clock times, no profile)."""
import importlib.util
import os
import sys
import time

import torch

from kgit.harness import NORM
from kgit.harness.timing import gpu_median_ms
from kgit.harness.tolerance import compare

OUT_DIR, OLD_PATH, DEADLINE_S = sys.argv[1], sys.argv[2], float(sys.argv[3])
DRY = os.environ.get("MOE59_DRY") == "1"
DEVICE = "cpu" if DRY else "cuda"
START = time.time()
os.makedirs(OUT_DIR, exist_ok=True)
LOG = open(os.path.join(OUT_DIR, "probe_moe59.txt"), "a")


def say(line):
    print(line, flush=True)
    LOG.write(line + "\n")
    LOG.flush()


def sync():
    if not DRY:
        torch.cuda.synchronize()


def median_us(fn):
    if DRY:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e6
    return gpu_median_ms(fn, warmup_ms=25, rep_ms=100) * 1e3


def left_s():
    return DEADLINE_S - (time.time() - START)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HERE = os.path.join(os.getcwd(), "skills", "kernels", "fused-moe")
sys.path.insert(0, HERE)  # test_fused_moe imports fused_moe (this branch's) beside it
new = load(os.path.join(HERE, "fused_moe.py"), "fused_moe_new")
old = load(OLD_PATH, "fused_moe_old")
tests = load(os.path.join(HERE, "test_fused_moe.py"), "test_fused_moe_probe")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

# (shape T x E x k x H x I, dtype): the compute-bound many-expert shapes first, then the memory-bound ones that must
# not lose; the fp16 twin of the first last
SHAPES = [((4096, 60, 4, 2048, 1408), "bf16"), ((64, 64, 6, 2048, 1408), "bf16"), ((4096, 64, 6, 2048, 1408), "bf16"),
          ((2048, 64, 8, 3584, 2560), "bf16"), ((2048, 8, 2, 4096, 14336), "bf16"), ((512, 64, 6, 2048, 1408), "fp16"),
          ((4096, 60, 4, 2048, 1408), "fp16")]
if DRY:
    SHAPES = [((40, 6, 2, 32, 48), "fp16"), ((8, 6, 2, 32, 48), "fp16")]  # (the interpreter's bf16 is not checked)
# predicted (.stage/moe59_notes.md): new / old for the autotuned pick and for CONFIG forced (new:CONFIG / old:CONFIG),
# new:dealt / old:CONFIG, and new's x dense
PREDICTED = {
    (4096, 60, 4, 2048, 1408): dict(new=1.12, config=1.12, dealt=1.00, dense=0.60),
    (4096, 64, 6, 2048, 1408): dict(new=1.04, config=1.04, dealt=1.01, dense=0.66),
    (2048, 64, 8, 3584, 2560): dict(new=1.05, config=1.05, dealt=1.02, dense=0.69),
    (2048, 8, 2, 4096, 14336): dict(new=1.025, config=1.025, dealt=1.025, dense=0.815),
    (64, 64, 6, 2048, 1408): dict(new=1.00, config=1.00, dealt=1.00, dense=None),
    (512, 64, 6, 2048, 1408): dict(new=1.00, config=1.00, dealt=1.00, dense=None),
}


def check(name, out, ref, dtype):
    why = compare(out.float(), ref, NORM[dtype])
    if why is not None:
        raise AssertionError(f"{name}: {why}")


def with_claim(claim, fn):
    """fn() with this branch's CLAIM_TILES set to claim (then back to its rule)."""
    def run():
        new.CLAIM_TILES = claim
        try:
            return fn()
        finally:
            new.CLAIM_TILES = None
    return run


def probe_shape(shape, dtype):
    T, E, k, H, I = shape
    x, w13, w2, logits, top_k, x_rep, h_rep = tests.make_inputs(shape, DTYPES[dtype], DEVICE, "normal")
    ref = new.reference(x, w13, w2, logits, top_k)
    outs = {name: torch.full_like(x, float("nan")) for name in ("old", "new", "old:CONFIG", "new:CONFIG", "new:dealt")}
    sides = {
        "old": lambda: old.fused_moe(x, w13, w2, logits, top_k, out=outs["old"]),
        "new": lambda: new.fused_moe(x, w13, w2, logits, top_k, out=outs["new"]),
        "old:CONFIG": lambda: old.fused_moe(x, w13, w2, logits, top_k, out=outs["old:CONFIG"], config=dict(old.CONFIG)),
        "new:CONFIG": lambda: new.fused_moe(x, w13, w2, logits, top_k, out=outs["new:CONFIG"], config=dict(new.CONFIG)),
        "new:dealt": with_claim(False, lambda: new.fused_moe(x, w13, w2, logits, top_k, out=outs["new:dealt"],
                                                            config=dict(new.CONFIG))),
        "dense": lambda: new.dense_equivalent(x_rep, w13[0], h_rep, w2[0]),
    }
    paths = {}
    for name, fn in sides.items():  # first call: compiles, autotunes; then the check on NaN-filled outputs
        fn()
        sync()
        if name != "dense":
            check(name, outs[name], ref, dtype)
            module = old if name.startswith("old") else new
            paths[name] = {key: module.last_config.get(key) for key in
                           ("BLOCK_M", "BLOCK_N", "DOWN_BLOCK_N", "num_stages", "DOWN_num_stages", "PDL", "PAIRS_ONLY",
                            "CLAIM")}
    say(f"{'x'.join(map(str, shape))} {dtype}: all outputs match the fp32 reference; paths: " +
        "; ".join(f"{n} {p}" for n, p in paths.items()))
    order = list(sides)
    times = {name: [] for name in order}
    for round_order in (order, order[::-1]):
        for name in round_order:
            if left_s() < 15:
                say("  deadline: the rest of this shape's timing skipped")
                break
            times[name].append(median_us(sides[name]))
    for name in order[:-1]:  # the layer's sides, checked again after timing
        outs[name].fill_(float("nan"))
        sides[name]()
    sync()
    for name in order[:-1]:
        check(name + " (after timing)", outs[name], ref, dtype)
    best = {name: min(t) for name, t in times.items() if t}
    pred = PREDICTED.get(shape, {})
    for name in order:
        if name not in best:
            continue
        t = times[name]
        spread = (max(t) - min(t)) / min(t)
        base_name = "old:CONFIG" if name in ("new:CONFIG", "new:dealt") else "old"
        ratio = best[base_name] / best[name] if base_name in best and name not in ("old", "dense") else None
        dense = best["dense"] / best[name] if "dense" in best and name != "dense" else None
        predicted = {"new": pred.get("new"), "new:CONFIG": pred.get("config"), "new:dealt": pred.get("dealt")}.get(name)
        say(f"  {name:11s} rounds {' / '.join(f'{v:9.1f}' for v in t)} us  best {best[name]:9.1f}  spread {spread:5.1%}"
            + (f"  vs {base_name} {ratio:.3f}" + (f" (predicted {predicted})" if predicted else "") if ratio else "")
            + (f"  x dense {dense:.3f}" if dense else "")
            + (f" (predicted {pred['dense']})" if name == "new" and pred.get("dense") else ""))


def profile_shape(shape, dtype):
    """Each kernel's device time in the new file's autotuned call (5 calls, per call)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    x, w13, w2, logits, top_k, _, _ = tests.make_inputs(shape, DTYPES[dtype], DEVICE, "normal")
    out = torch.empty_like(x)
    new.fused_moe(x, w13, w2, logits, top_k, out=out)
    torch.cuda.synchronize()
    calls = 5
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            new.fused_moe(x, w13, w2, logits, top_k, out=out)
        torch.cuda.synchronize()
    kernels = {}
    for event in prof.key_averages():  # the kernels themselves (the CPU ops' totals would count them again)
        if event.device_type == DeviceType.CUDA:
            kernels[event.key] = kernels.get(event.key, 0) + event.self_device_time_total / calls
    total = sum(kernels.values())
    say(f"profile {'x'.join(map(str, shape))} {dtype} (new, autotuned; {new.last_config.get('BLOCK_M')}-row blocks, "
        f"CLAIM {new.last_config.get('CLAIM')}): {total:.1f} us of kernels a call")
    for name, us in sorted(kernels.items(), key=lambda kv: -kv[1]):
        say(f"  {us:9.1f} us  {us / total:5.1%}  {name[:100]}")


say(f"probe_moe59 on {'the CPU (dry run)' if DRY else torch.cuda.get_device_name()}, torch {torch.__version__}, "
    f"deadline {DEADLINE_S:.0f} s")
for shape, dtype in SHAPES:
    if left_s() < 40:
        say(f"{'x'.join(map(str, shape))} {dtype}: skipped (deadline)")
        continue
    try:
        probe_shape(shape, dtype)
    except Exception as e:  # a wrong output or a failed launch: say so, go on with the next shape
        say(f"{'x'.join(map(str, shape))} {dtype}: FAILED {type(e).__name__}: {str(e)[:300]}")
    if not DRY:
        torch.cuda.empty_cache()
for shape, dtype in ([] if DRY else SHAPES[:5]):
    if shape[1] * 128 >= shape[0] * shape[2]:  # the memory-bound ones: the routing's kernels were profiled before
        continue
    if left_s() < 20:
        say(f"profile {'x'.join(map(str, shape))}: skipped (deadline)")
        continue
    try:
        profile_shape(shape, dtype)
    except Exception as e:
        say(f"profile {'x'.join(map(str, shape))}: FAILED {type(e).__name__}: {str(e)[:300]}")
say(f"done in {time.time() - START:.0f} s")
