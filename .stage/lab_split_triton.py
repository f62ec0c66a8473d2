"""Lab (gemm59): the wave-fill experiment's Triton two-accumulator tile (3c18f1f, 128 x (128 + 64)) compiled for
sm_90: how its wgmma are waited on (was the 0.64x a serialization?)."""
import importlib.util, os, re, subprocess, sys, tempfile
import torch, triton
from triton.backends.compiler import BaseBackend, GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import native_specialize_impl
from triton.tools.tensor_descriptor import TensorDescriptor

spec = importlib.util.spec_from_file_location("g3c18", "/tmp/gemm_3c18.py")
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
fn = t.gemm_tma_kernel
M, N, K = 2048, 4608, 3584
mk = lambda r, c, box: TensorDescriptor.from_tensor(torch.empty(r, c, dtype=torch.bfloat16), box)
descs = [mk(M, K, [128, 64]), mk(K, N, [64, 128]), mk(M, N, [128, 128]), mk(K, N, [64, 64]), mk(M, N, [128, 64])]
consts = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_N2=64, BLOCK_K=64, GROUP_M=8, NUM_PROGRAMS=128, PERSISTENT=1,
              FLATTEN=1, WARP_SPECIALIZE=0, EPILOGUE_SUBTILE=0)
args = dict(zip(fn.arg_names, descs + [M, N, K]))
signature, attrs = {}, {}
for i, name in enumerate(fn.arg_names):
    if name in consts:
        continue
    signature[name], spec_ = native_specialize_impl(BaseBackend, args[name], False, True, True)
    if spec_ == "D":
        attrs[(i,)] = [["tt.divisibility", 16]]
signature.update({n: "constexpr" for n in consts})
k = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                   target=GPUTarget("cuda", 90, 64), options=dict(num_warps=8, num_stages=4))
cuobj = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
    f.write(k.asm["cubin"]); f.flush()
    sass = subprocess.run([cuobj, "-sass", f.name], capture_output=True, text=True).stdout
for line in sass.splitlines():
    if re.search(r"HGMMA|WARPGROUP|SYNCS.PHASECHK", line):
        print(line.split("/*")[1].split("*/")[1].strip() if "/*" in line else line)
