"""Where gemm's host time per call goes (issue 15): the launch path, piece by piece.

    python benchmarks/explore/gemm_host_path.py [--out FILE]

benchmarks/explore/gemm_launch_overhead.py found kgit's gemm spending 48-55 us of host time per call on
the TMA path (2048^3 and up) and 25 us on the pointer path (1024^3), against torch.matmul's 13-15 us.
Here, at 2048^3 bf16, the host time per call (200 calls enqueued back to back) of:
  gemm        T.gemm(a, b, out=c), as users call it: since 2026-12-01 a call of a shape seen before
              launches the compiled kernel directly (T._PLANS)
  launch      T._launch(a, b, c, cfg): the JIT's path, as every call took before
  descriptors the three TensorDescriptor.from_tensor calls alone (no launch)
  kernel      gemm_tma_kernel[grid](...) with descriptors made once, outside the loop
"""

import argparse
import json
from pathlib import Path

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

import templates  # beside this file


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    args = p.parse_args()
    T = templates.load("gemm")
    a = torch.randn(2048, 2048, device="cuda").bfloat16()
    b = torch.randn(2048, 2048, device="cuda").bfloat16()
    c = torch.empty_like(a)
    T.gemm(a, b, out=c)
    cfg = dict(T.last_config)
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    programs = min(torch.cuda.get_device_properties(0).multi_processor_count, (2048 // bm) * (2048 // bn))
    consts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg["GROUP_M"], NUM_PROGRAMS=programs,
                  PERSISTENT=cfg["PERSISTENT"], FLATTEN=cfg["FLATTEN"], WARP_SPECIALIZE=cfg["WARP_SPECIALIZE"],
                  EPILOGUE_SUBTILE=cfg["EPILOGUE_SUBTILE"], num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])

    def descriptors():
        return (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
                TensorDescriptor.from_tensor(c, [bm, bn]))

    made = descriptors()
    rows = {}
    for _ in range(3):
        for name, fn in (("gemm", lambda: T.gemm(a, b, out=c)), ("launch", lambda: T._launch(a, b, c, cfg)),
                         ("descriptors", descriptors),
                         ("kernel", lambda: T.gemm_tma_kernel[(programs,)](*made, 2048, 2048, 2048, **consts)),
                         ("torch", lambda: torch.matmul(a, b, out=c))):
            rows.setdefault(name, []).append(templates.host_us_per_call(fn))
    for name, values in rows.items():
        print(f"{name}: {' '.join(f'{v:.1f}' for v in values)} us per call", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
