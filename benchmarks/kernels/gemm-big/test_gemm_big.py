"""A large bf16 GEMM (compute-bound at 8192^3): correctness against fp32, then TFLOP/s (kgit contract).

    python benchmarks/kernels/gemm-big/test_gemm_big.py [--json] [--profile]

A profiling fixture (benchmarks/device/profile_h200.sh), not a kernel skill: one plain tiled matmul.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "..")]  # the kernel beside, then this checkout's harness
from kgit import harness  # noqa: E402

import torch  # noqa: E402

from gemm_big import matmul  # noqa: E402


def make_inputs(shape, dtype, device, case):
    M, N, K = shape
    return harness.rand((M, K), dtype, device, case), harness.rand((K, N), dtype, device, case)


def reference(inputs):
    a, b = inputs
    torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 product of the same rounded inputs
    return (a.float() @ b.float(),)


SPEC = harness.Spec(
    name="gemm-big",
    metric="tflops",
    make_inputs=make_inputs,
    make_outputs=lambda inputs: (inputs[0].new_empty((inputs[0].shape[0], inputs[1].shape[1])),),
    kernel=lambda inputs, outputs: matmul(*inputs, outputs[0]),
    reference=reference,
    torch_impl=lambda inputs: torch.matmul(*inputs),
    flops=lambda inputs, outputs: 2.0 * outputs[0].numel() * inputs[0].shape[1],
    tolerances=harness.NORM,
    gpu=harness.Plan(check_shapes=[(257, 513, 1031), (1024, 1024, 1024)], time_shapes=[(8192, 8192, 8192)],
                     dtypes=("bf16",)),
    # fp32 in the interpreter, which has no bf16 arithmetic
    interpreter=harness.Plan(check_shapes=[(33, 65, 47)], time_shapes=[(64, 64, 64)], dtypes=("fp32",)),
)

if __name__ == "__main__":
    harness.main(SPEC)
