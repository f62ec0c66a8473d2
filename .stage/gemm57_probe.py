"""gemm57's probe (issue 52), one H100, from the repository root: python .stage/gemm57_probe.py (under 90 s).

Which side pays for rows that are not whole 128-byte lines, and whether C_PTR / B_PAD recover it. At
3000x5000x2000 (bf16, fp16), 2048x5000x4096, 4096x4100x4096 (rows of 8200 B: not even 16-byte multiples, so CONFIG
runs the pointer kernel) and 3000x5120x2000 (the control, every row whole lines), beside torch.matmul, each output
checked first (NaN-poisoned, against the fp32 product), then kgit's median (the L2 cleared clean before each call),
two rounds in opposite order:
  config      CONFIG forced on the contiguous tensors (what main runs there, bar the autotune)
  c_ptr       CONFIG with C_PTR (C stored with st.global)
  b_ptr       CONFIG with B_PTR (B loaded with cp.async), b_ptr+c_ptr both
  b_pad       CONFIG with B_PAD (B copied to 128-byte rows in the call: the copy is timed)
  b_pad+c_ptr both
  split+...   where tail_split_pays offers a split: it, alone and with c_ptr, b_ptr+c_ptr, b_pad+c_ptr
  view:B      CONFIG with B already in a buffer of 128-byte rows (a view of the same shape): the kernel alone
  view:C      CONFIG writing C into a buffer of 128-byte rows
  view:BC     both; view:ABC also A (where K's rows are not whole lines either): every row on a line
  copy:B      padded_rows(B) alone: what B_PAD's copy costs
  auto        the autotune's pick
and cuBLAS's kernel names. Everything printed goes to $OUT/gemm57_probe.txt, the rows to $OUT/gemm57_probe.jsonl.
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
TXT = open(os.path.join(OUT, "gemm57_probe.txt"), "w")
ROWS = open(os.path.join(OUT, "gemm57_probe.jsonl"), "w")
T0 = time.time()


def say(*parts):
    line = " ".join(str(p) for p in parts)
    print(line, flush=True)
    TXT.write(line + "\n")
    TXT.flush()


spec = importlib.util.spec_from_file_location("gemm_new", os.path.join(ROOT, "skills/kernels/gemm/gemm.py"))
g = importlib.util.module_from_spec(spec)
spec.loader.exec_module(g)
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
KEYS = ("BLOCK_M", "BLOCK_N", "num_stages", "GROUP_M", "PERSISTENT", "GLUON", "USE_TMA", "TAIL_BLOCK_M",
        "TAIL_BLOCK_N", "EPILOGUE_SUBTILE", "C_PTR", "B_PTR", "B_PAD")


def name(cfg):
    return " ".join(f"{k}={cfg[k]}" for k in KEYS if k in cfg and (cfg[k] or k in ("BLOCK_M", "BLOCK_N")))


def lined(t):
    """t's copy in a buffer whose rows are whole 128-byte lines, as a view of t's shape."""
    per = 128 // t.element_size()
    view = torch.empty(t.shape[0], -(-t.shape[1] // per) * per, dtype=t.dtype, device=t.device)[:, :t.shape[1]]
    view.copy_(t)
    return view


def wrong(c, ref):
    if not torch.isfinite(c).all():
        return "non-finite"
    err = ((c.float() - ref).norm() / ref.norm()).item()
    return None if err < 1e-2 else f"relative error {err:.3g}"


def us(fn):
    return gpu_median_ms(fn, warmup_ms=5, rep_ms=25) * 1e3


say(f"gemm57 probe on {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {g.triton.__version__}")
torch.backends.cuda.matmul.allow_tf32 = False
FORCED = {"config": {}, "c_ptr": {"C_PTR": 1}, "b_ptr": {"B_PTR": 1}, "b_ptr+c_ptr": {"B_PTR": 1, "C_PTR": 1},
          "b_pad": {"B_PAD": 1}, "b_pad+c_ptr": {"B_PAD": 1, "C_PTR": 1}}
for M, N, K, dt in [(3000, 5000, 2000, "bf16"), (3000, 5000, 2000, "fp16"), (2048, 5000, 4096, "bf16"),
                    (4096, 4100, 4096, "bf16"), (3000, 5120, 2000, "bf16")]:
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda").to(DT[dt])
    b = torch.randn(K, N, device="cuda").to(DT[dt])
    ref = a.float() @ b.float()
    a_l, b_l = lined(a), lined(b)
    c_l = lined(torch.empty(M, N, device="cuda", dtype=DT[dt]))
    calls, names = {}, {}
    forced = dict(FORCED)
    tail = g.tail_split_pays(M, N, K, g._num_sms(a.device), g.CONFIG)
    if tail:  # the split the autotune offers there, alone and with the ways around the rows
        for k in ("config", "c_ptr", "b_ptr+c_ptr", "b_pad+c_ptr"):
            forced["split+" + k] = {**FORCED[k], "TAIL_BLOCK_M": tail[0], "TAIL_BLOCK_N": tail[1]}
    cases = [(k, a, b, None, cfg) for k, cfg in forced.items()]
    cases += [("view:B", a, b_l, None, {}), ("view:C", a, b, c_l, {}), ("view:BC", a, b_l, c_l, {})]
    if (K * a.element_size()) % 128:
        cases.append(("view:ABC", a_l, b_l, c_l, {}))
    for k, x, y, out, cfg in cases:
        out = torch.full((M, N), float("nan"), device="cuda", dtype=DT[dt]) if out is None else out.fill_(float("nan"))
        try:
            g.gemm(x, y, out=out, config=cfg)
            torch.cuda.synchronize()
            why = wrong(out, ref)
        except Exception as e:
            why = f"{type(e).__name__}: {str(e).splitlines()[-1] if str(e) else ''}"
        ran = dict(g.last_config)
        b_seen = None if ran.get("B_PTR") else g.padded_rows(y) if ran.get("B_PAD") else y
        names[k] = name(ran) + ("" if g._tma_ok(x, b_seen, None if ran.get("C_PTR") else out) else " (pointer kernel)")
        if why:
            say(f"  {M}x{N}x{K} {dt} {k} {names[k]}: WRONG/FAILED {why}")
            continue
        calls[k] = lambda x=x, y=y, out=out, cfg=cfg: g.gemm(x, y, out=out, config=cfg)
    calls["copy:B"] = lambda: g.padded_rows(b)
    names["copy:B"] = f"B {K}x{N} to 128-byte rows ({K * N * b.element_size() / 1e6:.1f} MB)"
    out = torch.full((M, N), float("nan"), device="cuda", dtype=DT[dt])
    g.gemm(a, b, out=out)  # the autotune's pick
    torch.cuda.synchronize()
    pick, pick_ok = dict(g.last_config), wrong(out, ref)
    calls["auto"] = lambda out=out: g.gemm(a, b, out=out)
    names["auto"] = name(pick)
    tout = torch.matmul(a, b)
    calls["torch"] = lambda: torch.matmul(a, b, out=tout)
    names["torch"] = "cuBLAS"
    times = {k: [] for k in calls}
    for order in (list(calls), list(reversed(calls))):
        for k in order:
            times[k].append(us(calls[k]))
    t_torch = sum(times["torch"]) / 2
    say(f"{M}x{N}x{K} {dt}: torch {t_torch:.2f} us; autotune pick {name(pick)} ok={pick_ok is None}")
    for k in calls:
        mean = sum(times[k]) / 2
        say(f"  {k:18s} {mean:8.2f} us  x torch {t_torch / mean:.3f}  rounds {times[k][0]:.2f}/{times[k][1]:.2f}"
            f"  {names[k]}")
        ROWS.write(json.dumps(dict(shape=f"{M}x{N}x{K}", dtype=dt, side=k, us=mean, rounds=times[k],
                                   config=names[k], x_torch=t_torch / mean)) + "\n")
        ROWS.flush()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.matmul(a, b)
        torch.cuda.synchronize()
    kernels = [e.key for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    say(f"  cuBLAS: {' | '.join(kernels)}  ({time.time() - T0:.0f} s)")
