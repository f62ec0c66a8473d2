"""Device probe for issue 52 (branch sm58): softmax's shared-memory team on few rows of a vocabulary, and on layouts
whose y is not cut like x. experiments/held-out-shapes/few-rows-team/README.md has the reasoning and predictions.

    cd .stage/wt-sm58 && export PYTHONPATH=$PWD && python .stage/probe_sm58.py $OUT        (one H100, under 4 min)
    PROBE_TINY=1 TRITON_INTERPRET=1 python .stage/probe_sm58.py /tmp/out                    (CPU: the script's paths)

For every case: main's kernel (`git show 8efb40c:skills/kernels/softmax/softmax.py`, loaded from a temp file), this
tree's kernel under each of VARIANTS (switches of its SMEM_TEAM, set before each call), torch.softmax and a torch
copy of the same bytes. First every output is checked against float64 (a NaN-poisoned output each call, extremes
planted at each row's head, body and tail, relative to each element as the cut check did), then each function is
timed by kgit.harness.timing.gpu_median_ms (the L2 cleared before each call) in two rounds of opposite order. % of
copy is of kgit.harness.device's measured copy bandwidth, as benchmarks/held_out_bench.py reports it. Where no
variant changes the path (the team does not take the rows), this tree is timed once, as "new".
Writes probe_sm58.txt and probe_sm58.jsonl under argv[1]; the cases left when PROBE_SECONDS (default 215) have
passed are skipped and said so. Exit 1 if any output is wrong.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kgit.harness import device  # noqa: E402
from kgit.harness.timing import gpu_median_ms  # noqa: E402

MAIN = "8efb40c"
TINY = os.environ.get("PROBE_TINY", "") not in ("", "0")
T0 = time.time()
DEADLINE = T0 + float(os.environ.get("PROBE_SECONDS", "215"))
# The switches of SMEM_TEAM each variant sets (the rest as this tree ships them); see TEAM_PARTS, TEAM_SLOTS,
# TEAM_WORDS in skills/kernels/softmax/softmax.py. "even": main's team (two slots, five programs an SM) on parts of
# one length, dealt; "even + words": the siblings' words read early too; "3 slots + words" (this tree's default):
# a third row in flight a program, four programs an SM, registers capped at 128 (which four allow).
VARIANTS = {
    "even": {"EVEN_PARTS": 1, "DEAL_ROWS": 1, "SLOTS": 2, "EARLY_WORDS": 0, "maxnreg": 96},
    "even + words": {"EVEN_PARTS": 1, "DEAL_ROWS": 1, "SLOTS": 2, "EARLY_WORDS": 1, "maxnreg": 96},
    "3 slots + words": {"EVEN_PARTS": 1, "DEAL_ROWS": 1, "SLOTS": 3, "EARLY_WORDS": 1, "maxnreg": 128},
}
B, H, F = torch.bfloat16, torch.float16, torch.float32
CASES = [  # (M, N, dtype, layout); layouts as experiments/held-out-shapes/wide-unaligned-paths/ built them
    *[(m, n, dt, "contiguous") for m, n in [(512, 50257), (512, 32000), (512, 128256), (512, 151936), (1024, 50257),
                                            (2048, 50257), (4096, 32000)] for dt in (B, H)],
    (512, 50257, F, "contiguous"),
    (512, 50257, B, "x+3"), (512, 50257, H, "y own stride"), (512, 50257, B, "x+5,y+5"),  # the last: y cut like x
    (1024, 65537, H, "x+3"), (2048, 30001, B, "y own stride"), (2048, 20001, H, "x+3"),
    (4096, 4096, B, "contiguous"), (8192, 1000, B, "contiguous"),  # controls: other kernels
    # the team launched by hand where the pipelined loop takes the rows (not dispatched): would it read more?
    (512, 32000, B, "team forced"), (4096, 32000, B, "team forced"),
    # 512x50257 on even parts, P forced past the rule's 7: does a smaller part pay (TEAM_ROW_OVERHEAD)?
    (512, 50257, B, "P=10"), (512, 50257, B, "P=14"),
]
TOL = {B: (2e-2, 1e-3), H: (4e-3, 1e-4), F: (4e-3, 1e-4)}  # held_out_bench's allclose, the timed outputs
# relative to each element, down to what the output holds (the cut check's): an edge element of 1e-6 written
# wrong shows, which an absolute 1e-3 would hide in a row of 50257
ELEMENT_TOL = {B: (1e-2, 2e-38), H: (4e-3, 1e-7), F: (1e-3, 2e-38)}

DEV = "cuda" if torch.cuda.is_available() and not TINY else "cpu"
TXT = JSONL = new = old = old_path = SHIPPED = None  # set by main(): this script is also imported for VARIANTS


def say(*parts):
    line = " ".join(str(p) for p in parts)
    print(line, flush=True)
    TXT.write(line + "\n")
    TXT.flush()


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def with_team(switches, fn):
    """fn run with this tree's SMEM_TEAM under `switches`, then as shipped. A team that failed to compile is
    forgotten after each call (its warning printed, its path the kernel that took its rows instead), so that
    the next variant tries its own."""
    def run():
        new.SMEM_TEAM = {**SHIPPED, **switches}
        try:
            return fn()
        finally:
            new.SMEM_TEAM = SHIPPED
            new._TEAM_FAILED.clear()
    return run


def layout(M, N, dtype, how):
    """x (M x N, randn * 3, placed as `how` says) and y (NaN; None: softmax's own output)."""
    x_skew = {"x+3": 3, "x+5,y+5": 5}.get(how, 0)
    big = (torch.randn(M, N + x_skew + (1 if x_skew else 0), device=DEV) * 3).to(dtype)  # stride N + skew + 1
    x = big[:, x_skew:x_skew + N]
    if how == "y own stride":
        return x, torch.full((M, N + 3), float("nan"), device=DEV, dtype=dtype)[:, :N]
    if how == "x+5,y+5":  # y's rows at x's offsets (same stride, same skew): cut like x
        return x, torch.full((M, x.stride(0)), float("nan"), device=DEV, dtype=dtype)[:, 5:5 + N]
    return x, None


def plant(x):
    """Extremes at each row's own cut (head [0, h), body, tail [N - t, N) at 16-byte boundaries), eight rows a
    feature so that each meets every offset of a row's start (the cut check's)."""
    M, N = x.shape
    start0 = x.data_ptr() // x.element_size()
    features = ["first", "head last", "body first", "body last", "tail first", "last", "inf but first",
                "inf but last", "inf but middle", "inf head", "x100"]
    for f, name in enumerate(features):
        for q in range(8):
            r = f * 8 + q
            if r >= M:
                return
            start = start0 + r * x.stride(0)
            h, t = (-start) % 8, (start + N) % 8
            at = {"first": 0, "head last": max(h - 1, 0), "body first": h, "body last": N - t - 1,
                  "tail first": N - t if t else N - 1, "last": N - 1}.get(name)
            if at is not None:
                x[r, at] = x[r].float().max() + 1.0
            elif name.startswith("inf but"):
                keep = {"inf but first": 0, "inf but last": N - 1, "inf but middle": N // 2}[name]
                v = x[r, keep].clone()
                x[r] = -float("inf")
                x[r, keep] = v
            elif name == "inf head":
                x[r, :max(h, 1)] = -float("inf")
            else:
                x[r] *= 100


def forced(x, out, switches=None, P=None):
    """The team launched by hand on x (rows cut at 16-byte boundaries where they are not of 16-element groups),
    under `switches`; P: parts of one length forced to P (not dealt)."""
    def run():
        x2, y2 = x.reshape(-1, x.shape[-1]), out.reshape(-1, out.shape[-1])
        cut = not new._rows_of_16(x2, y2)
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        rule = new._team_shape
        if P is not None:
            new._team_shape = lambda M, body, vec, slots: (P, new.triton.cdiv(new.triton.cdiv(body, P), vec) * vec)
        try:
            new.SMEM_TEAM = {**SHIPPED, **(switches or {})}
            assert new._launch_smem_team(x2, y2, *x2.shape, sms, cut=cut), "the team did not launch"
        finally:
            new._team_shape = rule
            new.SMEM_TEAM = SHIPPED
        return out
    return run


def functions(x, out, how):
    """name -> a call that writes softmax(x) into out (torch's allocates its own)."""
    calls = {"main": lambda: old.softmax(x, out=out)}
    if how == "team forced":
        calls.update({name: forced(x, out, sw) for name, sw in VARIANTS.items()})
    elif how.startswith("P="):
        calls["even"] = with_team(VARIANTS["even"], lambda: new.softmax(x, out=out))
        calls[how] = forced(x, out, VARIANTS["even"], int(how[2:]))
    else:
        calls.update({name: with_team(sw, lambda: new.softmax(x, out=out)) for name, sw in VARIANTS.items()})
    calls["torch"] = lambda: torch.softmax(x, dim=-1)
    return calls


def path_of(fn, mod):
    """The kernel fn's call launched and its launch's settings, as the launcher records them (last_config)."""
    mod.last_config.clear()
    fn()
    c = dict(mod.last_config)
    return " ".join([str(c.pop("kernel", None))] + [f"{k}={v}" for k, v in c.items()])


def check(name, fn, x, out, ref, dtype):
    """Whether fn's output is right: every element against float64, the output NaN-poisoned first; twice (the
    team's words must come back unstamped for the next launch). Returns (ok, worst error / tolerance)."""
    rtol, atol = ELEMENT_TOL[dtype]
    worst = 0.0
    for _ in range(2):
        if out is not None:
            out.fill_(float("nan"))
        got = fn()
        excess = (got.double() - ref).abs() / (rtol * ref.abs() + atol)
        worst = max(worst, float(torch.nan_to_num(excess, nan=float("inf")).max()))
    good = worst <= 1 and bool((got[ref == 0] == 0).all())  # -inf in: exactly 0 out
    return good, worst


def time_us(fn):
    if DEV == "cuda":
        return gpu_median_ms(fn, warmup_ms=10, rep_ms=40) * 1e3
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def main():
    global TXT, JSONL, new, old, old_path, SHIPPED
    os.makedirs(sys.argv[1], exist_ok=True)
    TXT = open(os.path.join(sys.argv[1], "probe_sm58.txt"), "w")
    JSONL = open(os.path.join(sys.argv[1], "probe_sm58.jsonl"), "w")
    new = load(os.path.join(ROOT, "skills", "kernels", "softmax", "softmax.py"), "softmax_sm58")
    old_path = os.path.join(tempfile.mkdtemp(), "softmax_main.py")
    with open(old_path, "w") as f:
        f.write(subprocess.run(["git", "show", f"{MAIN}:skills/kernels/softmax/softmax.py"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout)
    old = load(old_path, "softmax_main")
    SHIPPED = dict(new.SMEM_TEAM)
    say(f"softmax sm58 probe on {torch.cuda.get_device_name() if DEV == 'cuda' else 'CPU'}, torch {torch.__version__}, "
        f"triton {__import__('triton').__version__}; main = {MAIN} ({old_path}); shipped SMEM_TEAM {SHIPPED}")
    copy = device.measured_copy_gbps(refresh=True) if DEV == "cuda" else None
    say(f"copy {copy:.0f} GB/s" if copy else "copy: none (CPU)")
    wrong, fp16_paths = [], {}
    for M, N, dtype, how in CASES:
        if time.time() > DEADLINE:
            say(f"  {M}x{N} {str(dtype)[6:]} {how}: skipped, out of time")
            continue
        if DEV != "cuda" and (how == "team forced" or how.startswith("P=")):
            say(f"  {M}x{N} {str(dtype)[6:]} {how}: skipped, a GPU's only (the team)")
            continue
        shape = (M, N)
        if TINY:
            M = 2
        x, y = layout(M, N, dtype, how)
        plant(x)
        out = y if y is not None else torch.empty_like(x)
        ref = new.softmax_ref(x)
        calls = functions(x, out, how)
        row = {"M": M, "N": N, "dtype": str(dtype)[6:], "layout": how, "ok": {}, "worst": {}, "path": {}}
        for name, fn in calls.items():
            try:
                good, worst = check(name, fn, x, out if name != "torch" else None, ref, dtype)
            except Exception as e:  # one failing variant must not hide the others' figures
                good, worst = False, float("inf")
                row.setdefault("error", {})[name] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:160]}"
            row["ok"][name], row["worst"][name] = good, worst
            if name != "torch":
                row["path"][name] = path_of(fn, old if name == "main" else new) if good else "-"
            if not good:
                wrong.append(f"{M}x{N} {row['dtype']} {how} {name}")
        del ref
        variants = [n for n in calls if n not in ("main", "torch")]
        if len({row["path"][n] for n in variants}) == 1:
            calls = {"main": calls["main"], "new": calls[variants[0]], "torch": calls["torch"]}  # one path: once
            row["path"] = {"main": row["path"]["main"], "new": row["path"][variants[0]]}
        if dtype != F and how == "contiguous":
            fp16_paths.setdefault(shape, {})[row["dtype"]] = row["path"]
        nbytes = 2 * x.numel() * x.element_size()
        src = torch.empty(nbytes // 2, dtype=torch.uint8, device=DEV)
        dst = torch.empty_like(src)
        calls["copy"] = lambda: dst.copy_(src)
        times = {name: [] for name in calls}
        for order in (list(calls), list(reversed(calls))):
            for name in order:
                times[name].append(time_us(calls[name]))
        us = {name: sum(t) / len(t) for name, t in times.items()}
        row.update(us=us, rounds=times, bytes=nbytes, copy_gbps=copy)
        pct = {name: 100 * nbytes / (t * 1e3) / copy for name, t in us.items()} if copy else {}
        row["pct_copy"] = pct
        JSONL.write(json.dumps(row) + "\n")
        JSONL.flush()
        ours = [n for n in calls if n not in ("main", "torch", "copy")]
        say(f"{M}x{N} {row['dtype']} {how}: " + "  ".join(
            f"{name} {us[name]:.1f}us" + (f" {pct[name]:.1f}%" if pct else "") for name in calls)
            + "  x main " + " ".join(f"{n} {us['main'] / us[n]:.3f}" for n in ours)
            + f"  x torch {min(us['torch'] / us[n] for n in ours):.2f}")
        say("    paths: " + "; ".join(f"{n}: {p}" for n, p in row["path"].items())
            + ("" if all(row["ok"].values()) else f"  WRONG: {[n for n, ok in row['ok'].items() if not ok]}")
            + f"  worst err/tol {max(row['worst'].values()):.2f}")
        del x, y, out, src, dst
        if DEV == "cuda":
            torch.cuda.empty_cache()
    # fp16 must never fall off a kernel bf16 takes: each function's kernel, bf16 against fp16, shape by shape
    fell = [f"{M}x{N} {name}" for (M, N), p in fp16_paths.items() if len(p) == 2
            for name in p["bfloat16"] if p["bfloat16"][name].split()[0] != p["float16"].get(name, "-").split()[0]]
    say(f"fp16 on bf16's kernels: {'yes' if not fell else 'NO: ' + ', '.join(fell)}")
    say(f"done in {time.time() - T0:.0f} s; {'WRONG: ' + ', '.join(wrong) if wrong else 'every output right'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
