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


def compiled(fn, sig, consts, num_warps, num_stages, ints16=(), **opts):
    # every pointer 16-byte aligned, as torch allocates; integers unspecialized (a stride of 4097) but those
    # named in ints16, which Triton sees as multiples of 16 (rows of 32000)
    attrs = {(i,): [["tt.divisibility", 16]] for i, (name, t) in enumerate(sig.items())
             if t.startswith("*") or name in ints16}
    src = ASTSource(fn, sig, {k: v for k, v in consts.items() if k in fn.arg_names}, attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=num_warps, num_stages=num_stages, **opts))


def _ptxas() -> str:
    try:
        return get_ptxas(90).path
    except TypeError:  # Tritons before the Blackwell one's ptxas take no architecture
        return get_ptxas().path


def stats(k) -> str:
    ptx = k.asm["ptx"]
    ops = collections.Counter(re.findall(r"(?:ld|st)\.global[\.\w]*", ptx))
    ops.update(f"cp.async {int(n, 0)} B" for n in re.findall(r"cp\.async\.c[ga]\.shared\.global \[[^\]]*\], "
                                                           r"\[[^\]]*\], (0x[0-9a-f]+|\d+)", ptx))
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:  # ptxas's report: no driver needed
        f.write(k.asm["ptx"])
        f.flush()
        err = subprocess.run([_ptxas(), "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"],
                             capture_output=True, text=True).stderr
    n_regs = re.search(r"Used (\d+) registers", err).group(1)
    spills = re.search(r"(\d+) bytes spill stores", err).group(1)
    threads = 32 * k.metadata.num_warps
    # an H100's SM: 2048 threads, 64K registers (allocated 8 a thread at a time), 228 KB of shared memory
    # (1 KB a program reserved); as softmax's _fit counts them
    occ = min(2048 // threads, 65536 // (-(-int(n_regs) // 8) * 8 * threads),
              228 * 1024 // (k.metadata.shared + 1024))
    return (f"{', '.join(f'{n} {op}' for op, n in sorted(ops.items()))}; {n_regs} registers, {spills} B spilled, "
            f"{k.metadata.shared} B shared: {occ} programs an SM")


def main():
    m = bench.kernel_module("softmax", side="new_softmax")
    row = {"x_ptr": "*bf16", "y_ptr": "*bf16", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
    split = {"x_ptr": "*bf16", "y_ptr": "*bf16", "words": "*i64", "exits": "*i32", "M": "i32", "N": "i32",
             "stride_x": "i32", "stride_y": "i32"}
    rows = {"x_ptr": "*bf16", "y_ptr": "*bf16", "M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
    aligned = {"ROWS": 1, "EVEN": False, "UNIT": 1, "ALIGNED": True, "VEC": 8}
    before = [  # (what, kernel, signature, constexprs, warps, stages, options)
        ("2048x4097 bf16, before: _softmax_row, 8 warps", m._softmax_row, row,
         {"BLOCK_N": 8192, "GROUPED": False, "GROUP": 64, "ALIGNED": True, "VEC": 8}, 8, 1, {}),
        ("896x8193 (as bf16), before: _softmax_row, 8 warps", m._softmax_row, row,
         {"BLOCK_N": 16384, "GROUPED": False, "GROUP": 64, "ALIGNED": True, "VEC": 8}, 8, 1, {}),
        ("2048x30522 bf16, before: _softmax_split", m._softmax_split, split,
         {"BLOCK_N": 4096, "P": 8, "P_POW2": 8, "MAX_SPIN": 1 << 20, "ALIGNED": True, "VEC": 8}, 8, 1,
         {"maxnreg": 64}),
    ]
    print(f"triton {triton.__version__}, sm_90")
    for what, fn, sig, consts, warps, stages, opts in before:
        print(f"{what}\n    {stats(compiled(fn, sig, consts, warps, stages, **opts))}")
    # the pipelined loop on bodies of 4096 (4097), 8192 (8193), 16384 (12289 or 16385) and 32768 (30522), on
    # the warps and stages _pipelined_choice weighs (stages up to what the shared memory holds: 3 at 32768)
    for block_n in (4096, 8192, 16384, 32768):
        for warps in m.PIPELINED_BODY_WARPS:
            for stages in range(m.MIN_PIPELINED_STAGES, m.PIPELINED_ROWS["num_stages"] + 1):
                k = compiled(m._softmax_rows, rows, {"BLOCK_N": block_n, "NUM_STAGES": stages, **aligned}, warps,
                             stages)
                print(f"_softmax_rows ALIGNED, body block {block_n}, {warps} warps, {stages} stages\n    {stats(k)}")
    k = compiled(m._softmax_rows, rows, {"BLOCK_N": 32768, "NUM_STAGES": 4, "ROWS": 1, "EVEN": False, "UNIT": 1,
                                         "ALIGNED": False, "VEC": 8}, 16, 4, ints16=("N", "stride_x", "stride_y"))
    print(f"rows of 16-element groups (1024x32000), the loop as it was, 16 warps, 4 stages\n    {stats(k)}")


if __name__ == "__main__":
    main()
