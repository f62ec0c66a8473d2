"""A large bf16 GEMM (compute-bound at 8192^3): correctness against fp32, then TFLOPS (kgit contract)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import harness  # noqa: E402
import torch  # noqa: E402
from triton_template import matmul  # noqa: E402

PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4}  # dense bf16 datasheet figures


def inputs(m, n, k, device):
    # bf16 on the GPU; fp32 in Triton's interpreter, which has no bf16 arithmetic
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    return a, b, torch.full((m, n), float("nan"), device=device, dtype=dtype)


def check(m, n, k, device) -> str | None:
    a, b, c = inputs(m, n, k, device)
    matmul(a, b, c)
    ref = a.float() @ b.float()  # fp32 reference of the same bf16 inputs
    err = (c.float() - ref).abs().max().item()
    scale = ref.abs().max().item()
    if not err <= 2e-2 * scale:  # bf16 output rounding is 2^-8 relative; NaN fails too
        return f"{m}x{n}x{k}: max error {err:.3g} vs scale {scale:.3g}"
    return None


def main():
    args = harness.parse_args()
    gpu = harness.on_gpu()
    device = "cuda" if gpu else "cpu"
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = False
    size = (8192, 8192, 8192) if gpu else (64, 64, 64)
    if args.profile:
        a, b, c = inputs(*size, device)
        for _ in range(3):
            matmul(a, b, c)
        if gpu:
            torch.cuda.synchronize()
        harness.emit({"kernel": "gemm-big", "gpu": harness.gpu_name(), "profile": True, "status": "profiled"})
        return
    shapes = [(257, 513, 1031), (1024, 1024, 1024), size] if gpu else [(33, 65, 47), size]
    errors = [e for e in (check(*s, device) for s in shapes) if e]
    result = {"kernel": "gemm-big", "gpu": harness.gpu_name(), "backend": "cuda" if gpu else "interpreter",
              "cpu_timing": not gpu, "correctness": not errors, "status": "pass" if not errors else "fail",
              "errors": errors}
    if not errors:
        a, b, c = inputs(*size, device)
        us, spread = harness.bench(lambda: matmul(a, b, c))
        flops = 2.0 * size[0] * size[1] * size[2]
        tflops = flops / (us * 1e-6) / 1e12
        peak = next((v for k, v in PEAK_TFLOPS.items() if k in result["gpu"]), None) if gpu else None
        torch_us, _ = harness.bench(lambda: torch.matmul(a, b, out=c)) if gpu else (None, None)
        result.update(latency_us=round(us, 2), tflops=float(f"{tflops:.5g}"), spread_pct=round(spread, 2),
                      pct_of_peak=round(tflops / peak * 100, 2) if peak else None,
                      speedup=round(torch_us / us, 3) if torch_us else None,
                      torch_tflops=round(flops / (torch_us * 1e-6) / 1e12, 2) if torch_us else None,
                      headline=f"{str(a.dtype)[6:]} {size[0]}x{size[1]}x{size[2]}")
    harness.emit(result)


if __name__ == "__main__":
    main()
