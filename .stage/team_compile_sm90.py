"""Compile softmax's shared-memory team for sm_90 on this CPU machine, one line a (variant, case): registers,
stack, shared memory, SASS instructions, the programs an SM those allow (H100: 64K registers, 228 KB of shared
memory less 1 KB a program), and the P and PART the launcher would give it at 512 rows on 132 SMs.

    python .stage/team_compile_sm90.py [SOFTMAX_FILE]           (this Python's Triton)
    PYTHONPATH=/tmp/sm58/t36 python .stage/team_compile_sm90.py  (Triton 3.6, the device's)

Issue 52 (experiments/held-out-shapes/few-rows-team/): what each variant the device probe times costs in
registers and shared memory before it runs.
"""
import importlib.util
import json
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "skills", "kernels", "softmax", "softmax.py")
spec = importlib.util.spec_from_file_location("softmax_under_test", path)
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_sm58 import VARIANTS  # noqa: E402  the device probe's switches

CASES = [  # (N, dtype, off_x, Y_CUT): cut rows, y cut like x or not; rows of 16 (CUT off)
    (50257, torch.bfloat16, 0, True), (50257, torch.float16, 3, False), (100277, torch.bfloat16, 0, True),
    (151936, torch.bfloat16, 0, None), (128256, torch.float16, 0, None), (262144, torch.bfloat16, 0, None)]


def compile_team(mod, st, N, dtype, off_x, y_cut):
    fn = mod._softmax_smem_team
    cut = y_cut is not None
    if hasattr(mod, "_team_shape"):
        P, part = mod._team_shape(512, N // 8 * 8 if cut else N, 8, 132 * 4 if st["SLOTS"] == 3 else 132 * 5)
    else:  # main's: parts of NCH whole chunks
        P, part = max(1, triton.cdiv(N // 8 * 8 if cut else N, st["CHUNK"] * st["NCH"])), None
    x = torch.empty(4, N, dtype=dtype)
    values = dict(x_ptr=x, y_ptr=torch.empty_like(x), words=torch.empty(64, dtype=torch.int64),
                  exits=torch.empty(64, dtype=torch.int32), M=512, N=N, stride_x=N, stride_y=N, off_x=off_x,
                  off_y=0)
    consts = dict(CHUNK=st["CHUNK"], NCH=st["NCH"], P=P, P_POW2=triton.next_power_of_2(P), SPIN=mod.MAX_SPIN,
                  CUT=cut, Y_CUT=bool(y_cut), VEC=8)
    if part is not None:
        consts.update(PART=part, SLOTS=st["SLOTS"], EARLY_WORDS=bool(st["EARLY_WORDS"]))
    signature, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            signature[name] = "constexpr"
            continue
        if name in ("off_x", "off_y"):  # not specialized (do_not_specialize)
            signature[name] = "i32"
            continue
        signature[name], s = native_specialize_impl(BaseBackend, values[name], False, True, True)
        if signature[name] == "constexpr":
            consts[name] = s
        elif s == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    k = triton.compile(GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": st["num_warps"], "maxnreg": st["maxnreg"]})
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"])
        f.flush()
        usage = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
        sass = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True, check=True).stdout
    regs = int(re.search(r"REG:(\d+)", usage).group(1))
    shared = k.metadata.shared
    threads = 32 * st["num_warps"]
    per_sm = min(65536 // (-(-regs // 8) * 8 * threads), 228 * 1024 // (shared + 1024), st["PROGRAMS_PER_SM"])
    return {"P": P, "PART": part, "regs": regs, "stack": int(re.search(r"STACK:(\d+)", usage).group(1)),
            "shared": shared, "sass": len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, re.M)), "per_sm": per_sm}


main_path = os.path.join(tempfile.mkdtemp(), "softmax_main.py")
with open(main_path, "w") as f:
    f.write(subprocess.run(["git", "show", "8efb40c:skills/kernels/softmax/softmax.py"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout)
spec = importlib.util.spec_from_file_location("softmax_main", main_path)
main = importlib.util.module_from_spec(spec)
spec.loader.exec_module(main)
print(f"softmax team compiled for sm_90 by Triton {triton.__version__} ({path}; main: 8efb40c)")
for name, mod, switches in [("main", main, {}), *[(n, t, sw) for n, sw in VARIANTS.items()]]:
    st = {**mod.SMEM_TEAM, **switches}
    for N, dtype, off_x, y_cut in CASES:
        r = compile_team(mod, st, N, dtype, off_x, y_cut)
        layout = "rows of 16" if y_cut is None else ("y cut like x" if y_cut else f"x+{off_x}, y not cut like x")
        print(json.dumps({"variant": name, "N": N, "dtype": str(dtype)[6:], "layout": layout, **r}))
