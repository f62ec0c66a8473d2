"""Branch fa62 on one H100: the persistent Gluon kernel (GLUON 2) at head dim 128 with a third V stage and O stored
by pointers (this branch's launcher: 2 K + 3 V stages, two Q tiles a consumer), against main's file, the other way
to fit a third stage (3 K + 3 V, one Q tile a consumer) and O by pointers alone (2 + 2 stages), torch's default
SDPA beside. Predictions and their arithmetic: .stage/fa62_notes.md.

    export PYTHONPATH=$PWD
    git show main:skills/kernels/flash-attention/flash_attention.py > .stage/old_fa.py
    python .stage/probe_fa62.py OUT_DIR .stage/old_fa.py 280

Columns: "main G2" (main's file, GLUON 2 forced), "new G2" (this branch's), "kv3q1 G2" and "direct G2" (this
branch's file loaded again as modules of their own with the launcher's head-dim-128 tables changed), "main auto"
and "new auto" (each file's autotuned pick, on the shapes marked so: ~6 compiles each), "sdpa". At each shape
every column's output (NaN-poisoned before the call) is checked against float64 attention, allowed twice SDPA's
own error or the dtype's floor, and the GLUON each launch ran is recorded (asserted 2 where forced), before any
timing; a column that fails is reported and not timed. Times: kgit.harness.timing.gpu_median_ms (L2 cleared,
medians), two rounds in opposite column orders; the rounds' widest spread and the prediction print beside each
row. DEADLINE_S: seconds from the start; shapes left when it passes are skipped, and an autotune is skipped with
under 90 s left. Writes OUT_DIR/probe_fa62.txt (every line printed, flushed as it goes) and OUT_DIR/probe_fa62.jsonl
(a line a shape). The sm_90 compiles (shared memory, spills, stale descriptors, main's SASS with the switch off)
were checked on the CPU under Triton 3.6 (.stage/fa62_sass.py; fa62_notes.md has the results)."""
import importlib.util
import json
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
KERNEL = "skills/kernels/flash-attention/flash_attention.py"
# (B, H, S, D, causal, dtype, autotune columns too, prediction: main G2 time / each column's), in the order they
# matter, so that a deadline cuts the least
SHAPES = [(16, 16, 512, 128, True, "bf16", True, "new 1.03-1.07, kv3q1 0.83-0.97, direct 0.99-1.01; "
                                                 "main G2 0.96-0.975x SDPA, new 0.99-1.04x"),
          (8, 16, 512, 64, True, "bf16", False, "new 1.00 (main's SASS), within the spread"),
          (4, 16, 4096, 128, True, "bf16", False, "new 1.02-1.05, kv3q1 0.98-1.04, direct 0.99-1.01"),
          (8, 16, 512, 128, True, "bf16", False, "new 1.02-1.06, kv3q1 0.83-0.97, direct 0.99-1.01"),
          (1, 24, 4608, 128, False, "bf16", True, "new 1.00-1.04, kv3q1 0.97-1.03, direct 0.99-1.01"),
          (16, 16, 512, 128, True, "fp16", False, "new 1.03-1.07, kv3q1 0.83-0.97, direct 0.99-1.01")]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
FLOOR = {torch.float16: 2e-3, torch.bfloat16: 1e-2}  # max|err| any right 16-bit output may have here
COLUMNS = ["main G2", "new G2", "kv3q1 G2", "direct G2", "main auto", "new auto", "sdpa"]
# the variants' head-dim-128 tables (the launcher's globals, read at each call); head dim 64 runs no variant
VARIANTS = {"kv3q1": dict(PERSISTENT_BUFFERS={64: 4, 128: 3}, PERSISTENT_V_BUFFERS={64: 4, 128: 3},
                          PERSISTENT_Q_SLOTS=1, PERSISTENT_O_STAGED={64: True, 128: False}),
            "direct": dict(PERSISTENT_BUFFERS={64: 4, 128: 2}, PERSISTENT_V_BUFFERS={64: 4, 128: 2},
                           PERSISTENT_O_STAGED={64: True, 128: False})}


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def run_shape(shape, files, autotune):
    from kgit.harness import timing
    B, H, S, D, causal, dtype_name, _, predicted = shape
    dtype = DTYPES[dtype_name]
    q, k, v, ref, sdpa_err, allowed = inputs(B, H, S, D, causal, dtype)
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    row = {"shape": f"{B}x{H}x{S}x{D}", "causal": causal, "dtype": dtype_name, "predicted": predicted,
           "sdpa_err": sdpa_err, "allowed": allowed, "cols": {"sdpa": {"err": sdpa_err}}}
    fns = {"sdpa": sdpa}
    for name in COLUMNS[:-1]:
        file, how = name.split()
        if (how == "auto" and not autotune) or (file in VARIANTS and D != 128):
            continue
        module = files[file]
        col = row["cols"][name] = {}
        config = {"GLUON": 2} if how == "G2" else None
        o = torch.full_like(q, float("nan"))
        try:
            module.flash_attention(q, k, v, causal=causal, out=o, config=config)  # autotunes here where config None
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 (a column that fails is reported, the others run)
            col["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}"
            continue
        ran = dict(module.last_config)
        col["ran"] = {key: ran.get(key) for key in ("GLUON", "NUM_BUFFERS", "V_BUFFERS")}
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
    picks = " ".join(f"{n}: {c[n]['ran']}" for n in ("main auto", "new auto") if "ran" in c.get(n, {}))
    text = (f"{row['shape']:>14s} {row['dtype']:4s} {'y' if row['causal'] else 'n'} {cells}"
            f" {ratio('main G2', 'new G2')} {ratio('main G2', 'kv3q1 G2')} {ratio('main G2', 'direct G2')}"
            f" {ratio('sdpa', 'main G2')} {ratio('sdpa', 'new G2')} {ratio('sdpa', 'main auto')}"
            f" {ratio('sdpa', 'new auto')} {100 * spread:5.1f}%  [{picks}]  predicted: {row['predicted']}")
    for n, col in c.items():
        if "error" in col:
            text += f"\n{'':>14s} {n}: {col['error']}"
    return text


def main():
    out_dir, old_path, deadline_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    start = time.time()
    deadline = start + deadline_s
    os.makedirs(out_dir, exist_ok=True)
    txt = open(os.path.join(out_dir, "probe_fa62.txt"), "w")
    jsonl = open(os.path.join(out_dir, "probe_fa62.jsonl"), "w")

    def emit(text):
        print(text, flush=True)
        txt.write(text + "\n")
        txt.flush()

    import triton
    emit(f"probe_fa62: torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    files = {"main": load(old_path, "flash_attention_main"), "new": load(os.path.join(ROOT, KERNEL), "fa62_new")}
    for name, tables in VARIANTS.items():
        files[name] = load(os.path.join(ROOT, KERNEL), f"fa62_{name}")
        for key, value in tables.items():
            setattr(files[name], key, value)
    emit(f"{'shape':>14s} {'dt':4s} c " + " ".join(f"{n:>9s}" for n in COLUMNS) +
         f" {'mn/new':>8s} {'mn/kv3q1':>8s} {'mn/dir':>8s} {'xSDPA mn':>8s} {'xSDPA nw':>8s} {'xSDPA ma':>8s}"
         f" {'xSDPA na':>8s} {'sprd':>6s}  (us: mean of 2 rounds; G2: GLUON 2 forced, auto: the file's autotuned"
         " pick; mn/X: main G2's time / X's; xSDPA: sdpa's time / the column's; sprd: the widest round-to-round"
         " spread)")
    wrong = False
    for shape in SHAPES:
        left = deadline - time.time()
        if left < 0:
            emit(f"{shape[:6]}: skipped, past the deadline")
            continue
        row = run_shape(shape, files, autotune=shape[6] and left > 90)
        jsonl.write(json.dumps(row) + "\n")
        jsonl.flush()
        emit(line(row))
        wrong = wrong or any("error" in col for col in row["cols"].values())
        torch.cuda.empty_cache()
    emit(f"done in {time.time() - start:.0f} s")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
