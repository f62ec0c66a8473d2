"""Correctness and speed of layernorm.layernorm (kgit test contract).

    python skills/kernels/layernorm/test_layernorm.py [--json] [--quick] [--sweep] [--profile]
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

from layernorm import EPS, last_config, layernorm, layernorm_ref  # noqa: E402


def make_inputs(shape, dtype, device, case):
    x = harness.rand(shape, dtype, device, case)
    w = (1.0 + 0.5 * torch.randn(shape[-1], device=device)).to(dtype)  # weights near 1, random
    b = (0.5 * torch.randn(shape[-1], device=device)).to(dtype)
    return x, w, b


SPEC = harness.Spec(
    name="layernorm",
    metric="gbps",
    make_inputs=make_inputs,
    make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
    kernel=lambda inputs, outputs: layernorm(*inputs, out=outputs[0]),
    launched=lambda: last_config,
    reference=lambda inputs: (layernorm_ref(*inputs),),
    torch_impl=lambda inputs: torch.nn.functional.layer_norm(inputs[0], (inputs[0].shape[-1],), inputs[1], inputs[2], EPS),
    cases=("normal", "large", "tiny", "equal"),
    # An all-equal fp32 row is ill-conditioned: (x - mean) is a rounding residue
    # of a few ulps of |x| (~1e-6), multiplied by rstd = 1/sqrt(eps) = 316, so
    # the output (= b exactly) carries ~3e-4 absolute error in any fp32
    # implementation (seen on the H200: 2.5e-4 to 3.6e-4). atol 1e-3 x rowmax
    # covers that; 16-bit outputs round far coarser and keep the defaults.
    tolerances={**harness.ELEMENTWISE, "fp32": harness.Elementwise(rtol=1e-4, atol=1e-3, floor=1.4e-45)},
    gpu=harness.Plan(
        check_shapes=[(1, 1), (3, 1023), (5, 1537), (9, 3000), (7, 4097), (64, 1024), (33, 16384),
                      (1000, 32768), (300, 131072), (2, 131072), (3, 262144),
                      (7, 40000), (5, 40008), (5, 16400)],
        extreme_shapes=[(16, 1537), (4, 40000), (2, 262144)],
        time_shapes=[(131072, 1024), (32768, 4096), (8192, 16384), (4096, 32768),
                     (2048, 65536), (1024, 131072), (512, 262144)],
    ),
    interpreter=harness.Plan(check_shapes=[(3, 33), (1, 1), (5, 100), (3, 3000), (2, 8200), (2, 20000), (1, 33000)],
                             extreme_shapes=[(3, 33), (1, 1)], time_shapes=[(8, 256)]),
)

if __name__ == "__main__":
    harness.main(SPEC)
