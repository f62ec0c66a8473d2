"""Correctness and speed of gemm.gemm (kgit test contract, TFLOP/s).

    python skills/kernels/gemm/test_gemm.py [--json] [--quick] [--sweep] [--profile]

Headline: 4096^3 bf16; --sweep adds every benchmark shape in bf16 and fp16. Shapes are (M, N, K).
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

import gemm as T  # noqa: E402


def make_inputs(shape, dtype, device, case):
    M, N, K = shape
    return harness.rand((M, K), dtype, device, case), harness.rand((K, N), dtype, device, case)


SPEC = harness.Spec(
    name="gemm",
    metric="tflops",
    make_inputs=make_inputs,
    make_outputs=lambda inputs: (inputs[0].new_empty((inputs[0].shape[0], inputs[1].shape[1])),),
    kernel=lambda inputs, outputs: T.gemm(*inputs, out=outputs[0]),
    reference=lambda inputs: (T.reference(*inputs),),
    torch_impl=lambda inputs: T.torch_gemm(*inputs),
    torch_name="torch.matmul",
    flops=lambda inputs, outputs: 2.0 * inputs[0].shape[0] * inputs[1].shape[1] * inputs[0].shape[1],
    launched=lambda: T.last_config,
    tolerances=harness.NORM,
    gpu=harness.Plan(
        # odd sizes, a row of one, K not a multiple of BLOCK_K
        check_shapes=[(1, 4096, 4096), (1023, 1537, 4097), (4097, 1023, 1000), (257, 384, 72), (4000, 4000, 4000)],
        dtypes=("bf16", "fp16"),
        time_shapes=[(4096, 4096, 4096)],
        time_dtypes=("bf16",),
        # squares, a skinny-K, a wide one, non-multiples of the tile sizes
        sweep_shapes=[(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                      (8192, 1024, 8192), (4096, 4096, 1000), (4000, 4000, 4000)],
        sweep_dtypes=("bf16", "fp16"),
    ),
    # tiny, and fp16/fp32 only: the interpreter has no bf16 arithmetic
    interpreter=harness.Plan(
        check_shapes=[(64, 48, 40), (33, 70, 19), (1, 16, 16), (96, 64, 72)],
        dtypes=("fp16", "fp32"),
        time_shapes=[(64, 64, 64)],
        time_dtypes=("fp16",),
        sweep_shapes=[(64, 64, 64), (48, 80, 33)],
        sweep_dtypes=("fp16", "fp32"),
    ),
)

if __name__ == "__main__":
    harness.main(SPEC)
