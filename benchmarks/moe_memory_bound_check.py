"""Issue 52 A/B: fused MoE where the token count makes it weight-read bound, new (this worktree) against
main's file, one process. Correctness first (NaN-poisoned outputs against the kernel file's fp32 reference),
then do_bench medians (L2 flushed by do_bench), two rounds in opposite orders, and the weight-read floor:
the layer's minimal bytes (x, w13, w2, logits read once, out written once) / the copy bandwidth measured
here. Sides: old = main's fused_moe (its autotune), new = this fused_moe (its autotune, which times the
streaming layout first), rule = this fused_moe forced to streaming_config (no autotune), and route =
route_and_align alone (the fixed share). Run from the repository root:  python .stage/moe_membound.py"""
import importlib.util, os, subprocess, sys, tempfile, time
import torch, triton
from triton.testing import do_bench

t0 = time.time()
ROOT = os.getcwd()


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


new = load("moe_new", os.path.join(ROOT, "skills/kernels/fused-moe/fused_moe.py"))
try:
    src = subprocess.run(["git", "show", "main:skills/kernels/fused-moe/fused_moe.py"], capture_output=True,
                         text=True, check=True).stdout
except Exception:  # no git here: the copy saved beside this script
    src = open(os.path.join(ROOT, ".stage/fused_moe_main.py")).read()
tmp = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
tmp.write(src)
tmp.close()
old = load("moe_old", tmp.name)

# copy bandwidth: 1 GiB read + 1 GiB written
buf = torch.empty(2 ** 30, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(buf)
copy_ms = min(do_bench(lambda: dst.copy_(buf), return_mode="median") for _ in range(2))
copy_gbps = 2 * buf.numel() / copy_ms / 1e6
del buf, dst
print(f"{torch.cuda.get_device_name()}  torch {torch.__version__} triton {triton.__version__}  copy {copy_gbps:.0f} GB/s")

SHAPES = [((512, 8, 2, 4096, 14336), torch.float16), ((64, 64, 6, 2048, 1408), torch.bfloat16),
          ((512, 64, 6, 2048, 1408), torch.float16), ((64, 8, 2, 4096, 14336), torch.bfloat16)]
print(f"{'shape':>22s} {'dt':4s} {'side':6s} {'us r1':>8s} {'us r2':>8s} {'%floor':>7s} {'new/old':>7s} ok  config")
for (T, E, k, HD, I), dt in SHAPES:
    g = torch.Generator(device="cuda").manual_seed(T * E + k)
    x = torch.randn(T, HD, device="cuda", generator=g).to(dt)
    w13 = (torch.randn(E, 2 * I, HD, device="cuda", generator=g) * HD ** -0.5).to(dt)
    w2 = (torch.randn(E, HD, I, device="cuda", generator=g) * I ** -0.5).to(dt)
    logits = torch.randn(T, E, device="cuda", generator=g)
    ref = new.reference(x, w13, w2, logits, k)
    floor_us = sum(t.numel() * t.element_size() for t in (x, w13, w2, logits, x)) / copy_gbps / 1e3
    rule = {**new.CONFIG, **new.streaming_config(T, E, k, HD, torch.cuda.get_device_properties(0).multi_processor_count)}
    sides = {"old": lambda o: old.fused_moe(x, w13, w2, logits, k, out=o),
             "new": lambda o: new.fused_moe(x, w13, w2, logits, k, out=o),
             "rule": lambda o: new.fused_moe(x, w13, w2, logits, k, out=o, config=rule)}
    outs, ok, cfgs = {}, {}, {}
    for name, fn in sides.items():
        o = torch.full((T, HD), float("nan"), device="cuda", dtype=dt)
        fn(o)
        torch.cuda.synchronize()
        err = ((o.float() - ref).norm() / ref.norm()).item()
        ok[name] = bool(torch.isfinite(o).all()) and err < 2e-2
        cfgs[name] = dict((old if name == "old" else new).last_config)
        outs[name] = o
    ws, _, _, _, _, _ = new.route_and_align(logits, k, 64, new.CONFIG["ROUTE_BLOCK_T"])
    calls = {name: (lambda fn=fn, o=outs[name]: fn(o)) for name, fn in sides.items() if ok[name]}
    calls["route"] = lambda: new.route_and_align(logits, k, 64, new.CONFIG["ROUTE_BLOCK_T"])
    times = {name: [] for name in calls}
    for order in (list(calls), list(reversed(calls))):
        for name in order:
            times[name].append(do_bench(calls[name], return_mode="median") * 1e3)
    med = {name: sum(ts) / 2 for name, ts in times.items()}
    for name in sides:
        if not ok[name]:
            print(f"{f'{T}x{E}x{k}x{HD}x{I}':>22s} {name}: WRONG (or NaN), config {cfgs[name]}")
            continue
        c = cfgs[name]
        desc = f"BM {c.get('BLOCK_M')} GLUON {c.get('GLUON')} st {c.get('num_stages')}/{c.get('DOWN_num_stages')} DBN {c.get('DOWN_BLOCK_N')}"
        print(f"{f'{T}x{E}x{k}x{HD}x{I}':>22s} {'bf16' if dt == torch.bfloat16 else 'fp16':4s} {name:6s} {times[name][0]:8.1f} {times[name][1]:8.1f} "
              f"{100 * floor_us / med[name]:7.1f} {med['old'] / med[name]:7.3f} y   {desc}")
    print(f"{'':>22s} {'':4s} {'route':6s} {times['route'][0]:8.1f} {times['route'][1]:8.1f}  (route_and_align alone; floor {floor_us:.1f} us)")
    del x, w13, w2, ref, outs
    torch.cuda.empty_cache()
print(f"done in {time.time() - t0:.0f} s")
