"""gemm56's probe (issue 52), one H100, from the repository root: python .stage/gemm56_probe.py (under 120 s).

1. Every autotune candidate of this tree's gemm.py forced, at 384x4096x4096 (bf16, fp16), 320x4096x4096,
   2048x4608x3584, 2048x3584x18944 and 3000x5000x2000 (bf16), beside torch.matmul: each output checked first (NaN-poisoned, against
   the fp32 product), then kgit's median (the L2 cleared clean before each call), two rounds in opposite order,
   and the autotune's own pick in the same process (does it pick the fastest it was offered?).
2. Five fresh autotunes at 2048x4608x3584 bf16 (the kernels compiled already: the timing's cost alone, in ms,
   and the pick each time).
3. cuBLAS's kernel names at the same shapes (torch.profiler): its tile, and whether it splits K (splitK /
   streamk / segment_k in the name).
4. 3000x5000xK for K = 1000, 2000, 4000 on CONFIG (persistent 128x256) and cuBLAS: the slope is the K-steps'
   time, the intercept what a tile costs besides them (prologue, epilogue); and 3000x5000x2048, 3000x5120x2000,
   3000x5120x2048, 3072x5120x2048: rows that are multiples of 128 B, and whole tiles, one at a time; and
   stream-K over every tile forced at 3000x5000x2000 (not offered there).
Everything printed is written to $OUT/gemm56_probe.txt, the rows to $OUT/gemm56_probe.jsonl.
"""

import importlib.util
import json
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kgit.harness.timing import gpu_median_ms  # noqa: E402

OUT = os.environ.get("OUT", ".")
TXT = open(os.path.join(OUT, "gemm56_probe.txt"), "w")
ROWS = open(os.path.join(OUT, "gemm56_probe.jsonl"), "w")
T0 = time.time()


def say(*parts):
    line = " ".join(str(p) for p in parts)
    print(line, flush=True)
    TXT.write(line + "\n")
    TXT.flush()


def row(**r):
    ROWS.write(json.dumps(r) + "\n")
    ROWS.flush()


spec = importlib.util.spec_from_file_location("gemm_new", os.path.join(ROOT, "skills/kernels/gemm/gemm.py"))
g = importlib.util.module_from_spec(spec)
spec.loader.exec_module(g)
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
KEYS = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "GROUP_M", "PERSISTENT", "GLUON", "USE_TMA", "STREAM_K",
        "TAIL_BLOCK_M", "TAIL_BLOCK_N", "EPILOGUE_SUBTILE")


def name(cfg):
    return " ".join(f"{k}={cfg[k]}" for k in KEYS if k in cfg and (cfg[k] or k in ("BLOCK_M", "BLOCK_N")))


def inputs(M, N, K, dt):
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda").to(DT[dt])
    b = torch.randn(K, N, device="cuda").to(DT[dt])
    return a, b, a.float() @ b.float()


def wrong(c, ref):
    if not torch.isfinite(c).all():
        return "non-finite"
    err = ((c.float() - ref).norm() / ref.norm()).item()
    return None if err < 1e-2 else f"relative error {err:.3g}"


def us(fn):
    return gpu_median_ms(fn, warmup_ms=5, rep_ms=25) * 1e3


say(f"gemm56 probe on {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {g.triton.__version__}")
torch.backends.cuda.matmul.allow_tf32 = False

# 1. every candidate forced, and the autotune's pick
for M, N, K, dt in [(384, 4096, 4096, "bf16"), (384, 4096, 4096, "fp16"), (320, 4096, 4096, "bf16"),
                    (2048, 4608, 3584, "bf16"), (2048, 3584, 18944, "bf16"), (3000, 5000, 2000, "bf16")]:
    a, b, ref = inputs(M, N, K, dt)
    c = torch.empty(M, N, device="cuda", dtype=DT[dt])
    cands = g._candidates(a, b, c)
    calls, names = {}, {}
    for i, cfg in enumerate(cands):
        out = torch.full_like(c, float("nan"))
        try:
            g.gemm(a, b, out=out, config=cfg)
            torch.cuda.synchronize()
            why = wrong(out, ref)
        except Exception as e:
            why = f"{type(e).__name__}: {str(e).splitlines()[-1] if str(e) else ''}"
        ran = dict(g.last_config)
        names[f"c{i}"] = name(ran)
        if why:
            say(f"  {M}x{N}x{K} {dt} c{i} {name(cfg)}: WRONG/FAILED {why}")
            continue
        calls[f"c{i}"] = lambda cfg=cfg, out=out: g.gemm(a, b, out=out, config=cfg)
    out = torch.full_like(c, float("nan"))
    g.gemm(a, b, out=out)  # the autotune's pick
    torch.cuda.synchronize()
    pick, pick_ok = dict(g.last_config), wrong(out, ref)
    calls["auto"] = lambda out=out: g.gemm(a, b, out=out)
    tout = torch.matmul(a, b)
    calls["torch"] = lambda: torch.matmul(a, b, out=tout)
    times = {k: [] for k in calls}
    for order in (list(calls), list(reversed(calls))):
        for k in order:
            times[k].append(us(calls[k]))
    t_torch = sum(times["torch"]) / 2
    say(f"{M}x{N}x{K} {dt}: torch {t_torch:.2f} us (rounds {times['torch'][0]:.2f}/{times['torch'][1]:.2f}); "
        f"autotune pick {name(pick)} ok={pick_ok is None}")
    for k in calls:
        mean = sum(times[k]) / 2
        say(f"  {k:5s} {mean:8.2f} us  x torch {t_torch / mean:.3f}  rounds {times[k][0]:.2f}/{times[k][1]:.2f}  "
            f"{names.get(k, name(pick) if k == 'auto' else 'cuBLAS')}")
        row(part="candidates", shape=f"{M}x{N}x{K}", dtype=dt, side=k, us=mean, rounds=times[k],
            config=names.get(k, name(pick) if k == "auto" else "cuBLAS"), x_torch=t_torch / mean)
    say(f"  ({time.time() - T0:.0f} s)")

# 2. fresh autotunes at 2048x4608x3584 bf16: the pick and the timing's cost, compiled already
a, b, ref = inputs(2048, 4608, 3584, "bf16")
c = torch.empty(2048, 4608, device="cuda", dtype=torch.bfloat16)
for i in range(5):
    g._TUNED.clear()
    torch.cuda.synchronize()
    start = time.perf_counter()
    cfg = g._autotune(a, b, c)
    ms = (time.perf_counter() - start) * 1e3
    say(f"autotune {i}: 2048x4608x3584 bf16 picked {name(cfg)} in {ms:.1f} ms (compiled already)")
    row(part="autotune", i=i, ms=ms, config=name(cfg))

# 3. cuBLAS's kernels
for M, N, K in [(384, 4096, 4096), (320, 4096, 4096), (448, 4096, 4096), (2048, 4608, 3584), (3000, 5000, 2000)]:
    a, b, _ = inputs(M, N, K, "bf16")
    torch.matmul(a, b)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.matmul(a, b)
        torch.cuda.synchronize()
    kernels = [e.key for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    say(f"cuBLAS {M}x{N}x{K} bf16: {' | '.join(kernels)}")
    row(part="cublas", shape=f"{M}x{N}x{K}", kernels=kernels)

# 4. around 3000x5000x2000: K (the slope: K-steps; the intercept: what a tile costs besides them), and the rows'
# alignment (A's 4000 B and B's and C's 10000 B rows are not multiples of 128 B; 2048 and 5120 make them so) apart
# from the ragged tiles (3072x5120x2048: the same 480 tiles of 128x256, whole)
for M, N, K in [(3000, 5000, 1000), (3000, 5000, 2000), (3000, 5000, 4000), (3000, 5000, 2048), (3000, 5120, 2000),
                (3000, 5120, 2048), (3072, 5120, 2048)]:
    a, b, ref = inputs(M, N, K, "bf16")
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    # CONFIG everywhere; stream-K over every tile (not offered there: 0.91 of the waves filled) at the shape
    for label, cfg in [("CONFIG", dict(g.CONFIG))] + ([("stream-K", {**g.CONFIG, **g.STREAM_K_CONFIGS[0]})]
                                                      if (M, N, K) == (3000, 5000, 2000) else []):
        out.fill_(float("nan"))
        g.gemm(a, b, out=out, config=cfg)
        torch.cuda.synchronize()
        why = wrong(out, ref)
        tout = torch.matmul(a, b)
        t = [us(lambda: g.gemm(a, b, out=out, config=cfg)), us(lambda: torch.matmul(a, b, out=tout))]
        t += [us(lambda: torch.matmul(a, b, out=tout)), us(lambda: g.gemm(a, b, out=out, config=cfg))]
        t_ours, t_torch = (t[0] + t[3]) / 2, (t[1] + t[2]) / 2
        tflops = 2 * M * N * K / t_ours / 1e6
        say(f"{M}x{N}x{K} bf16 {label} {t_ours:.2f} us ({tflops:.0f} TFLOP/s) ok={why is None}, torch {t_torch:.2f} "
            f"us, x torch {t_torch / t_ours:.3f}  rounds {t[0]:.2f}/{t[3]:.2f} torch {t[1]:.2f}/{t[2]:.2f}")
        row(part="around-3000x5000", shape=f"{M}x{N}x{K}", side=label, us=t_ours, torch_us=t_torch,
            ok=why is None)
say(f"done in {time.time() - T0:.0f} s")
