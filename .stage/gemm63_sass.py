"""Compiles the gemm template's Gluon kernel (gemm_gluon_kernel) for sm_90 on a CPU, as its launcher would launch it,
and writes each case's TTGIR, PTX and SASS to OUT_DIR beside a line of facts (shared memory, registers, stack, the
wgmma shapes). Branch gemm61: main's kernel and the branch's must give the same TTGIR and SASS on one-box tiles
(BLOCK_N2 0); the two-box tiles (128x192, 128x160) must fit without spilling. Branch gemm62: main's kernel and the
branch's must give the same TTGIR and SASS where PERSISTENT is 0 (every case of main's); the persistent cases
(PERSISTENT 1: 128x192, 128x128, 128x256) must fit without spilling, 168 registers at launch. Branch gemm63: main's
and the branch's the same SASS on every case of main's (MIXED 0); the mixed tile list (MIXED 1: 128x256 as two
128-wide boxes, the tiles past N_BIG one box) without spilling.

    PYTHONPATH=$PWD:/tmp/gemm59/t36 python .stage/gemm63_sass.py TEMPLATE OUT_DIR

Under the device's Triton (3.6: PYTHONPATH a folder holding its wheel's files) or this machine's (3.9)."""
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


def load(path):
    spec = importlib.util.spec_from_file_location("template", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_case(t, dtype, M, N, K, BM, BN, stages, persistent=0, n_big=0):
    torch_dtype, gl_dtype = {"bf16": (torch.bfloat16, t.gl.bfloat16), "fp16": (torch.float16, t.gl.float16)}[dtype]
    widths = (BN // 2, BN // 2) if n_big else t.gluon_widths(BN) if hasattr(t, "gluon_widths") else (BN, 0)
    n1, n2 = widths
    mats = [torch.empty(M, K, dtype=torch_dtype), torch.empty(K, N, dtype=torch_dtype), torch.empty(M, N, dtype=torch_dtype)]
    boxes = [[64, 64], [64, n1], [64, n1]]

    def desc(tensor, box):
        return t.GluonDescriptor(tensor, list(tensor.shape), list(tensor.stride()), box,
                                 t.gl.NVMMASharedLayout.get_default_for(box, gl_dtype))

    args = [desc(m, box) for m, box in zip(mats, boxes)]
    if "b2_desc" in t.gemm_gluon_kernel.arg_names:
        args += [desc(mats[1], [64, n2]) if n2 else None, desc(mats[2], [64, n2]) if n2 else None]
    args += [M, N, K]
    consts = dict(BLOCK_M=BM, BLOCK_N=n1, BLOCK_K=64, NUM_STAGES=stages, LOADER_REGS=t.GLUON_LOADER_REGS,
                  CONSUMER_REGS=t.GLUON_CONSUMER_REGS)
    if "BLOCK_N2" in t.gemm_gluon_kernel.arg_names:
        consts["BLOCK_N2"] = n2
    if "PERSISTENT" in t.gemm_gluon_kernel.arg_names:
        consts["PERSISTENT"] = persistent
    if "N_BIG" in t.gemm_gluon_kernel.arg_names:  # gemm63: a run-time argument after the constexprs, 0 unless mixed
        consts["MIXED"] = int(n_big > 0)
        args.append(n_big)
    fn = t.gemm_gluon_kernel
    signature, attrs = {}, {}
    for i, (name, arg) in enumerate(zip([n for n in fn.arg_names if n not in consts], args)):
        signature[name], specialization = native_specialize_impl(BaseBackend, arg, False, True, True)
        if specialization == "D":
            attrs[(fn.arg_names.index(name),)] = [["tt.divisibility", 16]]
    signature.update({name: "constexpr" for name in consts})
    regs = t.GLUON_TWO_CONSUMER_LAUNCH_REGS if BM == 128 else t.GLUON_LAUNCH_REGS
    return triton.compile(GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": regs})


def cuobjdump(kernel, flag):
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        return subprocess.run([tool, flag, cubin.name], capture_output=True, text=True, check=True).stdout


CASES = [("bf16", 1024, 1024, 1024, 64, 128, 8), ("fp16", 1000, 3000, 1000, 64, 128, 8),
         ("bf16", 128, 4096, 4096, 64, 64, 12), ("fp16", 60, 3000, 1000, 64, 32, 16),
         ("fp16", 512, 4096, 4096, 128, 128, 6), ("bf16", 300, 4096, 1000, 128, 128, 6)]
WIDE_CASES = [("bf16", 2048, 4608, 3584, 128, 192, 4), ("fp16", 2048, 4608, 3584, 128, 192, 4),
              ("bf16", 2048, 5000, 4096, 128, 160, 5), ("fp16", 130, 400, 200, 128, 192, 4)]
MIXED_CASES = [("bf16", 2048, 5000, 4096, 128, 256, 3, 1, 4096), ("fp16", 2048, 5000, 4096, 128, 256, 3, 1, 4096),
               ("bf16", 3000, 5000, 2000, 128, 256, 3, 1, 4608)]
PERSISTENT_CASES = [("bf16", 2048, 4608, 3584, 128, 192, 4, 1), ("fp16", 2048, 4608, 3584, 128, 192, 4, 1),
                    ("bf16", 4096, 4096, 4096, 128, 256, 3, 1), ("fp16", 512, 4096, 4096, 128, 128, 6, 1)]

if __name__ == "__main__":
    t = load(sys.argv[1])
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    wide = hasattr(t, "gluon_widths")
    persistent = "PERSISTENT" in t.gemm_gluon_kernel.arg_names
    mixed = "MIXED" in t.gemm_gluon_kernel.arg_names
    for case in (CASES + (WIDE_CASES if wide else []) + (PERSISTENT_CASES if persistent else [])
                 + (MIXED_CASES if mixed else [])):
        kernel = compile_case(t, *case)
        name = "_".join(map(str, case))
        sass = cuobjdump(kernel, "-sass")
        # the SASS without its header lines (the cubin's name differs between runs)
        body = "\n".join(line for line in sass.splitlines() if line.strip().startswith("/*"))
        for ext, text in (("ttgir", kernel.asm["ttgir"]), ("ptx", kernel.asm["ptx"]), ("sass", body)):
            with open(os.path.join(out, f"{name}.{ext}"), "w") as f:
                f.write(text)
        usage = cuobjdump(kernel, "-res-usage")
        print(json.dumps({"case": case, "shared": kernel.metadata.shared,
                          "usage": re.search(r"REG:.*", usage).group(0),
                          "wgmma": sorted(set(re.findall(r"wgmma\.mma_async\S*m64n\d+k16", kernel.asm["ptx"]))),
                          "hgmma": len(re.findall(r"HGMMA", sass))}), flush=True)
