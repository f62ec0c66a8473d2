"""Issue 15: where the fused MoE's last gap lies: its gate/up and down GEMMs each against a dense GEMM of
the same work, and the down GEMM on other tiles.

    python benchmarks/explore/moe_down.py [--out DIR]

Why: at the Mixtral shape (T 4096, E 8, top 2, hidden 4096, intermediate 14336) the template reads 83.9%
of a dense GEMM pair of the same FLOPs (session 13, call 7; bar 90). In session 13's call 6 the gate/up
GEMM alone read 0.913 of its dense GEMM. Two thirds of the FLOPs at 0.913 and the whole at 0.839 leave
the down GEMM (one third) near 0.75, if the gather, routing and the sum of the k outputs cost about 2%:
an inference this script measures. Both GEMMs compute padding: each expert's rows are padded to a
multiple of BLOCK_M (about 64 rows of 1024 an expert at BLOCK_M 128, 6%).

Rows, each timed alone (routing, alignment and the gather done once before), bf16 then fp16:
- gate/up: the template's moe_gate_up_kernel, and torch.matmul of the same T * k rows by one expert's
  w13 (the dense GEMM the test compares with).
- down: moe_down_kernel at the template's CONFIG and at other tiles (BLOCK_N, stages, warps, GROUP_M);
  torch.matmul of T * k rows of h by one expert's w2.
- the whole layer (fused_moe with its AUTOTUNE) and the dense pair.
Prediction: gate/up 0.90-0.93 of dense; down 0.72-0.80; a down tile better than CONFIG's by 3-6%.
Every down variant's y is checked against the template's (same math, same rounding).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import templates  # noqa: E402  (beside this file)

MIXTRAL = (4096, 8, 2, 4096, 14336)  # tokens, experts, top k, hidden, intermediate
MOE = templates.load("fused-moe")
# (BLOCK_N, num_stages, num_warps, GROUP_M) of the down GEMM; BLOCK_M and BLOCK_K are the template's
DOWN_TILES = [(256, 4, 8, 8), (128, 4, 8, 8), (256, 3, 8, 8), (128, 5, 8, 8), (128, 3, 4, 8), (256, 4, 8, 1),
              (256, 4, 8, 16), (128, 4, 8, 16)]


def timed(run):
    """Three do_bench medians (warmup 25 ms, rep 200 ms): their median and min-max spread %."""
    times = [triton.testing.do_bench(run, warmup=25, rep=200, return_mode="median") for _ in range(3)]
    ms = statistics.median(times)
    return ms, 100 * (max(times) - min(times)) / ms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = dict(MOE.CONFIG)
    T, E, K, HD, I = MIXTRAL
    n_pairs = T * K
    bm, bk = cfg["BLOCK_M"], cfg["BLOCK_K"]
    torch.manual_seed(0)
    rows = []

    def record(row, flops, run, check=None):
        try:
            if check:
                check()
            row["ms"], row["spread_pct"] = timed(run)
            row["tflops"] = flops / row["ms"] * 1e-9
        except Exception as e:  # a tile that does not fit is a result too
            row["error"] = templates.last_lines(e)
        rows.append(row)
        figure = row.get("error") or f"{row['ms']:.3f} ms {row['tflops']:.0f} TFLOP/s ±{row['spread_pct']:.1f}%"
        print(f"{row['dtype']} {row['gemm']} {row['variant']}: {figure}", flush=True)
        (out / "moe_down.json").write_text(json.dumps({"time": time.ctime(), "rows": rows}, indent=1))
        return row

    for dtype in (torch.bfloat16, torch.float16):
        dt = str(dtype)[6:]
        x = torch.randn(T, HD, device="cuda", dtype=dtype)
        w13 = torch.randn(E, 2 * I, HD, device="cuda", dtype=dtype) / HD ** 0.5
        w2 = torch.randn(E, HD, I, device="cuda", dtype=dtype) / I ** 0.5
        logits = torch.randn(T, E, device="cuda")
        weights, sorted_ids, block_expert, num_m_blocks = MOE.route_and_align(logits, K, bm, cfg["ROUTE_BLOCK_T"])
        padded = int((block_expert >= 0).sum()) * bm
        print(f"{dt}: {n_pairs} pairs in {padded} padded rows ({100 * (padded / n_pairs - 1):.1f}% padding)",
              flush=True)
        x_sorted = torch.empty((num_m_blocks * bm, HD), device="cuda", dtype=dtype)
        MOE.moe_gather_kernel[(num_m_blocks, triton.cdiv(HD, MOE.GATHER_BLOCK_D))](
            x, x_sorted, sorted_ids, block_expert, n_pairs, HD, x.stride(0), TOP_K=K, BLOCK_M=bm,
            BLOCK_D=MOE.GATHER_BLOCK_D, num_warps=4)
        h = torch.empty((num_m_blocks * bm, I), device="cuda", dtype=dtype)
        bn = cfg["BLOCK_N"]
        x_src = TensorDescriptor.from_tensor(x_sorted, [bm, bk])
        w13_src = TensorDescriptor.from_tensor(w13.view(E * 2 * I, HD), [bn, bk])

        def gate_up():
            MOE.moe_gate_up_kernel[(num_m_blocks * triton.cdiv(I, bn),)](
                x_src, w13_src, h, sorted_ids, block_expert, n_pairs, HD, I, num_m_blocks, x.stride(0),
                TOP_K=K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg["GROUP_M"], USE_TMA=True,
                num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])

        gate_up()
        a_dense = torch.randn(n_pairs, HD, device="cuda", dtype=dtype)
        h_dense = torch.randn(n_pairs, I, device="cuda", dtype=dtype)
        up_flops, down_flops = 2.0 * n_pairs * 2 * I * HD, 2.0 * n_pairs * I * HD
        base = dict(dtype=dt, shape=list(MIXTRAL), padded_rows=padded)
        dense_up = record(dict(base, gemm="gate/up", variant="dense torch.matmul"), up_flops,
                          lambda: torch.matmul(a_dense, w13[0].T))
        up = record(dict(base, gemm="gate/up", variant="template"), up_flops, gate_up)

        y_ref = torch.empty((n_pairs, HD), device="cuda", dtype=dtype)

        def down(y, tile):
            dbn, stages, warps, group = tile
            h_src = TensorDescriptor.from_tensor(h, [bm, bk])
            w2_src = TensorDescriptor.from_tensor(w2.view(E * HD, I), [dbn, bk])
            MOE.moe_down_kernel[(num_m_blocks * triton.cdiv(HD, dbn),)](
                h_src, w2_src, y, sorted_ids, block_expert, weights, n_pairs, HD, I, num_m_blocks,
                BLOCK_M=bm, BLOCK_N=dbn, BLOCK_K=bk, GROUP_M=group, USE_TMA=True, num_warps=warps,
                num_stages=stages)

        template_tile = (cfg["DOWN_BLOCK_N"], cfg["DOWN_num_stages"], cfg["num_warps"], cfg["GROUP_M"])
        down(y_ref, template_tile)
        dense_down = record(dict(base, gemm="down", variant="dense torch.matmul"), down_flops,
                            lambda: torch.matmul(h_dense, w2[0].T))
        for tile in [template_tile] + [t for t in DOWN_TILES if t != template_tile]:
            y = torch.full_like(y_ref, float("nan"))

            def check(y=y, tile=tile):
                down(y, tile)
                err = ((y.float() - y_ref.float()).abs().max() / y_ref.float().abs().max()).item()
                if not err < 1e-2:
                    raise AssertionError(f"y differs from the template's: {err:.3g}")

            name = "BLOCK_N {} stages {} warps {} GROUP_M {}".format(*tile)
            record(dict(base, gemm="down", variant=name + (" (CONFIG)" if tile == template_tile else "")),
                   down_flops, lambda y=y, tile=tile: down(y, tile), check)

        moe_out = torch.empty((T, HD), device="cuda", dtype=dtype)
        record(dict(base, gemm="layer", variant="fused_moe at CONFIG"), up_flops + down_flops,
               lambda: MOE.fused_moe(x, w13, w2, logits, K, out=moe_out, config=MOE.CONFIG))
        MOE.fused_moe(x, w13, w2, logits, K, out=moe_out)  # AUTOTUNE picks once
        layer = record(dict(base, gemm="layer", variant="fused_moe", config=dict(MOE.last_config)),
                       up_flops + down_flops, lambda: MOE.fused_moe(x, w13, w2, logits, K, out=moe_out))
        pair = record(dict(base, gemm="layer", variant="dense pair"), up_flops + down_flops,
                      lambda: (torch.matmul(a_dense, w13[0].T), torch.matmul(h_dense, w2[0].T)))
        for r in rows:
            if r["dtype"] != dt or "tflops" not in r:
                continue
            ref = {"gate/up": dense_up, "down": dense_down, "layer": pair}[r["gemm"]]
            if "tflops" in ref:
                r["of_dense"] = r["tflops"] / ref["tflops"]
        print(f"{dt} of dense: gate/up {up.get('of_dense', 0):.3f}, layer {layer.get('of_dense', 0):.3f}; down: "
              + ", ".join(f"{r['variant']} {r.get('of_dense', 0):.3f}" for r in rows
                          if r["dtype"] == dt and r["gemm"] == "down"), flush=True)
        (out / "moe_down.json").write_text(json.dumps({"time": time.ctime(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
