"""Issue 52 (branch fa60): the persistent Gluon kernel (GLUON 2) with consumer 0's S in each causal tile's diagonal
block over the block's first 64 keys alone (_diag_half_qk: a 64 x 64 wgmma where the block's would be 64 x 128,
half of whose scores that consumer's rows mask), at head dim <= 64 only (_persist_consumer's HALF), against main's
file, on an H100.

    export PYTHONPATH=$PWD && python .stage/probe_fa60.py OUT_DIR OLD_FILE DEADLINE_S [--no-sass] [--autotune]

OLD_FILE: main's flash_attention.py (the lead writes .stage/old_fa.py with `git show main:...`). DEADLINE_S: seconds
from the start; the shapes left when it passes are skipped (~180 fits the compiles and the forced pass).
Columns, in one process: at every shape main G2 and new G2 (GLUON 2 forced) and sdpa (torch's default
scaled_dot_product_attention); then, with --autotune and as far as the deadline allows, main auto and new auto
(each file's autotune, its pick named) beside new G2 and sdpa again: a line a shape and pass. First (unless
--no-sass), this Triton's sm_90 compile of each causal kernel the shapes launch from the new file is checked as
tests/kernels/sass_defs.py checks the template (no wgmma descriptor from a block that does not dominate it: Triton
3.6's ptxas fault of fa57; no stack), a kernel that fails is not launched; and its instructions are compared with
main's kernel of the same constexprs: at head dim 128 (gated) they should be the same, which the 1.00 predicted
there rests on. Every column's output (NaN-poisoned before the call) is checked against float64 attention, allowed
twice SDPA's own error or the dtype's floor, and the GLUON each forced launch ran is asserted. Times:
kgit.harness.timing.gpu_median_ms (L2 cleared, medians), two rounds in opposite column orders; the spread of the two
rounds and the prediction print beside each row. Writes OUT_DIR/probe_fa60.jsonl (a line a shape, flushed) and
OUT_DIR/probe_fa60.txt (the SASS lines, the table, a line a shape, the seconds it took)."""
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
# (B, H, S, D, causal, dtype, predicted main/new with GLUON 2 forced): .stage/fa60_notes.md has the arithmetic.
# Head dim 128: main's SASS (gated); head dim 64 causal: the SASS measured at 1.049 / 1.037 before the gate.
SHAPES = [(16, 16, 512, 128, True, "bf16", "1.00 (same SASS)"), (16, 16, 512, 128, True, "fp16", "1.00 (same SASS)"),
          (8, 16, 512, 64, True, "bf16", "1.035-1.06"), (16, 12, 1024, 64, True, "fp16", "1.02-1.05"),
          (4, 16, 4096, 128, True, "bf16", "1.00 (same SASS)"), (64, 12, 512, 64, False, "bf16", "1.00 (same SASS)"),
          (8, 16, 512, 128, True, "bf16", "1.00 (same SASS)"), (16, 16, 768, 64, True, "fp16", "1.025-1.055")]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
FLOOR = {torch.float16: 2e-3, torch.bfloat16: 1e-2}  # max|err| any right 16-bit output may have here
COLUMNS = ["main G2", "new G2", "main auto", "new auto", "sdpa"]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def instructions(sass):
    """A kernel's SASS instruction text, addresses dropped (two kernels the same code compare equal)."""
    return [op for _, op in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?;)", sass)]


def sass_checks(new, main, emit):
    """{(dtype, D): problem or ''} for the new file's causal GLUON 2 kernels the shapes launch; each also compared
    with main's (main's launcher passes DIAGONAL_FIRST, its PERSISTENT_DIAGONAL_FIRST)."""
    import fa59_sass
    from sass_defs import descriptor_reads_not_dominated
    main_consts = {}
    if hasattr(main, "PERSISTENT_DIAGONAL_FIRST"):
        main_consts["DIAGONAL_FIRST"] = main.PERSISTENT_DIAGONAL_FIRST
    results = {}
    for B, H, S, D, causal, dtype, _ in SHAPES:
        if not causal or (dtype, D) in results:
            continue
        kernel = fa59_sass.compile_persist(new, dtype, D, causal)
        sass = fa59_sass.cuobjdump(kernel, "-sass")
        stale = [hex(a) for a, _, _ in descriptor_reads_not_dominated(sass)]
        stack = "STACK:0 " not in fa59_sass.cuobjdump(kernel, "-res-usage")
        results[(dtype, D)] = (f"stale wgmma descriptors at {stale}" if stale else "") + (" stack" if stack else "")
        ours = instructions(sass)
        theirs = instructions(fa59_sass.cuobjdump(fa59_sass.compile_persist(main, dtype, D, causal, **main_consts),
                                                  "-sass"))
        against = "same SASS as main" if ours == theirs else f"{len(ours)} SASS instructions, main {len(theirs)}"
        emit(f"sm_90 compile, new G2 causal {dtype} D{D}: {results[(dtype, D)] or 'clean'}; {against}")
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


def run_shape(shape, main, new, sass_bad, columns):
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
    for name in columns:
        module = main if name.startswith("main") else new
        config = {"GLUON": 2} if name.endswith("G2") else None
        col = row["cols"][name] = {}
        if name == "new G2" and causal and sass_bad.get((dtype_name, D)):
            col["error"] = f"not launched: sm_90 compile {sass_bad[(dtype_name, D)]}"
            continue
        o = torch.full_like(q, float("nan"))
        try:
            module.flash_attention(q, k, v, causal=causal, out=o, config=config)  # the autotune runs here
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 (a column that fails is reported, the others run)
            col["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}"
            continue
        ran = dict(module.last_config)
        col["ran"] = {key: ran.get(key) for key in ("GLUON", "BLOCK_M", "BLOCK_N", "NUM_BUFFERS", "num_warps")}
        err = (o.double() - ref).abs().max().item()  # NaN propagates: a row never written fails
        col["err"] = err
        if err > allowed or (config and ran.get("GLUON") != 2):
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
    picks = "/".join(str(c.get(n, {}).get("ran", {}).get("GLUON", "-")) for n in ("main auto", "new auto"))
    text = (f"{row['shape']:>14s} {row['dtype']:4s} {'y' if row['causal'] else 'n'} {cells} {ratio('main G2', 'new G2')}"
            f" {ratio('sdpa', 'main G2')} {ratio('sdpa', 'new G2')} {ratio('sdpa', 'new auto')} {picks:>5s}"
            f" {100 * spread:5.1f}%  {row['predicted']}")
    for n, col in c.items():
        if "error" in col:
            text += f"\n{'':>14s} {n}: {col['error']}"
    return text


def main():
    out_dir, old_path, deadline_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    start = time.time()
    deadline = start + deadline_s
    os.makedirs(out_dir, exist_ok=True)
    main_module = load(old_path, "flash_attention_main")
    new = load(os.path.join(ROOT, KERNEL), "flash_attention_fa60")
    import triton
    head = (f"probe_fa60: main ({old_path}) against {KERNEL}; torch {torch.__version__}, triton {triton.__version__}, "
            f"{torch.cuda.get_device_name()}\n"
            f"{'shape':>14s} {'dt':4s} c " + " ".join(f"{n:>9s}" for n in COLUMNS) +
            f" {'main/new':>8s} {'xSDPA mn':>8s} {'xSDPA nw':>8s} {'xSDPA na':>8s} {'picks':>5s} {'sprd':>6s}"
            "  predicted main/new (us: mean of 2 rounds; xSDPA: sdpa / main G2, new G2, new auto; picks: GLUON"
            " the autotunes took, main/new; sprd: the widest column's round-to-round spread)")
    txt = open(os.path.join(out_dir, "probe_fa60.txt"), "w")
    jsonl = open(os.path.join(out_dir, "probe_fa60.jsonl"), "w")

    def emit(text):
        print(text, flush=True)
        txt.write(text + "\n")
        txt.flush()

    sass_bad = {}
    if "--no-sass" not in sys.argv:
        sass_bad = {k: v for k, v in sass_checks(new, main_module, emit).items() if v}
    emit(head)
    wrong = False
    # GLUON 2 forced both ways at every shape; then, asked for, the autotunes (each compiles and times its
    # candidates, the longer part) as far as the deadline allows
    phases = [["main G2", "new G2"]] + ([["main auto", "new auto", "new G2"]] if "--autotune" in sys.argv else [])
    for phase in phases:
        for shape in SHAPES:
            if time.time() > deadline:
                emit(f"{shape[:6]} {phase}: skipped, past the deadline")
                continue
            row = run_shape(shape, main_module, new, sass_bad, phase)
            jsonl.write(json.dumps(row) + "\n")
            jsonl.flush()
            emit(line(row))
            wrong = wrong or any("error" in col for col in row["cols"].values())
            torch.cuda.empty_cache()
    emit(f"done in {time.time() - start:.0f} s")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
