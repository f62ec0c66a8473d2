"""Rotary position embedding (RoPE, GPT-NeoX "rotate half" layout) in Triton,
with the torch reference beside it.

x has shape [T, H, D] (tokens, heads, head dim; D even), cos and sin [T, D/2]
(one angle per token and frequency, shared by every head). With x1 = x[..., :D/2]
and x2 = x[..., D/2:]:

    out[..., :D/2] = x1 * cos - x2 * sin
    out[..., D/2:] = x2 * cos + x1 * sin

fp32 arithmetic, one rounding on the store. Minimal traffic: read x, write out,
read cos and sin once (T * D elements, H times fewer than x). 6 flops per
pair: purely memory-bound, an elementwise kernel whose ceiling is the copy.

One kernel: a program owns BLOCK_T tokens x BLOCK_H heads, loads each token's
cos/sin once and reuses it for all its heads (the main saving over torch,
which also materialises x1*cos etc. as temporaries: ~5 passes over x).
"""

import torch
import triton
import triton.language as tl

CONFIG = {"BLOCK_T": 1, "BLOCK_H": 32, "num_warps": 4, "num_stages": 1}
CONFIG_SPACE = {
    "BLOCK_T": [1, 2, 4, 8, 16],
    "BLOCK_H": [4, 8, 16, 32],
    "num_warps": [2, 4, 8, 16],
    "num_stages": [1, 2],
}


def rope_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    xd, c, s = x.double(), cos.double()[:, None, :], sin.double()[:, None, :]
    half = x.shape[-1] // 2
    x1, x2 = xd[..., :half], xd[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def rope_torch(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """What a model does in eager torch (the baseline for speedup)."""
    half = x.shape[-1] // 2
    c, s = cos[:, None, :], sin[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


@triton.jit
def _rope(x_ptr, cos_ptr, sin_ptr, y_ptr, T, H, stride_xt, stride_xh, stride_yt, stride_yh, stride_ct,
          HALF: tl.constexpr, HALF_POW2: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr,
          N_HB: tl.constexpr):
    # A 1-D grid, the head block fastest: the programs resident at once cover contiguous memory (see
    # rope()).
    pid = tl.program_id(0)
    toks = (pid // N_HB) * BLOCK_T + tl.arange(0, BLOCK_T)
    heads = (pid % N_HB) * BLOCK_H + tl.arange(0, BLOCK_H)
    d = tl.arange(0, HALF_POW2)
    tok_ok = toks < T
    cs_ok = tok_ok[:, None] & (d[None, :] < HALF)
    cs_off = toks.to(tl.int64)[:, None] * stride_ct + d[None, :]
    c = tl.load(cos_ptr + cs_off, mask=cs_ok, other=0.0).to(tl.float32)[:, None, :]
    s = tl.load(sin_ptr + cs_off, mask=cs_ok, other=0.0).to(tl.float32)[:, None, :]
    ok = cs_ok[:, None, :] & (heads < H)[None, :, None]
    t64 = toks.to(tl.int64)[:, None, None]
    h64 = heads.to(tl.int64)[None, :, None]
    x_off = t64 * stride_xt + h64 * stride_xh + d[None, None, :]
    y_off = t64 * stride_yt + h64 * stride_yh + d[None, None, :]
    x1 = tl.load(x_ptr + x_off, mask=ok, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + x_off + HALF, mask=ok, other=0.0).to(tl.float32)
    ty = y_ptr.dtype.element_ty
    tl.store(y_ptr + y_off, (x1 * c - x2 * s).to(ty), mask=ok)
    tl.store(y_ptr + y_off + HALF, (x2 * c + x1 * s).to(ty), mask=ok)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor | None = None,
         config: dict | None = None) -> torch.Tensor:
    """Apply RoPE to x [T, H, D] with cos/sin [T, D/2]; writes `out` (or a new tensor)."""
    cfg = dict(CONFIG, **(config or {}))
    T, H, D = x.shape
    assert D % 2 == 0 and x.stride(-1) == 1 and cos.shape == (T, D // 2) and cos.stride() == sin.stride()
    y = torch.empty_like(x) if out is None else out
    if T == 0 or H == 0:
        return y
    bt, bh = int(cfg["BLOCK_T"]), int(cfg["BLOCK_H"])
    bh = min(bh, triton.next_power_of_2(H))
    # One program per (token block, head block), numbered head block fastest. With the token block on
    # grid axis 0 and the head block on axis 1 (as before), H=64 x D=128 meant two programs a token and
    # the programs resident at once read every other 8 KB (16-bit) of x: 88.9-89.9% of copy in 16-bit,
    # 93.0-93.4% in fp32 on the H200; in this order 92.8-93.2% and 96.0% (the A/B runs,
    # df8b865:experiments/sweep-h200-2026-12-01/session9-near-misses/). Where one head block covers every head
    # (H <= BLOCK_H) the two orders are the same.
    n_hb = triton.cdiv(H, bh)
    grid = (triton.cdiv(T, bt) * n_hb,)
    _rope[grid](x, cos, sin, y, T, H, x.stride(0), x.stride(1), y.stride(0), y.stride(1), cos.stride(0),
                HALF=D // 2, HALF_POW2=max(triton.next_power_of_2(D // 2), 2), BLOCK_T=bt, BLOCK_H=bh, N_HB=n_hb,
                num_warps=int(cfg["num_warps"]), num_stages=int(cfg["num_stages"]))
    return y
