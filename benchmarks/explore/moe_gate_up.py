"""Issue 15: fused MoE's gate/up GEMM, the kernel where the MoE's gap to a dense GEMM lies.

    python benchmarks/explore/moe_gate_up.py [--out DIR]

Why: at the Mixtral shape (T 4096, E 8, top 2, hidden 4096, intermediate 14336) the template reads 79% of
a dense GEMM of the same work (bar 90). Its profile (experiments/sweep-h200-session12/worst-shapes/):
moe_gate_up_kernel 3.25 ms at 72% SM issue (about 590 TFLOP/s), moe_down_kernel 1.42 ms at 87% (about
680). Two things the gate/up kernel does that a dense GEMM does not:
- each program makes its own TMA descriptor of w13 (tl.make_tensor_descriptor: a global write and a
  fence a program; the gemm template measured that at -8% at 2048^3 before it moved its descriptors to
  the host);
- A is gathered: each step loads BLOCK_M token rows through pointers (cp.async, an address a row),
  where a dense GEMM's A tile comes by one TMA copy.
Variants, each only the gate/up GEMM (the routing done once before):
- template: moe_gate_up_kernel as the template launches it.
- host-desc: w13 as one host-made descriptor of the (E * 2I, HD) view. The template's in-kernel
  descriptor stops at the expert's last row so that rows past it read zero; here they read the next
  expert's rows, which only feed columns the store masks (gate rows past I are up rows already).
- host-desc + sorted x: also x gathered once into expert-sorted order (x_sorted[r] = x[pair_r // k],
  one torch gather, timed with the kernel) and read by a host descriptor, as a dense GEMM reads A.
Predicted: host-desc +2-4% (a descriptor and a fence per 50 us program); sorted x another +3-8% (the
gather's extra 75 MB cost about 1%); together 0.85-0.9x of the dense GEMM of the same shape, today
about 0.84x. Each variant's h is checked against the template's (same math, same rounding).
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
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import templates  # noqa: E402  (beside this file)

MIXTRAL = (4096, 8, 2, 4096, 14336)  # tokens, experts, top k, hidden, intermediate
MOE = templates.load("fused-moe")
_tile_coords = MOE._tile_coords  # the template's grouped tile order, called by the kernel below


@triton.jit
def gate_up_host_desc(x_ptr, w_desc, a_desc, h_ptr, sorted_ids_ptr, block_expert_ptr, n_pairs, I, num_m_blocks,
                      stride_x, HD: tl.constexpr, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, SORTED_X: tl.constexpr):
    # The template's moe_gate_up_kernel with w13 (and, SORTED_X, the expert-sorted x) read through
    # descriptors made on the host.
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_m_blocks, tl.cdiv(I, BLOCK_N), GROUP_M)
    e = tl.load(block_expert_ptr + pid_m)
    if e < 0:
        return
    offs_r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if not SORTED_X:
        pair = tl.load(sorted_ids_ptr + offs_r)
        valid = pair < n_pairs
        x_ptrs = x_ptr + (pair // TOP_K).to(tl.int64)[:, None] * stride_x + offs_k[None, :]
    gate_row = e * 2 * I + pid_n * BLOCK_N
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, HD, BLOCK_K):
        if SORTED_X:
            a = a_desc.load([pid_m * BLOCK_M, k0])
        else:
            a = tl.load(x_ptrs, mask=valid[:, None], other=0.0)
            x_ptrs += BLOCK_K
        acc_g = tl.dot(a, tl.trans(w_desc.load([gate_row, k0])), acc_g)
        acc_u = tl.dot(a, tl.trans(w_desc.load([gate_row + I, k0])), acc_u)
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    h_ptrs = h_ptr + offs_r.to(tl.int64)[:, None] * I + offs_n[None, :]
    tl.store(h_ptrs, h.to(h_ptr.dtype.element_ty), mask=offs_n[None, :] < I)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    M = MOE
    cfg = dict(M.CONFIG)
    T, E, K, HD, I = MIXTRAL
    torch.manual_seed(0)
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        x = torch.randn(T, HD, device="cuda", dtype=dtype)
        w13 = torch.randn(E, 2 * I, HD, device="cuda", dtype=dtype) / HD ** 0.5
        logits = torch.randn(T, E, device="cuda")
        bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
        weights, sorted_ids, block_expert, num_m_blocks = M.route_and_align(logits, K, bm, cfg["ROUTE_BLOCK_T"])
        n_pairs = T * K
        grid = (num_m_blocks * triton.cdiv(I, bn),)
        h_ref = torch.empty((num_m_blocks * bm, I), device="cuda", dtype=dtype)
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
        w_desc = TensorDescriptor.from_tensor(w13.view(E * 2 * I, HD), [bn, bk])
        x_sorted = torch.empty((num_m_blocks * bm, HD), device="cuda", dtype=dtype)
        a_desc = TensorDescriptor.from_tensor(x_sorted, [bm, bk])
        # rows of blocks past the last expert's (block_expert -1) hold whatever sorted_ids' memory held;
        # padding rows hold the sentinel n_pairs: neither is a pair, and no kernel stores them
        in_use = block_expert.repeat_interleave(bm) >= 0
        is_pair = in_use & (sorted_ids >= 0) & (sorted_ids < n_pairs)
        tokens = torch.where(is_pair, sorted_ids // K, 0).long()  # the gather reads token 0 for the rest

        def template(h):
            M.moe_gate_up_kernel[grid](x, w13, h, sorted_ids, block_expert, n_pairs, HD, I, num_m_blocks, x.stride(0),
                                       TOP_K=K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg["GROUP_M"],
                                       USE_TMA=True, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])

        def host_desc(h, sorted_x=False):
            if sorted_x:
                torch.index_select(x, 0, tokens, out=x_sorted)
            gate_up_host_desc[grid](x, w_desc, a_desc, h, sorted_ids, block_expert, n_pairs, I, num_m_blocks,
                                    x.stride(0), HD=HD, TOP_K=K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                    GROUP_M=cfg["GROUP_M"], SORTED_X=sorted_x, num_warps=cfg["num_warps"],
                                    num_stages=cfg["num_stages"])

        # the dense GEMM of the same work, as the kernel's test defines it: the T * k rows through one expert
        a_dense = torch.randn(n_pairs, HD, device="cuda", dtype=dtype)
        w_dense = w13[0]
        flops = 2.0 * n_pairs * 2 * I * HD
        template(h_ref)
        valid_rows = is_pair.nonzero().squeeze(1)
        variants = [("template", template), ("host-desc", host_desc),
                    ("host-desc + sorted x", lambda h: host_desc(h, True)),
                    ("dense torch.matmul", lambda h: torch.matmul(a_dense, w_dense.T))]
        for name, run in variants:
            row = {"dtype": str(dtype), "variant": name, "shape": list(MIXTRAL)}
            try:
                h = torch.full_like(h_ref, float("nan"))
                run(h)
                torch.cuda.synchronize()
                if not name.startswith("dense"):
                    err = ((h[valid_rows].float() - h_ref[valid_rows].float()).abs().max()
                           / h_ref[valid_rows].float().abs().max()).item()
                    row["max_rel_err_vs_template"] = err
                    if not err < 1e-2:
                        raise AssertionError(f"h differs from the template's: {err:.3g}")
                times = [triton.testing.do_bench(lambda: run(h), warmup=25, rep=200, return_mode="median")
                         for _ in range(3)]
                row["ms"] = statistics.median(times)
                row["tflops"] = flops / row["ms"] * 1e-9
                row["spread_pct"] = 100 * (max(times) - min(times)) / row["ms"]
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {str(e)[-400:]}"
            rows.append(row)
            figure = row.get("error") or f"{row['ms']:.3f} ms {row['tflops']:.0f} TFLOP/s ±{row['spread_pct']:.1f}%"
            print(f"gate/up {str(dtype)[6:]} {name}: {figure}", flush=True)
        dense = next(r for r in rows if r["variant"].startswith("dense") and r["dtype"] == str(dtype))
        for r in rows:
            if r["dtype"] == str(dtype) and "tflops" in r and "tflops" in dense:
                r["of_dense"] = r["tflops"] / dense["tflops"]
        print("  of dense: " + ", ".join(f"{r['variant']} {r.get('of_dense', 0):.3f}" for r in rows
                                         if r["dtype"] == str(dtype)), flush=True)
        (out / "moe_gate_up.json").write_text(json.dumps({"time": time.ctime(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
