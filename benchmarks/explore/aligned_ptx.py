"""Global loads and stores by width, registers and spills of the row kernels the ALIGNED_BODY / ROW_UNIT
candidate changes, compiled for sm_90 with this machine's Triton (no GPU needed: ptxas ships with Triton), at
the held-out shapes' arguments, main's kernel file against this checkout's.

    python benchmarks/explore/aligned_ptx.py MAIN_SOFTMAX.py MAIN_CROSS_ENTROPY.py
"""
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402


def compiled(fn, sig, consts, num_warps, **opts):
    # every pointer 16-byte aligned, as torch allocates; integers unspecialized, as for a stride of 4097
    attrs = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t.startswith("*")}
    src = ASTSource(fn, sig, {k: v for k, v in consts.items() if k in fn.arg_names}, attrs)
    options = dict(num_warps=num_warps, num_stages=1, **opts)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def stats(k) -> str:
    ops = collections.Counter(re.findall(r"((?:ld|st)\.global[\.\w]*)", k.asm["ptx"]))
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(k.asm["ptx"])
        f.flush()
        err = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"],
                             capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", err).group(1)
    spills = re.search(r"(\d+) bytes spill stores", err).group(1)
    return f"{', '.join(f'{n} {op}' for op, n in sorted(ops.items()))}; {regs} registers, {spills} B spilled"


def main():
    old = {"softmax": common.load_module(sys.argv[1], "old_softmax"),
           "cross-entropy": common.load_module(sys.argv[2], "old_ce")}
    new = {"softmax": common.kernel_module("softmax", side="new_softmax"),
           "cross-entropy": common.kernel_module("cross-entropy", side="new_ce")}
    row = {"x_ptr": "*bf16", "y_ptr": "*bf16", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
    split = {"x_ptr": "*bf16", "y_ptr": "*bf16", "words": "*i64", "exits": "*i32", "M": "i32", "N": "i32",
             "stride_x": "i32", "stride_y": "i32"}
    rows = {"x_ptr": "*bf16", "y_ptr": "*bf16", "M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
    ce_rows = {"x_ptr": "*fp16", "t_ptr": "*i64", "loss_ptr": "*fp32", "M": "i32", "V": "i32", "stride_x": "i32",
               "ignore_index": "i32"}
    ce_split = {**ce_rows, "ws_ptr": "*fp32", "cnt_ptr": "*i32"}
    ce_split = {k: ce_split[k] for k in ("x_ptr", "t_ptr", "loss_ptr", "ws_ptr", "cnt_ptr", "M", "V", "stride_x",
                                         "ignore_index")}
    cases = [  # (what, kernel file, kernel, signature, constexprs (the candidate's beside main's), warps, options)
        ("softmax 2048x4097 bf16: _softmax_row, 8 warps", "softmax", "_softmax_row", row,
         {"BLOCK_N": 8192, "GROUPED": False, "GROUP": 64, "ALIGNED": True, "VEC": 8}, 8, {}),
        ("softmax 896x8193 fp16 (as bf16): _softmax_row, 8 warps", "softmax", "_softmax_row", row,
         {"BLOCK_N": 16384, "GROUPED": False, "GROUP": 64, "ALIGNED": True, "VEC": 8}, 8, {}),
        ("softmax 512x50257 bf16: _softmax_split", "softmax", "_softmax_split", split,
         {"BLOCK_N": 4096, "P": 13, "P_POW2": 16, "MAX_SPIN": 1 << 20, "ALIGNED": True, "VEC": 8}, 8, {"maxnreg": 64}),
        ("softmax 8192x3000 bf16: _softmax_rows, 4 warps", "softmax", "_softmax_rows", rows,
         {"BLOCK_N": 4096, "ROWS": 1, "NUM_STAGES": 1, "EVEN": False, "UNIT": 8}, 4, {}),
        ("cross-entropy 4096x30522 fp16: _ce_rows, 4 warps", "cross-entropy", "_ce_rows", ce_rows,
         {"BLOCK_N": 2048, "ROWS": 1, "NUM_STAGES": 1, "EVEN": False, "ALIGNED": True, "VEC": 8}, 4, {}),
        ("cross-entropy 4096x50257 (fp16): _ce_split, 4 warps", "cross-entropy", "_ce_split", ce_split,
         {"BLOCK_N": 2048, "CHUNK": 32768, "P": 2, "P_POW2": 2, "NUM_STAGES": 1, "ALIGNED": True, "VEC": 8}, 4, {}),
    ]
    for what, kernel, name, sig, consts, warps, opts in cases:
        print(what)
        for side, mods in (("main", old), ("candidate", new)):
            print(f"  {side:9s}  {stats(compiled(getattr(mods[kernel], name), sig, consts, warps, **opts))}")


if __name__ == "__main__":
    main()
