"""fa62: _attn_fwd_ws (GLUON 1) and _attn_fwd_ws3 (GLUON 3) call _ws_block and _kv_barriers, which took a V ring
size of their own (default: K's); their sm_90 SASS under Triton 3.6 compared with main's, instruction for instruction.
Run: PYTHONPATH=$PWD:/tmp/fa59/t36:$PWD/tests/kernels python .stage/fa62_ws_same.py MAIN_TEMPLATE BRANCH_TEMPLATE"""
import os
import re
import sys

import torch
import triton
from triton.backends.compiler import BaseBackend, GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import native_specialize_impl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fa59_sass import cuobjdump, load  # noqa: E402


def compile_ws(t, which, dtype, D, causal, buffers):
    torch_dtype, gl_dtype = {"bf16": (torch.bfloat16, t.gl.bfloat16), "fp16": (torch.float16, t.gl.float16)}[dtype]
    S, rows = 1024, 2048
    descs = [t.GluonDescriptor(torch.empty(rows, D, dtype=torch_dtype), [rows, D], [D, 1], [box, D],
                               t.gl.NVMMASharedLayout.get_default_for([box, D], gl_dtype)) for box in (64, 128, 128, 64)]
    consts = dict(BLOCK_M=128, BLOCK_N=128, NUM_BUFFERS=buffers, CAUSAL=causal, LOADER_REGS=t.WS_LOADER_REGS,
                  CONSUMER_REGS=t.WS_CONSUMER_REGS)
    if which == "ws":
        fn, args = t._attn_fwd_ws, descs + [torch.empty(rows, D, dtype=torch_dtype), S, 0.1]
        consts["RAGGED"] = False
    else:
        fn, args = t._attn_fwd_ws3, descs + [S, 0.1]
        consts.update(BLOCK_M=t.WS3_BLOCK_M, CONSUMER_REGS=t.WS3_CONSUMER_REGS)
    signature, attrs = {}, {}
    for i, (name, arg) in enumerate(zip(fn.arg_names, args)):
        signature[name], specialization = native_specialize_impl(BaseBackend, arg, False, True, True)
        if specialization == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    signature.update({name: "constexpr" for name in consts})
    kernel = triton.compile(GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                            target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    return [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(.*?;)", cuobjdump(kernel, "-sass"))]


main_t, branch_t = load(sys.argv[1], "main_t"), load(sys.argv[2], "branch_t")
for which, dtype, D, causal, buffers in [("ws", "bf16", 128, True, 2), ("ws", "fp16", 64, False, 3),
                                         ("ws3", "bf16", 64, True, 2)]:
    a, b = (compile_ws(t, which, dtype, D, causal, buffers) for t in (main_t, branch_t))
    print(which, dtype, f"D{D}", "causal" if causal else "full", f"{buffers} stages:", len(a), "instructions,",
          "same as main's" if a == b else "NOT main's", flush=True)
