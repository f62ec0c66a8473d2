"""Test for the flash-attention forward template: checks, times, prints the kgit contract JSON (tflops).

    python skills/kernels/flash-attention/test_flash_attention.py --json     # checks + headline
    python skills/kernels/flash-attention/test_flash_attention.py --sweep    # every benchmark shape
    TRITON_INTERPRET=1 python skills/kernels/flash-attention/test_flash_attention.py --json

FLOPs: two matmuls of 2*S*S*D each per (batch, head) = 4*B*H*S*S*D; causal counts half (the
convention of the flash-attention papers and of torch's own benchmarks).
"""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))

from kgit import bench_compute as bc  # noqa: E402

T = bc.load_sibling(__file__, "triton_template", "kgit_flash_attention_template")

SEQS = [1024, 2048, 4096, 8192, 16384]
TOKENS = 16 * 16384          # B * S fixed per head count: the same total work at every sequence length
HEADLINE = dict(S=4096, D=128, causal=False)
REF_HEADS = 2                # heads checked against the fp32 reference at big shapes (all heads checked finite)


def bench_shape(S, D):
    H = 16 if D == 128 else 32
    return max(1, TOKENS // S // 16), H


def problem(B, H, S, D, causal, dtype_name):
    import torch

    dtype = getattr(torch, dtype_name)
    dev = bc.device()
    gen = bc.new_generator()
    q, k, v = (torch.empty((B, H, S, D), device=dev, dtype=dtype) for _ in range(3))
    out = torch.empty_like(q)

    def refill():
        for t in (q, k, v):
            bc.randn_(t, gen)

    def reference():
        # all heads when small; at large S a few random (batch, head) pairs (S x S fp32 each)
        if B * H * S * S <= (1 << 28):
            return out, T.reference(q, k, v, causal)
        flat = [(int(i) // H, int(i) % H) for i in torch.randperm(B * H, device="cpu")[:REF_HEADS]]
        got = torch.stack([out[b, h] for b, h in flat])
        want = torch.stack([T.reference(q[b, h], k[b, h], v[b, h], causal) for b, h in flat])
        return got.reshape(-1, D), want.reshape(-1, D)

    refill()
    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
    baseline = (lambda: T.torch_sdpa_flash(q, k, v, causal)) if dev == "cuda" else \
        (lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
    return bc.Problem(
        label=f"B{B} H{H} S{S} D{D}{' causal' if causal else ''}", dtype=dtype_name, flops=flops, out=out,
        launch=lambda: T.flash_attention(q, k, v, causal=causal, out=out),
        reference=reference, refill=refill, baseline=baseline, baseline_name="sdpa-flash",
        params={"B": B, "H": H, "S": S, "D": D, "causal": causal},
    )


def check_problems():
    if bc.device() == "cpu":
        # S=128/256 take the TMA-descriptor path (S a multiple of the tiles), the others the masked pointer path
        cases = [(1, 2, 128, 16, False), (1, 1, 256, 16, True), (2, 1, 40, 16, True), (1, 1, 33, 32, False)]
        return [lambda c=c, d=d: problem(*c, d) for d in ("float16", "float32") for c in cases]
    cases = [(2, 4, 1000, 64, True), (1, 3, 257, 128, False), (2, 8, 1024, 128, True), (1, 2, 4096, 64, False),
             (1, 2, 1, 64, False)]
    return [lambda c=c: problem(*c, "bfloat16") for c in cases] + \
        [lambda: problem(2, 4, 512, 128, True, "float16")]


def headline_problem():
    if bc.device() == "cpu":
        return problem(1, 2, 64, 16, False, "float16")
    B, H = bench_shape(HEADLINE["S"], HEADLINE["D"])
    return problem(B, H, HEADLINE["S"], HEADLINE["D"], HEADLINE["causal"], "bfloat16")


def sweep_problems():
    if bc.device() == "cpu":
        return [lambda: problem(1, 2, 64, 16, True, "float16")]
    out = []
    for D in (64, 128):
        for causal in (False, True):
            for S in SEQS:
                B, H = bench_shape(S, D)
                out.append(lambda B=B, H=H, S=S, D=D, c=causal: problem(B, H, S, D, c, "bfloat16"))
    return out


def main(argv=None):
    head = "B4 H16 S4096 D128 non-causal bf16" if bc.device() != "cpu" else "B1 H2 S64 D16 fp16 (CPU interpreter)"
    return bc.run_test("flash-attention", check_problems, headline_problem, sweep_problems, head, argv)


if __name__ == "__main__":
    main()
