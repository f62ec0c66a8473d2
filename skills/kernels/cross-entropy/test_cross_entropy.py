"""Correctness and speed of cross_entropy.cross_entropy (kgit test contract).

    python skills/kernels/cross-entropy/test_cross_entropy.py [--json] [--quick] [--sweep] [--profile]
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

from cross_entropy import IGNORE_INDEX, cross_entropy, cross_entropy_ref, last_config  # noqa: E402


def make_inputs(shape, dtype, device, case):
    M, V = shape
    x = harness.rand(shape, dtype, device, case)
    t = torch.randint(0, V, (M,), device=device)
    t = torch.where(torch.rand(M, device=device) < 0.05, IGNORE_INDEX, t)  # some ignored rows
    return x, t


SPEC = harness.Spec(
    name="cross-entropy",
    metric="gbps",
    make_inputs=make_inputs,
    make_outputs=lambda inputs: (torch.empty(inputs[0].shape[0], device=inputs[0].device, dtype=torch.float32),),
    kernel=lambda inputs, outputs: cross_entropy(inputs[0], inputs[1], out=outputs[0]),
    launched=lambda: last_config,
    reference=lambda inputs: (cross_entropy_ref(*inputs),),
    torch_impl=lambda inputs: torch.nn.functional.cross_entropy(inputs[0], inputs[1], reduction="none",
                                                                ignore_index=IGNORE_INDEX),
    cases=("normal", "large", "tiny", "equal"),
    gpu=harness.Plan(
        # vocabularies: edge sizes, one chunk, several chunks (split + last-arriver), Llama-3's 128256
        check_shapes=[(1, 1), (3, 1023), (4096, 1024), (5, 1537), (7, 4097), (300, 32000), (64, 128256), (3, 262144)],
        extreme_shapes=[(16, 1537), (8, 128256)],
        # rows of 1024..262144 at >= 256 MB of logits in bf16, and the LM head case 8192 x 128256
        time_shapes=[(131072, 1024), (32768, 4096), (8192, 16384), (4096, 32768), (2048, 65536),
                     (1024, 131072), (512, 262144), (8192, 128256)],
    ),
    interpreter=harness.Plan(check_shapes=[(3, 33), (1, 1), (5, 100), (2, 300), (16, 128)],
                             extreme_shapes=[(3, 33), (1, 1)], time_shapes=[(8, 256)]),
)

if __name__ == "__main__":
    harness.main(SPEC)
