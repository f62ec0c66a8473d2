"""Lab (gemm59): does Gluon (Triton 3.9) take a tile whose N is not a power of two? Compiles tiny kernels for
sm_90 on the CPU: an accumulator [64, 96] with wgmma instr N 96 on a [64, 96] shared B; and, for comparison,
the two-piece form (n64 + n32). Prints what each compile says."""
import os, sys, traceback
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma, warpgroup_mma_wait


@gluon.jit
def one_wgmma(out, BN: gl.constexpr):
    layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)
    a = gl.allocate_shared_memory(gl.bfloat16, [64, 64], layout)
    b = gl.allocate_shared_memory(gl.bfloat16, [64, BN], layout)
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    acc = gl.zeros([64, BN], gl.float32, acc_layout)
    acc = warpgroup_mma(a, b, acc)
    gl.store(out + gl.arange(0, 1), gl.sum(gl.sum(acc, 1), 0))


@gluon.jit
def smem_only(out, BN: gl.constexpr):
    layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)
    b = gl.allocate_shared_memory(gl.bfloat16, [64, BN], layout)
    s = b.slice(0, 64, dim=1)


def compile_(fn, consts):
    sig = {"out": "*fp32", **{k: "constexpr" for k in consts}}
    src = GluonASTSource(fn=fn, signature=sig, constexprs=consts, attrs={})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})


for fn, bn in [(one_wgmma, 128), (one_wgmma, 96), (smem_only, 96)]:
    try:
        k = compile_(fn, {"BN": bn})
        print(fn.__name__, bn, "compiles:", "n96" if "n96" in k.asm["ptx"] else "", k.metadata.shared)
    except Exception as e:
        print(fn.__name__, bn, "FAILS:", type(e).__name__, str(e).strip().splitlines()[-1][:300])
