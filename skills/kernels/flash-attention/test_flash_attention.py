"""Correctness and speed of flash_attention.flash_attention, forward (kgit test contract, TFLOP/s).

    python skills/kernels/flash-attention/test_flash_attention.py [--json] [--quick] [--sweep] [--profile]

Shapes are (B, H, S, D, causal). FLOPs: two matmuls of 2*S*S*D each per (batch, head) = 4*B*H*S*S*D;
causal counts half (the convention of the flash-attention papers and of torch's own benchmarks).
Headline: B4 H16 S4096 D128 non-causal bf16; --sweep adds S 1024..16384, D 64 and 128, causal or not,
at the same number of tokens.
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

import flash_attention as T  # noqa: E402

TOKENS = 16 * 16384  # B * S * 16 fixed: the same total work at every sequence length
REF_HEADS = 2  # (batch, head) pairs compared with the fp32 reference at big shapes (all checked finite)


def bench_shape(S, D, causal):
    H = 16 if D == 128 else 32
    return (max(1, TOKENS // S // 16), H, S, D, causal)


def make_inputs(shape, dtype, device, case):
    *bhsd, causal = shape
    return (*(harness.rand(bhsd, dtype, device, case) for _ in range(3)), causal)


def sample(inputs, outputs):
    """At big shapes (S x S fp32 scores of every head), a few random (batch, head) pairs."""
    q, k, v, causal = inputs
    B, H, S, _ = q.shape
    if B * H * S * S <= (1 << 28):
        return inputs, outputs
    pairs = [(int(i) // H, int(i) % H) for i in torch.randperm(B * H)[:REF_HEADS]]
    pick = lambda t: torch.stack([t[b, h] for b, h in pairs])  # noqa: E731
    return (pick(q), pick(k), pick(v), causal), (pick(outputs[0]),)


def sdpa(q, k, v, causal):
    """What a user calls: torch picks its fastest backend for the shape (the attention bars are set against it)."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def flops(inputs, outputs):
    B, H, S, D = inputs[0].shape
    return 4.0 * B * H * S * S * D * (0.5 if inputs[3] else 1.0)


SPEC = harness.Spec(
    name="flash-attention",
    metric="tflops",
    make_inputs=make_inputs,
    make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
    kernel=lambda inputs, outputs: T.flash_attention(*inputs[:3], causal=inputs[3], out=outputs[0]),
    reference=lambda inputs: (T.reference(*inputs),),
    sample=sample,
    torch_impl=lambda inputs: sdpa(*inputs),
    torch_name="sdpa",
    # its flash backend alone, as earlier runs compared (on the CPU there is none to pin)
    others={"sdpa_flash": lambda inputs: T.torch_sdpa_flash(*inputs) if inputs[0].is_cuda else sdpa(*inputs)},
    flops=flops,
    launched=lambda: T.last_config,
    tolerances=harness.NORM,
    label=lambda s: f"B{s[0]} H{s[1]} S{s[2]} D{s[3]}{' causal' if s[4] else ''}",
    gpu=harness.Plan(
        # ragged S (not a multiple of 128) runs the Gluon kernel's masked last blocks on Hopper: every head
        # compared whole, so that a last query block's rows written into the next head would show
        check_shapes=[(2, 4, 1000, 64, True), (1, 3, 257, 128, False), (2, 8, 1024, 128, True),
                      (1, 2, 4096, 64, False), (1, 2, 1, 64, False), (2, 4, 512, 128, True),
                      (1, 4, 3000, 128, True), (2, 3, 1500, 64, False), (3, 2, 197, 64, False)],
        dtypes=("bf16", "fp16"),
        time_shapes=[bench_shape(4096, 128, False)],
        time_dtypes=("bf16",),
        sweep_shapes=[bench_shape(S, D, causal) for D in (64, 128) for causal in (False, True)
                      for S in (1024, 2048, 4096, 8192, 16384)],
    ),
    # S=128/256 take the TMA-descriptor path (S a multiple of the tiles), the others the masked pointer path
    interpreter=harness.Plan(
        check_shapes=[(1, 2, 128, 16, False), (1, 1, 256, 16, True), (2, 1, 40, 16, True), (1, 1, 33, 32, False)],
        dtypes=("fp16", "fp32"),
        time_shapes=[(1, 2, 64, 16, False)],
        time_dtypes=("fp16",),
        sweep_shapes=[(1, 2, 64, 16, True)],
    ),
)

if __name__ == "__main__":
    harness.main(SPEC)
