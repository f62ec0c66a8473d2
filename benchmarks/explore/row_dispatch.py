"""Softmax's and layernorm's row kernels launched directly on a grid of dispatch choices (rows a program,
warps, a persistent grid, prefetch, chunk), beside main's launcher and torch, on the tune half of
benchmarks/shapes.py and on synthetic shapes of the same kinds, never on the held-out half: the figures
the dispatch rules are chosen from.

    python benchmarks/explore/row_dispatch.py MAIN_DIR [--kernels softmax,layernorm] [--json FILE]

MAIN_DIR holds main's kernel files as <kernel>.py. Every variant's output is checked against the float64
reference before it is timed (kgit.harness.timing.gpu_median_ms: medians over calls, the L2 cleared by a
read before each). Each case's kernels are compiled first by worker processes into Triton's cache, so that
the timed process mostly loads them. EXPLORE_DEADLINE (a Unix time) skips the cases left when it passes.
EXPLORE_TINY=1 cuts every shape to 2 rows and times one wall-clock call: with TRITON_INTERPRET=1 on a CPU it
checks this script's code paths, not any speed.
"""

import argparse
import json
import multiprocessing as mp
import os
import sys
import time

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402
from kgit.harness import device  # noqa: E402
from kgit.harness.timing import gpu_median_ms  # noqa: E402

TINY = os.environ.get("EXPLORE_TINY", "") not in ("", "0")
DEADLINE = float(os.environ.get("EXPLORE_DEADLINE", "inf"))
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
TOL = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (2e-2, 1e-3), torch.float16: (4e-3, 1e-4)}

# (kernel, rows, width, dtype, class, where it comes from: T = shapes.py's tune half, S = synthetic)
CASES = [
    ("softmax", 12288, 1024, "bf16", "short", "T"),
    ("softmax", 4096, 1000, "bf16", "short", "T"),
    ("softmax", 768, 1025, "fp32", "short", "T"),
    ("softmax", 8192, 2048, "fp16", "short", "S"),
    ("softmax", 16384, 1536, "bf16", "short", "S"),
    ("softmax", 8192, 2500, "fp16", "short", "S"),
    ("softmax", 4096, 3584, "fp32", "short", "S"),
    ("softmax", 2048, 5000, "bf16", "mid", "S"),
    ("softmax", 1024, 6145, "fp16", "mid", "S"),
    ("softmax", 1024, 12289, "bf16", "mid", "S"),
    ("softmax", 1024, 10000, "fp32", "mid", "S"),
    ("softmax", 1024, 32000, "fp16", "long", "T"),
    ("softmax", 2048, 20001, "bf16", "long", "S"),
    ("softmax", 512, 40001, "fp16", "long", "S"),
    ("softmax", 256, 100003, "bf16", "long", "S"),
    ("layernorm", 8192, 1280, "bf16", "short", "T"),
    ("layernorm", 64, 1600, "bf16", "short", "T"),
    ("layernorm", 8192, 768, "bf16", "short", "T"),
    ("layernorm", 16384, 1536, "fp16", "short", "S"),
    ("layernorm", 8192, 2048, "bf16", "short", "S"),
    ("layernorm", 8192, 3072, "fp16", "short", "S"),
    ("layernorm", 16384, 1024, "fp32", "short", "S"),
    ("layernorm", 128, 2048, "fp16", "short", "S"),
    ("layernorm", 8192, 1000, "fp16", "short", "S"),
    ("layernorm", 8192, 4544, "bf16", "mid", "T"),
    ("layernorm", 8192, 5120, "fp16", "mid", "T"),
    ("layernorm", 2048, 14336, "bf16", "mid", "T"),
    ("layernorm", 32, 8192, "bf16", "mid", "S"),
    ("layernorm", 4096, 6000, "fp32", "mid", "S"),
    ("cross-entropy", 64, 128256, "bf16", "vocab", "T"),
    ("cross-entropy", 4096, 50257, "bf16", "vocab", "T"),
    ("cross-entropy", 4096, 50272, "fp16", "vocab", "T"),
    ("cross-entropy", 1024, 151936, "bf16", "vocab", "T"),
    ("cross-entropy", 4096, 32064, "bf16", "vocab", "T"),
    ("cross-entropy", 4096, 32000, "fp16", "vocab", "T"),
    ("cross-entropy", 32, 32000, "bf16", "vocab", "S"),
    ("cross-entropy", 128, 65536, "fp32", "vocab", "S"),
    ("cross-entropy", 2048, 30001, "fp16", "vocab", "S"),
    ("cross-entropy", 256, 200000, "bf16", "vocab", "S"),
]


def variants(kernel, M, N, dtype, cls):
    """(name, kernel function name, constexprs, num_warps, num_stages, grid rule) of each choice tried:
    grid rule "tiles" (one program a tile of ROWS rows), "rows" (one a row) or ("persistent", k): k
    times the programs the GPU holds at once, at most the tiles."""
    out = []
    block = triton.next_power_of_2(N)
    esize = torch.finfo(DTYPES[dtype]).bits // 8
    fn = {"softmax": "_softmax_rows", "layernorm": "_layernorm_rows"}.get(kernel)

    def rows_consts(rows, prefetch, stages=1, wb=None):
        c = {"BLOCK_N": block, "ROWS": rows, "NUM_STAGES": stages, "PREFETCH": prefetch}
        if kernel == "softmax":
            c["EVEN"] = N == block and M % rows == 0 and not prefetch
        else:
            c["WB_PER_TILE"] = int(wb)
        return c

    if cls == "short":
        for rows in (1, 2, 4, 8):
            if rows * block > 16384 or (rows > 1 and M < 1024):
                continue
            for per_thread in (8, 16, 32):
                warps = rows * block // (32 * per_thread)
                if not 1 <= warps <= 16:
                    continue
                wbs = (False, True) if kernel == "layernorm" and esize == 2 else (False,)
                for wb in wbs:
                    tag = f" wb{'late' if wb else 'early'}" if kernel == "layernorm" else ""
                    out.append((f"rows R{rows} W{warps}{tag}", fn, rows_consts(rows, False, wb=wb), warps, 1, "tiles"))
                    if per_thread <= 16:
                        out.append((f"rows R{rows} W{warps}{tag} persist-prefetch", fn, rows_consts(rows, True, wb=wb),
                                    warps, 1, ("persistent", 1)))
                if per_thread <= 16 and N % 16 == 0:  # Triton's pipeline copies groups it proves aligned
                    wb = kernel == "layernorm" and esize == 2
                    out.append((f"rows R{rows} W{warps} persist-3stages", fn, rows_consts(rows, False, 3, wb=wb), warps,
                                3, ("persistent", 1)))
    if cls == "mid":
        if kernel == "softmax":
            for warps in (4, 8, 16, 32):
                out.append((f"row W{warps}", "_softmax_row", {"BLOCK_N": block, "GROUPED": False, "GROUP": 64},
                            warps, 1, "rows"))
            for warps in (8, 16, 32):
                out.append((f"rows R1 W{warps} persist-prefetch", fn, rows_consts(1, True), warps, 1, ("persistent", 1)))
        else:
            for warps in (8, 16, 32):
                out.append((f"row W{warps}", "_layernorm_row",
                            {"BLOCK_N": block, "W_IN_L1": N * esize > 64 * 1024, "EVEN": False}, warps, 1, "rows"))
                out.append((f"rows R1 W{warps} wblate persist-prefetch", fn, rows_consts(1, True, wb=True), warps, 1,
                            ("persistent", 1)))
                out.append((f"rows R1 W{warps} wblate", fn, rows_consts(1, False, wb=True), warps, 1, "tiles"))
    if cls == "vocab":
        natural = triton.cdiv(N, 32768)
        seen = set()
        for p in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64):
            chunk = triton.cdiv(triton.cdiv(N, p), 2048) * 2048
            P = triton.cdiv(N, chunk)
            if P in seen or (P > natural and M * P > max(M * natural, 8192)):
                continue
            seen.add(P)
            for block, warps, stages in ((2048, 4, 1), (2048, 4, 3), (4096, 8, 3)):
                if block > chunk:
                    continue
                out.append((f"split P{P} C{chunk} B{block} W{warps} S{stages}", "_ce_split",
                            {"BLOCK_N": block, "CHUNK": chunk, "P": P, "P_POW2": triton.next_power_of_2(P),
                             "NUM_STAGES": stages}, warps, stages, "split"))
    if cls == "long" and kernel == "softmax":
        for chunk in (4096, 8192, 16384):
            for warps in (8, 16):
                if chunk // (32 * warps) > 64:
                    continue
                for prefetch in (False, True):
                    c = {"BLOCK_N": chunk, "NUM_STAGES": 3, "PREFETCH": prefetch}
                    name = f"streamed C{chunk} W{warps}{' prefetch' if prefetch else ''}"
                    out.append((name, "_softmax_streamed", c, warps, 1 if prefetch else 3, "rows"))
                    for k in (1, 2):
                        out.append((f"{name} persist{k}", "_softmax_streamed", c, warps, 1 if prefetch else 3,
                                    ("persistent", k)))
        if not device.interpreting():  # a team's programs wait for each other: the interpreter runs one at a time
            for chunk, warps in ((4096, 8), (8192, 8), (8192, 16)):
                P = triton.cdiv(N, chunk)
                out.append((f"split team C{chunk} W{warps}", "_softmax_split",
                            {"BLOCK_N": chunk, "P": P, "P_POW2": triton.next_power_of_2(P), "MAX_SPIN": 1 << 20,
                             "maxnreg": 64 if warps == 8 else 32}, warps, 1, "team"))
        if N <= 32768:
            for warps in (16, 32):
                out.append((f"rows R1 W{warps} persist-prefetch", fn, rows_consts(1, True), warps, 1, ("persistent", 1)))
    return out


def make_inputs(kernel, M, N, dt, where):
    x = torch.randn(M, N, device=where).mul_(1 if kernel == "layernorm" else 3).to(dt)
    if kernel == "softmax":
        return (x,)
    if kernel == "cross-entropy":
        t = torch.randint(0, N, (M,), device=where)
        return x, torch.where(torch.rand(M, device=where) < 0.05, -100, t)
    return x, (torch.rand(N, device=where) + 0.5).to(dt), torch.randn(N, device=where).to(dt)


def reference(mod, kernel, inputs):
    return getattr(mod, f"{kernel.replace('-', '_')}_ref")(*inputs)


def empty_out(kernel, inputs):
    if kernel == "cross-entropy":
        return torch.empty(inputs[0].shape[0], device=inputs[0].device, dtype=torch.float32)
    return torch.empty_like(inputs[0])


def through_launcher(mod, kernel, inputs, out):
    """The module's own launcher (its dispatch) on inputs into out."""
    getattr(mod, kernel.replace("-", "_"))(*inputs, out=out)


def torch_call(kernel, inputs):
    x, N = inputs[0], inputs[0].shape[-1]
    if kernel == "softmax":
        return lambda: torch.softmax(x, dim=-1)
    if kernel == "layernorm":
        return lambda: torch.nn.functional.layer_norm(x, (N,), inputs[1], inputs[2], 1e-5)
    return lambda: torch.nn.functional.cross_entropy(x, inputs[1], reduction="none", ignore_index=-100)


def launcher(mod, kernel, inputs, out, variant, parts=False):
    """A function that launches `variant` of the module's kernels on inputs into out, and its grid; with
    parts, (kernel, args, constexprs, num_warps, num_stages) instead."""
    name, fn_name, consts, warps, stages, rule = variant
    fn = getattr(mod, fn_name)
    x = inputs[0]
    M, N = x.shape
    if rule == "split":
        ws = torch.empty(M * consts["P"] * 2, device=x.device, dtype=torch.float32)
        args = (x, inputs[1], out, ws, mod._counters(x.device, M), M, N, x.stride(0), -100)
        if parts:
            return fn, args, consts, warps, stages
        return lambda: fn[(M * consts["P"],)](*args, **consts, num_warps=warps, num_stages=stages), M * consts["P"]
    if kernel == "softmax":
        args = (x, out, N, x.stride(0), out.stride(0)) if fn_name == "_softmax_row" else \
            (x, out, M, N, x.stride(0), out.stride(0))
    else:
        w, b = inputs[1], inputs[2]
        args = (x, w, b, out, N, x.stride(0), out.stride(0), mod.EPS) if fn_name == "_layernorm_row" else \
            (x, w, b, out, M, N, x.stride(0), out.stride(0), mod.EPS)
    units = triton.cdiv(M, consts["ROWS"]) if "ROWS" in consts else M
    if rule == "team":
        words, exits = mod._team_words(x.device, mod._sm_count(x.device) * 32)
        args = (x, out, words, exits, M, N, x.stride(0), out.stride(0))
        occ = mod._programs_per_sm(fn, args, consts, warps, stages, x.device)
        grid = min(M, mod._sm_count(x.device) * occ // consts["P"]) * consts["P"]
        if grid == 0:
            raise ValueError("no team fits the GPU at once")
    elif rule in ("tiles", "rows"):
        grid = units
    else:
        occ = mod._programs_per_sm(fn, args, consts, warps, stages, x.device)
        grid = min(units, rule[1] * occ * mod._sm_count(x.device))
    if parts:
        return fn, args, consts, warps, stages
    return lambda: fn[(grid,)](*args, **consts, num_warps=warps, num_stages=stages), grid


def compiled_stats(mod, kernel, inputs, out, variant) -> dict:
    """Registers and spilled bytes a thread of the variant's compiled kernel takes (on a GPU)."""
    if not device.on_gpu():
        return {}
    fn, args, consts, warps, stages = launcher(mod, kernel, inputs, out, variant, parts=True)
    k = fn.warmup(*args, **consts, num_warps=warps, num_stages=stages, grid=(1,))
    k._init_handles()
    return {"regs": k.n_regs, "spills": k.n_spills}


def close(out, ref):
    rtol, atol = TOL[out.dtype]
    return bool(torch.allclose(out.double(), ref, rtol=rtol, atol=atol))


def bench(fn):
    if device.on_gpu():
        return gpu_median_ms(fn, warmup_ms=10, rep_ms=25) * 1e3
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def _compile_case(args):
    """Worker: compile one case's kernels into Triton's cache (each variant launched once)."""
    new_path, main_path, case = args
    kernel, M, N, dtype, cls, _ = case
    where = device.detect()["device"]
    new = common.load_module(new_path, f"{kernel.replace('-', '_')}_new")
    main = common.load_module(main_path, f"{kernel.replace('-', '_')}_main")
    M = 2 if TINY else M
    inputs = make_inputs(kernel, M, N, DTYPES[dtype], where)
    out = empty_out(kernel, inputs)
    failed = 0
    for v in variants(kernel, M, N, dtype, cls):
        try:
            launcher(new, kernel, inputs, out, v)[0]()
        except Exception:
            failed += 1
    through_launcher(main, kernel, inputs, out)
    return failed


def run_case(new, main, case, copy, where):
    kernel, M, N, dtype, cls, origin = case
    M = 2 if TINY else M
    dt = DTYPES[dtype]
    inputs = make_inputs(kernel, M, N, dt, where)
    ref = reference(new, kernel, inputs)
    esize = inputs[0].element_size()
    nbytes = {"softmax": 2 * M * N * esize, "layernorm": (2 * M * N + 2 * N) * esize,
              "cross-entropy": M * N * esize + 12 * M}[kernel]
    rows = []
    calls = [("main", lambda o: through_launcher(main, kernel, inputs, o), None), ("torch", None, None)]
    calls += [(v[0], v, None) for v in variants(kernel, M, N, dtype, cls)]
    for name, what, _ in calls:
        out = empty_out(kernel, inputs).fill_(float("nan"))
        row = {"kernel": kernel, "shape": f"{M}x{N}", "dtype": dtype, "class": cls, "origin": origin, "variant": name}
        try:
            if name == "torch":
                fn = torch_call(kernel, inputs)
                out = fn()
            elif name == "main":
                fn = (lambda o=out: what(o))
                fn()
                row["path"] = dict(main.last_config).get("kernel", "")
            else:
                fn, grid = launcher(new, kernel, inputs, out, what)
                fn()
                row["grid"] = grid
                try:
                    row.update(compiled_stats(new, kernel, inputs, out, what))
                except Exception as e:  # the figures stand without the registers
                    row["stats_error"] = f"{type(e).__name__}: {e}"[:200]
            row["ok"] = close(out, ref)
            if row["ok"]:
                row["us"] = bench(fn)
                row["pct_copy"] = 100 * nbytes / (row["us"] * 1e3) / copy if copy else None
        except Exception as e:
            row["ok"] = False
            row["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}"
        rows.append(row)
    base = next((r["us"] for r in rows if r["variant"] == "main" and "us" in r), None)
    torch_us = next((r["us"] for r in rows if r["variant"] == "torch" and "us" in r), None)
    print(f"\n{kernel} {M}x{N} {dtype} ({cls}, {origin}); main {base and f'{base:.2f}'} us "
          f"({rows[0].get('path', '')}), torch {torch_us and f'{torch_us:.2f}'} us")
    for r in sorted(rows, key=lambda r: r.get("us", float("inf"))):
        if "us" in r:
            r["x_main"] = base / r["us"] if base else None
            r["x_torch"] = torch_us / r["us"] if torch_us else None
            print(f"  {r['variant']:44s} {r['us']:9.2f} us {r['pct_copy'] or 0:6.1f}% copy  x{r['x_main'] or 0:.3f} main"
                  f"  x{r['x_torch'] or 0:.3f} torch  grid {r.get('grid', '-')} regs {r.get('regs', '-')}"
                  f"{' SPILLS ' + str(r['spills']) if r.get('spills') else ''}")
        else:
            print(f"  {r['variant']:44s} FAILED {r.get('error', 'wrong output')}")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("main_dir")
    ap.add_argument("--kernels", default="softmax,layernorm,cross-entropy")
    ap.add_argument("--json")
    ap.add_argument("--jobs", type=int, default=12)
    args = ap.parse_args()
    kernels = args.kernels.split(",")
    cases = [c for c in CASES if c[0] in kernels]
    where = device.detect()["device"]
    paths = {k: (str(common.kernel_file(common.ROOT / "skills" / "kernels" / k / "test.py")),
                 os.path.join(args.main_dir, f"{k}.py")) for k in kernels}
    if device.on_gpu():
        start = time.time()
        with mp.get_context("spawn").Pool(args.jobs) as pool:
            failed = pool.map(_compile_case, [(*paths[c[0]], c) for c in cases], chunksize=1)
        print(f"compiled {len(cases)} cases in {time.time() - start:.0f} s ({sum(failed)} variant launches failed)")
    mods = {k: (common.load_module(paths[k][0], f"{k}_new"), common.load_module(paths[k][1], f"{k}_main"))
            for k in kernels}
    copy = device.measured_copy_gbps(refresh=True) if device.on_gpu() else None
    m = common.machine()
    print(f"{m['gpu']}, torch {m['torch']}, triton {m['triton']}, copy {copy and f'{copy:.0f}'} GB/s")
    records = []
    for case in cases:
        if time.time() > DEADLINE:
            print(f"{case[0]} {case[1]}x{case[2]} {case[3]}: skipped, out of time")
            continue
        new, old = mods[case[0]]
        rows = run_case(new, old, case, copy, where)
        for r in rows:
            r.update(gpu=m["gpu"], copy_gbps=copy)
        records += rows
        if device.on_gpu():
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
