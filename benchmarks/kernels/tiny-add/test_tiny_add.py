"""A tiny-launch vector add (latency-bound): correctness, then GB/s (kgit contract).

    python benchmarks/kernels/tiny-add/test_tiny_add.py [--json] [--profile]

A profiling fixture (benchmarks/device/profile_h200.sh), not a kernel skill: one 4096-element launch.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "..")]  # the kernel beside, then this checkout's harness
from kgit import harness  # noqa: E402

import torch  # noqa: E402

from tiny_add import add  # noqa: E402

SPEC = harness.Spec(
    name="tiny-add",
    metric="gbps",
    make_inputs=lambda shape, dtype, device, case: (harness.rand(shape, dtype, device, case),
                                                    harness.rand(shape, dtype, device, case)),
    make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
    kernel=lambda inputs, outputs: add(*inputs, outputs[0]),
    reference=lambda inputs: (inputs[0].double() + inputs[1].double(),),
    torch_impl=lambda inputs: torch.add(*inputs),
    # edge sizes and the headline one, fp32: the sum of two fp32 values is exact to half an ulp
    gpu=harness.Plan(check_shapes=[(1,), (1023,), (4096,)], time_shapes=[(4096,)], dtypes=("fp32",)),
    interpreter=harness.Plan(check_shapes=[(1,), (1023,), (4096,)], time_shapes=[(4096,)], dtypes=("fp32",)),
)

if __name__ == "__main__":
    harness.main(SPEC)
