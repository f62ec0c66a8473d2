"""Stream-K GEMM (issue 52) on one H100: correctness, then timing beside main's gemm.py and torch.matmul.

    python .stage/gemm_streamk.py          (from the repository root; under 150 s)

Checks every output element (NaN-poisoned first) of new forced stream-K, new autotuned, main's autotuned and
torch.matmul against the fp32 product, then times them with do_bench (median), two rounds in turn."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import torch
import triton
from triton.testing import do_bench

START = time.time()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main_source():
    try:
        return subprocess.run(["git", "show", "main:skills/kernels/gemm/gemm.py"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):  # no git history on the device: the copy made beside this file
        return open(os.path.join(ROOT, ".stage", "gemm_main.py")).read()


new = load(os.path.join(ROOT, "skills", "kernels", "gemm", "gemm.py"), "gemm_new")
old_file = tempfile.NamedTemporaryFile("w", suffix="_gemm_main.py", delete=False)
old_file.write(main_source())
old_file.close()
old = load(old_file.name, "gemm_main")

SHAPES = [(2048, 4608, 3584), (3000, 5000, 2000), (4096, 4096, 4096), (1024, 1024, 1024), (128, 4096, 4096),
          (2048, 3584, 18944)]
DTYPES = {"bf16": (torch.bfloat16, 2.0 ** -8), "fp16": (torch.float16, 2.0 ** -10)}
FORCED = {"STREAM_K": 1}
print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
      f"{torch.cuda.get_device_properties(0).multi_processor_count} SMs", flush=True)


def impls(a, b, c):
    return {"torch": lambda: torch.matmul(a, b, out=c),
            "main": lambda: old.gemm(a, b, out=c),
            "new": lambda: new.gemm(a, b, out=c),
            "new SK": lambda: new.gemm(a, b, out=c, config=FORCED)}


def check(name, fn, c, ref, rtol):
    """Every element within rtol of its own size plus 1% of the output's rms (fp32 sums in another order)."""
    c.fill_(float("nan"))
    fn()
    torch.cuda.synchronize()
    err = (c.float() - ref).abs()
    bound = rtol * ref.abs() + 1e-2 * ref.pow(2).mean().sqrt()
    bad = int((~(err <= bound)).sum())  # NaN counts as bad
    return bad, float(err.max())


cases, failures = [], 0
for M, N, K in SHAPES:
    for dname, (dtype, rtol) in DTYPES.items():
        torch.manual_seed(M + N + K)
        a = torch.randn(M, K, device="cuda").to(dtype)
        b = torch.randn(K, N, device="cuda").to(dtype)
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        ref = new.reference(a, b)
        fns = impls(a, b, c)
        status = []
        for name, fn in fns.items():
            for _ in range(2):  # twice: the second launch finds the stream-K counts zeroed by the first
                bad, worst = check(name, fn, c, ref, rtol)
            failures += bad > 0
            status.append(f"{name} {'ok' if not bad else f'{bad} BAD'} (max err {worst:.2g})")
        fns["new"]()
        picked = "SK" if new.last_config.get("STREAM_K") else "whole"
        picked += f" G{new.last_config['GROUP_M']} s{new.last_config['num_stages']}"
        tiles, k_steps = triton.cdiv(M, 128) * triton.cdiv(N, 256), triton.cdiv(K, 64)
        print(f"check {M}x{N}x{K} {dname}: " + "; ".join(status) + f"; autotune picked {picked}; "
              f"stream_k_pays {new.stream_k_pays(tiles, new._num_sms(a.device), k_steps)}", flush=True)
        cases.append(((M, N, K), dname, fns, picked))
        del ref
print(f"checks done in {time.time() - START:.0f} s, {failures} failing", flush=True)

results = {}
for rnd in range(2):
    for (M, N, K), dname, fns, picked in cases:
        for name, fn in fns.items():
            ms = do_bench(fn, warmup=10, rep=40, return_mode="median")
            results.setdefault(((M, N, K), dname, name), []).append(ms)
print(f"timed in {time.time() - START:.0f} s (do_bench median, two rounds)\n")
print(f"{'shape':>17} {'dt':>4} {'torch us':>9} | {'x torch: main':>13} {'new auto':>9} {'new SK':>7} | "
      f"{'TFLOP/s new auto':>16}  picked")
for (M, N, K), dname, fns, picked in cases:
    us = {name: [1e3 * t for t in results[((M, N, K), dname, name)]] for name in fns}
    ratio = {name: " ".join(f"{us['torch'][r] / us[name][r]:.3f}" for r in range(2))
             for name in fns}
    tflops = 2 * M * N * K / min(us["new"]) * 1e-6
    print(f"{f'{M}x{N}x{K}':>17} {dname:>4} {min(us['torch']):9.1f} | {ratio['main']:>13} {ratio['new']:>11} "
          f"{ratio['new SK']:>11} | {tflops:16.1f}  {picked}")
print(f"\n(x torch per round, round 1 then 2; {failures} failing checks; {time.time() - START:.0f} s)")
os.unlink(old_file.name)
