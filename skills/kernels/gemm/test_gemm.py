"""Test for the GEMM template: checks, times, prints the kgit contract JSON (tflops).

    python skills/kernels/gemm/test_gemm.py --json        # checks + headline (4096^3 bf16)
    python skills/kernels/gemm/test_gemm.py --sweep       # checks + every benchmark shape
    TRITON_INTERPRET=1 python skills/kernels/gemm/test_gemm.py --json   # CPU: tiny shapes, correctness
"""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))

from kgit import bench_compute as bc  # noqa: E402

T = bc.load_sibling(__file__, "triton_template", "kgit_gemm_template")

# (M, N, K): squares, a skinny-K, a wide one, non-multiples of the tile sizes.
BENCH_SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                (8192, 1024, 8192), (4096, 4096, 1000), (4000, 4000, 4000)]
HEADLINE = (4096, 4096, 4096)
# Checked on the GPU before timing: odd sizes, a row of one, K not a multiple of BLOCK_K.
GPU_CHECK = [(1, 4096, 4096), (1023, 1537, 4097), (4097, 1023, 1000), (257, 384, 72), (4000, 4000, 4000)]
# Interpreter: tiny, and fp16/fp32 only (no bf16 arithmetic in the interpreter).
CPU_CHECK = [(64, 48, 40), (33, 70, 19), (1, 16, 16), (96, 64, 72)]


def problem(M, N, K, dtype_name):
    import torch

    dtype = getattr(torch, dtype_name)
    dev = bc.device()
    gen = bc.new_generator()
    a = torch.empty((M, K), device=dev, dtype=dtype)
    b = torch.empty((K, N), device=dev, dtype=dtype)
    out = torch.empty((M, N), device=dev, dtype=dtype)

    def refill():
        bc.randn_(a, gen)
        bc.randn_(b, gen)

    refill()
    return bc.Problem(
        label=f"{M}x{N}x{K}", dtype=dtype_name, flops=2.0 * M * N * K, out=out,
        launch=lambda: T.gemm(a, b, out=out),
        reference=lambda: (out, T.reference(a, b)),
        refill=refill,
        baseline=lambda: T.torch_gemm(a, b, out=out) if dev == "cuda" else torch.matmul(a.float(), b.float()),
        baseline_name="torch.matmul",
        params={"M": M, "N": N, "K": K},
    )


def check_problems():
    if bc.device() == "cpu":
        return [lambda s=s, d=d: problem(*s, d) for d in ("float16", "float32") for s in CPU_CHECK]
    return [lambda s=s, d=d: problem(*s, d) for d in ("bfloat16", "float16") for s in GPU_CHECK]


def headline_problem():
    if bc.device() == "cpu":
        return problem(64, 64, 64, "float16")
    return problem(*HEADLINE, "bfloat16")


def sweep_problems(dtypes=("bfloat16", "float16")):
    if bc.device() == "cpu":
        return [lambda: problem(64, 64, 64, "float16"), lambda: problem(48, 80, 33, "float32")]
    return [lambda s=s, d=d: problem(*s, d) for d in dtypes for s in BENCH_SHAPES]


def main(argv=None):
    return bc.run_test("gemm", check_problems, headline_problem, sweep_problems,
                       "4096x4096x4096 bf16" if bc.device() != "cpu" else "64x64x64 fp16 (CPU interpreter)",
                       argv)


if __name__ == "__main__":
    main()
