"""The noise experiment's test (kgit's test contract, through the shared harness).

    python benchmarks/kernels/padded-copy/test_padded_copy.py [--json]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "..")]  # the kernel beside, then this checkout's harness
from kgit import harness  # noqa: E402

import torch  # noqa: E402

from padded_copy import padded_copy  # noqa: E402

SPEC = harness.Spec(
    name="padded-copy",
    metric="gbps",
    make_inputs=lambda shape, dtype, device, case: (harness.rand(shape, dtype, device, case),),
    make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
    kernel=lambda inputs, outputs: padded_copy(inputs[0], outputs[0]),
    reference=lambda inputs: (inputs[0].double(),),
    torch_impl=lambda inputs: inputs[0].clone(),
    gpu=harness.Plan(check_shapes=[(1,), (1023,), (4097,), (1 << 20,)],
                     time_shapes=[(1 << 28,)],  # 1 GiB read + 1 GiB written
                     dtypes=("fp32",)),
    interpreter=harness.Plan(check_shapes=[(1,), (1023,)], time_shapes=[(1,)], dtypes=("fp32",)),
)

if __name__ == "__main__":
    harness.main(SPEC)
