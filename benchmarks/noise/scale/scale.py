"""y = 2 x, plus an extra read: the first EXTRA fraction of the elements also adds a side array of
zeros, which costs EXTRA of x's bytes in traffic. EXTRA = 0.06 reads 3% more than one read and one
write; the decisions experiment cuts it to 0.0, a real 3% traffic cut that changes no result.

Each call reads the next of SLICES slices of the zeros: 24 slices of 6% of x are about 70 MB, more
than the H200's 50 MB L2, so the extra read comes from DRAM and is not served by the cache."""

import torch
import triton
import triton.language as tl

EXTRA = 0.06
BLOCK = 4096
SLICES = 24


@triton.jit
def _scale_kernel(x_ptr, pad_ptr, y_ptr, n, n_pad, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    pad = tl.load(pad_ptr + offsets, mask=offsets < n_pad, other=0.0)  # a masked-off load reads nothing
    tl.store(y_ptr + offsets, 2.0 * x + pad, mask=offsets < n)


def scale(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    n_pad = int(n * EXTRA)
    width = max(n_pad, 1)
    pad = _zeros(width * SLICES, x.device)
    start = (_calls[0] % SLICES) * width
    _calls[0] += 1
    _scale_kernel[(triton.cdiv(n, BLOCK),)](x, pad[start:], out, n, n_pad, BLOCK=BLOCK)
    return out


_pads = {}
_calls = [0]


def _zeros(n, device):
    if (n, device) not in _pads:
        _pads[(n, device)] = torch.zeros(n, device=device)
    return _pads[(n, device)]
