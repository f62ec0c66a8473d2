"""Registers, spills and shared memory of layernorm's long-row kernels compiled for sm_90 without a GPU.

    python experiments/held-out-shapes/fp32-smem-team/compile_sm90.py [KERNEL_FILE]

Why fp32 rows of 65536-262144 read 83-84% of copy on _layernorm_split and what the shared-memory team
costs them instead: the split on SPLIT's chunk and warps, the team on fp32 (EXACT) and, as the control,
on 16 bits (whose code the fp32 change must leave alone). Triton's own ptxas reports the figures; which
Triton compiles them is the one imported (the H100 runs 3.6).
"""

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.backends.compiler import BaseBackend, GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.compiler import ASTSource
from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction
from triton.runtime.jit import native_specialize_impl

ROOT = Path(__file__).resolve().parents[3]


def compile_sm90(kernel, args, constexprs, num_warps):
    """The kernel compiled for sm_90 from CPU stand-ins of its arguments (an integer's value sets its
    divisibility hint, as a launch's would)."""
    signature, attrs = {}, {}
    for i, (name, arg) in enumerate(zip(kernel.arg_names, args)):
        signature[name], specialization = native_specialize_impl(BaseBackend, arg, False, True, True)
        if specialization == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    signature.update({name: "constexpr" for name in constexprs})
    source = GluonASTSource if isinstance(kernel, GluonJITFunction) else ASTSource
    src = source(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})


def usage(kernel) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        ptx = Path(tmp) / "k.ptx"
        ptx.write_text(kernel.asm["ptx"])
        log = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", str(ptx), "-o", os.path.join(tmp, "k.cubin")],
                             capture_output=True, text=True)
    text = log.stdout + log.stderr
    regs = re.search(r"Used (\d+) registers", text).group(1)
    spills = sum(map(int, re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text).groups()))
    return f"{regs} registers, {spills} bytes spilled, {kernel.metadata.shared} bytes of shared memory"


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else ROOT / "skills/kernels/layernorm/layernorm.py"
    spec = importlib.util.spec_from_file_location("layernorm_under_test", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    print(f"Triton {triton.__version__}, sm_90, {path}")
    for N in (65536, 131072, 262144):
        x, w = torch.empty(8, N), torch.empty(N)
        P = -(-N // m.SPLIT["BLOCK_N"])
        k = compile_sm90(m._layernorm_split, (x, w, w, x, torch.empty(8), torch.empty(8, dtype=torch.int32), 8, N, N,
                                              N, m.EPS),
                         {"BLOCK_N": m.SPLIT["BLOCK_N"], "P": P, "P_POW2": triton.next_power_of_2(P),
                          "MAX_SPIN": m.MAX_SPIN}, m.SPLIT["num_warps"])
        print(f"_layernorm_split fp32 N {N}, {m.SPLIT}: {usage(k)}")
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            chunk = m.SMEM_TEAM["CHUNK"] * 2 // dtype.itemsize
            P = -(-N // (chunk * m.SMEM_TEAM["NCH"]))
            x, w = torch.empty(8, N, dtype=dtype), torch.empty(N, dtype=dtype)
            consts = {"CHUNK": chunk, "NCH": m.SMEM_TEAM["NCH"], "P": P, "P_POW2": triton.next_power_of_2(P),
                      "SPIN": m.MAX_SPIN, "PAIRS": dtype == torch.bfloat16, "EVEN": N % chunk == 0,
                      "EXACT": dtype == torch.float32, "VEC": 16 // dtype.itemsize}
            k = compile_sm90(m._layernorm_smem_team, (x, w, w, x, torch.empty(8, dtype=torch.int64),
                                                      torch.empty(8, dtype=torch.int32), 8, N, N, N, m.EPS),
                             consts, m.SMEM_TEAM["num_warps"])
            print(f"_layernorm_smem_team {str(dtype)[6:]} N {N}, CHUNK {chunk}, P {P}: {usage(k)}")


if __name__ == "__main__":
    main()
