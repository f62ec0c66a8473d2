"""Branch fa61: where the persistent Gluon kernel (GLUON 2) spends its cycles at short S and head dim 128, on an
H100. Two parts, in this order:

1. The stamped diagnostic (.stage/fa61_stamped.py) at 16x16x512x128 causal bf16: its output checked against
   float64 attention, its time beside the unstamped kernel's (the stamps' cost), then one run's log after an L2
   clear, summarized: each phase's median and its cycles a consumer (fa61_notes.md has what to read from them).
2. Timings: main's file ("main") against this branch's as committed ("new") and with PERSISTENT_DEFER_STORE on
   ("defer": each tile's O stored from registers to its staging tile and by TMA under the next tile's diagonal-block
   wgmma, rather than after it), GLUON 2 forced, and main's and defer's autotuned picks ("auto"), torch's default
   SDPA beside. "defer" is the branch's file loaded a second time as a module of its own with the switch set.

    export PYTHONPATH=$PWD && python .stage/probe_fa61.py OUT_DIR OLD_FILE DEADLINE_S [--no-sass] [--no-stamps]

e.g. `git show main:skills/kernels/flash-attention/flash_attention.py > .stage/old_fa.py && PYTHONPATH=$PWD python
.stage/probe_fa61.py $OUT .stage/old_fa.py 300 --no-sass` (~4 minutes, most of it compiles: the stamped kernel,
GLUON 2 from three files at four dtype/head-dim/causal combinations, and two shapes' autotunes; the SASS checks,
~6 more compiles, ran on the CPU under Triton 3.6 and are in fa61_notes.md).

OLD_FILE: main's flash_attention.py (`git show main:skills/kernels/flash-attention/flash_attention.py`). DEADLINE_S:
seconds from the start; the parts and shapes left when it passes are skipped (~240 fits). First (unless
--no-sass), this Triton's sm_90 compile of the causal kernels that new and defer launch is checked as
tests/kernels/sass_defs.py asks (no wgmma descriptor read from a block that does not dominate it: Triton 3.6's
ptxas fault of fa57), a kernel that fails not launched, its local loads and stores (spills) counted, and new's
instructions compared with main's (the same: the switch is off). At each shape every column's output (NaN-poisoned before the call) is checked
against float64 attention, allowed twice SDPA's own error or the dtype's floor, and the GLUON each launch ran is
recorded (asserted 2 where forced), before any timing. Times: kgit.harness.timing.gpu_median_ms (L2 cleared,
medians), two rounds in opposite column orders; the spread of the two rounds and the predictions print beside
each row. Writes OUT_DIR/probe_fa61.txt (every line printed, flushed as it goes) and OUT_DIR/probe_fa61.jsonl
(a line a shape)."""
import importlib.util
import json
import os
import re
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, ".stage"))
sys.path.insert(0, os.path.join(ROOT, "tests", "kernels"))
KERNEL = "skills/kernels/flash-attention/flash_attention.py"
# (B, H, S, D, causal, dtype, autotuned columns too (each autotune compiles ~6 candidates, ~30 s a shape and dtype:
# the shape of the brief and the non-causal one), predictions main/defer with GLUON 2 forced and SDPA / main):
# fa61_notes.md has the arithmetic. new is main's SASS everywhere (the switch off); defer changes the causal and non-causal kernels.
SHAPES = [(16, 16, 512, 128, True, "bf16", True, "defer 1.005-1.025; main G2 and auto 0.96-0.975x SDPA"),
          (16, 16, 512, 128, True, "fp16", False, "defer 1.005-1.025; main G2 0.96-0.98x SDPA"),
          (8, 16, 512, 128, True, "bf16", False, "defer 1.00-1.025; main G2 0.93-0.98x SDPA"),
          (4, 16, 4096, 128, True, "bf16", False, "defer 0.995-1.005 (a tile turn every 16.5 blocks)"),
          (8, 16, 512, 64, True, "bf16", False, "defer 1.00-1.03"),
          (64, 12, 512, 64, False, "bf16", True, "defer 1.00-1.02")]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
FLOOR = {torch.float16: 2e-3, torch.bfloat16: 1e-2}  # max|err| any right 16-bit output may have here
FORCED = ["main G2", "new G2", "defer G2"]
COLUMNS = FORCED + ["main auto", "defer auto", "sdpa"]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def instructions(sass):
    """A kernel's SASS instruction text, addresses dropped (two kernels the same code compare equal)."""
    return [op for _, op in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?;)", sass)]


def launch_constexprs(module):
    """The constexprs a file's launcher passes beyond .stage/fa59_sass.py's defaults."""
    return {"DEFER_STORE": True} if getattr(module, "PERSISTENT_DEFER_STORE", False) else {}


def sass_checks(files, emit):
    """{(file, dtype, D, causal): problem or ''} for defer's GLUON 2 kernels the shapes launch, a line each; new's
    first one compared with main's (the switch off: the same instructions). A stale descriptor keeps a kernel from
    launching; spills (local loads and stores: defer's D128 kernels spill a few words a tile, outside the block
    loop, .stage/fa61_notes.md) are reported."""
    import fa59_sass
    from sass_defs import descriptor_reads_not_dominated
    results = {}
    for B, H, S, D, causal, dtype, *_ in SHAPES:
        if ("defer", dtype, D, causal) in results:
            continue
        names = ["defer"] if results else ["main", "new", "defer"]
        sass_of = {}
        for name in names:
            if name not in files:
                continue
            kernel = fa59_sass.compile_persist(files[name], dtype, D, causal, S=S, **launch_constexprs(files[name]))
            sass_of[name] = sass = fa59_sass.cuobjdump(kernel, "-sass")
            stale = [hex(a) for a, _, _ in descriptor_reads_not_dominated(sass)]
            problem = f"stale wgmma descriptors at {stale}" if stale else ""
            if name != "main":
                results[(name, dtype, D, causal)] = problem
            spills = len(re.findall(r"\b(?:STL|LDL)\b", sass))
            against = ""
            if name != "main" and "main" in sass_of:
                same = instructions(sass) == instructions(sass_of["main"])
                against = "; same SASS as main" if same else "; not main's SASS"
            emit(f"sm_90 compile, {name} G2 {'causal' if causal else 'non-causal'} {dtype} D{D}: {problem or 'clean'}, "
                 f"{len(instructions(sass))} instructions, {spills} local loads/stores{against}")
    return results


def reference64(q, k, v, causal):
    """float64 attention (torch's math SDPA), a few heads at a time."""
    B, H, S, D = q.shape
    out = torch.empty(B * H, S, D, dtype=torch.float64, device=q.device)
    flat = [t.reshape(B * H, S, D) for t in (q, k, v)]
    step = max(1, (1 << 28) // (S * S * 8))
    for i in range(0, B * H, step):
        out[i:i + step] = torch.nn.functional.scaled_dot_product_attention(
            *(t[i:i + step].double() for t in flat), is_causal=causal)
    return out.reshape(B, H, S, D)


def inputs(B, H, S, D, causal, dtype):
    torch.manual_seed(B * 7919 + S * 31 + D)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(3))
    ref = reference64(q, k, v, causal)
    sdpa_err = (torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).double() - ref)
    sdpa_err = sdpa_err.abs().max().item()
    return q, k, v, ref, sdpa_err, max(2 * sdpa_err, FLOOR[dtype])


def stamped_part(emit, out_dir):
    """Part 1: the stamped kernel at 16x16x512x128 causal bf16, checked, timed beside the kernel it copies, and one
    run's log summarized."""
    import fa61_stamped
    from kgit.harness import timing
    q, k, v, ref, _, allowed = inputs(16, 16, 512, 128, True, torch.bfloat16)
    o = torch.full_like(q, float("nan"))
    log = fa61_stamped.run(q, k, v, o)
    torch.cuda.synchronize()
    err = (o.double() - ref).abs().max().item()
    emit(f"stamped kernel, 16x16x512x128 causal bf16: max|err| {err:.3g} (allowed {allowed:.3g})")
    if not err <= allowed:
        emit("stamped kernel wrong: its log not read")
        return
    plain = lambda: fa61_stamped.fa.flash_attention(q, k, v, causal=True, out=o, config={"GLUON": 2})  # noqa: E731
    stamped = lambda: fa61_stamped.run(q, k, v, o, log)  # noqa: E731
    us = [timing.gpu_median_ms(fn, warmup_ms=10, rep_ms=40) * 1e3 for fn in (plain, stamped, stamped, plain)]
    emit(f"unstamped G2 {us[0]:.1f} / {us[3]:.1f} us, stamped {us[1]:.1f} / {us[2]:.1f} us (two rounds): the stamps "
         f"cost {(us[1] + us[2]) / (us[0] + us[3]):.3f}x")
    clear = timing._l2_clear()
    for _ in range(3):  # warm: the log of a run after an L2 clear, as the timings run
        clear()
        log = fa61_stamped.run(q, k, v, o)
    torch.cuda.synchronize()
    torch.save(log.cpu(), os.path.join(out_dir, "fa61_stamps.pt"))
    for text in fa61_stamped.summarize(log):
        emit(text)


def run_shape(shape, files, sass_bad):
    from kgit.harness import timing
    B, H, S, D, causal, dtype_name, auto, predicted = shape
    dtype = DTYPES[dtype_name]
    q, k, v, ref, sdpa_err, allowed = inputs(B, H, S, D, causal, dtype)
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    row = {"shape": f"{B}x{H}x{S}x{D}", "causal": causal, "dtype": dtype_name, "predicted": predicted,
           "sdpa_err": sdpa_err, "allowed": allowed, "cols": {"sdpa": {"err": sdpa_err}}}
    fns = {"sdpa": sdpa}
    for name in COLUMNS[:-1]:
        file, how = name.split()
        if how == "auto" and not auto:
            continue
        module = files.get(file)
        col = row["cols"][name] = {}
        if module is None:
            col["error"] = "no such file"
            continue
        if sass_bad.get((file, dtype_name, D, causal)):
            col["error"] = f"not launched: sm_90 compile {sass_bad[(file, dtype_name, D, causal)]}"
            continue
        config = {"GLUON": 2} if how == "G2" else None
        o = torch.full_like(q, float("nan"))
        try:
            module.flash_attention(q, k, v, causal=causal, out=o, config=config)  # autotunes here where config None
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 (a column that fails is reported, the others run)
            col["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}"
            continue
        ran = dict(module.last_config)
        col["ran"] = {key: ran.get(key) for key in ("GLUON", "BLOCK_M", "BLOCK_N", "NUM_BUFFERS", "num_warps")}
        err = (o.double() - ref).abs().max().item()  # NaN propagates: a row never written fails
        col["err"] = err
        if not err <= allowed or (how == "G2" and ran.get("GLUON") != 2):
            col["error"] = f"ran GLUON {ran.get('GLUON')}; max|err| {err:.3g} (allowed {allowed:.3g})"
            continue
        fns[name] = lambda module=module, config=config, o=o: module.flash_attention(q, k, v, causal=causal, out=o,
                                                                                     config=config)
    names = list(fns)
    for rnd, order in enumerate((names, names[::-1])):
        for name in order:
            row["cols"][name].setdefault("us", [None, None])[rnd] = \
                timing.gpu_median_ms(fns[name], warmup_ms=10, rep_ms=40) * 1e3
    for col in row["cols"].values():
        if "us" in col:
            col["mean_us"] = sum(col["us"]) / 2
            col["spread"] = abs(col["us"][0] - col["us"][1]) / col["mean_us"]
    return row


def line(row):
    c = row["cols"]
    t = {n: col["mean_us"] for n, col in c.items() if "mean_us" in col}
    cells = " ".join(f"{t[n]:9.1f}" if n in t else f"{'ERR' if 'error' in c.get(n, {}) else '-':>9s}" for n in COLUMNS)
    ratio = lambda a, b: f"{t[a] / t[b]:8.3f}" if a in t and b in t else f"{'-':>8s}"  # noqa: E731
    spread = max(col["spread"] for col in c.values() if "spread" in col)
    picks = " ".join(f"{n}: GLUON {c[n]['ran']['GLUON']}" for n in ("main auto", "defer auto") if "ran" in c.get(n, {}))
    text = (f"{row['shape']:>14s} {row['dtype']:4s} {'y' if row['causal'] else 'n'} {cells}"
            f" {ratio('main G2', 'new G2')} {ratio('main G2', 'defer G2')} {ratio('sdpa', 'main G2')}"
            f" {ratio('sdpa', 'defer G2')} {ratio('sdpa', 'main auto')} {ratio('sdpa', 'defer auto')}"
            f" {100 * spread:5.1f}%  [{picks}]  predicted: {row['predicted']}")
    for n, col in c.items():
        if "error" in col:
            text += f"\n{'':>14s} {n}: {col['error']}"
    return text


def main():
    out_dir, old_path, deadline_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    start = time.time()
    deadline = start + deadline_s
    os.makedirs(out_dir, exist_ok=True)
    txt = open(os.path.join(out_dir, "probe_fa61.txt"), "w")
    jsonl = open(os.path.join(out_dir, "probe_fa61.jsonl"), "w")

    def emit(text):
        print(text, flush=True)
        txt.write(text + "\n")
        txt.flush()

    import triton
    emit(f"probe_fa61: torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    wrong = False
    if "--no-stamps" not in sys.argv:
        try:
            stamped_part(emit, out_dir)
        except Exception as e:  # noqa: BLE001 (the timings run whatever the diagnostic does)
            emit(f"stamped part failed: {type(e).__name__}: {str(e).strip().splitlines()[-1][:300] if str(e) else ''}")
            wrong = True
        emit(f"stamped part done at {time.time() - start:.0f} s")
    files = {"main": load(old_path, "flash_attention_main"),
             "new": load(os.path.join(ROOT, KERNEL), "flash_attention_fa61")}
    defer = load(os.path.join(ROOT, KERNEL), "flash_attention_fa61_defer")
    if hasattr(defer, "PERSISTENT_DEFER_STORE"):
        defer.PERSISTENT_DEFER_STORE = True
        files["defer"] = defer
    sass_bad = {}
    if "--no-sass" not in sys.argv and time.time() < deadline:
        sass_bad = {key: v for key, v in sass_checks(files, emit).items() if v}
    emit(f"{'shape':>14s} {'dt':4s} c " + " ".join(f"{n:>9s}" for n in COLUMNS) +
         f" {'main/new':>8s} {'mn/defer':>8s} {'xSDPA mn':>8s} {'xSDPA df':>8s} {'xSDPA ma':>8s} {'xSDPA da':>8s}"
         f" {'sprd':>6s}  (us: mean of 2 rounds; G2: GLUON 2 forced, auto: the file's autotuned pick; xSDPA: sdpa /"
         " the column; sprd: the widest column's round-to-round spread)")
    for shape in SHAPES:
        if time.time() > deadline:
            emit(f"{shape[:6]}: skipped, past the deadline")
            continue
        row = run_shape(shape, files, sass_bad)
        jsonl.write(json.dumps(row) + "\n")
        jsonl.flush()
        emit(line(row))
        wrong = wrong or any("error" in col for col in row["cols"].values())
        torch.cuda.empty_cache()
    emit(f"done in {time.time() - start:.0f} s")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
