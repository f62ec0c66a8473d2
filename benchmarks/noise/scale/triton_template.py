"""y = 2 x, plus an extra read: the first EXTRA fraction of the elements also adds a side array of
zeros, which costs EXTRA of x's bytes in traffic. EXTRA = 0.06 reads 3% more than one read and one
write; the decisions experiment cuts it to 0.0, a real 3% traffic cut that changes no result."""

import torch
import triton
import triton.language as tl

EXTRA = 0.06
BLOCK = 4096


@triton.jit
def _scale_kernel(x_ptr, pad_ptr, y_ptr, n, n_pad, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    pad = tl.load(pad_ptr + offsets, mask=offsets < n_pad, other=0.0)  # a masked-off load reads nothing
    tl.store(y_ptr + offsets, 2.0 * x + pad, mask=offsets < n)


def scale(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    n_pad = int(n * EXTRA)
    pad = _zeros(max(n_pad, 1), x.device)
    _scale_kernel[(triton.cdiv(n, BLOCK),)](x, pad, out, n, n_pad, BLOCK=BLOCK)
    return out


_pads = {}


def _zeros(n, device):
    if (n, device) not in _pads:
        _pads[(n, device)] = torch.zeros(n, device=device)
    return _pads[(n, device)]
