"""A copy with a known, removable waste: the kernel behind the noise experiment of kgit's decisions.

    y[i] = x[i]      and, beside it, a read of PAD_PCT % of the copy's traffic that does no useful work

The copy is memory-bound, so its time follows the bytes it moves: with PAD_PCT = 3 it moves 3% more
than the minimal 2 * N * elem bytes and its useful bandwidth should be about 3% lower. Setting PAD_PCT
to 0 is therefore a real gain of about 3%, which kgit must keep; re-measuring an unchanged kernel is
not a gain, which kgit must not keep.
"""

import torch
import triton
import triton.language as tl

CONFIG = {"PAD_PCT": 3, "BLOCK": 8192, "num_warps": 8}
CONFIG_SPACE = {"PAD_PCT": [0, 3], "BLOCK": [2048, 4096, 8192, 16384], "num_warps": [4, 8, 16]}

_pad_buffers = {}


@triton.jit
def _padded_copy(x_ptr, y_ptr, pad_ptr, sink_ptr, n, n_pad, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    copy_programs = tl.cdiv(n, BLOCK)
    if pid < copy_programs:
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
    else:  # the waste: read a slice of the pad buffer, keep one number so the read is not optimized away
        offs = (pid - copy_programs).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(pad_ptr + offs, mask=offs < n_pad, other=0.0)
        tl.store(sink_ptr + pid - copy_programs, tl.sum(v.to(tl.float32), axis=0))


def padded_copy(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    n_pad = (2 * n * CONFIG["PAD_PCT"]) // 100  # PAD_PCT % of the copy's read + write, in elements
    key = (x.device, x.dtype, n_pad)
    if key not in _pad_buffers:
        _pad_buffers[key] = (torch.full((max(n_pad, 1),), 0.5, device=x.device, dtype=x.dtype),
                             torch.empty(triton.cdiv(max(n_pad, 1), CONFIG["BLOCK"]), device=x.device))
    pad, sink = _pad_buffers[key]
    grid = (triton.cdiv(n, CONFIG["BLOCK"]) + triton.cdiv(n_pad, CONFIG["BLOCK"]),)
    _padded_copy[grid](x, out, pad, sink, n, n_pad, BLOCK=CONFIG["BLOCK"], num_warps=CONFIG["num_warps"])
    return out
