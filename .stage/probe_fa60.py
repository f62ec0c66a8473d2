"""Branch fa60, step 3: the persistent Gluon kernel (GLUON 2) three ways on an H100, GLUON 2 forced in each: main's
file ("main"), this branch's as committed ("new": the half diagonal at head dim <= 64) and this branch's with
PERSISTENT_PV_WAIT_BEFORE_SOFTMAX on ("pv": each block-loop step waits for S_j and P_{j-1} V_{j-1} at once, then runs
its softmax, which Triton 3.6's ptxas placed after the P V wait in some kernels and before it in others; the kernels
with it after ran faster, fa60_notes.md).

    export PYTHONPATH=$PWD && python .stage/probe_fa60.py OUT_DIR OLD_FILE DEADLINE_S [--no-sass]

OLD_FILE: main's flash_attention.py (`git show main:skills/kernels/flash-attention/flash_attention.py`). DEADLINE_S:
seconds from the start; the shapes left when it passes are skipped (~180 fits the compiles and the timing: about
9 sm_90 compiles for the SASS lines, 3 files x 3 causal kernels, and 15 at launch, 3 files x 5 kernels).
"pv" is the branch's file loaded a second time as a module of its own with the switch set, so its kernels and
caches are its own (the switch reaches the kernel as a constexpr at launch, as PERSISTENT_Q_SLOTS does).
First (unless --no-sass), this Triton's sm_90 compile of each causal kernel the shapes launch, from each file: its
block loops' softmax placement a consumer (.stage/fa60_softmax_place.py), and for new and pv the check of
tests/kernels/sass_defs.py (no wgmma descriptor from a block that does not dominate it: Triton 3.6's ptxas fault of
fa57; no stack), a kernel that fails it not launched; new's instructions are compared with main's (at head dim 128
they should be the same). Then at each shape every column's output (NaN-poisoned before the call) is checked
against float64 attention, allowed twice SDPA's own error or the dtype's floor, and the GLUON each launch ran is
asserted, before any timing. Times: kgit.harness.timing.gpu_median_ms (L2 cleared, medians), two rounds in
opposite column orders; the spread of the two rounds and the predictions print beside each row. Writes
OUT_DIR/probe_fa60.jsonl (a line a shape, flushed) and OUT_DIR/probe_fa60.txt (the SASS lines, the table, a line a
shape, the seconds it took)."""
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
# (B, H, S, D, causal, dtype, predicted main/new and main/pv with GLUON 2 forced): .stage/fa60_notes.md has the
# arithmetic. new at head dim 128 and without causal is main's SASS; pv moves every block loop's softmax after the
# P V wait (main: D128 causal after for both consumers; D64 causal before for both; without causal split or before).
SHAPES = [(16, 16, 512, 128, True, "bf16", "new 1.00 (same SASS); pv 0.985-1.01"),
          (8, 16, 512, 128, True, "bf16", "new 1.00 (same SASS); pv 0.985-1.01"),
          (8, 16, 512, 64, True, "bf16", "new 1.035-1.06; pv 1.035-1.08"),
          (16, 12, 1024, 64, True, "fp16", "new 1.02-1.05; pv 1.02-1.07"),
          (16, 16, 768, 64, True, "fp16", "new 1.025-1.055; pv 1.025-1.075"),
          (4, 16, 4096, 128, True, "bf16", "new 1.00 (same SASS); pv 0.985-1.01"),
          (4, 16, 4096, 64, True, "bf16", "new 1.00-1.03; pv 1.00-1.05"),
          (64, 12, 512, 64, False, "bf16", "new 1.00 (same SASS); pv 0.98-1.03"),
          (8, 16, 2048, 128, False, "bf16", "new 1.00 (same SASS); pv 0.99-1.02")]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
FLOOR = {torch.float16: 2e-3, torch.bfloat16: 1e-2}  # max|err| any right 16-bit output may have here
COLUMNS = ["main G2", "new G2", "pv G2", "sdpa"]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def instructions(sass):
    """A kernel's SASS instruction text, addresses dropped (two kernels the same code compare equal)."""
    return [op for _, op in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?;)", sass)]


def launch_constexprs(module):
    """The constexprs a file's launcher passes beyond .stage/fa59_sass.py's defaults (main: DIAGONAL_FIRST)."""
    consts = {}
    if hasattr(module, "PERSISTENT_DIAGONAL_FIRST"):
        consts["DIAGONAL_FIRST"] = module.PERSISTENT_DIAGONAL_FIRST
    if getattr(module, "PERSISTENT_PV_WAIT_BEFORE_SOFTMAX", False):
        consts["PV_WAIT_BEFORE_SOFTMAX"] = True
    return consts


def sass_checks(files, emit):
    """{(file, dtype, D): problem or ''} for new's and pv's causal GLUON 2 kernels the shapes launch; a line a kernel
    and file with its block loops' softmax placement, new's compared with main's."""
    import fa59_sass
    from fa60_softmax_place import describe
    from sass_defs import descriptor_reads_not_dominated
    results = {}
    for B, H, S, D, causal, dtype, _ in SHAPES:
        if not causal or ("new", dtype, D) in results:
            continue
        sass_of = {}
        for name, module in files.items():
            kernel = fa59_sass.compile_persist(module, dtype, D, causal, **launch_constexprs(module))
            sass_of[name] = sass = fa59_sass.cuobjdump(kernel, "-sass")
            facts = describe(kernel)
            where = ", ".join(f"{c} {loop['softmax']} ({loop['instructions']} instructions)"
                              for c, loop in sorted(facts["loops"].items()))
            problem = ""
            if name != "main":
                stale = [hex(a) for a, _, _ in descriptor_reads_not_dominated(sass)]
                problem = f"stale wgmma descriptors at {stale}" if stale else ""
                problem += " stack" if facts["stack"] else ""
                results[(name, dtype, D)] = problem
            against = ""
            if name == "new":
                same = instructions(sass) == instructions(sass_of["main"])
                against = "; same SASS as main" if same else "; not main's SASS"
            emit(f"sm_90 compile, {name} G2 causal {dtype} D{D}: {problem or 'clean'}, {facts['instructions']} "
                 f"instructions; block loop softmax vs the P V wait: {where}{against}")
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


def run_shape(shape, files, sass_bad):
    from kgit.harness import timing
    B, H, S, D, causal, dtype_name, predicted = shape
    dtype = DTYPES[dtype_name]
    torch.manual_seed(B * 7919 + S * 31 + D)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(3))
    ref = reference64(q, k, v, causal)
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    sdpa_err = (sdpa().double() - ref).abs().max().item()
    allowed = max(2 * sdpa_err, FLOOR[dtype])
    row = {"shape": f"{B}x{H}x{S}x{D}", "causal": causal, "dtype": dtype_name, "predicted": predicted,
           "sdpa_err": sdpa_err, "allowed": allowed, "cols": {"sdpa": {"err": sdpa_err}}}
    fns = {"sdpa": sdpa}
    for file, module in files.items():
        name, config = f"{file} G2", {"GLUON": 2}
        col = row["cols"][name] = {}
        if causal and sass_bad.get((file, dtype_name, D)):
            col["error"] = f"not launched: sm_90 compile {sass_bad[(file, dtype_name, D)]}"
            continue
        o = torch.full_like(q, float("nan"))
        try:
            module.flash_attention(q, k, v, causal=causal, out=o, config=config)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 (a column that fails is reported, the others run)
            col["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}"
            continue
        ran = dict(module.last_config)
        col["ran"] = {key: ran.get(key) for key in ("GLUON", "BLOCK_M", "BLOCK_N", "NUM_BUFFERS", "num_warps")}
        err = (o.double() - ref).abs().max().item()  # NaN propagates: a row never written fails
        col["err"] = err
        if err > allowed or ran.get("GLUON") != 2:
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
    text = (f"{row['shape']:>14s} {row['dtype']:4s} {'y' if row['causal'] else 'n'} {cells}"
            f" {ratio('main G2', 'new G2')} {ratio('main G2', 'pv G2')} {ratio('new G2', 'pv G2')}"
            f" {ratio('sdpa', 'main G2')} {ratio('sdpa', 'new G2')} {ratio('sdpa', 'pv G2')} {100 * spread:5.1f}%"
            f"  {row['predicted']}")
    for n, col in c.items():
        if "error" in col:
            text += f"\n{'':>14s} {n}: {col['error']}"
    return text


def main():
    out_dir, old_path, deadline_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    start = time.time()
    deadline = start + deadline_s
    os.makedirs(out_dir, exist_ok=True)
    pv = load(os.path.join(ROOT, KERNEL), "flash_attention_fa60_pv")
    pv.PERSISTENT_PV_WAIT_BEFORE_SOFTMAX = True
    files = {"main": load(old_path, "flash_attention_main"),
             "new": load(os.path.join(ROOT, KERNEL), "flash_attention_fa60"), "pv": pv}
    import triton
    head = (f"probe_fa60: main ({old_path}) against {KERNEL}, as committed (new) and with "
            f"PERSISTENT_PV_WAIT_BEFORE_SOFTMAX (pv); torch {torch.__version__}, triton {triton.__version__}, "
            f"{torch.cuda.get_device_name()}\n"
            f"{'shape':>14s} {'dt':4s} c " + " ".join(f"{n:>9s}" for n in COLUMNS) +
            f" {'main/new':>8s} {'main/pv':>8s} {'new/pv':>8s} {'xSDPA mn':>8s} {'xSDPA nw':>8s} {'xSDPA pv':>8s}"
            f" {'sprd':>6s}  predicted main/new, main/pv (us: mean of 2 rounds, GLUON 2 forced; xSDPA: sdpa / the"
            " column; sprd: the widest column's round-to-round spread)")
    txt = open(os.path.join(out_dir, "probe_fa60.txt"), "w")
    jsonl = open(os.path.join(out_dir, "probe_fa60.jsonl"), "w")

    def emit(text):
        print(text, flush=True)
        txt.write(text + "\n")
        txt.flush()

    sass_bad = {}
    if "--no-sass" not in sys.argv:
        sass_bad = {k: v for k, v in sass_checks(files, emit).items() if v}
    emit(head)
    wrong = False
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
