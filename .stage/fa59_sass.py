"""Compiles flash_attention.py's persistent Gluon kernel (_attn_fwd_persist) for sm_90 on a CPU, as the launcher
would launch it, and writes each case's PTX and SASS beside a line of facts: shared memory, registers, stack,
wgmma descriptors read from a block that does not dominate them (tests/kernels/sass_defs.py, fa57's ptxas fault),
and the opcode counts of each consumer's hottest loop. Branch fa59 (issue 52).

    python .stage/fa59_sass.py TEMPLATE OUT_DIR [CASE ...]

A case is name:dtype:D:causal[:KEY=VALUE...] (e.g. diag1:fp16:64:1:DIAG_FIRST=1); the kernel's constexprs not
named come from the template's launcher (PERSISTENT_BUFFERS, PERSISTENT_Q_SLOTS, its defaults). Run it under the
device's Triton (3.6: PYTHONPATH=a folder holding its wheel's files) and under this machine's (3.9)."""
import collections
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
sys.path.insert(0, os.path.join(ROOT, "tests", "kernels"))
from sass_defs import descriptor_reads_not_dominated, parse  # noqa: E402


def load(path, name="template"):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_persist(t, dtype, D, causal, S=1024, ragged=False, **overrides):
    """The compiled kernel (triton's CompiledKernel) of _attn_fwd_persist at these constexprs."""
    torch_dtype, gl_dtype = {"bf16": (torch.bfloat16, t.gl.bfloat16), "fp16": (torch.float16, t.gl.float16)}[dtype]
    rows = 2 * S
    descs = [t.GluonDescriptor(torch.empty(rows, D, dtype=torch_dtype), [rows, D], [D, 1], [box, D],
                               t.gl.NVMMASharedLayout.get_default_for([box, D], gl_dtype)) for box in (64, 128, 128, 64)]
    sched = torch.zeros(132, 34, dtype=torch.int32)
    args = descs + [torch.empty(rows, D, dtype=torch_dtype), S - 24 if ragged else S, sched, 34, 0.1]
    consts = dict(BLOCK_M=t.WS_BLOCK_M, BLOCK_N=t.WS_BLOCK_N, NUM_BUFFERS=t.PERSISTENT_BUFFERS[D], CAUSAL=causal,
                  RAGGED=ragged, LOADER_REGS=t.WS_LOADER_REGS, CONSUMER_REGS=t.WS_CONSUMER_REGS,
                  Q_SLOTS=t.PERSISTENT_Q_SLOTS)
    consts.update(overrides)
    fn = t._attn_fwd_persist
    signature, attrs = {}, {}
    for i, (name, arg) in enumerate(zip(fn.arg_names, args)):
        signature[name], specialization = native_specialize_impl(BaseBackend, arg, False, True, True)
        if specialization == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    signature.update({name: "constexpr" for name in consts})
    return triton.compile(GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})


def cuobjdump(kernel, flag):
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        return subprocess.run([tool, flag, cubin.name], capture_output=True, text=True, check=True).stdout


def loops(sass):
    """Each backward branch's body (target..branch) as (start, end, opcode counts), longest bodies last: the
    consumers' block loops are the ones holding HGMMAs."""
    ins = parse(sass)
    found = []
    for i, (addr, pred, op, rest) in enumerate(ins):
        m = re.search(r"0x([0-9a-f]+)", rest) if op.startswith("BRA") else None
        if m and int(m.group(1), 16) < addr:
            start = int(m.group(1), 16)
            body = [o.split(".")[0] for a, p, o, r in ins if start <= a <= addr]
            if "HGMMA" in body:
                found.append((hex(start), hex(addr), len(body), dict(collections.Counter(body).most_common(14))))
    return found


def main():
    template, out_dir, *cases = sys.argv[1:]
    os.makedirs(out_dir, exist_ok=True)
    t = load(template)
    for case in cases:
        name, dtype, D, causal, *kv = case.split(":")
        overrides = {k: int(v) for k, v in (x.split("=") for x in kv)}
        ragged = bool(overrides.pop("RAGGED", 0))
        kernel = compile_persist(t, dtype, int(D), bool(int(causal)), ragged=ragged, **overrides)
        sass = cuobjdump(kernel, "-sass")
        usage = cuobjdump(kernel, "-res-usage")
        stem = os.path.join(out_dir, f"{name}-{triton.__version__}")
        for ext, text in (("ptx", kernel.asm["ptx"]), ("sass", sass)):
            with open(f"{stem}.{ext}", "w") as f:
                f.write(text)
        print(json.dumps({"case": case, "triton": triton.__version__, "shared": kernel.metadata.shared,
                          "regs": int(re.search(r"REG:(\d+)", usage).group(1)),
                          "stack": int(re.search(r"STACK:(\d+)", usage).group(1)),
                          "stale_descriptors": [hex(a) for a, _, _ in descriptor_reads_not_dominated(sass)],
                          "instructions": len(parse(sass)), "hgmma_loops": loops(sass)}))


if __name__ == "__main__":
    main()
