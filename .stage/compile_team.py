"""Compile softmax's _softmax_smem_team for sm_90 on a CPU (no GPU needed) as its launcher launches it, and
print a line a case: registers, spill stores/loads, stack, shared memory, and the counts of 16-byte cp.async
copies and vector stores in its PTX.

    python .stage/compile_team.py TEMPLATE [TEMPLATE ...]

Run without TRITON_INTERPRET. A template whose kernel has no CUT argument (main's) compiles its own cases only.
"""
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

import torch
import triton
from triton.backends.compiler import BaseBackend, GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import native_specialize_impl


def load(path):
    spec = importlib.util.spec_from_file_location(f"t{abs(hash(path))}", path)
    t = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(t)
    return t


def compile_case(t, label, N, dtype, cut, y_cut, stride=None, off=0):
    fn = t._softmax_smem_team
    st = t.SMEM_TEAM
    W = st["CHUNK"] * st["NCH"]
    P = triton.cdiv(N // 8 * 8 if cut else N, W)
    stride = stride or N
    x = torch.empty(4, stride, dtype=dtype)
    y = torch.empty_like(x)
    words, exits = torch.empty(64, dtype=torch.int64), torch.empty(64, dtype=torch.int32)
    values = dict(x_ptr=x, y_ptr=y, words=words, exits=exits, M=512, N=N, stride_x=stride, stride_y=stride,
                  off_x=off, off_y=off)
    consts = dict(CHUNK=st["CHUNK"], NCH=st["NCH"], P=P, P_POW2=triton.next_power_of_2(P), SPIN=t.MAX_SPIN,
                  CUT=cut, Y_CUT=y_cut, VEC=8)
    consts = {k: v for k, v in consts.items() if k in fn.arg_names}
    signature, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            signature[name] = "constexpr"
            continue
        if name in ("off_x", "off_y"):  # not specialized (do_not_specialize)
            signature[name] = "i32"
            continue
        signature[name], spec = native_specialize_impl(BaseBackend, values[name], False, True, True)
        if signature[name] == "constexpr":  # an integer of 1, as the launch specializes it
            consts[name] = spec
        elif spec == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    src = GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": st["num_warps"],
                                                                        "maxnreg": st["maxnreg"]})
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"])
        f.flush()
        usage = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
    regs = re.search(r"REG:(\d+)", usage).group(1)
    stack = re.search(r"STACK:(\d+)", usage).group(1)
    ptx = k.asm["ptx"]
    cp16 = len(re.findall(r"cp\.async\.c[ag]\.shared\.global[^\n]*0x10", ptx))
    cp_small = len(re.findall(r"cp\.async\.c[ag]\.shared\.global[^\n]*0x(4|8|2)\b", ptx))
    v4 = len(re.findall(r"st\.global[^\n]*\.v4", ptx))
    st_b16 = len(re.findall(r"st\.global(\.[a-z]+)*\.b16 ", ptx))
    print(f"{label:42s} regs {regs:>3s} stack {stack:>3s} B  shared {k.metadata.shared:6d} B  P {P:2d}  "
          f"cp.async 16B {cp16:3d} (<16B {cp_small})  st.v4 {v4:3d}  st.b16 {st_b16:3d}  "
          f"spill st/ld {k.n_spills if hasattr(k, 'n_spills') else '?'}", flush=True)


for path in sys.argv[1:]:
    t = load(path)
    new = "CUT" in t._softmax_smem_team.arg_names
    print(f"== {path} (triton {triton.__version__}){' with CUT' if new else ''}")
    for N in (50272, 65552, 100288, 65536, 131072, 262144):
        compile_case(t, f"rows of 16: {N} bf16", N, torch.bfloat16, False, False)
    if new:
        for N, dt, y_cut, off in [(50257, torch.bfloat16, True, 0), (50257, torch.float16, True, 3),
                                  (50257, torch.bfloat16, False, 1), (65537, torch.float16, True, 0),
                                  (100277, torch.bfloat16, True, 0), (100277, torch.bfloat16, False, 5),
                                  (128256 + 8, torch.bfloat16, True, 0), (262143, torch.float16, True, 0),
                                  (20001, torch.bfloat16, False, 1)]:
            compile_case(t, f"cut: {N} {str(dt)[6:]} Y_CUT={y_cut} off={off}", N, dt, True, y_cut, off=off)
