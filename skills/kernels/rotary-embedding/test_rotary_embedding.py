"""Correctness and speed of rotary_embedding.rope (kgit test contract).

    python skills/kernels/rotary-embedding/test_rotary_embedding.py [--json] [--quick] [--sweep] [--profile]
Shapes are (tokens, heads, head_dim).
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

from rotary_embedding import rope, rope_ref, rope_torch  # noqa: E402


def make_inputs(shape, dtype, device, case):
    T, H, D = shape
    x = harness.rand(shape, dtype, device, case)
    # real angles: position * inverse frequency, plus a random offset so that
    # every call draws fresh values
    pos = torch.arange(T, device=device, dtype=torch.float64)[:, None] + torch.rand(1, device=device).double() * 1000
    inv_freq = 10000.0 ** (-torch.arange(0, D // 2, device=device, dtype=torch.float64) * 2 / D)
    ang = pos * inv_freq[None, :]
    return x, torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


SPEC = harness.Spec(
    name="rotary-embedding",
    metric="gbps",
    make_inputs=make_inputs,
    make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
    kernel=lambda inputs, outputs: rope(*inputs, out=outputs[0]),
    reference=lambda inputs: (rope_ref(*inputs),),
    torch_impl=lambda inputs: rope_torch(*inputs),
    cases=("normal", "large", "tiny", "equal"),
    gpu=harness.Plan(
        check_shapes=[(1, 1, 2), (3, 5, 64), (1023, 3, 128), (1537, 7, 96), (4097, 32, 128), (100, 40, 256)],
        extreme_shapes=[(1537, 7, 96), (257, 32, 128)],
        # 2**27 elements of x each (>= 512 MB of traffic in bf16): head dims 64..256,
        # heads 8..64 (GQA key heads to wide query heads)
        time_shapes=[(131072, 8, 128), (32768, 32, 128), (16384, 64, 128), (65536, 32, 64), (16384, 32, 256)],
    ),
    interpreter=harness.Plan(check_shapes=[(3, 5, 64), (1, 1, 2), (7, 3, 20), (3, 40, 16)],
                             extreme_shapes=[(3, 5, 64), (1, 1, 2)], time_shapes=[(16, 4, 64)]),
)

if __name__ == "__main__":
    harness.main(SPEC)
