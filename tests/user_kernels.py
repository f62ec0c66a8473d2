"""Two small repositories of Triton kernels as their authors might write them, for kgit init and the
loop (tests/test_scaffold_user_repos.py) and for the readers of kernel files (tests/model/, tests/harness/).

SOFTMAX_REPO: what kgit init was built on: a package with forward and backward kernels behind a
torch.autograd.Function, a launcher with a float and a mode string that returns a tuple, and the
repository's own tests folder.
RMSNORM_REPO: held out (kgit init was never tuned on it): a src/ layout, a test/ folder named by
pyproject.toml's testpaths, a residual-add kernel, an Optional residual, a backward that reduces dw
with torch, a launcher returning (out, rstd).
ELEMENTWISE_REPO: for a scripted agent's loop (tests/loop/test_agent_keeps_an_improvement.py): a package
whose one kernel file holds three kernels behind launchers that share a module constant BLOCK_SIZE, left
small from debugging (a slow but correct start), and a pytest module that prints nothing but pytest's
own lines; no kgit.yaml.
"""

SOFTMAX = '''"""Row softmax with a temperature, forward and backward, as a torch.autograd.Function."""
import torch
import triton
import triton.language as tl


def _block(n_cols: int) -> int:
    return triton.next_power_of_2(n_cols)


@triton.jit
def _softmax_fwd_kernel(x_ptr, y_ptr, lse_ptr, n_cols, inv_temperature, BLOCK: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x * inv_temperature
    z_max = tl.max(z, axis=0)
    e = tl.exp(z - z_max)
    total = tl.sum(e, axis=0)
    if LOG:
        y = z - z_max - tl.log(total)
    else:
        y = e / total
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(lse_ptr + row, z_max + tl.log(total))


@triton.jit
def _softmax_bwd_kernel(dy_ptr, y_ptr, dx_ptr, n_cols, inv_temperature, BLOCK: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    if LOG:
        dz = dy - tl.exp(y) * tl.sum(dy, axis=0)
    else:
        dz = y * (dy - tl.sum(dy * y, axis=0))
    tl.store(dx_ptr + row * n_cols + cols, (dz * inv_temperature).to(dx_ptr.dtype.element_ty), mask=mask)


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, temperature, mode):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        y = torch.empty_like(x2)
        lse = torch.empty(x2.shape[0], device=x.device, dtype=torch.float32)
        log = mode == "log_softmax"
        _softmax_fwd_kernel[(x2.shape[0],)](x2, y, lse, x2.shape[1], 1.0 / temperature,
                                            BLOCK=_block(x2.shape[1]), LOG=log)
        ctx.save_for_backward(y)
        ctx.temperature, ctx.log = temperature, log
        ctx.mark_non_differentiable(lse)
        return y.view(shape), lse.view(shape[:-1])

    @staticmethod
    def backward(ctx, dy, dlse):
        (y,) = ctx.saved_tensors
        dy2 = dy.reshape(y.shape).contiguous()
        dx = torch.empty_like(y)
        _softmax_bwd_kernel[(y.shape[0],)](dy2, y, dx, y.shape[1], 1.0 / ctx.temperature,
                                           BLOCK=_block(y.shape[1]), LOG=ctx.log)
        return dx.view(dy.shape), None, None


def softmax(x: torch.Tensor, temperature: float = 1.0, mode: str = "softmax") -> tuple[torch.Tensor, torch.Tensor]:
    """softmax (or log_softmax) of x / temperature over the last dimension, and the rows' logsumexp."""
    if mode not in ("softmax", "log_softmax"):
        raise ValueError(f"mode must be softmax or log_softmax, not {mode!r}")
    return _Softmax.apply(x, temperature, mode)
'''

SOFTMAX_REPO = {
    "mykernels/__init__.py": "",
    "mykernels/softmax.py": SOFTMAX,
    "tests/test_softmax.py": '''import torch

from mykernels.softmax import softmax


def test_softmax_matches_torch():
    x = torch.randn(4, 50)
    y, lse = softmax(x, 2.0)
    torch.testing.assert_close(y, torch.softmax(x / 2.0, -1))
    torch.testing.assert_close(lse, torch.logsumexp(x / 2.0, -1))
''',
}

RMSNORM = '''"""Fused residual-add + RMSNorm, with its backward."""
from typing import Optional

import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, r_ptr, h_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    b = tl.load(r_ptr + offs, mask=m).to(tl.float32)
    tl.store(h_ptr + offs, (a + b).to(h_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rms_fwd(h_ptr, w_ptr, y_ptr, rstd_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    h = tl.load(h_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    ms = tl.sum(h * h, axis=0) / N
    rstd = 1.0 / tl.sqrt(ms + eps)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * N + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rms_bwd(dy_ptr, h_ptr, w_ptr, rstd_ptr, dh_ptr, dw_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    dy = tl.load(dy_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    h = tl.load(h_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.load(rstd_ptr + row)
    hn = h * rstd
    wdy = w * dy
    dh = rstd * (wdy - hn * tl.sum(wdy * hn, axis=0) / N)
    tl.store(dh_ptr + row * N + cols, dh.to(dh_ptr.dtype.element_ty), mask=m)
    tl.store(dw_ptr + row * N + cols, dy * hn, mask=m)


class _RMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, residual, eps):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        M, N = x2.shape
        if residual is not None:
            h = torch.empty_like(x2)
            _add_kernel[(triton.cdiv(M * N, 1024),)](x2, residual.reshape(M, N), h, M * N, BLOCK=1024)
        else:
            h = x2.contiguous()
        y = torch.empty_like(h)
        rstd = torch.empty(M, dtype=torch.float32, device=x.device)
        _rms_fwd[(M,)](h, weight, y, rstd, N, eps, BLOCK_N=triton.next_power_of_2(N))
        ctx.save_for_backward(h, weight, rstd)
        ctx.has_residual = residual is not None
        return y.view(shape), rstd.view(shape[:-1])

    @staticmethod
    def backward(ctx, dy, drstd):
        h, weight, rstd = ctx.saved_tensors
        M, N = h.shape
        dh = torch.empty_like(h)
        dw_rows = torch.empty((M, N), dtype=torch.float32, device=h.device)
        _rms_bwd[(M,)](dy.reshape(M, N).contiguous(), h, weight, rstd, dh, dw_rows, N,
                       BLOCK_N=triton.next_power_of_2(N))
        dw = dw_rows.sum(0).to(weight.dtype)
        dx = dh.view(dy.shape)
        return dx, dw, (dx if ctx.has_residual else None), None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, residual: Optional[torch.Tensor] = None,
             eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm of (x + residual) scaled by weight; returns (out, rstd)."""
    return _RMSNormFn.apply(x, weight, residual, eps)
'''

RMSNORM_REPO = {
    "pyproject.toml": '''[project]
name = "normlib"
version = "0.1.0"

[tool.pytest.ini_options]
testpaths = ["test"]
pythonpath = ["src"]
''',
    "src/normlib/__init__.py": "",
    "src/normlib/ops/__init__.py": "",
    "src/normlib/ops/rmsnorm.py": RMSNORM,
    "test/test_rmsnorm.py": '''import torch

from normlib.ops.rmsnorm import rms_norm


def test_rms_norm():
    x, r, w = torch.randn(4, 64), torch.randn(4, 64), torch.randn(64)
    y, rstd = rms_norm(x, w, r)
    h = x + r
    torch.testing.assert_close(y, h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w)
''',
}

ELEMENTWISE = '''"""Elementwise ops in Triton: add, scale and relu, a kernel each."""
import torch
import triton
import triton.language as tl

# small while the kernels were being debugged
BLOCK_SIZE = 256


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def _grid(n: int) -> tuple[int]:
    return (triton.cdiv(n, BLOCK_SIZE),)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    _add_kernel[_grid(x.numel())](x, y, out, x.numel(), BLOCK=BLOCK_SIZE)
    return out


def scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    _scale_kernel[_grid(x.numel())](x, out, x.numel(), alpha, BLOCK=BLOCK_SIZE)
    return out


def relu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    _relu_kernel[_grid(x.numel())](x, out, x.numel(), BLOCK=BLOCK_SIZE)
    return out
'''

ELEMENTWISE_REPO = {
    "pyproject.toml": '''[project]
name = "fastops"
version = "0.1.0"

[tool.pytest.ini_options]
testpaths = ["tests"]
''',
    "fastops/__init__.py": "from fastops.elementwise import add, relu, scale  # noqa: F401\n",
    "fastops/elementwise.py": ELEMENTWISE,
    "tests/test_elementwise.py": '''import pytest
import torch

from fastops import add, relu, scale


@pytest.mark.parametrize("n", [1, 1000, 65536])
def test_add(n):
    x, y = torch.randn(n), torch.randn(n)
    torch.testing.assert_close(add(x, y), x + y)


@pytest.mark.parametrize("n", [1, 1000, 65536])
def test_scale(n):
    x = torch.randn(n)
    torch.testing.assert_close(scale(x, 0.5), x * 0.5)


def test_relu():
    x = torch.randn(65536)
    torch.testing.assert_close(relu(x), x.clamp_min(0))
''',
}
