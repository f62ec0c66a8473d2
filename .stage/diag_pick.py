"""Why held_out_bench's first-loaded GEMM module picks a 64-row tile at M=384-512 where fresh processes pick
the 128x128 Gluon tile. Loads main's gemm.py three times (as held_out_bench loads old and new, and a third
after), autotunes each at 384 and 512 x 4096 x 4096 bf16, logging each candidate, whether its prepare raised,
the first turns' and re-timed medians, warnings, and the pick; then times each module's pick (L2 cleared).
Prediction: if the first module's 128x128 candidate raises or warns in prepare (compile, _GLUON_FAILED), the
log shows it; if instead its medians differ, the first module's timing runs on a GPU that compiled for
seconds (idle clocks) and the turns' order shows a ramp (the first candidates' medians higher)."""
import os, sys, time, warnings, json
import torch
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
import bench
from kgit.harness.timing import gpu_median_ms

out_dir = sys.argv[1]
log = open(os.path.join(out_dir, "diag-pick.txt"), "w")
def say(*a):
    s = " ".join(str(x) for x in a); print(s); log.write(s + "\n"); log.flush()

path = "skills/kernels/gemm/gemm.py"
mods = [bench.load_module(path, f"gemm_diag_{i}") for i in range(3)]

def instrument(m, tag):
    orig_times, orig_run = m._times_each, m._run
    def times_each(fns, clear, clock=None, warmup_calls=5, calls=None):
        t0 = time.time()
        res = orig_times(fns, clear, clock, warmup_calls, calls)
        med = [round(sorted(t)[len(t)//2] * 1000, 2) for t in res]
        say(f"  [{tag}] turns of {len(fns)} ({calls or m.CALLS} calls, {time.time()-t0:.2f}s): medians us {med}")
        firsts = [round(t[0]*1000, 1) for t in res]; say(f"  [{tag}]   first timed call us {firsts}")
        return res
    def run(a, b, c, cfg):
        t0 = time.time()
        try:
            r = orig_run(a, b, c, cfg)
        except Exception as e:
            say(f"  [{tag}] prepare RAISED for {cfg}: {type(e).__name__}: {str(e)[:300]}")
            raise
        say(f"  [{tag}] prepared BM {cfg['BLOCK_M']} BN {cfg['BLOCK_N']} GLUON {cfg.get('GLUON')} st {cfg.get('num_stages')} ran GLUON {r[1].get('GLUON')} in {time.time()-t0:.2f}s")
        return r
    m._times_each, m._run = times_each, run

for i, m in enumerate(mods):
    instrument(m, f"mod{i}")

torch.manual_seed(0)
for M in (128, 256, 384, 512):
    a = torch.randn(M, 4096, device="cuda").bfloat16(); b = torch.randn(4096, 4096, device="cuda").bfloat16()
    picks = []
    for i, m in enumerate(mods):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t0 = time.time()
            c = m.gemm(a, b)
            torch.cuda.synchronize()
            say(f"M={M} mod{i}: autotune+call {time.time()-t0:.2f}s pick {dict(m.last_config)}")
            for x in w:
                say(f"  warning: {x.message}")
        err = (c.float() - (a.float() @ b.float())).abs().max().item()
        say(f"  max err {err:.3g}")
        picks.append(m)
    for i, m in enumerate(mods):
        us = gpu_median_ms(lambda: m.gemm(a, b), warmup_ms=10, rep_ms=40) * 1000
        say(f"M={M} mod{i} picked-config time {us:.1f} us")
    us = gpu_median_ms(lambda: torch.matmul(a, b), warmup_ms=10, rep_ms=40) * 1000
    say(f"M={M} cuBLAS {us:.1f} us")
