"""Correctness and speed of rmsnorm.rmsnorm (kgit test contract).

    python skills/kernels/rmsnorm/test_rmsnorm.py [--json] [--quick] [--sweep] [--profile]
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

from rmsnorm import EPS, last_config, rmsnorm, rmsnorm_ref  # noqa: E402


def make_inputs(shape, dtype, device, case):
    x = harness.rand(shape, dtype, device, case)
    w = (1.0 + 0.5 * torch.randn(shape[-1], device=device)).to(dtype)  # weights near 1, random
    return x, w


SPEC = harness.Spec(
    name="rmsnorm",
    metric="gbps",
    make_inputs=make_inputs,
    make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
    kernel=lambda inputs, outputs: rmsnorm(inputs[0], inputs[1], out=outputs[0]),
    launched=lambda: last_config,
    reference=lambda inputs: (rmsnorm_ref(*inputs),),
    torch_impl=lambda inputs: torch.nn.functional.rms_norm(inputs[0], (inputs[0].shape[-1],), inputs[1], EPS),
    cases=("normal", "large", "tiny", "equal"),
    gpu=harness.Plan(
        check_shapes=[(1, 1), (3, 1023), (5, 1537), (7, 4097), (64, 1024), (33, 16384),
                      (1000, 32768), (300, 131072), (2, 131072), (3, 262144),
                      (7, 40000), (5, 40008)],
        extreme_shapes=[(16, 1537), (4, 40000), (2, 262144)],
        time_shapes=[(131072, 1024), (32768, 4096), (8192, 16384), (4096, 32768),
                     (2048, 65536), (1024, 131072), (512, 262144)],
    ),
    interpreter=harness.Plan(check_shapes=[(3, 33), (1, 1), (5, 100), (2, 8200), (1, 33000)],
                             extreme_shapes=[(3, 33), (1, 1)], time_shapes=[(8, 256)]),
)

if __name__ == "__main__":
    harness.main(SPEC)
