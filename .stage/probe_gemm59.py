"""Device probe (issue 52, gemm59): the swapped Gluon tiles (80x128 and 96x128 computed as C^T,
gemm_gluon_swap_kernel, SWAP_NOTE in gemm.py) against main's gemm (8efb40c) and cuBLAS, at M=256-512.

    cd .stage/wt-gemm59 && export PYTHONPATH=$PWD && python .stage/probe_gemm59.py $OUT
    PROBE_DRY=1 python .stage/probe_gemm59.py /tmp/probe59    (no GPU: compiles the forced tiles for sm_90, prints
                                                              the planned sides and the branch's candidates)

Sides, each checked first against the fp32 product (its output NaN-poisoned before the call), then timed by kgit's
gpu_median_ms (the L2 cleared clean before each call, warm-up 10 ms, 40 ms of calls) in two rounds, the second in the
opposite order: main's gemm.py (git show 8efb40c, autotuned), this tree's (autotuned), this tree's with a tile forced
(g96: 96x128 on 6 stages, g80: 80x128 on 7, g128: the 128x128 Gluon tile main picks at M=320-384), torch.matmul.
Each autotuned side is tuned twice in the process (its caches cleared between) and the second pick kept: a module's
first autotune in a process has picked differently before (experiments/gemm-h100/stream-k-small/, 'Correction').
Writes probe_gemm59.txt (the table) and probe_gemm59.jsonl (a row a side and shape) under argv[1]."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(HERE)  # this worktree's root: .stage/..
MAIN_COMMIT = "8efb40c"
GEMM_PATH = "skills/kernels/gemm/gemm.py"
DRY = os.environ.get("PROBE_DRY", "") not in ("", "0")
OUT = sys.argv[1] if len(sys.argv) > 1 else "."
T0 = time.time()
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "210"))  # the forced sides of shapes left after this are skipped

BF16, FP16 = torch.bfloat16, torch.float16
# (M, N, K, dtype, forced): the band first, then the controls (no forced tiles there)
SHAPES = [(384, 4096, 4096, BF16, True), (320, 4096, 4096, BF16, True), (384, 4096, 4096, FP16, True),
          (320, 4096, 4096, FP16, True), (256, 4096, 4096, BF16, True), (448, 4096, 4096, BF16, True),
          (512, 4096, 4096, BF16, True), (384, 14336, 4096, BF16, True), (128, 4096, 4096, BF16, False),
          (1024, 1024, 1024, BF16, False), (4096, 4096, 4096, BF16, False)]
SMALL = {"BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "PERSISTENT": 0, "GLUON": 1}
FORCED = {"g96": {**SMALL, "BLOCK_M": 96, "num_stages": 6}, "g80": {**SMALL, "BLOCK_M": 80, "num_stages": 7},
          "g128": {**SMALL, "BLOCK_M": 128, "num_stages": 6}}


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main_source():
    """main's gemm.py at MAIN_COMMIT: from this tree's git, else from the working directory's or a folder above."""
    here = os.path.abspath(os.getcwd())
    for folder in [TREE, here] + [os.path.normpath(os.path.join(here, *[".."] * i)) for i in range(1, 4)]:
        proc = subprocess.run(["git", "-C", folder, "show", f"{MAIN_COMMIT}:{GEMM_PATH}"], capture_output=True,
                              text=True)
        if proc.returncode == 0:
            return proc.stdout
    raise SystemExit(f"git show {MAIN_COMMIT}:{GEMM_PATH} failed in {TREE} and {here}")


def pick(cfg):
    """A config as one short word: kernel, tile, stages (and warps for the Triton kernels)."""
    if not cfg:
        return "-"
    kernel = "gluon" if cfg.get("GLUON") else ("tma" if cfg.get("USE_TMA") else "ptr")
    if kernel == "tma" and cfg.get("PERSISTENT"):
        kernel += "-pers"
    tail = f"+tail{cfg['TAIL_BLOCK_M']}x{cfg['TAIL_BLOCK_N']}" if cfg.get("TAIL_BLOCK_M") else ""
    warps = "" if cfg.get("GLUON") else f"w{cfg['num_warps']}"
    return f"{kernel} {cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} s{cfg['num_stages']}{warps}{tail}"


def write(rows):
    """The table (a line a shape: each side's two medians in us and x cuBLAS, its pick) and the jsonl rows."""
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "probe_gemm59.jsonl"), "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    lines = [f"probe_gemm59 {'(dry: nothing launched)' if DRY else ''} device={rows[0]['device'] if rows else '-'}",
             "x cuBLAS = cuBLAS's mean of its two medians / the side's; us = the two rounds' medians", ""]
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    for shape in shapes:
        sides = [r for r in rows if r["shape"] == shape]
        cublas = next((r for r in sides if r["side"] == "cublas"), None)
        base = None if cublas is None or not cublas["us"] else sum(cublas["us"]) / len(cublas["us"])
        lines.append(shape)
        for r in sides:
            us = " / ".join(f"{t:7.2f}" for t in r["us"]) if r["us"] else "      -"
            x = f"{base / (sum(r['us']) / len(r['us'])):.3f}" if base and r["us"] else "  -  "
            check = "ok" if r["check"] is True else ("-" if r["check"] is None else f"FAIL {r['check']}")
            lines.append(f"  {r['side']:7s} {us} us  x{x}  check {check:10s} {r['pick']}")
        lines.append("")
    lines.append(f"elapsed {time.time() - T0:.0f} s")
    with open(os.path.join(OUT, "probe_gemm59.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def sides_for(main, new, forced):
    """(name, call(a, b, c), pick) of each side, the autotuned ones tuned twice first."""
    def autotuned(module):
        def call(a, b, c):
            module.gemm(a, b, out=c)
        return call

    def forced_call(cfg):
        return lambda a, b, c: new.gemm(a, b, out=c, config=cfg)

    sides = [("main", autotuned(main), main), ("new", autotuned(new), new)]
    if forced and time.time() - T0 < BUDGET_S:
        sides += [(name, forced_call(cfg), new) for name, cfg in FORCED.items()]
    sides.append(("cublas", lambda a, b, c: torch.matmul(a, b, out=c), None))
    return sides


def run_gpu():
    from kgit.harness.timing import gpu_median_ms

    main = load(write_main(), "gemm_main")
    new = load(os.path.join(TREE, GEMM_PATH), "gemm_new")
    device = torch.cuda.get_device_name()
    rows = []
    for M, N, K, dtype, forced in SHAPES:
        shape = f"{M}x{N}x{K} {str(dtype).split('.')[-1]}"
        torch.manual_seed(M + N + K)
        a, b = torch.randn(M, K, device="cuda", dtype=dtype), torch.randn(K, N, device="cuda", dtype=dtype)
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        ref = new.reference(a, b)  # fp32, TF32 off
        sides, results = sides_for(main, new, forced), {}
        for name, call, module in sides:
            picks = []
            for _ in range(2 if name in ("main", "new") else 1):  # tuned twice, the second pick kept
                if name in ("main", "new"):
                    module._TUNED.clear()
                    module._PLANS.clear()
                c.fill_(float("nan"))
                try:
                    call(a, b, c)
                    torch.cuda.synchronize()
                except Exception as e:  # a side that does not run is reported, not fatal
                    picks.append(f"ERROR {type(e).__name__}: {str(e).strip().splitlines()[-1][:120]}")
                    break
                picks.append(pick(dict(module.last_config)) if module else "cuBLAS")
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
            check = True if err < 1e-2 else f"{err:.2e}"  # one rounding of C (bf16: 2^-8) and the sum's order
            results[name] = {"call": call, "check": check, "pick": " then ".join(picks), "us": []}
        timed = [name for name, _, _ in sides if results[name]["check"] is True]
        for order in (timed, timed[::-1]):  # two rounds, the second in the opposite order
            for name in order:
                fn = lambda call=results[name]["call"]: call(a, b, c)
                results[name]["us"].append(1e3 * gpu_median_ms(fn, warmup_ms=10, rep_ms=40))
        for name, _, _ in sides:
            r = results[name]
            rows.append({"shape": shape, "M": M, "N": N, "K": K, "dtype": str(dtype).split(".")[-1], "side": name,
                         "us": [round(t, 3) for t in r["us"]], "check": r["check"], "pick": r["pick"],
                         "device": device, "elapsed_s": round(time.time() - T0, 1)})
        print(f"{shape}: done at {time.time() - T0:.0f} s", flush=True)
        write(rows)
    return rows


def write_main():
    path = os.path.join(tempfile.mkdtemp(prefix="gemm59_main_"), "gemm_main.py")
    with open(path, "w") as f:
        f.write(main_source())
    return path


def run_dry():
    """No GPU: both modules load, the branch's candidates at each shape on 132 SMs (Gluon taken as running), and
    the forced tiles compiled for sm_90 (registers, shared memory, spills, the wgmma's waits) as the launcher builds
    them."""
    import triton
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import native_specialize_impl

    main = load(write_main(), "gemm_main")
    new = load(os.path.join(TREE, GEMM_PATH), "gemm_new")
    rows = []
    for module in (main, new):
        module._num_sms = lambda device: 132
        module._gluon_runs = lambda a, b, c, cfg: True
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    compiled = {}
    for M, N, K, dtype, forced in SHAPES:
        shape = f"{M}x{N}x{K} {str(dtype).split('.')[-1]}"
        a, b = torch.empty(M, K, dtype=dtype), torch.empty(K, N, dtype=dtype)
        picks = {name: [pick({**m.CONFIG, **cfg}) for cfg in m._candidates(a, b, b)[1:] if cfg.get("GLUON")]
                 for name, m in (("main", main), ("new", new))}
        for name, _, _ in sides_for(main, new, forced):
            note = "candidates' Gluon tiles: " + ", ".join(picks[name]) if name in picks else ""
            if name in FORCED:
                cfg = FORCED[name]
                key = (cfg["BLOCK_M"], dtype, N % 128 != 0)
                if key not in compiled:
                    compiled[key] = compile_sm90(new, cfg, M, N, K, dtype, triton, BaseBackend, GPUTarget,
                                                 GluonASTSource, native_specialize_impl, cuobjdump)
                note = compiled[key]
            rows.append({"shape": shape, "M": M, "N": N, "K": K, "dtype": str(dtype).split(".")[-1], "side": name,
                         "us": [], "check": None, "pick": note, "device": "cpu (dry)", "elapsed_s": 0})
    write(rows)
    return rows


def compile_sm90(g, cfg, M, N, K, dtype, triton, BaseBackend, GPUTarget, GluonASTSource, native_specialize_impl,
                 cuobjdump):
    BM, BN, BK = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    kernel, boxes = g.gluon_kernel(BM, BN, BK)
    gl_dtype = g.gl.bfloat16 if dtype == BF16 else g.gl.float16
    descs = [g.GluonDescriptor(t, list(t.shape), list(t.stride()), box, g._shared_layout(tuple(box), dtype))
             for t, box in zip((torch.empty(M, K, dtype=dtype), torch.empty(K, N, dtype=dtype),
                                torch.empty(M, N, dtype=dtype)), boxes)]
    assert descs[0].layout == g.gl.NVMMASharedLayout.get_default_for(boxes[0], gl_dtype)
    consts = dict(BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, NUM_STAGES=cfg["num_stages"], LOADER_REGS=g.GLUON_LOADER_REGS,
                  CONSUMER_REGS=g.GLUON_CONSUMER_REGS)
    signature, attrs = {}, {}
    for i, (name, arg) in enumerate(zip(kernel.arg_names, descs + [M, N, K])):
        signature[name], specialization = native_specialize_impl(BaseBackend, arg, False, True, True)
        if specialization == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    signature.update({name: "constexpr" for name in consts})
    regs = g.GLUON_TWO_CONSUMER_LAUNCH_REGS if g.gluon_consumers(BM, BN) == 2 else g.GLUON_LAUNCH_REGS
    compiled = triton.compile(GluonASTSource(fn=kernel, signature=signature, constexprs=consts, attrs=attrs),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": regs})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        usage = subprocess.run([cuobjdump, "-res-usage", cubin.name], capture_output=True, text=True).stdout
        sass = subprocess.run([cuobjdump, "-sass", cubin.name], capture_output=True, text=True).stdout
    facts = {k: re.search(rf"{k}:(\d+)", usage).group(1) for k in ("REG", "STACK", "LOCAL")}
    return (f"sm_90 compile: {kernel.fn.__name__} {BM}x{BN} s{cfg['num_stages']}: {facts['REG']} regs, stack "
            f"{facts['STACK']}, local {facts['LOCAL']}, {compiled.metadata.shared} B shared, "
            f"{sass.count('HGMMA.')} wgmma / {sass.count('WARPGROUP.DEPBAR')} waits")


if __name__ == "__main__":
    run_dry() if DRY else run_gpu()
