"""GEMM: stream-K for the last partial wave of a persistent grid (issue 15, session 18).

    python benchmarks/explore/gemm_stream_k.py [--out DIR]      (GPU, about three minutes)

Run it at commit 2e372b8, whose template has STREAM_K (the experiment's kernel, `_stream_k_tiles`); the
template dropped it after this outcome.

Why: 4096^3 reads 0.989x cuBLAS in bf16 and fp16 (bar 1.00) with CONFIG, the best of the 288
configurations of CONFIG_SPACE. Its persistent grid of 132 programs takes 512 tiles of 128x256 in
waves: 116 programs run four tiles and 16 run three, so 3% of the SMs' time is idle (3.88 waves). 8192^3
is 2048 tiles, 15.52 waves: 3% idle too. The template's STREAM_K shares the last partial wave and one
wave before it out by K-steps (stream_k_start): every program ends together, at the cost of one fp32
partial tile (128 KB) written and read back through L2 for each shared tile.

Prediction: +2-3% at 4096^3, 8192^3 and 4000^3 (512 tiles too), less the exchange (at most one partial
per owner, written early in the helper's range): 4096^3 from 0.99 to 1.01-1.02x cuBLAS; 8192x1024x8192 (256
tiles, 1.94 waves, all shared) and 4096x4096x1000 (512 tiles) likewise. No change at 2048^3 (128 tiles,
under one wave: whole tiles).

Each variant is checked (NaN-poisoned output against an fp32 product) on its shape, then timed by the
harness's Timer (L2 cleared, the sweep's figure) in three interleaved rounds beside torch.matmul; the
stream-K path is also checked on shapes that stress its edges (133 tiles, K not a multiple of BLOCK_K,
one K-step a tile).
Outcome (experiments/sweep-h200-session18/call1-stream-k/): falsified, slower at every shape it touches.
Correct everywhere (relative error 1.7e-3 bf16, 2.1e-4 fp16, as whole tiles, three launches in a row at
each edge shape). Best of three rounds, x torch.matmul in the same run, bf16 / fp16:
4096^3 stream-K 0.875 / 0.880 against whole tiles 0.991 / 0.990; 4000^3 0.859 / 0.861 against 0.976 /
0.968; 8192x1024x8192 0.797 / 0.807 against 0.988 / 0.987; 4096x4096x1000 0.776 / 0.784 against 0.996 /
0.996; 8192^3 1.011 / 1.011 against 1.012 / 1.013 (its shared part is a tenth of the work); 2048^3
unchanged (one wave: whole tiles). At 4096^3 the shared 1.88 tiles a program took ~28% longer than whole
tiles would; at K 1000 (A and B 16 MB, in L2 whatever the order) ~5 us more a segment. Not profiled;
what the compile shows: the fixup (`acc += tl.load(partial)`) takes the kernel from 162 to 255
registers with 216 B of spills, and the fp32 tile crosses shared memory twice (convert_layout from the
wgmma layout to a blocked one and back) in every segment; and, at 4096^3, ranges that start at staggered
K-steps no longer read the same K-slices of A and B at once, as a wave of whole tiles does, with A and B
(64 MB) larger than the L2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)
from kgit.harness.timing import Timer, spread_pct  # noqa: E402

T = templates.load("gemm")

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4000, 4000, 4000), (8192, 1024, 8192), (4096, 4096, 1000),
          (2048, 2048, 2048)]
EDGE_SHAPES = [(2432, 1792, 4096), (2432, 1792, 4097), (4352, 4096, 64), (8320, 8192, 1000), (1000, 33000, 300)]
VARIANTS = [  # (label, config over CONFIG); AUTOTUNE off: each is what it says
    ("stream-K", {"STREAM_K": 1, "AUTOTUNE": 0}),
    ("whole tiles", {"STREAM_K": 0, "AUTOTUNE": 0}),
    ("stream-K subtile s4", {"STREAM_K": 1, "EPILOGUE_SUBTILE": 1, "num_stages": 4, "AUTOTUNE": 0}),
    ("non-persistent s4", {"PERSISTENT": 0, "num_stages": 4, "AUTOTUNE": 0}),
]


def rel_err(c, ref):
    return ((c.float() - ref).norm() / ref.norm()).item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    timer = Timer(repeats=3)
    rows, checks = [], []
    for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        for M, N, K in EDGE_SHAPES:  # the stream-K path against an fp32 product, several launches in a row
            a, b = torch.randn(M, K, device="cuda").to(dtype), torch.randn(K, N, device="cuda").to(dtype)
            c = torch.empty(M, N, device="cuda", dtype=dtype)
            ref = T.reference(a, b)
            errs = []
            for _ in range(3):
                c.fill_(float("nan"))
                T.gemm(a, b, out=c, config=VARIANTS[0][1])
                errs.append(rel_err(c, ref))
            tiles = -(-M // 128) * -(-N // 256)
            checks.append({"dtype": dname, "shape": [M, N, K], "tiles": tiles,
                           "stream_from": T.stream_k_start(tiles, min(132, tiles)), "rel_errs": errs})
            print(f"check {dname} {M}x{N}x{K}: tiles {tiles}, stream from {checks[-1]['stream_from']}, "
                  f"relative errors {['%.2e' % e for e in errs]}", flush=True)
    for M, N, K in SHAPES:
        flops = 2 * M * N * K
        for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            a, b = torch.randn(M, K, device="cuda").to(dtype), torch.randn(K, N, device="cuda").to(dtype)
            c = torch.empty(M, N, device="cuda", dtype=dtype)
            ref = T.reference(a, b)
            runs = [("torch", None, lambda: torch.matmul(a, b, out=c))]
            runs += [(label, cfg, lambda cfg=cfg: T.gemm(a, b, out=c, config=cfg)) for label, cfg in VARIANTS]
            for rnd in range(args.rounds):
                for label, cfg, fn in runs:
                    row = {"shape": [M, N, K], "dtype": dname, "variant": label, "config": cfg, "round": rnd}
                    try:
                        c.fill_(float("nan"))
                        fn()
                        torch.cuda.synchronize()
                        row["rel_err"] = rel_err(c, ref)
                        if not row["rel_err"] < 1e-2:
                            row["error"] = f"wrong output: relative error {row['rel_err']:.3g}"
                        else:
                            t = timer.times_ms(fn, on_gpu=True)
                            row["tflops"] = flops / statistics.median(t) * 1e-9
                            row["spread_pct"] = spread_pct(t)
                    except Exception as e:  # a variant that does not compile or fit is a result too
                        row["error"] = templates.last_lines(e)
                    rows.append(row)
                    print(f"{M}x{N}x{K} {dname} round {rnd} {label}: " + (row.get("error") or
                          f"{row['tflops']:.1f} TFLOP/s ±{row['spread_pct']:.1f}%"), flush=True)
            (out / "gemm_stream_k.json").write_text(json.dumps({"checks": checks, "rows": rows}, indent=1))
    summary = []
    for M, N, K in SHAPES:
        for dname in ("bf16", "fp16"):
            mine = [r for r in rows if r["shape"] == [M, N, K] and r["dtype"] == dname and "tflops" in r]
            best = {}
            for r in mine:
                best[r["variant"]] = max(best.get(r["variant"], 0), r["tflops"])
            torch_best = best.pop("torch", None)
            if torch_best:
                summary.append(f"{M}x{N}x{K} {dname}: torch {torch_best:.1f}; " +
                               ", ".join(f"{v} {t:.1f} ({t / torch_best:.3f}x)" for v, t in best.items()))
    (out / "summary.txt").write_text("\n".join(summary) + "\n")
    print("\n".join(summary))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
