"""Issue 15: the fused-MoE template with persistent GEMMs against the template before them, one process.

    git show REV:skills/kernels/fused-moe/triton_template.py > before.py
    python benchmarks/explore/moe_persistent_ab.py --before before.py [--out DIR]      (GPU, about a minute)

Run at commit bfa697a, whose template has the persistent GEMMs, with REV its parent; the template dropped
them after this outcome.

Session 14 measured persistent versions of the two GEMMs apart (benchmarks/explore/moe_persistent.py,
experiments/sweep-h200-session14/call6-moe-persistent/): gate/up 0.864 of a dense GEMM of its rows
against the template's 0.840, down 0.87 against 0.85, the pair 0.870 against 0.844 (bf16). The template
now has them (one program an SM over the tiles of the row blocks in use, counted in the kernel; h stored
by TMA; the tile loop not flattened into the K loop, which cost 10% there). Prediction: the whole layer
+2-3% over the template before them (REV), from 0.84-0.86 to 0.86-0.88 of the dense pair.

Outcome (experiments/sweep-h200-session18/call3-moe-persistent/): falsified. Both sides correct (the
template's own GPU checks passed too, 12 shapes). Of the dense pair in the same rounds, bf16: before
0.833-0.838, persistent 0.812-0.822 (580.5 against 595.2 TFLOP/s at best); fp16: 0.892-0.902 against
0.877-0.881 (598.7 against 606.6). In the layer, with AUTOTUNE picking each side's tile, the persistent GEMMs
lost 1-3% where session 14 timed them 2-3% ahead, each GEMM alone. Not profiled.

Each side is checked against the fp32 reference at a small shape first, then the Mixtral layer (T 4096,
E 8, top 2, hidden 4096, intermediate 14336) is timed by the harness's Timer (L2 cleared, medians, three
repeats) in three interleaved rounds beside the dense GEMM pair of the same work, bf16 then fp16.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "skills/kernels/fused-moe"))
from kgit.harness.timing import Timer, spread_pct  # noqa: E402

import test_fused_moe  # noqa: E402  (its make_inputs: the harness's inputs)

sys.path.insert(0, str(ROOT / "benchmarks/explore"))
import templates  # noqa: E402  (beside this file)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--before", required=True, help="the template file before the change")
    p.add_argument("--out", default=".")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    sides = {"before": templates.load("fused-moe", Path(args.before), "before"),
             "persistent": templates.load("fused-moe")}
    timer = Timer(repeats=3)
    rows = []
    for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        small = test_fused_moe.make_inputs((333, 8, 2, 1024, 2816), dtype, "cuda", "normal")
        for label, T in sides.items():
            ref = T.reference(*small[:5])
            got = T.fused_moe(*small[:5])
            err = ((got.float() - ref).abs().max() / ref.abs().max()).item()
            print(f"check {dname} {label}: max relative error {err:.2e}", flush=True)
            assert err < 2e-2, f"{label} is wrong"
        inputs = test_fused_moe.make_inputs(test_fused_moe.MIXTRAL, dtype, "cuda", "normal")
        x, w13, w2, logits, top_k, x_rep, h_rep = inputs
        flops = 6.0 * x.shape[0] * top_k * x.shape[1] * w2.shape[2]
        outs = torch.empty_like(x)
        runs = {label: (lambda T=T: T.fused_moe(x, w13, w2, logits, top_k, out=outs)) for label, T in sides.items()}
        runs["dense pair"] = lambda: sides["before"].dense_equivalent(x_rep, w13[0], h_rep, w2[0])
        for rnd in range(3):
            for label, fn in runs.items():
                t = timer.times_ms(fn, on_gpu=True)
                row = {"dtype": dname, "round": rnd, "variant": label, "tflops": flops / statistics.median(t) * 1e-9,
                       "spread_pct": spread_pct(t)}
                rows.append(row)
                print(f"{dname} round {rnd} {label}: {row['tflops']:.1f} TFLOP/s ±{row['spread_pct']:.1f}%", flush=True)
        for label in sides:
            mine = [r["tflops"] for r in rows if r["dtype"] == dname and r["variant"] == label]
            dense = [r["tflops"] for r in rows if r["dtype"] == dname and r["variant"] == "dense pair"]
            print(f"{dname} {label}: best {max(mine):.1f} TFLOP/s, {max(mine) / max(dense):.3f} of the dense pair "
                  f"(rounds {', '.join(f'{m / d:.3f}' for m, d in zip(mine, dense))})", flush=True)
    (out / "moe_persistent_ab.json").write_text(json.dumps({"before": args.before, "rows": rows}, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
