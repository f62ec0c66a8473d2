"""z = x + y over 4096 fp32 elements: one tiny launch, latency-bound by construction.

Four programs of 1024 elements on a 132-SM GPU: the launch overhead and the ramp-up are the time;
neither memory nor compute comes near its peak. Bytes: 3 * 4 * n.
"""
import torch
import triton
import triton.language as tl

CONFIG = {"BLOCK_SIZE": 1024, "num_warps": 4}


@triton.jit
def _tiny_add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    grid = (triton.cdiv(n, CONFIG["BLOCK_SIZE"]),)
    _tiny_add_kernel[grid](x, y, out, n, BLOCK_SIZE=CONFIG["BLOCK_SIZE"], num_warps=CONFIG["num_warps"])
    return out
