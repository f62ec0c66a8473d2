"""One kernel on the shapes of benchmarks/shapes.py, tune half and held-out half apart: an old kernel file
(e.g. main's version from git) against this checkout's and torch, in one process; a memory-bound kernel
beside the measured device-copy bandwidth (softmax and layernorm also beside the peer: the one-program-a-row
kernel of Triton's tutorial and the kernel-skill collections, benchmarks/peer_rows.py), a compute-bound one
(gemm, flash-attention, fused-moe) in TFLOP/s beside what its test compares it with (cuBLAS, SDPA and its flash
backend, the per-expert loop and a dense GEMM pair of the same work).

    python benchmarks/held_out_bench.py KERNEL OLD_FILE [--json FILE] [--sweep | --half held-out]

--sweep times the kernel test's own time shapes (the power-of-two sweep the kernels were tuned on) in bf16,
fp16 and fp32 instead, as one table: whether a dispatch change for the model shapes costs the sweep.
--half times one half alone (a short device call that must reach the held-out half). --shapes times the
shapes it names instead (e.g. --shapes 1024x6145:bf16 512x12289:fp16; flash-attention's causal as 0 or 1,
4x16x1024x128x1:bf16): synthetic shapes around a rule's bounds, which neither half has.

Each shape gets fresh random inputs; every output (old, new, torch) is checked against the float64
reference before it is timed (a compute-bound kernel's against its test's reference and tolerances, and
poisoned before its call, as kgit.harness checks it). Times are medians over calls with the L2 cleared
before each, as kgit times (kgit.harness.timing.gpu_median_ms), taken in two rounds in opposite orders
(old, new, torch, then torch, new, old); the table shows the mean of the two. Traffic is the minimal one: each input read once, each
output written once; % of copy is of kgit.harness.device's measured copy bandwidth, and %same of a
torch copy of the shape's own traffic timed in the same rounds (what launch and the last wave leave a
small shape: the bound of a kernel that moves its bytes once).

HELD_OUT_TINY=1 cuts every shape's first dimension to 2 (a compute-bound kernel's shape to TINY_DIMS', in
fp16) and times one call with a wall clock: with TRITON_INTERPRET=1 on a CPU it checks this script's code
paths, not any speed. HELD_OUT_DEADLINE (a Unix time) skips the shapes left when it passes, so that the
device run ends in time.
"""

import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import peer_rows  # noqa: E402
from kgit.harness import cheat, device  # noqa: E402
from kgit.harness.checks import wrong_outputs  # noqa: E402
from kgit.harness.timing import gpu_median_ms  # noqa: E402
from shapes import Shape, split  # noqa: E402

TINY = os.environ.get("HELD_OUT_TINY", "") not in ("", "0")
DEADLINE = float(os.environ.get("HELD_OUT_DEADLINE", "inf"))
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# allclose tolerances (rtol, atol) by the output's dtype: one rounding of the result, plus fp32 sums
PATH_CHARS = 120  # of a compute-bound row's path (its config, every key) in the table's line
TOL = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (2e-2, 1e-3), torch.float16: (4e-3, 1e-4)}


# Per kernel: inputs(dims, dtype, device) -> tuple; run(module, inputs, out) fills out; out(inputs) -> an
# empty output; ref(module, inputs) -> float64; torch(inputs) -> output; bytes(inputs) -> minimal traffic.
def _softmax():
    return dict(
        inputs=lambda dims, dt, dev: (torch.randn(dims, device=dev).mul_(3).to(dt),),
        out=lambda i: torch.empty_like(i[0]),
        run=lambda m, i, o: m.softmax(i[0], out=o),
        ref=lambda m, i: m.softmax_ref(i[0]),
        torch=lambda i: torch.softmax(i[0], dim=-1),
        peer=lambda m, i: peer_rows.peer_run("softmax", m, i[0], None, None),
        bytes=lambda i: 2 * i[0].numel() * i[0].element_size(),
    )


def _layernorm():
    def inputs(dims, dt, dev):
        n = dims[-1]
        return (torch.randn(dims, device=dev).to(dt), (torch.rand(n, device=dev) + 0.5).to(dt),
                torch.randn(n, device=dev).to(dt))
    return dict(
        inputs=inputs,
        out=lambda i: torch.empty_like(i[0]),
        run=lambda m, i, o: m.layernorm(*i, out=o),
        ref=lambda m, i: m.layernorm_ref(*i),
        torch=lambda i: torch.nn.functional.layer_norm(i[0], (i[0].shape[-1],), i[1], i[2], 1e-5),
        peer=lambda m, i: peer_rows.peer_run("layernorm", m, *i),
        bytes=lambda i: (2 * i[0].numel() + 2 * i[1].numel()) * i[0].element_size(),
    )


def _cross_entropy():
    def inputs(dims, dt, dev):
        m, v = dims
        t = torch.randint(0, v, (m,), device=dev)
        t = torch.where(torch.rand(m, device=dev) < 0.05, -100, t)  # some ignored rows
        return torch.randn(dims, device=dev).mul_(3).to(dt), t
    return dict(
        inputs=inputs,
        out=lambda i: torch.empty(i[0].shape[0], device=i[0].device, dtype=torch.float32),
        run=lambda m, i, o: m.cross_entropy(i[0], i[1], out=o),
        ref=lambda m, i: m.cross_entropy_ref(*i),
        torch=lambda i: torch.nn.functional.cross_entropy(i[0], i[1], reduction="none", ignore_index=-100),
        bytes=lambda i: i[0].numel() * i[0].element_size() + i[1].numel() * 8 + i[0].shape[0] * 4,
    )


def _rotary():
    def inputs(dims, dt, dev):
        t, _, d = dims
        pos = torch.arange(t, device=dev, dtype=torch.float32)[:, None] + torch.rand(1, device=dev) * 100
        ang = pos * (10000.0 ** (-torch.arange(d // 2, device=dev, dtype=torch.float32) * 2 / d))
        return torch.randn(dims, device=dev).to(dt), torch.cos(ang).to(dt), torch.sin(ang).to(dt)
    return dict(
        inputs=inputs,
        out=lambda i: torch.empty_like(i[0]),
        run=lambda m, i, o: m.rope(*i, out=o),
        ref=lambda m, i: m.rope_ref(*i),
        torch=None,  # set from the template: rope_torch, what a model does in eager torch
        # eager torch rounds each product and difference to the 16-bit dtype: up to a few of its ulps of
        # |x| (about 4), not of the result, so it is checked against an absolute bound
        torch_atol=3e-2,
        bytes=lambda i: (2 * i[0].numel() + i[1].numel() + i[2].numel()) * i[0].element_size(),
    )


KERNELS = {"softmax": _softmax, "layernorm": _layernorm, "cross-entropy": _cross_entropy,
           "rotary-embedding": _rotary}
# The compute-bound kernels are read from their tests' Spec (kgit.harness.Spec: inputs, reference,
# tolerances, FLOPs, torch_impl and others), whose launches go to the old or the new kernel file.
# HELD_OUT_TINY's shapes keep what decides their path (a size off the tiles, causal, top-k of several
# experts) on sizes Triton's interpreter runs in a second.
TINY_DIMS = {"gemm": lambda d: (2, 24, 40),
             "flash-attention": lambda d: (1, 2, 40, 16, d[4]),
             "fused-moe": lambda d: (6, min(d[1], 4), min(d[2], 2), 16, 24)}


def time_us(fn) -> float:
    """Microseconds: kgit's median over calls on a GPU; one wall-clock call on a CPU (HELD_OUT_TINY's check)."""
    if device.on_gpu():
        return gpu_median_ms(fn, warmup_ms=10, rep_ms=40) * 1e3
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def failure(e: Exception) -> str:
    """An exception as a row's error: its type and its message's last line."""
    last = str(e).strip().splitlines()[-1][:200] if str(e).strip() else ""
    return f"{type(e).__name__}: {last}"


def close(out, ref, atol=None) -> bool:
    rtol, dtype_atol = TOL[out.dtype]
    atol = dtype_atol if atol is None or out.dtype == torch.float32 else atol
    return bool(torch.allclose(out.double(), ref, rtol=rtol, atol=atol))


def measure(spec, old, new, shape, where):
    dims = (2, *shape.dims[1:]) if TINY else shape.dims
    dt = DTYPES[shape.dtype]
    inputs = spec["inputs"](dims, dt, where)
    ref = spec["ref"](new, inputs)
    # torch allocates its own output (in the logits' dtype for cross-entropy): part of what a user calls
    calls = {"old": lambda o: spec["run"](old, inputs, o), "new": lambda o: spec["run"](new, inputs, o),
             "torch": lambda o: spec["torch"](inputs)}
    if "peer" in spec:
        calls["peer"] = spec["peer"](new, inputs)
    row = {"shape": shape.size, "dtype": shape.dtype, "source": shape.source}
    outs = {}
    for name, call in calls.items():
        out = spec["out"](inputs).fill_(float("nan"))
        try:
            out = call(out) if name == "torch" else (call(out), out)[1]
            outs[name] = out
            row[f"{name}_ok"] = close(out, ref, spec.get("torch_atol") if name == "torch" else None)
        except Exception as e:  # one failing launcher must not hide the others' figures
            row[f"{name}_ok"] = False
            row[f"{name}_error"] = failure(e)
    row["path"] = dict(getattr(new, "last_config", {})).get("kernel", "")
    row["old_path"] = dict(getattr(old, "last_config", {})).get("kernel", "")
    del ref
    row["bytes"] = spec["bytes"](inputs)
    # The copy of the same traffic (half read, half written) bounds what a small shape can reach: its
    # launch and last wave cost the copy too, which the large copy that % of copy divides by does not see.
    src = torch.randint(0, 256, (row["bytes"] // 2,), dtype=torch.uint8, device=where)
    dst = torch.empty_like(src)
    calls["copy"], outs["copy"] = (lambda o: o.copy_(src)), dst
    times = {name: [] for name in outs}
    for order in (list(outs), list(reversed(outs))):
        for name in order:
            times[name].append(time_us(lambda call=calls[name], o=outs[name]: call(o)))
    for name, ts in times.items():
        row[f"{name}_us"] = sum(ts) / len(ts)
        row[f"{name}_us_rounds"] = ts
    return row


def measure_compute(old_spec, new_spec, shape, where):
    """measure() for a compute-bound kernel: old and new through their tests' Spec, torch_impl checked beside
    them, the Spec's others (not the same computation, or a backend of torch's) timed only."""
    dims = TINY_DIMS[shape.kernel](shape.dims) if TINY else shape.dims
    # the interpreter has no bf16 arithmetic: its check of the script runs bf16 shapes in fp16
    dt = torch.float16 if TINY and shape.dtype == "bf16" else DTYPES[shape.dtype]
    inputs = new_spec.make_inputs(dims, dt, where, "normal")
    row = {"shape": shape.size, "dtype": shape.dtype, "source": shape.source}
    calls, outputs = {}, None
    for name, spec in (("old", old_spec), ("new", new_spec)):
        outs = spec.make_outputs(inputs)
        cheat.poison(outs)
        try:
            spec.kernel(inputs, outs)
            device.sync()
            why = wrong_outputs(spec, inputs, outs)
        except Exception as e:  # one failing launcher must not hide the others' figures
            why = failure(e)
        row[f"{name}_ok"] = why is None
        if why is None:
            calls[name] = lambda spec=spec, outs=outs: spec.kernel(inputs, outs)
        else:
            row[f"{name}_error"] = why
        # what each side ran (its autotune's pick): "path" the new one's, "old_path" the old one's
        launched = dict(spec.launched()) if spec.launched else {}
        # whole in the row (the JSON); the table's line shows its first PATH_CHARS
        row["path" if name == "new" else "old_path"] = (launched.get("kernel")
                                                        or ", ".join(f"{k} {v}" for k, v in launched.items()))
        if name == "new":
            outputs = outs
    try:
        torch_out = new_spec.torch_impl(inputs)
        device.sync()
        why = wrong_outputs(new_spec, inputs, (torch_out,))
    except Exception as e:
        why = failure(e)
    row["torch_ok"] = why is None
    if why is None:
        calls["torch"] = lambda: new_spec.torch_impl(inputs)
    else:
        row["torch_error"] = why
    for name, other in new_spec.others.items():
        calls[name] = lambda other=other: other(inputs)
    times = {name: [] for name in calls}
    for order in (list(calls), list(reversed(calls))):
        for name in order:
            times[name].append(time_us(calls[name]))
    for name, ts in times.items():
        row[f"{name}_us"] = sum(ts) / len(ts)
        row[f"{name}_us_rounds"] = ts
    row["others"] = list(new_spec.others)
    row["flops"] = new_spec.flops(inputs, outputs)
    if new_spec.nbytes:
        row["bytes"] = new_spec.nbytes(inputs, outputs)
    return row


def ratio(r, a, b, width=7):
    """A row's a time over its b time, as the tables print it ('-' where either is missing)."""
    return f"{r[a + '_us'] / r[b + '_us']:{width}.3f}" if f"{a}_us" in r and f"{b}_us" in r else f"{'-':>{width}s}"


def compute_table(kernel, half, rows, copy):
    """The rows of measure_compute: TFLOP/s, new/old, and new against torch and each other comparison."""
    print(f"\n{kernel}, {half} half")
    others = rows[0]["others"] if rows else []
    print(f"{'shape':>26s} {'dtype':5s} {'old us':>9s} {'new us':>9s} {'torch us':>9s} {'TFLOP/s':>8s} "
          f"{'%copy':>6s} {'new/old':>7s} {'x torch':>7s} " + " ".join(f"{'x ' + o:>12s}" for o in others)
          + "  ok(o/n/t)  path")

    for r in rows:
        us = {n: f"{r[n + '_us']:9.2f}" if f"{n}_us" in r else f"{'-':>9s}" for n in ("old", "new", "torch")}
        tflops = f"{r['flops'] / (r['new_us'] * 1e6):8.1f}" if "new_us" in r else f"{'-':>8s}"
        pct = f"{100 * r['bytes'] / (r['new_us'] * 1e3) / copy:6.1f}" if "bytes" in r and "new_us" in r and copy \
            else f"{'-':>6s}"
        ok = "/".join("y" if r.get(f"{n}_ok") else "N" for n in ("old", "new", "torch"))
        print(f"{r['shape']:>26s} {r['dtype']:5s} {us['old']} {us['new']} {us['torch']} {tflops} {pct} "
              f"{ratio(r, 'old', 'new')} {ratio(r, 'torch', 'new')} "
              + " ".join(ratio(r, o, "new", 12) for o in others) + f"  {ok:9s}  {r['path'][:PATH_CHARS]}")
        for n in ("old", "new", "torch"):
            if f"{n}_error" in r:
                print(f"{'':>26s} {n}: {r[n + '_error']}")
    timed = [r for r in rows if all(f"{n}_us" in r for n in ("old", "new", "torch"))]
    if timed:
        gain = math.prod(r["old_us"] / r["new_us"] for r in timed) ** (1 / len(timed))
        against = "; ".join(f"x {n} min {min(r[n + '_us'] / r['new_us'] for r in timed):.3f}"
                            for n in ("torch", *others))
        print(f"{'summary':>26s}: new/old geomean {gain:.3f}; {against}")


def test_path(kernel: str):
    return bench.ROOT / "skills" / "kernels" / kernel / f"test_{kernel.replace('-', '_')}.py"


def sweep_shapes(kernel: str) -> list[Shape]:
    """The kernel test's time shapes in bf16, fp16 and fp32; a compute-bound one's sweep in its dtypes."""
    spec, _ = bench.load_test(test_path(kernel))
    if kernel in TINY_DIMS:
        return [Shape(kernel, tuple(dims), dtype, "the kernel test's sweep shape")
                for dims in spec.gpu.sweep_shapes for dtype in spec.gpu.dtypes]
    return [Shape(kernel, tuple(dims), dtype, "the kernel test's time shape")
            for dims in spec.gpu.time_shapes for dtype in ("bf16", "fp16", "fp32")]


def synthetic(kernel: str, text: str) -> Shape:
    """A shape of --shapes: DIMS:DTYPE, DIMS as a table shows them (2048x5000)."""
    dims, _, dtype = text.partition(":")
    if dtype not in DTYPES:
        raise SystemExit(f"--shapes {text}: the dtype after ':' is one of {', '.join(DTYPES)}")
    sizes = [int(d) for d in dims.split("x")]
    if kernel == "flash-attention" and len(sizes) == 5:  # (batch, heads, sequence, head_dim, causal 0/1)
        sizes[4] = bool(sizes[4])
    return Shape(kernel, tuple(sizes), dtype, "synthetic (--shapes)")


def table(kernel, half, rows, copy):
    print(f"\n{kernel}, {half} half (copy {f'{copy:.0f} GB/s' if copy else 'not measured: no GPU'})")
    peer = any("peer_us" in r for r in rows)  # softmax and layernorm: beside the one-program-a-row kernel
    names = ("old", "new", "torch", "peer") if peer else ("old", "new", "torch")
    head = f"{'shape':>14s} {'dtype':5s} {'old us':>9s} {'new us':>9s} {'torch us':>9s} {'old %copy':>9s} " \
           f"{'new %copy':>9s} {'%same':>6s} {'new/old':>7s} {'x torch':>7s} " + (f"{'x peer':>7s} " if peer else "") \
           + f" ok({'/'.join(n[0] for n in names)})  path"
    print(head)
    for r in rows:
        def pct(name):
            us = r.get(f"{name}_us")
            return f"{100 * r['bytes'] / (us * 1e3) / copy:9.1f}" if us and copy else f"{'-':>9s}"
        def us(name):
            return f"{r[name + '_us']:9.2f}" if f"{name}_us" in r else f"{'-':>9s}"
        same = f"{100 * r['copy_us'] / r['new_us']:6.1f}" if "copy_us" in r and "new_us" in r else f"{'-':>6s}"
        ok = "/".join("y" if r.get(f"{n}_ok") else "N" for n in names)
        print(f"{r['shape']:>14s} {r['dtype']:5s} {us('old')} {us('new')} {us('torch')} {pct('old')} {pct('new')} "
              f"{same} {ratio(r, 'old', 'new')} {ratio(r, 'torch', 'new')} "
              + (f"{ratio(r, 'peer', 'new')} " if peer else "")
              + f" {ok:11s}  {r['path']}")
        for n in names:
            if f"{n}_error" in r:
                print(f"{'':>14s} {n}: {r[n + '_error']}")
    timed = [r for r in rows if "new_us" in r and "old_us" in r and "torch_us" in r]
    if timed and copy:
        pcts = sorted(100 * r["bytes"] / (r["new_us"] * 1e3) / copy for r in timed)
        gain = 1.0
        for r in timed:
            gain *= r["old_us"] / r["new_us"]
        sames = sorted(100 * r["copy_us"] / r["new_us"] for r in timed)
        print(f"{'summary':>14s}: new % of copy min {pcts[0]:.1f} median {pcts[len(pcts) // 2]:.1f}; % of the "
              f"same-size copy min {sames[0]:.1f} median {sames[len(sames) // 2]:.1f}; new/old "
              f"geomean {gain ** (1 / len(timed)):.3f}; "
              f"x torch min {min(r['torch_us'] / r['new_us'] for r in timed):.3f}"
              + (f"; x peer min {min(r['peer_us'] / r['new_us'] for r in timed if 'peer_us' in r):.3f}"
                 if any("peer_us" in r for r in timed) else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel", choices=sorted([*KERNELS, *TINY_DIMS]))
    ap.add_argument("old_file")
    ap.add_argument("--json", help="write the rows here, one JSON object a line")
    shapes = ap.add_mutually_exclusive_group()  # --half of the sweep would time nothing
    shapes.add_argument("--sweep", action="store_true", help="the kernel test's time shapes instead of shapes.py's")
    shapes.add_argument("--half", choices=("tune", "held-out"), help="shapes.py's one half alone")
    shapes.add_argument("--shapes", nargs="+", metavar="DIMS:DTYPE", help="these shapes instead, e.g. 1024x6145:bf16")
    args = ap.parse_args()
    where = device.detect()["device"]
    old, new = bench.kernel_module(args.kernel, args.old_file, "old"), bench.kernel_module(args.kernel, side="new")
    compute = args.kernel in TINY_DIMS
    if compute:
        old_spec, new_spec = bench.load_test(test_path(args.kernel), old)[0], bench.load_test(test_path(args.kernel))[0]
    else:
        spec = KERNELS[args.kernel]()
        if spec["torch"] is None:
            spec["torch"] = lambda i: new.rope_torch(*i)
    copy = device.measured_copy_gbps(refresh=True)
    machine = bench.machine()
    gpu = machine["gpu"]
    print(f"{args.kernel} on {gpu}, torch {machine['torch']}, triton {machine['triton']}")
    records = []
    if args.shapes:
        halves = [("synthetic", [synthetic(args.kernel, text) for text in args.shapes])]
    elif args.sweep:
        halves = [("sweep", sweep_shapes(args.kernel))]
    else:
        halves = zip(("tune", "held-out"), split(args.kernel))
    halves = [(half, shapes) for half, shapes in halves if args.half in (None, half)]
    for half, shapes in halves:
        rows = []
        for shape in shapes:
            if time.time() > DEADLINE:
                print(f"  {shape.label}: skipped, out of time")
                continue
            row = measure_compute(old_spec, new_spec, shape, where) if compute else measure(spec, old, new, shape, where)
            row.update(kernel=args.kernel, half=half, copy_gbps=copy, gpu=gpu)
            rows.append(row)
            if device.on_gpu():
                torch.cuda.empty_cache()
        (compute_table if compute else table)(args.kernel, half, rows, copy)
        records += rows
    if args.json:
        with open(args.json, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
    bad = [f"{r['shape']} {r['dtype']}" for r in records if not r.get("new_ok")]
    if bad:
        print(f"\nNEW TEMPLATE WRONG OR FAILED at: {', '.join(bad)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
