"""Device probe of branch moe58 (issue 52: fused MoE at 1024 tokens on 64 experts, 80.2% of the weight-read floor).

    cd <checkout of moe58> && export PYTHONPATH=$PWD && python .stage/probe_moe58.py $OUT

Main's kernel (git show 8efb40c:skills/kernels/fused-moe/fused_moe.py, into a temporary file) beside this tree's,
in one process. Each shape runs each file on its rule's config (rule_configs' first: no autotune, so both sides
run the same tiles) under the switches of a row:

    main      main's file
    base      this file, A_PAIRS_ONLY and WEIGHT_PREFETCH off: main's path (the loader's 32 registers aside)
    pad       A_PAIRS_ONLY by its rule: the GEMMs read only the rows of x_sorted and h that hold a pair
    prefetch  WEIGHT_PREFETCH by its rule: the first tiles' weights asked of the L2 while the routing runs
    new       both by their rules: the file as it stands

    new side  pad, and the prefetch (the same kernel and plan) on a side stream instead of in the memset's place:
              if the route kernel waits for the prefetch kernel's L2 fills to land (its grid's completion), this row
              beats new by up to the prefetch's ~8 us, and the product should issue it from a side stream

(the shapes past the streaming bound, where both rules are off: main and new only). Then, at 1024 tokens on 64
experts, the extras: new with PREFETCH_BYTES 12 and 36 MiB, and with one ring stage fewer in each GEMM (is the
two-consumer ring's depth what holds its stream?).

Every row's output is checked first against the test's fp32 reference (fused_moe.reference; the test's
tolerances, harness.NORM), its output poisoned with NaN before the call. Times: kgit.harness.timing.gpu_median_ms
(the L2 cleared before each call), two rounds, the second in the opposite order; the floor as held_out_bench
computes it (test_fused_moe.nbytes: x, w13, w2, logits read once, out written once, over the copy bandwidth
measured at the start). Then torch.profiler's device time a call of each kernel (both GEMMs share a name: the
first of each call is gate/up) for main and the new rows at the streaming shapes.

Before any of it a preflight child process runs this file's Gluon GEMMs with A_PAIRS_ONLY on (its loader is new
code: a phase short of bytes would hang the GPU) at three shapes, 150 s at most; if it fails or hangs, the pad
and new rows are left out and the reason written.

Writes $OUT/moe58.txt (the tables) and $OUT/moe58.jsonl (a line a row, a line a shape). PROBE_TINY=1 with
TRITON_INTERPRET=1 runs it on a CPU on tiny shapes (one wall-clock call a time, no preflight, no profile): the
script's paths, not any speed. PROBE_DEADLINE (seconds from the start, default 220) skips what is left.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

START = time.time()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench  # noqa: E402
from kgit import harness  # noqa: E402
from kgit.harness import device  # noqa: E402
from kgit.harness.timing import gpu_median_ms  # noqa: E402
from kgit.harness.tolerance import NORM, compare  # noqa: E402

TINY = os.environ.get("PROBE_TINY", "") not in ("", "0")
DEADLINE = START + float(os.environ.get("PROBE_DEADLINE", "220"))
MAIN_COMMIT = "8efb40c"
KERNEL = ROOT / "skills" / "kernels" / "fused-moe" / "fused_moe.py"
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# (tokens, experts, top_k, hidden, intermediate), dtype: the held-out suite's dims (benchmarks/shapes.py:
# DeepSeek-V2-Lite 2048 x 1408, Mixtral 4096 x 14336), the open shape first; bf16 throughout (the path does not
# depend on it, and each dtype is its own compile)
SHAPES = [((1024, 64, 6, 2048, 1408), "bf16"), ((512, 64, 6, 2048, 1408), "bf16"),
          ((256, 64, 6, 2048, 1408), "bf16"), ((512, 8, 2, 4096, 14336), "bf16"),
          ((2048, 64, 6, 2048, 1408), "bf16"), ((1024, 8, 2, 4096, 14336), "bf16"),
          ((4096, 64, 6, 2048, 1408), "bf16")]
# the switches of each row of this file (main's file runs as it is)
ROWS = {"base": dict(A_PAIRS_ONLY=False, WEIGHT_PREFETCH=False), "pad": dict(A_PAIRS_ONLY=None, WEIGHT_PREFETCH=False),
        "prefetch": dict(A_PAIRS_ONLY=False, WEIGHT_PREFETCH=None), "new": dict(A_PAIRS_ONLY=None, WEIGHT_PREFETCH=None)}
EXTRAS = {"new pf12": dict(PREFETCH_BYTES=12 << 20), "new pf36": dict(PREFETCH_BYTES=36 << 20), "new ring-1": {}}
PROFILED = ("main", "base", "pad", "prefetch", "new", "new side")
LAYER_KERNELS = ("moe_prefetch_kernel", "moe_route_kernel", "moe_align_kernel", "moe_gather_kernel",
                 "moe_gemm_gluon_kernel", "moe_sum_kernel")


def main_file() -> Path:
    """Main's kernel file at MAIN_COMMIT, from this checkout's git, in a temporary file."""
    text = subprocess.run(["git", "show", f"{MAIN_COMMIT}:skills/kernels/fused-moe/fused_moe.py"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "fused_moe_main.py"
    path.write_text(text)
    return path


def make_inputs(dims, dtype, where):
    """The kernel test's inputs (test_fused_moe.make_inputs, case normal): x, w13, w2, logits."""
    T, E, _, HD, I = dims
    return (harness.rand((T, HD), dtype, where), harness.rand((E, 2 * I, HD), dtype, where, scale=HD ** -0.5),
            harness.rand((E, HD, I), dtype, where, scale=I ** -0.5), harness.rand((T, E), torch.float32, where))


def time_us(fn) -> float:
    if device.on_gpu():
        return gpu_median_ms(fn, warmup_ms=10, rep_ms=40) * 1e3
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


class Switches:
    """A module's switches set for a row's calls, put back after."""

    def __init__(self, module, values):
        self.module, self.values = module, values

    def __enter__(self):
        self.saved = {name: getattr(self.module, name) for name in self.values}
        for name, value in self.values.items():
            setattr(self.module, name, value)

    def __exit__(self, *exc):
        for name, value in self.saved.items():
            setattr(self.module, name, value)


def one_stage_fewer(cfg):
    return {**cfg, "num_stages": cfg["num_stages"] - 1, "DOWN_num_stages": cfg["DOWN_num_stages"] - 1}


def profile(call, calls=10):
    """Device time a call of each of the layer's kernels (torch.profiler, the L2 cleared before each call):
    gate/up and down apart (the first moe_gemm_gluon_kernel of a call is gate/up), the memset as 'memset'."""
    from kgit.harness.timing import _l2_clear
    clear = _l2_clear()
    call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            clear()
            call()
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                    key=lambda e: e.time_range.start)
    totals, gemms = {}, 0
    for e in events:
        name = next((k for k in LAYER_KERNELS if k in e.name), None)
        if name is None and ("fill" in e.name.lower() or "zero" in e.name.lower()):
            name = "memset"
        if name == "moe_gemm_gluon_kernel":
            name = ("gate/up", "down")[gemms % 2]
            gemms += 1
        if name:
            totals[name] = totals.get(name, 0.0) + e.time_range.elapsed_us() / calls
    return {k: round(v, 1) for k, v in totals.items()}


SIDE = []  # the side stream of the row "new side", made once


def side_prefetch(new, w13, T, E, top_k, HD, I, cfg):
    """A function that launches new's moe_prefetch_kernel, with the plan the layer would use, on a side stream
    that first waits for the current one (the L2 clear before a timed call): the layer's own stream does not wait
    for it (the caller joins it after the layer). None off a GPU."""
    if not device.on_gpu():
        return None
    if not SIDE:
        SIDE.append(torch.cuda.Stream())
    pairs, row_bytes = new.weight_prefetch_plan(T, E, top_k, HD, I, cfg, new._num_sms(w13.device), w13.element_size())
    n_rows = pairs * 2 * cfg["BLOCK_N"]
    dummy = torch.empty(E, dtype=torch.int32, device=w13.device)  # the kernel zeroes it: not the route's counters

    def launch():
        SIDE[0].wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(SIDE[0]):
            new.moe_prefetch_kernel[(-(-n_rows // new.PREFETCH_BLOCK_R),)](
                dummy, w13, E, n_rows, I, HD, -(-I // cfg["BLOCK_N"]), row_bytes, BLOCK_N=cfg["BLOCK_N"],
                BLOCK_R=new.PREFETCH_BLOCK_R, E_PAD=1 << (E - 1).bit_length(), PREFETCH=1, num_warps=4)
    return launch


def preflight(switches) -> str | None:
    """This file's layer with `switches` (its new code: A_PAIRS_ONLY's loader, where a phase short of bytes would
    hang the GPU, or the prefetch kernel's PTX), once at three shapes in a child process (a hang or a fault is
    killed there, not in this process; what it compiles stays in Triton's cache for this one): None if every
    output matched the reference with the switches in effect, else why not."""
    code = f"""
import sys, torch
sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / "benchmarks")!r})
import bench
from kgit import harness
from kgit.harness.tolerance import NORM, compare
m = bench.load_module({str(KERNEL)!r}, "fused_moe_preflight")
for name, value in {switches!r}.items():
    setattr(m, name, value)
for dims in [(1024, 64, 6, 2048, 1408), (512, 64, 6, 2048, 1408), (512, 8, 2, 4096, 14336)]:
    T, E, k, HD, I = dims
    x, w13, w2, logits = (harness.rand((T, HD), torch.bfloat16, "cuda"),
                          harness.rand((E, 2 * I, HD), torch.bfloat16, "cuda", scale=HD ** -0.5),
                          harness.rand((E, HD, I), torch.bfloat16, "cuda", scale=I ** -0.5),
                          harness.rand((T, E), torch.float32, "cuda"))
    out = torch.full((T, HD), float("nan"), device="cuda", dtype=torch.bfloat16)
    m.fused_moe(x, w13, w2, logits, k, out=out, config=m.rule_configs(x, w13, w2, k)[0])
    torch.cuda.synchronize()
    on = dict(A_PAIRS_ONLY=int(bool(m.A_PAIRS_ONLY)), PREFETCH=bool(m.WEIGHT_PREFETCH))
    assert m.last_config["GLUON"] == 1 and m.last_config["A_PAIRS_ONLY"] == on["A_PAIRS_ONLY"] \\
        and bool(m.last_config["PREFETCH"]) == on["PREFETCH"], m.last_config
    why = compare(out.float(), m.reference(x, w13, w2, logits, k), NORM["bf16"])
    assert why is None, (dims, why)
print("preflight ok")
"""
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=150)
    except subprocess.TimeoutExpired:
        return f"preflight {switches}: no end in 150 s (a hang?)"
    if proc.returncode != 0 or "preflight ok" not in proc.stdout:
        return f"preflight {switches} failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:300]
    return None


def run_shape(old, new, dims, dtype_name, copy, rows, extras, lines, records):
    where = device.detect()["device"] if device.on_gpu() else "cpu"
    if TINY:  # the interpreter: tiny sizes that keep the shape's experts and top_k (up to 4 and 2)
        dims = (6, min(dims[1], 4), min(dims[2], 2), 16, 24)
    dtype = DTYPES[dtype_name] if not TINY else torch.float16
    T, E, top_k, HD, I = dims
    x, w13, w2, logits = make_inputs(dims, dtype, where)
    reference = new.reference(x, w13, w2, logits, top_k)
    nbytes = sum(t.numel() * t.element_size() for t in (x, w13, w2, logits)) + T * HD * x.element_size()
    floor_us = nbytes / (copy * 1e3) if copy else None
    config = new.rule_configs(x, w13, w2, top_k)[0]
    assert config == old.rule_configs(x, w13, w2, top_k)[0], "the two files' rules differ"
    streams = new.streams_weights(T, E, top_k)
    # (name, module, switches, config)
    plan = [("main", old, {}, config)]
    plan += [(name, new, switches, config) for name, switches in rows.items() if streams or name == "new"]
    side = None
    if streams and "pad" in rows and "prefetch" in rows and not extras:
        plan.append(("new side", new, {**rows["pad"], "WEIGHT_PREFETCH": False}, config))
        side = side_prefetch(new, w13, T, E, top_k, HD, I, config)
    if extras:
        for name, switches in EXTRAS.items():
            plan.append((name, new, {**ROWS["new"], **switches}, one_stage_fewer(config) if "ring" in name else config))
    outs, calls, results = {}, {}, {}
    for name, module, switches, cfg in plan:
        out = torch.empty((T, HD), device=where, dtype=dtype)
        results[name] = {"shape": "x".join(map(str, dims)), "dtype": dtype_name, "row": name,
                         "switches": {k: v for k, v in switches.items()}, "config": cfg}
        try:
            with Switches(module, switches):
                out.fill_(float("nan"))
                if name == "new side" and side:
                    side()
                module.fused_moe(x, w13, w2, logits, top_k, out=out, config=cfg)
                device.sync()
                launched = dict(module.last_config)
            why = compare(out.float(), reference, NORM[dtype_name if not TINY else "fp16"])
        except Exception as e:  # one failing row must not hide the others
            why, launched = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}", {}
        results[name].update(ok=why is None, why=why, launched={k: launched.get(k) for k in (
            "BLOCK_M", "BLOCK_N", "DOWN_BLOCK_N", "num_stages", "DOWN_num_stages", "GLUON", "PDL", "PAIRS_ONLY",
            "A_PAIRS_ONLY", "PREFETCH")})
        if why is None:
            outs[name] = out
            # neither switch changes a pair's arithmetic (A's pairs rows are each its own; the prefetch moves no
            # value), so every row should equal main's output bit for bit (the layer's output does not depend on
            # the routing's order within a run: test_moe_output_is_bitwise_the_same_whatever_the_order...)
            if "main" in outs:
                results[name]["bitwise_main"] = bool(torch.equal(out, outs["main"]))

            def call(module=module, switches=switches, cfg=cfg, out=out, prefetch=side if name == "new side" else None):
                if prefetch:
                    prefetch()
                with Switches(module, switches):
                    module.fused_moe(x, w13, w2, logits, top_k, out=out, config=cfg)
                if prefetch:
                    torch.cuda.current_stream().wait_stream(SIDE[0])
            calls[name] = call
    times = {name: [] for name in calls}
    for order in (list(calls), list(reversed(calls))):
        for name in order:
            if time.time() > DEADLINE:
                break
            times[name].append(time_us(calls[name]))
    if device.on_gpu() and streams and time.time() < DEADLINE - 20:
        for name in PROFILED:
            if name in calls:
                try:
                    results[name]["profile_us"] = profile(calls[name])
                except Exception as e:  # the profile is a reading beside the times, not one to stop for
                    results[name]["profile_us"] = {"error": f"{type(e).__name__}: {e}"[:200]}
    main_us = sum(times["main"]) / len(times["main"]) if times.get("main") else None
    head = (f"T{T} E{E} top{top_k} H{HD} I{I} {dtype_name}  floor "
            f"{f'{floor_us:.1f} us' if floor_us else '-'} ({nbytes / 1e6:.1f} MB at {copy or 0:.0f} GB/s)  "
            f"streams {streams}  config BM {config['BLOCK_M']} N {config['BLOCK_N']}/{config['DOWN_BLOCK_N']} "
            f"st {config['num_stages']}/{config['DOWN_num_stages']}")
    lines += ["", head, f"  {'row':10s} {'ok':3s} {'us (2 rounds)':>19s} {'mean':>8s} {'% floor':>8s} {'main/row':>8s}"
              f"  launched (PDL, PAIRS_ONLY, A_PAIRS_ONLY, PREFETCH bytes) | profile us a call"]
    for name, r in results.items():
        ts = times.get(name, [])
        mean = sum(ts) / len(ts) if ts else None
        r.update(us_rounds=[round(t, 2) for t in ts], us=round(mean, 2) if mean else None,
                 pct_floor=round(100 * floor_us / mean, 2) if mean and floor_us else None,
                 main_over_row=round(main_us / mean, 4) if mean and main_us else None)
        rounds = " / ".join(f"{t:8.1f}" for t in ts)
        lc = r["launched"]
        prof = " ".join(f"{k} {v}" for k, v in r.get("profile_us", {}).items())
        lines.append(f"  {name:10s} {'y' if r['ok'] else 'N':3s} {rounds:>19s} {mean or 0:8.1f} "
                     f"{r['pct_floor'] or 0:8.1f} {r['main_over_row'] or 0:8.3f}  "
                     f"{lc.get('PDL')}, {lc.get('PAIRS_ONLY')}, {lc.get('A_PAIRS_ONLY')}, {lc.get('PREFETCH')} | {prof}")
        if not r["ok"]:
            lines.append(f"  {'':10s} WRONG: {r['why']}")
        elif r.get("bitwise_main") is False:
            lines.append(f"  {'':10s} within tolerance, but not bit for bit main's output")
        records.append(r)
    records.append({"shape": "x".join(map(str, dims)), "dtype": dtype_name, "floor_us": floor_us, "bytes": nbytes,
                    "copy_gbps": copy, "streams": streams, "config": config})


def main():
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    old = bench.load_module(main_file(), "fused_moe_main")
    new = bench.load_module(KERNEL, "fused_moe_moe58")
    gpu = device.detect()
    copy = device.measured_copy_gbps(refresh=True) if device.on_gpu() else None
    lines = [f"# {gpu.get('name', 'cpu')}, torch {torch.__version__}, triton {__import__('triton').__version__}, "
             f"copy {copy or 0:.0f} GB/s; main {MAIN_COMMIT} against {KERNEL.relative_to(ROOT)}"]
    rows = dict(ROWS)
    if device.on_gpu():  # each new piece of code alone first: a row that uses a failed one is left out
        for switches, uses in [(dict(A_PAIRS_ONLY=True, WEIGHT_PREFETCH=False), ("pad", "new")),
                               (dict(A_PAIRS_ONLY=False, WEIGHT_PREFETCH=True), ("prefetch", "new"))]:
            why = preflight(switches)
            lines.append(f"# preflight {switches}: {why or 'ok'}")
            if why:
                rows = {k: v for k, v in rows.items() if k not in uses}
    records, skipped = [], []
    for i, (dims, dtype_name) in enumerate(SHAPES):
        if time.time() > DEADLINE:
            skipped.append(dims)
            continue
        run_shape(old, new, dims, dtype_name, copy, rows, False, lines, records)
    if time.time() < DEADLINE and "new" in rows:
        run_shape(old, new, SHAPES[0][0], SHAPES[0][1], copy, {"new": rows["new"]}, True, lines,
                  records)  # the extras at the open shape (main and new timed again beside them)
    lines.append(f"\nskipped (past the deadline): {skipped or 'none'}; done in {time.time() - START:.0f} s")
    text = "\n".join(lines)
    print(text)
    (out_dir / "moe58.txt").write_text(text + "\n")
    with open(out_dir / "moe58.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r, default=str) + "\n")


if __name__ == "__main__":
    main()
