"""A tiny-launch vector add (latency-bound): correctness, then GB/s (kgit contract)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import harness  # noqa: E402
import torch  # noqa: E402
from triton_template import add  # noqa: E402

N = 4096


def main():
    args = harness.parse_args()
    gpu = harness.on_gpu()
    device = "cuda" if gpu else "cpu"
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    x, y = torch.randn(N, device=device), torch.randn(N, device=device)
    z = torch.full_like(x, float("nan"))
    if args.profile:
        for _ in range(3):
            add(x, y, z)
        if gpu:
            torch.cuda.synchronize()
        harness.emit({"kernel": "tiny-add", "gpu": harness.gpu_name(), "profile": True, "status": "profiled"})
        return
    errors = []
    for n in (1, 1023, N):  # edge sizes and the headline one, fresh inputs each
        a, b = torch.randn(n, device=device), torch.randn(n, device=device)
        c = torch.full_like(a, float("nan"))
        add(a, b, c)
        if not torch.equal(c, a + b):
            errors.append(f"n={n}: max error {(c - (a + b)).abs().max().item():.3g}")
    result = {"kernel": "tiny-add", "gpu": harness.gpu_name(), "backend": "cuda" if gpu else "interpreter",
              "cpu_timing": not gpu, "correctness": not errors, "status": "pass" if not errors else "fail",
              "errors": errors}
    if not errors:
        us, spread = harness.bench(lambda: add(x, y, z))
        torch_us, _ = harness.bench(lambda: torch.add(x, y, out=z))
        result.update(latency_us=round(us, 3), gbps=float(f"{3 * 4 * N / (us * 1e-6) / 1e9:.5g}"),
                      spread_pct=round(spread, 2), speedup=round(torch_us / us, 3), pct_of_peak=None,
                      headline=f"fp32 n={N}, one launch")
    harness.emit(result)


if __name__ == "__main__":
    main()
