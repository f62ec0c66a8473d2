"""The noise experiment's test (kgit's test contract, through the shared harness)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kgit import bench  # noqa: E402

import torch  # noqa: E402

from padded_copy import padded_copy  # noqa: E402

SPEC = bench.Spec(
    name="padded-copy",
    make_inputs=lambda shape, dtype, device, case: (bench.rand(shape, dtype, device, case),),
    make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
    kernel=lambda inputs, outputs: padded_copy(inputs[0], outputs[0]),
    reference=lambda inputs: (inputs[0].double(),),
    torch_impl=lambda inputs: inputs[0].clone(),
    metric="gbps",
    dtypes=("fp32",),
    check_shapes=[(1,), (1023,), (4097,), (1 << 20,)],
    time_shapes=[(1 << 28,)],  # 1 GiB read + 1 GiB written
    interp_check_shapes=[(1,), (1023,)],
    cases=("normal",),
)

if __name__ == "__main__":
    bench.main(SPEC)
