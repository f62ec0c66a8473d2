"""Issue 52 (branch fa59): the persistent Gluon kernel (GLUON 2) with each causal tile's diagonal block first
(PERSISTENT_DIAGONAL_FIRST) against main's, on an H100, at causal S 512-1024 and controls.

    cd .stage/wt-fa59 && export PYTHONPATH=$PWD && python .stage/probe_fa59.py OUT_DIR [MAIN_FILE]

Columns, each forced (no autotune), in one process:
- main G2: main's (8efb40c) file, GLUON 2 (`git show 8efb40c:...` into a temp file, or MAIN_FILE);
- first G2: this tree's file, GLUON 2, PERSISTENT_DIAGONAL_FIRST on;
- first G2 2st (head dim 64): the same on 2 K/V stages (PERSISTENT_BUFFERS[64] = 2; 4 since fa56, unmeasured apart);
- main G1: main's one-tile Gluon kernel (GLUON 1, 2 stages): the non-persistent kernel at short causal S;
- main G0 (head dim 64): main's Triton kernel, 64x64 tiles, 4 warps, 3 stages (what the autotune took at 8x16x512x64);
- sdpa: torch's default scaled_dot_product_attention.
First, where PROBE_SASS is not 0, this Triton's sm_90 compile of each diagonal-first kernel the shapes launch is
checked as tests/kernels/sass_defs.py checks the template (no wgmma descriptor from a block that does not dominate
it, fa57's fault of Triton 3.6's ptxas; no stack): a kernel that fails is not launched. Then every column's output
(NaN-poisoned before the call) against float64 attention (torch's math SDPA in float64), allowed twice the default
SDPA's own error or the dtype's floor, and the kernel each launch ran (last_config) asserted. Then times: kgit's
median with the L2 cleared (kgit.harness.timing.gpu_median_ms, held_out_bench's 10 / 40 ms), two rounds in opposite
column orders; the table shows their mean, each round in the JSON. PROBE_DEADLINE (seconds from the start, 220 by
default) skips the shapes left. Writes OUT_DIR/probe_fa59.txt and .jsonl.

PROBE_DRY=1 (a CPU): builds the columns and the main file, compiles the diagonal-first kernels for sm_90 with their
SASS check, launches nothing."""
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
sys.path.insert(0, os.path.join(ROOT, ".stage"))
KERNEL = "skills/kernels/flash-attention/flash_attention.py"
MAIN_COMMIT = "8efb40c"
DRY = os.environ.get("PROBE_DRY", "") not in ("", "0")
SASS = os.environ.get("PROBE_SASS", "1") not in ("", "0")
DEADLINE = time.time() + float(os.environ.get("PROBE_DEADLINE", "220"))
# (B, H, S, D, causal, dtype): issue 52's shapes under the default SDPA, then controls
SHAPES = [(16, 12, 1024, 64, True, "fp16"), (8, 16, 512, 64, True, "bf16"), (16, 16, 512, 128, True, "bf16"),
          (32, 16, 512, 128, True, "fp16"), (16, 16, 768, 64, True, "bf16"),
          (4, 16, 4096, 128, True, "bf16"), (64, 12, 512, 64, False, "bf16"), (4, 16, 3000, 128, True, "bf16"),
          (4, 16, 4096, 64, True, "bf16")]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
FLOOR = {torch.float16: 2e-3, torch.bfloat16: 1e-2}  # max|err| any right 16-bit output may have here
DEVICE = "cuda"  # a CPU smoke run of run_shape and table sets "cpu" (and the interpreter)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main_file(given):
    """main's kernel file: given, or `git show MAIN_COMMIT:KERNEL` from this tree's repository or the one it sits in
    (.stage/wt-fa59 inside the lead's checkout)."""
    if given:
        return given
    for where in (ROOT, os.path.dirname(os.path.dirname(ROOT))):
        shown = subprocess.run(["git", "-C", where, "show", f"{MAIN_COMMIT}:{KERNEL}"], capture_output=True, text=True)
        if shown.returncode == 0:
            path = os.path.join(tempfile.mkdtemp(), "flash_attention_main.py")
            with open(path, "w") as f:
                f.write(shown.stdout)
            return path
    raise SystemExit(f"no git history holding {MAIN_COMMIT} here: pass main's file as the second argument")


def with_globals(module, **values):
    """A call of module.flash_attention with some of its module constants set for the call alone (the launcher reads
    them at each launch)."""
    def call(q, k, v, causal, out, config):
        saved = {name: getattr(module, name) for name in values}
        for name, value in values.items():
            setattr(module, name, value)
        try:
            return module.flash_attention(q, k, v, causal=causal, out=out, config=config)
        finally:
            for name, value in saved.items():
                setattr(module, name, value)
    return call


def columns(main, new, D):
    """[(name, module, call, config, the GLUON it must run)] for head dim D."""
    plain = lambda m: with_globals(m)  # noqa: E731
    cols = [("main G2", main, plain(main), {"GLUON": 2}, 2),
            ("first G2", new, with_globals(new, PERSISTENT_DIAGONAL_FIRST=True), {"GLUON": 2}, 2)]
    if D == 64:
        cols.append(("first G2 2st", new, with_globals(new, PERSISTENT_DIAGONAL_FIRST=True,
                                                        PERSISTENT_BUFFERS={**new.PERSISTENT_BUFFERS, 64: 2}),
                     {"GLUON": 2}, 2))
    cols.append(("main G1", main, plain(main), {"GLUON": 1, "NUM_BUFFERS": 2}, 1))
    if D == 64:
        cols.append(("main G0", main, plain(main), {"GLUON": 0, "BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4,
                                                    "num_stages": 3}, 0))
    return cols


def sass_checks(new, shapes):
    """{(dtype, D, causal, ragged, stages): problem or ''} for the diagonal-first kernels these shapes launch."""
    import fa59_sass
    from sass_defs import descriptor_reads_not_dominated
    results = {}
    for B, H, S, D, causal, dtype in shapes:
        if not causal:
            continue
        for stages in sorted({new.PERSISTENT_BUFFERS[D], 2 if D == 64 else new.PERSISTENT_BUFFERS[D]}):
            key = (dtype, D, causal, S % new.WS_BLOCK_M != 0, stages)
            if key in results:
                continue
            kernel = fa59_sass.compile_persist(new, dtype, D, causal, ragged=key[3], NUM_BUFFERS=stages, DIAGONAL_FIRST=1)
            sass = fa59_sass.cuobjdump(kernel, "-sass")
            usage = fa59_sass.cuobjdump(kernel, "-res-usage")
            stale = [hex(a) for a, _, _ in descriptor_reads_not_dominated(sass)]
            stack = "STACK:0 " not in usage
            results[key] = (f"stale wgmma descriptors at {stale}" if stale else "") + (" stack" if stack else "")
            print(f"sm_90 compile, diagonal first, {key}: {results[key] or 'clean'}", flush=True)
    return results


def reference64(q, k, v, causal):
    """float64 attention (torch's math SDPA), a few heads at a time."""
    B, H, S, D = q.shape
    out = torch.empty(B * H, S, D, dtype=torch.float64, device=q.device)
    flat = [t.reshape(B * H, S, D) for t in (q, k, v)]
    step = max(1, (1 << 28) // (S * S * 8))  # 256 MB of scores at a time
    for i in range(0, B * H, step):
        out[i:i + step] = torch.nn.functional.scaled_dot_product_attention(
            *(t[i:i + step].double() for t in flat), is_causal=causal)
    return out.reshape(B, H, S, D)


def run_shape(shape, main, new, sass_bad, log):
    from kgit.harness import timing
    B, H, S, D, causal, dtype_name = shape
    dtype = DTYPES[dtype_name]
    torch.manual_seed(B * 7919 + S * 31 + D)
    q, k, v = (torch.randn(B, H, S, D, device=DEVICE, dtype=dtype) for _ in range(3))
    ref = reference64(q, k, v, causal)
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    sdpa_err = (sdpa().double() - ref).abs().max().item()
    allowed = max(2 * sdpa_err, FLOOR[dtype])
    row = {"shape": f"{B}x{H}x{S}x{D}", "causal": causal, "dtype": dtype_name, "sdpa_err": sdpa_err,
           "allowed": allowed, "cols": {}}
    fns = {}
    ragged = S % new.WS_BLOCK_M != 0
    for name, module, call, config, gluon in columns(main, new, D):
        col = row["cols"].setdefault(name, {})
        stages = 2 if name.endswith("2st") else new.PERSISTENT_BUFFERS[D]
        problem = sass_bad.get((dtype_name, D, causal, ragged, stages), "") if name.startswith("first") else ""
        if problem:
            col["error"] = f"not launched: sm_90 compile {problem}"
            continue
        o = torch.full_like(q, float("nan"))
        try:
            call(q, k, v, causal, o, config)
            if DEVICE == "cuda":
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 (a column that fails is reported, the others run)
            col["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}"
            continue
        col["ran"] = dict(module.last_config)
        err = (o.double() - ref).abs().max().item()  # NaN propagates: a row never written fails
        col["err"] = err
        ran = module.last_config.get("GLUON")
        col["ok"] = bool(err <= allowed) and ran == gluon
        if not col["ok"]:
            col["error"] = (f"ran GLUON {ran}, not {gluon}; " if ran != gluon else "") + \
                f"max|err| {err:.3g} (allowed {allowed:.3g})"
        if col["ok"]:
            fns[name] = lambda call=call, config=config, o=o: call(q, k, v, causal, o, config)
    fns["sdpa"] = sdpa
    row["cols"].setdefault("sdpa", {})["err"] = sdpa_err
    names = list(fns)
    for rnd, order in enumerate((names, names[::-1])):
        for name in order:
            row["cols"].setdefault(name, {}).setdefault("us", [None, None])[rnd] = \
                timing.gpu_median_ms(fns[name], warmup_ms=10, rep_ms=40) * 1e3
    for col in row["cols"].values():
        if "us" in col:
            col["mean_us"] = sum(col["us"]) / 2
    flops = 4 * B * H * S * S * D / (2 if causal else 1)
    row["tflops"] = {name: flops / (col["mean_us"] * 1e6) for name, col in row["cols"].items() if "mean_us" in col}
    log(json.dumps(row))
    return row


def table(rows, names):
    lines = [f"{'shape':>16s} {'dtype':5s} c " + " ".join(f"{n:>13s}" for n in names) +
             f" {'first/main':>10s} {'first x sdpa':>12s} {'best x sdpa':>11s}  (us, mean of 2 rounds; x: sdpa / it)"]
    for r in rows:
        c = r["cols"]
        def us(n):
            col = c.get(n, {})
            if "mean_us" in col:
                return f"{col['mean_us']:13.1f}"
            return f"{('ERR' if 'error' in col else '-'):>13s}"
        t = {n: col["mean_us"] for n, col in c.items() if "mean_us" in col}
        first = f"{t['main G2'] / t['first G2']:10.3f}" if "main G2" in t and "first G2" in t else f"{'-':>10s}"
        fx = f"{t['sdpa'] / t['first G2']:12.3f}" if "sdpa" in t and "first G2" in t else f"{'-':>12s}"
        ours = [n for n in t if n != "sdpa"]
        best = min(ours, key=t.get) if ours else None
        bx = f"{t['sdpa'] / t[best]:6.3f} {best}" if best and "sdpa" in t else "-"
        lines.append(f"{r['shape']:>16s} {r['dtype']:5s} {'y' if r['causal'] else 'n'} " + " ".join(us(n) for n in names)
                     + f" {first} {fx} {bx:>11s}")
        for n, col in c.items():
            if "error" in col:
                lines.append(f"{'':>16s} {n}: {col['error']}")
    return "\n".join(lines)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out_dir, exist_ok=True)
    main_path = main_file(sys.argv[2] if len(sys.argv) > 2 else None)
    main = load(main_path, "flash_attention_main")
    new = load(os.path.join(ROOT, KERNEL), "flash_attention_fa59")
    assert not new.PERSISTENT_DIAGONAL_FIRST, "the template's default is main's order; the probe turns it on"
    import triton
    head = f"probe_fa59: main {MAIN_COMMIT} ({main_path}) against {KERNEL}; torch {torch.__version__}, triton " \
           f"{triton.__version__}, " + (torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")
    print(head, flush=True)
    for shape in SHAPES:
        print(f"  {shape}: " + ", ".join(n for n, *_ in columns(main, new, shape[3])) + ", sdpa")
    sass_bad = {}
    if SASS or DRY:
        sys.path.insert(0, os.path.join(ROOT, "tests", "kernels"))
        sass_bad = {k: v for k, v in sass_checks(new, SHAPES).items() if v}
    if DRY:
        print("dry: nothing launched" + (f"; sm_90 problems: {sass_bad}" if sass_bad else "; every sm_90 compile clean"))
        return 1 if sass_bad else 0
    jsonl = open(os.path.join(out_dir, "probe_fa59.jsonl"), "w")

    def log(line):
        jsonl.write(line + "\n")
        jsonl.flush()

    rows = []
    for shape in SHAPES:
        if time.time() > DEADLINE:
            print(f"  {shape}: skipped, out of time", flush=True)
            continue
        start = time.time()
        rows.append(run_shape(shape, main, new, sass_bad, log))
        print(f"  {shape}: {time.time() - start:.1f} s", flush=True)
        torch.cuda.empty_cache()
    names = ["main G2", "first G2", "first G2 2st", "main G1", "main G0", "sdpa"]
    text = head + "\n" + table(rows, names)
    print(text)
    with open(os.path.join(out_dir, "probe_fa59.txt"), "w") as f:
        f.write(text + "\n")
    wrong = [r["shape"] for r in rows for c in r["cols"].values() if "error" in c]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
