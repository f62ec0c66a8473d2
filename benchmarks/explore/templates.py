"""What the exploration scripts beside this file share: a kernel's template imported by path, a run's
start (its folder, timer, copy bandwidth and results header), the host's time per call of a launch,
one variant's check-then-time; for the scripts that compile for Hopper offline, the compile and the
compiled kernel's resources; an exception's message for a results row, and a watchdog for kernels that
hang."""

import importlib.util
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load(kernel: str, path=None, side: str = "template"):
    """skills/kernels/<kernel>/triton_template.py, or another file of that kernel's template (a revision's,
    a variant's) at `path`, imported under a name of its own (every kernel folder has a module of the same
    file name; two sides of an A/B live in one process)."""
    path = path or ROOT / "skills" / "kernels" / kernel / "triton_template.py"
    spec = importlib.util.spec_from_file_location(f"{kernel.replace('-', '_')}_{side.replace(' ', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def norm_call(kernel: str, T, x, w, b):
    """(run(out), the fp32 reference) of a row kernel's template T (softmax, rmsnorm, layernorm) on its
    inputs."""
    if kernel == "layernorm":
        return (lambda y: T.layernorm(x, w, b, out=y)), T.layernorm_ref(x, w, b).float()
    if kernel == "rmsnorm":
        return (lambda y: T.rmsnorm(x, w, out=y)), T.rmsnorm_ref(x, w).float()
    return (lambda y: T.softmax(x, out=y)), T.softmax_ref(x).float()


def begin(out_dir: str):
    """A GPU exploration run's start: its output folder (made), the timer every variant is timed with,
    the device copy bandwidth measured now (GB/s), and the results it writes, machine and versions
    first, its rows to come."""
    import torch
    import triton

    from kgit.harness import device
    from kgit.harness.timing import Timer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    copy = device.measured_copy_gbps(refresh=True)
    results = {"copy_gbps_start": copy, "device": device.detect(), "torch": torch.__version__,
               "triton": triton.__version__, "rows": []}
    print(f"copy {copy:.0f} GB/s", flush=True)
    return out, Timer(repeats=3, warmup_ms=10, rewarm_ms=5, rep_ms=15), copy, results


def norm_inputs(M: int, N: int, dtype):
    """Fresh inputs of a row norm on the GPU: x (M, N) off zero (mean 0.5, std 2), w near 1, b around 0."""
    import torch

    x = (torch.randn(M, N, device="cuda") * 2 + 0.5).to(dtype)
    w = (torch.rand(N, device="cuda") + 0.5).to(dtype)
    b = torch.randn(N, device="cuda").to(dtype)
    return x, w, b


def time_sides(kernel: str, sides: dict, M: int, N: int, dname: str, rounds: int, timer, copy_gbps,
               results: dict):
    """A row kernel's templates (sides: label -> module) on the same fresh inputs, A B A B for `rounds`
    rounds, each checked then timed (check_and_time_team); the rows go to results and are printed."""
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dname]
    x, w, b = norm_inputs(M, N, dtype)
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()
    for rnd in range(rounds):
        for label, T in sides.items():
            run, ref = norm_call(kernel, T, x, w, b)
            row = {"kernel": kernel, "shape": [M, N], "dtype": dname, "variant": label, "round": rnd}
            check_and_time_team(T, row, run, y, ref, nbytes, timer, copy_gbps)
            results["rows"].append(row)
            print(f"{kernel} {M}x{N} {dname} round {rnd} {label}: {figure(row)}", flush=True)


def time_variants(kernel: str, runs: dict, out, ref, M: int, N: int, dname: str, rounds: int, timer, copy_gbps,
                  results: dict):
    """Variants of one row kernel (runs: label -> run(out)) on the same inputs, A B A B for `rounds` rounds,
    each checked against `ref` then timed (check_and_time; the traffic is `out`'s bytes twice, x read and y
    written); the rows go to results and are printed."""
    nbytes = 2 * out.numel() * out.element_size()
    for rnd in range(rounds):
        for label, run in runs.items():
            row = {"kernel": kernel, "shape": [M, N], "dtype": dname, "variant": label, "round": rnd}
            check_and_time(row, run, out, ref, nbytes, timer, copy_gbps, on_gpu=True)
            results["rows"].append(row)
            print(f"{kernel} {M}x{N} {dname} round {rnd} {label}: {figure(row)}", flush=True)


def host_us_per_call(fn, calls: int = 200) -> float:
    """Microseconds of host time per call of fn: `calls` calls enqueued back to back, timed before the
    one synchronize that follows them."""
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    enqueued = time.perf_counter() - start
    torch.cuda.synchronize()
    return enqueued / calls * 1e6


def check_and_time(row: dict, run, out, ref, nbytes: int, timer, copy_gbps, on_gpu: bool) -> dict:
    """Fill `row` for one variant: poison `out` with NaN, run(out) once and compare it with the fp32
    `ref` (a 16-bit output is off by up to an ulp of bf16, 0.8%: 2e-2 relative to the largest value
    passes), then time run(out) with `timer`: the median, GB/s over `nbytes`, the spread, % of copy.
    A variant that fails to compile or is wrong gets an "error" instead of figures."""
    import torch

    from kgit.harness.timing import spread_pct

    try:
        out.fill_(float("nan"))
        run(out)
        if on_gpu:
            torch.cuda.synchronize()
        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        row["max_rel_err"] = err
        if not err < 2e-2:
            row["error"] = f"wrong output: max relative error {err:.3g}"
            return row
        times = timer.times_ms(lambda: run(out), on_gpu=on_gpu)
        row["ms"] = statistics.median(times)
        row["gbps"] = nbytes / row["ms"] * 1e-6
        row["spread_pct"] = spread_pct(times)
        if copy_gbps:
            row["pct_of_copy"] = 100 * row["gbps"] / copy_gbps
    except Exception as e:  # a variant that does not compile is a result too
        text = str(e).strip()  # a compiler error ends with its cause: keep both ends
        row["error"] = f"{type(e).__name__}: {text if len(text) <= 600 else text[:200] + ' ... ' + text[-400:]}"
    return row


def check_and_time_team(template, row: dict, run, out, ref, nbytes: int, timer, copy_gbps) -> dict:
    """check_and_time on a GPU, for a template whose launcher falls back from its shared-memory team when
    the team does not compile or launch: such a variant gets an error, not another kernel's figures."""
    check_and_time(row, run, out, ref, nbytes, timer, copy_gbps, True)
    if template._TEAM_FAILED:
        row["error"] = f"the team did not run: {template._TEAM_FAILED}"
        template._TEAM_FAILED.clear()
    return row


class Overridden:
    """A @jit kernel whose launches and warm-ups (a launcher's occupancy count compiles through warmup)
    take these keyword arguments over the launcher's own: constexprs, or options such as maxnreg."""

    def __init__(self, kernel, **overrides):
        self.kernel, self.overrides = kernel, overrides

    def __getitem__(self, grid):
        return lambda *args, **kw: self.kernel[grid](*args, **{**kw, **self.overrides})

    def warmup(self, *args, **kw):
        return self.kernel.warmup(*args, **{**kw, **self.overrides})


def figure(row: dict) -> str:
    """One variant's result as the exploration logs print it."""
    if "error" in row:
        return row["error"]
    pct = f"{row['pct_of_copy']:.1f}% " if "pct_of_copy" in row else ""
    return f"{row['gbps']:.0f} GB/s {pct}±{row['spread_pct']:.1f}%"


def compile_sm90(kernel, args, constexprs: dict, options: dict):
    """Compile a @triton.jit or @gluon.jit kernel for sm_90 (Hopper) without a GPU, from the arguments a
    launch would pass before its constexprs (CPU stand-ins will do: a descriptor's type is its dtype and
    block, an integer's value sets its divisibility hint); returns the compiled kernel."""
    import triton
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.compiler import ASTSource
    from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction
    from triton.runtime.jit import native_specialize_impl

    signature, attrs = {}, {}
    for i, (name, arg) in enumerate(zip(kernel.arg_names, args)):
        signature[name], specialization = native_specialize_impl(BaseBackend, arg, False, True, True)
        if specialization == "D":
            attrs[(i, )] = [["tt.divisibility", 16]]
    signature.update({name: "constexpr" for name in constexprs})
    source = GluonASTSource if isinstance(kernel, GluonJITFunction) else ASTSource
    src = source(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def resource_usage(kernel):
    """ptxas -v on the kernel's PTX: its registers, spill bytes and any warning (a wgmma serialized for
    want of registers is one), plus the shared memory from the compiled metadata. The registers are the
    launch figure (the warp-specialize pass sets .maxnreg); each partition's budget is its setmaxnreg."""
    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = get_ptxas(90).path  # the ptxas triton itself compiles sm_90 with
    with tempfile.TemporaryDirectory() as tmp:
        ptx = Path(tmp) / "k.ptx"
        ptx.write_text(kernel.asm["ptx"])
        log = subprocess.run([str(ptxas), "-arch=sm_90a", "-v", str(ptx), "-o", str(Path(tmp) / "k.cubin")],
                             capture_output=True, text=True)
    text = log.stdout + log.stderr
    regs = re.search(r"Used (\d+) registers", text)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    warnings = [ln.strip() for ln in text.splitlines() if "warning" in ln.lower() or "error" in ln.lower()]
    setmaxnreg = sorted({int(n) for n in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)",
                                                     kernel.asm["ptx"])})
    return dict(regs=int(regs.group(1)) if regs else None,
                spill_bytes=sum(map(int, spills.groups())) if spills else None,
                smem=kernel.metadata.shared, setmaxnreg=setmaxnreg, ptxas_warnings=warnings)


def last_lines(e, n=4):
    """An exception's message for a results row: a Triton compile error's innermost cause (what went
    wrong) and the last lines of the outermost (where)."""
    inner = e
    while inner.__cause__ is not None:
        inner = inner.__cause__
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    where = " | ".join(lines[-n:])
    what = f"{type(inner).__name__}: {str(inner).strip()[:600]}"
    return what if inner is e else f"{what} || {where}"


_LAST_ROW = [time.time()]  # when the last row finished (the watchdog reads it)


def row_done():
    """Tell the watchdog a row has finished."""
    _LAST_ROW[0] = time.time()


def start_watchdog(hang_s):
    """End the process when no row has finished for hang_s seconds (row_done): a kernel whose barriers
    never complete spins forever, and the rows done so far are already on disk."""
    row_done()

    def watch():
        while True:
            time.sleep(5)
            if time.time() - _LAST_ROW[0] > hang_s:
                print(f"no row finished in {hang_s:.0f} s (a hung kernel?): exiting", flush=True)
                os._exit(3)

    threading.Thread(target=watch, daemon=True).start()
