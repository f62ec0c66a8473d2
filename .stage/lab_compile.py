"""Lab (gemm59): compile gemm.py's Gluon kernels for sm_90 on the CPU and print shared memory, registers, spills and
the wgmma shapes in the PTX. Usage: python .stage/lab_compile.py [gemm.py path] (default: this tree's)."""
import importlib.util, json, os, re, subprocess, sys, tempfile
import torch, triton
from triton.backends.compiler import BaseBackend, GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import native_specialize_impl

path = sys.argv[1] if len(sys.argv) > 1 else "skills/kernels/gemm/gemm.py"
spec = importlib.util.spec_from_file_location("gemm_lab", path)
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
GL = {"bf16": (torch.bfloat16, t.gl.bfloat16), "fp16": (torch.float16, t.gl.float16)}
CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


def desc(tensor, block, gl_dtype):
    return t.GluonDescriptor(tensor, list(tensor.shape), list(tensor.stride()), block,
                             t.gl.NVMMASharedLayout.get_default_for(block, gl_dtype))


def compile_gluon(fn, args, consts, options):
    signature, attrs = {}, {}
    for i, (name, arg) in enumerate(zip(fn.arg_names, args)):
        signature[name], specialization = native_specialize_impl(BaseBackend, arg, False, True, True)
        if specialization == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    signature.update({name: "constexpr" for name in consts})
    kernel = triton.compile(GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                            target=GPUTarget("cuda", 90, 32), options=options)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        usage = subprocess.run([CUOBJDUMP, "-res-usage", cubin.name], capture_output=True, text=True).stdout
        sass = subprocess.run([CUOBJDUMP, "-sass", cubin.name], capture_output=True, text=True).stdout
    return kernel, usage, sass


def report(case, kernel, usage, sass):
    ptx = kernel.asm["ptx"]
    wgmma = sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)", ptx)))
    print(json.dumps({"case": case, "shared": kernel.metadata.shared,
                      "regs": re.findall(r"REG:(\d+)", usage), "stack": re.findall(r"STACK:(\d+)", usage),
                      "local": re.findall(r"LOCAL:(\d+)", usage), "wgmma": wgmma,
                      "wgmma_count": ptx.count("wgmma.mma_async"),
                      "waits": re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+)", ptx),
                      "tma_loads": len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::(cluster|cta)\.global", ptx)),
                      "tma_stores": len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta", ptx)),
                      "setmaxnreg": re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32 (\d+)", ptx),
                      "st_shared": sorted(set(re.findall(r"(st\.shared[.\w]*|stmatrix[.\w]*)", ptx)))}))


cases = sys.argv[2:] or ["96:bf16:384,4096,4096", "80:fp16:320,4096,4096", "96:bf16:300,4000,1000"]
for case in cases:
    bm, dtype, shape = case.split(":")
    BM = int(bm)
    M, N, K = map(int, shape.split(","))
    torch_dtype, gl_dtype = GL[dtype]
    BN, BK = 128, 64
    stages = t.gluon_stages(BM, BN, BK)
    rest = BM - 64
    if BM % 64:
        boxes = [[rest, BK], [BK, 64], [rest, 64]]
        fn = t.gemm_gluon_swap_kernel
    else:
        boxes = [[64, BK], [BK, BN], [64, BN]]
        fn = t.gemm_gluon_kernel
    descs = [desc(torch.empty(r, c, dtype=torch_dtype), box, gl_dtype)
             for (r, c), box in zip([(M, K), (K, N), (M, N)], boxes)]
    consts = dict(BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, NUM_STAGES=stages, LOADER_REGS=t.GLUON_LOADER_REGS,
                  CONSUMER_REGS=t.GLUON_CONSUMER_REGS)
    try:
        kernel, usage, sass = compile_gluon(fn, descs + [M, N, K], consts,
                                            {"num_warps": 4, "maxnreg": t.GLUON_TWO_CONSUMER_LAUNCH_REGS})
    except Exception as e:
        print(case, "FAILS", type(e).__name__, str(e).strip()[-3000:])
        continue
    report([case, stages], kernel, usage, sass)
    if os.environ.get("LAB_DUMP"):
        open(f"/tmp/lab_{bm}_{dtype}.ptx", "w").write(kernel.asm["ptx"])
        open(f"/tmp/lab_{bm}_{dtype}.sass", "w").write(sass)
        open(f"/tmp/lab_{bm}_{dtype}.ttgir", "w").write(kernel.asm["ttgir"])
