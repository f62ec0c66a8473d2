"""Correctness and speed of fused_moe.fused_moe (kgit test contract, TFLOP/s).

    python skills/kernels/fused-moe/test_fused_moe.py [--json] [--quick] [--sweep] [--profile]

Shapes are (tokens, experts, top_k, hidden, intermediate). Headline: Mixtral (T4096 E8 top2 H4096
I14336) bf16; --sweep adds many small experts (an OLMoE-1B-7B layer over 2048 tokens). speedup is
against the per-expert torch loop; dense_tflops is one dense GEMM pair of the same work (T*k rows
through one expert's gate/up and down projections, torch.matmul): the ceiling to compare with.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
if os.path.exists(os.path.join(ROOT, "kgit", "harness", "__init__.py")):
    sys.path.insert(0, ROOT)  # the harness of this checkout, not an installed one
sys.path.insert(0, HERE)
from kgit import harness  # noqa: E402

import torch  # noqa: E402

import fused_moe as T  # noqa: E402

MIXTRAL = (4096, 8, 2, 4096, 14336)
SMALL = (2048, 64, 8, 2048, 1024)


def make_inputs(shape, dtype, device, case):
    tokens, E, top_k, HD, I = shape
    return (harness.rand((tokens, HD), dtype, device, case),
            harness.rand((E, 2 * I, HD), dtype, device, case, scale=HD ** -0.5),  # unit-variance activations
            harness.rand((E, HD, I), dtype, device, case, scale=I ** -0.5),
            harness.rand((tokens, E), torch.float32, device, case),
            top_k,
            # the dense equivalent's operands (others["dense"]): T*k rows of the hidden and intermediate sizes
            harness.rand((tokens * top_k, HD), dtype, device, case),
            harness.rand((tokens * top_k, I), dtype, device, case))


def nbytes(inputs, outputs):
    """The MoE layer's minimal traffic: tokens, weights and logits read once, the output written once."""
    return sum(t.numel() * t.element_size() for t in (*inputs[:4], *outputs))


SPEC = harness.Spec(
    name="fused-moe",
    metric="tflops",
    make_inputs=make_inputs,
    make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
    kernel=lambda inputs, outputs: T.fused_moe(*inputs[:5], out=outputs[0]),
    reference=lambda inputs: (T.reference(*inputs[:5]),),
    torch_impl=lambda inputs: T.torch_expert_loop(*inputs[:5]),
    torch_name="torch-expert-loop",
    others={"dense": lambda inputs: T.dense_equivalent(inputs[5], inputs[1][0], inputs[6], inputs[2][0])},
    flops=lambda inputs, outputs: 6.0 * inputs[0].shape[0] * inputs[4] * inputs[0].shape[1] * inputs[2].shape[2],
    launched=lambda: T.last_config,
    nbytes=nbytes,
    tolerances=harness.NORM,
    label=lambda s: "T{} E{} top{} H{} I{}".format(*s),
    gpu=harness.Plan(
        check_shapes=[(1, 8, 2, 4096, 14336), (333, 8, 2, 1024, 2816), (1024, 64, 6, 2048, 1408),
                      (100, 16, 4, 520, 776), (3000, 128, 8, 256, 128), (256, 8, 2, 1024, 2048)],
        dtypes=("bf16", "fp16"),
        time_shapes=[MIXTRAL],
        time_dtypes=("bf16",),
        sweep_shapes=[SMALL],
    ),
    # I=20: rows of 40 bytes, not 16-byte aligned: the pointer path; the others take TMA descriptors;
    # 150 tokens: several routing chunks
    interpreter=harness.Plan(
        check_shapes=[(16, 4, 2, 32, 48), (7, 3, 1, 16, 20), (150, 5, 2, 16, 24)],
        dtypes=("fp16", "fp32"),
        time_shapes=[(16, 4, 2, 32, 48)],
        time_dtypes=("fp16",),
        sweep_shapes=[(24, 8, 3, 32, 40)],
    ),
)

if __name__ == "__main__":
    harness.main(SPEC)
