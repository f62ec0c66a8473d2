"""Correctness and speed of softmax.softmax (kgit test contract).

    python skills/kernels/softmax/test_softmax.py [--json] [--quick] [--sweep] [--profile]
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

from softmax import last_config, softmax, softmax_ref  # noqa: E402

SPEC = harness.Spec(
    name="softmax",
    metric="gbps",
    make_inputs=lambda shape, dtype, device, case: (harness.rand(shape, dtype, device, case),),
    make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
    kernel=lambda inputs, outputs: softmax(inputs[0], out=outputs[0]),
    launched=lambda: last_config,
    reference=lambda inputs: (softmax_ref(inputs[0]),),
    torch_impl=lambda inputs: torch.softmax(inputs[0], dim=-1),
    cases=("normal", "large", "tiny", "equal", "neginf"),
    gpu=harness.Plan(
        # edge sizes, non-powers of two, the rows-in-registers path; the 16-bit shared-memory team with a
        # ragged last part (20000, 40000), many rows per team (both halves of shared memory, the four
        # buffers of partials) and one (2 x 131072); 16-bit rows not in 8-element groups (20001: the
        # pipelined loop on its body; 40001, 65537: the shared-memory team on rows cut at 16-byte
        # boundaries, one row a team and 3-4, rows starting at every offset from 16 bytes); the fp32
        # split team with one row per team and with many
        check_shapes=[(1, 1), (3, 1023), (5, 1537), (7, 4097), (64, 1024), (33, 16384),
                      (1000, 32768), (7, 20000), (5, 20001), (5, 40001), (300, 65537), (300, 131072),
                      (2, 131072), (3, 262144)],
        extreme_shapes=[(16, 1537), (3, 24576), (4, 40000), (2, 262144)],
        # 2**27 elements each: >= 512 MB of traffic in bf16
        time_shapes=[(131072, 1024), (32768, 4096), (8192, 16384), (4096, 32768),
                     (2048, 65536), (1024, 131072), (512, 262144)],
    ),
    # interpreter: whole rows, several rows per tile, a whole row over BLOCK_SIZE, the looped path (N > 32768)
    interpreter=harness.Plan(check_shapes=[(3, 33), (1, 1), (5, 100), (2, 4100), (1, 33000)],
                             extreme_shapes=[(3, 33), (1, 1)], time_shapes=[(8, 256)]),
)

if __name__ == "__main__":
    harness.main(SPEC)
