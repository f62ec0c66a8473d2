"""Issue 15: the fused MoE template with and without tail tiles (TAIL_M 64 / 0) against the dense GEMM pair
of the same work (T*k rows through one expert), interleaved over three rounds at Mixtral's shape, bf16 and
fp16 (GPU, about a minute). Each layer's output is checked against the fp32 reference first.

    python benchmarks/explore/moe_tail_ab.py
"""
import sys
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "skills" / "kernels" / "fused-moe"))
import triton_template as T  # noqa: E402

TOKENS, E, TOP_K, HD, I = 4096, 8, 2, 4096, 14336


def main():
    for dtype in (torch.bfloat16, torch.float16):
        g = torch.Generator(device="cuda").manual_seed(1)

        def randn(*shape, scale=1.0, dt=dtype):
            return torch.randn(*shape, device="cuda", dtype=dt, generator=g) * scale

        x = randn(TOKENS, HD)
        w13 = randn(E, 2 * I, HD, scale=HD ** -0.5)
        w2 = randn(E, HD, I, scale=I ** -0.5)
        logits = randn(TOKENS, E, dt=torch.float32)
        x_rep, h_rep = randn(TOKENS * TOP_K, HD), randn(TOKENS * TOP_K, I)
        ref = T.reference(x, w13, w2, logits, TOP_K)
        runs = {"tail64": lambda: T.fused_moe(x, w13, w2, logits, TOP_K, config={"TAIL_M": 64}),
                "tail0": lambda: T.fused_moe(x, w13, w2, logits, TOP_K, config={"TAIL_M": 0}),
                "dense": lambda: T.dense_equivalent(x_rep, w13[0], h_rep, w2[0])}
        for name in ("tail64", "tail0"):
            out = runs[name]()
            print(dtype, name, "relative error", f"{((out.float() - ref).norm() / ref.norm()).item():.2e}", flush=True)
        ms = {name: [] for name in runs}
        for _ in range(3):
            for name, run in runs.items():
                ms[name].append(do_bench(run, warmup=25, rep=200, return_mode="median"))
        dense = sorted(ms["dense"])[1]
        for name in runs:
            median = sorted(ms[name])[1]
            print(dtype, name, "ms", [round(v, 3) for v in ms[name]], f"of dense {dense / median:.3f}", flush=True)


if __name__ == "__main__":
    main()
