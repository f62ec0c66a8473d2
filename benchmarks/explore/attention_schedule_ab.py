"""Issue 15, session 29: the persistent attention kernel (GLUON 2) with its tiles dealt by a list scheduler
(persist_schedule) against the same kernel dealing them in turn, wave after wave (the template before), and
torch's default SDPA, in one process, alternated.

    python benchmarks/explore/attention_schedule_ab.py --before FILE [--also NAME=FILE ...] [--out DIR]
                                                       [--shapes S:D[:causal],...] [--rounds 3] [--hang-s 60]

FILE is the template before the change (`git show REV:skills/kernels/flash-attention/triton_template.py`);
--also adds another version of the template as a side of its own.

Why: at head dim 64 causal S 1024 the persistent kernel read 0.990x the default SDPA in session 28 (ncu:
210.6 against 205.3 us), and the busiest of its 132 programs got 3.1% more key blocks than the mean at
every causal shape of the test's sweep: dealt in turn, program p took tile w * 132 + p of wave w (odd
waves right to left), and 132 is not a multiple of a head's 8-128 query blocks, so heavy and light
tiles did not pair up. The kernel's time is its busiest program's. Dealt as a list scheduler deals them
(each tile, heads in groups and each group's heaviest tiles first, to the program that would finish
first; a tile costing its key blocks plus one), the busiest is within 0.4-0.8% of the mean.
Prediction: causal shapes where GLUON 2 runs 2-3% faster (D64 causal S 1024 from 0.99x to ~1.01x the
default SDPA; D128 causal alike); non-causal level (every tile costs the same: in turn either way).
Each side is checked against the fp32 reference on two (batch, head) pairs first, then timed with kgit's
timer (the median of calls after a clean L2 clear, 3 repeats), A B SDPA in each round.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
import templates  # noqa: E402  (beside this file)

# the test's own sweep shapes (bench_shape: B * S fixed, H by head dim), from the test file itself
_test_file = importlib.util.spec_from_file_location(
    "attention_test", ROOT / "skills" / "kernels" / "flash-attention" / "test_flash_attention.py")
_test = importlib.util.module_from_spec(_test_file)
_test_file.loader.exec_module(_test)
sweep_shape = _test.bench_shape

# where AUTOTUNE took GLUON 2 in session 28 or could, causal first; then two with fewer tiles than SMs
# (a program a tile) and one with a last partial wave of a few tiles
SHAPES = [sweep_shape(S, D, True) for D in (64, 128) for S in (1024, 2048, 4096, 8192)]
SHAPES += [sweep_shape(1024, 64, False), sweep_shape(1024, 128, False), sweep_shape(2048, 128, False)]
SHAPES += [(1, 3, 256, 64, True), (1, 1, 2048, 128, True), (3, 5, 1152, 64, True)]
FORCED = {"GLUON": 2, "AUTOTUNE": 0}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--before", required=True)
    p.add_argument("--also", action="append", default=[], metavar="NAME=FILE")
    p.add_argument("--out", default=".")
    p.add_argument("--shapes", help="the test's sweep shapes of these S:D[:causal] instead of SHAPES")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hang-s", type=float, default=60.0)
    args = p.parse_args()
    out, timer, _, results = templates.begin(args.out)
    sides = {"before": templates.load("flash-attention", args.before, "before"),
             "after": templates.load("flash-attention")}
    for also in args.also:
        name, path = also.split("=", 1)
        sides[name] = templates.load("flash-attention", path, name)
    templates.start_watchdog(args.hang_s)
    started = time.time()
    shapes = SHAPES if not args.shapes else [
        sweep_shape(int(S), int(D), bool(rest)) for S, D, *rest in (text.split(":") for text in args.shapes.split(","))]
    for B, H, S, D, causal in shapes:
        torch.manual_seed(0)
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        ref = sides["after"].reference(q[:1, :2], k[:1, :2], v[:1, :2], causal)
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        label = f"B{B} H{H} S{S} D{D}{' causal' if causal else ''}"
        runs = {name: (lambda T=T: T.flash_attention(q, k, v, causal=causal, out=o, config=FORCED))
                for name, T in sides.items()}
        runs["sdpa"] = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        rows = {name: {"shape": [B, H, S, D], "causal": causal, "side": name, "ms": []} for name in runs}
        for name, run in runs.items():
            o.fill_(float("nan"))
            got = run()
            torch.cuda.synchronize()
            err = ((got[:1, :2].float() - ref).abs().max() / ref.abs().max()).item()
            rows[name]["max_rel_err"] = err
            if not err < 2e-2:
                rows[name]["error"] = f"wrong output: max relative error {err:.3g}"
            elif name in sides and sides[name].last_config.get("GLUON") != 2:  # a failed launch falls back
                rows[name]["error"] = f"GLUON 2 did not run: {sides[name]._GLUON_FAILED}"
        for _ in range(args.rounds):
            for name, run in runs.items():
                if "error" not in rows[name]:
                    rows[name]["ms"].append(statistics.median(timer.times_ms(run, on_gpu=True)))
        for row in rows.values():
            if row["ms"]:
                row["median_ms"] = statistics.median(row["ms"])
                row["tflops"] = flops / row["median_ms"] * 1e-9
                row["spread_pct"] = 100 * (max(row["ms"]) - min(row["ms"])) / row["median_ms"]
            results["rows"].append(row)
        parts = [f"{name} {row['tflops']:.1f} ±{row['spread_pct']:.1f}%" if "tflops" in row else
                 f"{name} {row.get('error')}" for name, row in rows.items()]
        if all("tflops" in row for row in rows.values()):
            parts.append("x SDPA " + " / ".join(f"{name} {rows[name]['tflops'] / rows['sdpa']['tflops']:.3f}"
                                                for name in sides))
        print(f"{label:28s} " + "  ".join(parts), flush=True)
        (out / "attention_schedule_ab.json").write_text(json.dumps(results, indent=1))
        templates.row_done()
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
