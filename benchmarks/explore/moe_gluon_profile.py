"""Issue 15: the fused-MoE layer's kernels at the Mixtral shape, for Nsight Compute: the Triton GEMMs
(GLUON 0), the warp-specialized Gluon GEMMs (GLUON 1) and the dense GEMM pair of the same work (cuBLAS),
each launched once inside an NVTX range "profiled" after a warm-up call.

    ncu --clock-control none --nvtx --nvtx-include "profiled/" --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section Occupancy python benchmarks/explore/moe_gluon_profile.py [bf16]
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import templates  # noqa: E402  (beside this file)

T, E, K, HD, I = 4096, 8, 2, 4096, 14336  # Mixtral: tokens, experts, top k, hidden, intermediate


def main():
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[sys.argv[1] if len(sys.argv) > 1 else "bf16"]
    m = templates.load("fused-moe")
    torch.manual_seed(0)
    x = torch.randn(T, HD, device="cuda", dtype=dtype)
    w13 = torch.randn(E, 2 * I, HD, device="cuda", dtype=dtype) * HD ** -0.5
    w2 = torch.randn(E, HD, I, device="cuda", dtype=dtype) * I ** -0.5
    logits = torch.randn(T, E, device="cuda")
    x_rep = torch.randn(T * K, HD, device="cuda", dtype=dtype)
    h_rep = torch.randn(T * K, I, device="cuda", dtype=dtype)
    out = torch.empty_like(x)
    runs = {f"GLUON {g}": lambda g=g: m.fused_moe(x, w13, w2, logits, K, out=out, config={**m.CONFIG, "GLUON": g})
            for g in (0, 1)}
    runs["dense pair"] = lambda: m.dense_equivalent(x_rep, w13[0], h_rep, w2[0])
    for run in runs.values():
        run()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("profiled")  # the kernels' names tell the sides apart
    for run in runs.values():
        run()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main()
