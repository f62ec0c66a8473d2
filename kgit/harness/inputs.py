"""Fresh random inputs in named value regimes, and the run's seed.

CASES (the `case` a Spec's make_inputs receives):
  normal: standard normal
  large:  normal x 1e4 (clamped inside fp16's range): overflow in exp() or in squares
  tiny:   normal x 1e-6 (fp16 subnormals): underflow, eps dominance
  equal:  every row one random constant: zero variance, a uniform softmax
  neginf: normal with ~1/8 of the entries -inf (never a whole row): masked logits
"""

from __future__ import annotations

import os

CASES = ("normal", "large", "tiny", "equal", "neginf")


def seed_everything(seed: int | None = None) -> int:
    """Seed torch from KGIT_SEED, else from the OS (never a fixed seed); returns the seed for the JSON."""
    import torch

    if seed is None:
        seed = int(os.environ.get("KGIT_SEED") or int.from_bytes(os.urandom(4), "little"))
    torch.manual_seed(seed)
    return seed


def rand(shape, dtype, device, case: str = "normal", scale: float = 1.0):
    """Fresh random values of `shape` in the regime `case`, drawn in fp32, times `scale`, then rounded."""
    import torch

    shape = tuple(shape)
    x = torch.randn(shape, device=device, dtype=torch.float32) * scale
    if case == "large":
        x = x * 1e4
        if dtype == torch.float16:
            x = x.clamp(-6e4, 6e4)
    elif case == "tiny":
        x = x * 1e-6
    elif case == "equal":
        first = x[..., :1] if x.dim() else x
        x = first.expand_as(x).contiguous()
    elif case == "neginf":
        mask = torch.rand(shape, device=device) < 0.125
        if x.dim():  # keep one random entry of every row finite: no row is all -inf
            keep = torch.randint(0, shape[-1], shape[:-1] + (1,), device=device)
            mask.scatter_(-1, keep, False)
        x = x.masked_fill(mask, float("-inf"))
    elif case != "normal":
        raise ValueError(f"unknown case {case!r} (one of {', '.join(CASES)})")
    return x.to(dtype)
