"""Compile statistics of softmax's pipelined loop on row bodies cut at 16-byte boundaries (PIPELINED_BODIES)
beside the kernels those rows took before (_softmax_row whole, _softmax_split), compiled for sm_90 with this
machine's Triton (no GPU needed: ptxas ships with Triton): a thread's global accesses and cp.async copies by
width, registers, spills and shared memory, at the held-out shapes' arguments.

    python benchmarks/explore/pipelined_bodies_ptx.py
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
import bench  # noqa: E402


def compiled(fn, sig, consts, num_warps, num_stages, **opts):
    # every pointer 16-byte aligned, as torch allocates; integers unspecialized, as for a stride of 4097
    attrs = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t.startswith("*")}
    src = ASTSource(fn, sig, {k: v for k, v in consts.items() if k in fn.arg_names}, attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=num_warps, num_stages=num_stages, **opts))


def stats(k) -> str:
    ops = collections.Counter(re.findall(r"((?:ld|st)\.global[\.\w]*|cp\.async\.c[ga]\.shared\.global[^\[]*\[[^\]]*\],"
                                         r" \[[^\]]*\], \d+)", k.asm["ptx"]))
    ops = collections.Counter({re.sub(r"\[[^\]]*\], \[[^\]]*\], ", "", op): n for op, n in ops.items()})
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:  # ptxas's report: no driver needed
        f.write(k.asm["ptx"])
        f.flush()
        err = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"],
                             capture_output=True, text=True).stderr
    n_regs = re.search(r"Used (\d+) registers", err).group(1)
    spills = re.search(r"(\d+) bytes spill stores", err).group(1)
    return (f"{', '.join(f'{n} {op}' for op, n in sorted(ops.items()))}; {n_regs} registers, {spills} B spilled, "
            f"{k.metadata.shared} B shared")


def main():
    m = bench.kernel_module("softmax", side="new_softmax")
    row = {"x_ptr": "*bf16", "y_ptr": "*bf16", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
    split = {"x_ptr": "*bf16", "y_ptr": "*bf16", "words": "*i64", "exits": "*i32", "M": "i32", "N": "i32",
             "stride_x": "i32", "stride_y": "i32"}
    rows = {"x_ptr": "*bf16", "y_ptr": "*bf16", "M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
    aligned = {"ROWS": 1, "EVEN": False, "UNIT": 1, "ALIGNED": True, "VEC": 8}
    cases = [  # (what, kernel, signature, constexprs, warps, stages, options)
        ("2048x4097 bf16, before: _softmax_row, 8 warps", m._softmax_row, row,
         {"BLOCK_N": 8192, "GROUPED": False, "GROUP": 64, "ALIGNED": True, "VEC": 8}, 8, 1, {}),
        ("2048x4097 bf16, now: _softmax_rows ALIGNED, 16 warps, 4 stages", m._softmax_rows, rows,
         {"BLOCK_N": 4096, "NUM_STAGES": 4, **aligned}, 16, 4, {}),
        ("896x8193 (as bf16), before: _softmax_row, 8 warps", m._softmax_row, row,
         {"BLOCK_N": 16384, "GROUPED": False, "GROUP": 64, "ALIGNED": True, "VEC": 8}, 8, 1, {}),
        ("896x8193 (as bf16), now: _softmax_rows ALIGNED, 16 warps, 4 stages", m._softmax_rows, rows,
         {"BLOCK_N": 8192, "NUM_STAGES": 4, **aligned}, 16, 4, {}),
        ("2048x30522 bf16, before: _softmax_split", m._softmax_split, split,
         {"BLOCK_N": 4096, "P": 8, "P_POW2": 8, "MAX_SPIN": 1 << 20, "ALIGNED": True, "VEC": 8}, 8, 1,
         {"maxnreg": 64}),
        ("2048x30522 bf16, now: _softmax_rows ALIGNED, 16 warps, 4 stages", m._softmax_rows, rows,
         {"BLOCK_N": 32768, "NUM_STAGES": 4, **aligned}, 16, 4, {}),
        ("1024x32000 (rows of 16, the loop as it was), 16 warps, 4 stages", m._softmax_rows, rows,
         {"BLOCK_N": 32768, "NUM_STAGES": 4, "ROWS": 1, "EVEN": False, "UNIT": 1, "ALIGNED": False, "VEC": 8},
         16, 4, {}),
    ]
    print(f"triton {triton.__version__}, sm_90")
    for what, fn, sig, consts, warps, stages, opts in cases:
        print(f"{what}\n    {stats(compiled(fn, sig, consts, warps, stages, **opts))}")


if __name__ == "__main__":
    main()
