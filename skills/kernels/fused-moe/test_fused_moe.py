"""Test for the fused-MoE template: checks, times, prints the kgit contract JSON (tflops).

    python skills/kernels/fused-moe/test_fused_moe.py --json     # checks + headline (Mixtral shape)
    python skills/kernels/fused-moe/test_fused_moe.py --sweep    # Mixtral + the small-experts shape
    TRITON_INTERPRET=1 python skills/kernels/fused-moe/test_fused_moe.py --json

speedup is against the per-expert torch loop; dense_tflops is one dense GEMM pair of the same work
(T*k rows through the gate/up and the down projection of a single expert, torch.matmul).
"""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))

from kgit import bench_compute as bc  # noqa: E402

T = bc.load_sibling(__file__, "triton_template", "kgit_fused_moe_template")

# (tokens, experts, top_k, hidden, intermediate)
MIXTRAL = (4096, 8, 2, 4096, 14336)
SMALL = (2048, 64, 8, 2048, 1024)          # many small experts: an OLMoE-1B-7B layer over 2048 tokens
BENCH = [MIXTRAL, SMALL]


def problem(tokens, E, top_k, HD, I, dtype_name):
    import torch

    dtype = getattr(torch, dtype_name)
    dev = bc.device()
    gen = bc.new_generator()
    x = torch.empty((tokens, HD), device=dev, dtype=dtype)
    logits = torch.empty((tokens, E), device=dev, dtype=torch.float32)
    w13 = torch.empty((E, 2 * I, HD), device=dev, dtype=dtype)
    w2 = torch.empty((E, HD, I), device=dev, dtype=dtype)
    out = torch.empty((tokens, HD), device=dev, dtype=dtype)
    # dense equivalent: the same number of rows through one expert's weights
    x_rep = torch.empty((tokens * top_k, HD), device=dev, dtype=dtype)
    h_rep = torch.empty((tokens * top_k, I), device=dev, dtype=dtype)

    def refill():
        bc.randn_(x, gen)
        bc.randn_(logits, gen)
        bc.randn_(w13, gen, HD ** -0.5)       # unit-variance activations, as trained layers keep them
        bc.randn_(w2, gen, I ** -0.5)

    refill()
    bc.randn_(x_rep, gen)
    bc.randn_(h_rep, gen)
    flops = 6.0 * tokens * top_k * HD * I
    others = {}
    if dev == "cuda":
        others["dense"] = lambda: T.dense_equivalent(x_rep, w13[0], h_rep, w2[0])
    return bc.Problem(
        label=f"T{tokens} E{E} top{top_k} H{HD} I{I}", dtype=dtype_name, flops=flops, out=out,
        launch=lambda: T.fused_moe(x, w13, w2, logits, top_k, out=out),
        reference=lambda: (out, T.reference(x, w13, w2, logits, top_k)),
        refill=refill,
        baseline=lambda: T.torch_expert_loop(x, w13, w2, logits, top_k), baseline_name="torch-expert-loop",
        others=others, params={"T": tokens, "E": E, "top_k": top_k, "H": HD, "I": I},
    )


def check_problems():
    if bc.device() == "cpu":
        # I=20: rows of 40 bytes, not 16-byte aligned: the pointer path; the others take TMA descriptors
        cases = [(16, 4, 2, 32, 48), (7, 3, 1, 16, 20), (150, 5, 2, 16, 24)]  # 150 tokens: several routing chunks
        return [lambda c=c, d=d: problem(*c, d) for d in ("float16", "float32") for c in cases]
    cases = [(1, 8, 2, 4096, 14336), (333, 8, 2, 1024, 2816), (1024, 64, 6, 2048, 1408), (100, 16, 4, 520, 776), (3000, 128, 8, 256, 128)]
    return [lambda c=c: problem(*c, "bfloat16") for c in cases] + [lambda: problem(256, 8, 2, 1024, 2048, "float16")]


def headline_problem():
    if bc.device() == "cpu":
        return problem(16, 4, 2, 32, 48, "float16")
    return problem(*MIXTRAL, "bfloat16")


def sweep_problems():
    if bc.device() == "cpu":
        return [lambda: problem(24, 8, 3, 32, 40, "float16")]
    return [lambda s=s: problem(*s, "bfloat16") for s in BENCH]


def main(argv=None):
    head = ("Mixtral T4096 E8 top2 H4096 I14336 bf16" if bc.device() != "cpu"
            else "T16 E4 top2 H32 I48 fp16 (CPU interpreter)")
    return bc.run_test("fused-moe", check_problems, headline_problem, sweep_problems, head, argv)


if __name__ == "__main__":
    main()
