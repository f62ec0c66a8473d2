"""Lab (gemm59): is wgmma's register A operand (B^T in the swapped kernel) laid out the same whatever the
accumulator's N? The swap consumer gives one register tensor, in the layout made with the top accumulator (instr N
64) as parent, to both wgmmas (N 64 and N REST). Prints the linear layouts of DotOperandLayout(0, parent, k_width 2)
for parents of instr N 64, 32, 16, on a [64, 64] operand, compiled for sm_90 on the CPU."""
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource


@gluon.jit
def show(out, N: gl.constexpr):
    parent: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, N, 16])
    gl.static_print(N, gl.to_linear_layout(gl.DotOperandLayout(operand_index=0, parent=parent, k_width=2), [64, 64]))


for n in (64, 32, 16):
    triton.compile(GluonASTSource(fn=show, signature={"out": "*fp32", "N": "constexpr"}, constexprs={"N": n},
                                  attrs={}), target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
