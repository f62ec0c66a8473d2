"""Flash attention, forward: O = softmax(Q K^T * scale [+ causal mask]) V, one pass, no S x S matrix.

Shapes: q, k, v, o are (B, H, S, D), contiguous, fp16 or bf16 (fp32 in the interpreter); scale = 1/sqrt(D).

The math, per (batch, head) and query row i, with s_ij = scale * q_i . k_j (j <= i when causal):
    o_i = sum_j exp(s_ij - m_i) v_j / sum_j exp(s_ij - m_i),     m_i = max_j s_ij
computed over key blocks j = [n0, n0 + BLOCK_N) with the online-softmax recurrence (fp32):
    m_new = max(m, rowmax(s_block))
    p     = exp(s_block - m_new)               (rounded to the input dtype for the second tensor-core dot)
    alpha = exp(m - m_new)                     (rescales what was accumulated under the old max)
    l     = l * alpha + rowsum(p)
    acc   = acc * alpha + p @ v_block
    o_i   = acc / l
exp is computed as exp2 with log2(e) folded into the scale: exp(x) = 2^(x * log2 e), so the
scale-and-subtract is one FMA per score.

Work split: one program per (BLOCK_M query rows, batch*head); grid (S / BLOCK_M, B*H) with the query
blocks of one head next to each other so that they share that head's K and V in L2. Causal: key
blocks strictly left of the diagonal run without a mask; only the diagonal block(s) are masked; the
heaviest (last) query blocks are launched first so the tail of the grid is the short work.

Hopper: Q/K/V/O tiles come through TMA descriptors (made on the host: TensorDescriptor) when S is a
multiple of the tiles; otherwise (and on AMD) masked pointer loads do the same work.
"""

import functools
import math

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "AUTOTUNE": 1}
CONFIG_SPACE = {"BLOCK_M": [64, 128], "BLOCK_N": [32, 64, 128], "num_warps": [4, 8], "num_stages": [2, 3, 4],
                "AUTOTUNE": [0, 1]}
# Extra candidates for AUTOTUNE (keys missing here come from CONFIG); timed once per shape. From the
# H200 exploration (experiments/compute-bound/explore.log): 128x128/8 warps led for D=128 non-causal
# at long S, 64x64/4 warps (one warpgroup) for D=128 causal and S=4096, 128x64 and 128x128 with
# 4 warps for D=64.
AUTOTUNE_CONFIGS = [
    {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 3},
]

LOG2E = 1.4426950408889634


@triton.jit
def _attn_block_loop(acc, l_i, m_i, q, k_src, v_src, row0, lo, hi, offs_m, S, qk_scale,
                     BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASK_DIAG: tl.constexpr,
                     MASK_SEQ: tl.constexpr, USE_TMA: tl.constexpr):
    # Key/value blocks [lo, hi) of one (batch, head). row0: that head's first row in the (B*H*S, D)
    # view (TMA path); the pointer path gets k_src/v_src already offset to the head.
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in tl.range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        if USE_TMA:
            k = k_src.load([row0 + start_n, 0])
        else:
            k = tl.load(k_src + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_n[:, None] < S, other=0.0)
        qk = tl.dot(q, tl.trans(k))                                  # raw scores, fp32 [BLOCK_M, BLOCK_N]
        if MASK_DIAG:
            qk = tl.where(offs_m[:, None] >= offs_n[None, :], qk, float("-inf"))
        if MASK_SEQ:
            qk = tl.where(offs_n[None, :] < S, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)              # running max, log2 units
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if USE_TMA:
            v = v_src.load([row0 + start_n, 0])
        else:
            v = tl.load(v_src + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_n[:, None] < S, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attn_fwd_kernel(q_src, k_src, v_src, o_src, S, BH, qk_scale,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                    CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, EVEN: tl.constexpr):
    # q_src..o_src: TMA descriptors of the (B*H*S, D) views, made on the host (USE_TMA), else pointers.
    start_m = tl.program_id(0)
    if CAUSAL:
        start_m = tl.num_programs(0) - 1 - start_m                  # longest rows first
    bh = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row0 = bh * S                                                   # first row of this head, (B*H*S, D) view
    if USE_TMA:
        # TMA path needs S % BLOCK_M == S % BLOCK_N == 0 (the launcher checks): tiles never cross heads.
        q = q_src.load([row0 + start_m * BLOCK_M, 0])
    else:
        head = row0.to(tl.int64) * HEAD_DIM
        q = tl.load(q_src + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < S, other=0.0)
        k_src = k_src + head
        v_src = v_src + head

    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # 1) key blocks entirely left of this query block: every score counts, no mask
        acc, l_i, m_i = _attn_block_loop(acc, l_i, m_i, q, k_src, v_src, row0, 0, start_m * BLOCK_M, offs_m, S,
                                         qk_scale, BLOCK_N, HEAD_DIM, False, False, USE_TMA)
        # 2) the diagonal: keys j <= i only (and j < S when S is ragged)
        acc, l_i, m_i = _attn_block_loop(acc, l_i, m_i, q, k_src, v_src, row0, start_m * BLOCK_M,
                                         (start_m + 1) * BLOCK_M, offs_m, S, qk_scale, BLOCK_N, HEAD_DIM,
                                         True, not EVEN, USE_TMA)
    else:
        acc, l_i, m_i = _attn_block_loop(acc, l_i, m_i, q, k_src, v_src, row0, 0, S, offs_m, S, qk_scale,
                                         BLOCK_N, HEAD_DIM, False, not EVEN, USE_TMA)
    out = (acc / l_i[:, None]).to(q.dtype)
    if USE_TMA:
        o_src.store([row0 + start_m * BLOCK_M, 0], out)
    else:
        o_ptrs = o_src + row0.to(tl.int64) * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
        tl.store(o_ptrs, out, mask=offs_m[:, None] < S)


# --------------------------------------------------------------------------------------------------
# launcher
# --------------------------------------------------------------------------------------------------
_TUNED = {}
last_config = {}  # the config of the latest launch (the benchmark reports it)


@functools.lru_cache(maxsize=None)
def _has_tma(device) -> bool:
    if device.type == "cuda":
        return (not torch.version.hip) and torch.cuda.get_device_capability(device)[0] >= 9
    return True  # interpreter: descriptors are emulated


def _launch(q, k, v, o, causal, cfg):
    B, H, S, D = q.shape
    BM, BN = cfg["BLOCK_M"], cfg["BLOCK_N"]
    assert BM % BN == 0, "the causal diagonal stage walks BLOCK_M / BLOCK_N key blocks"
    even = S % BM == 0 and S % BN == 0
    use_tma = even and _has_tma(q.device)
    last_config.clear()
    last_config.update(cfg, USE_TMA=use_tma)
    if use_tma:
        # Made on the host and passed as parameters: made in the kernel (tl.make_tensor_descriptor), each
        # program writes and fences its own, which cost gemm 8% at 2048^3 (experiments/gemm-sizes-h200/).
        srcs = [TensorDescriptor.from_tensor(t.view(B * H * S, D), [BM if t is q or t is o else BN, D])
                for t in (q, k, v, o)]
    else:
        srcs = [q, k, v, o]
    qk_scale = (1.0 / math.sqrt(D)) * LOG2E
    grid = (triton.cdiv(S, BM), B * H)
    attn_fwd_kernel[grid](*srcs, S, B * H, qk_scale, BLOCK_M=BM, BLOCK_N=BN, HEAD_DIM=D, CAUSAL=causal,
                          USE_TMA=use_tma, EVEN=even, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return o


def _autotune(q, k, v, o, causal):
    key = (tuple(q.shape), q.dtype, causal)
    if key not in _TUNED:
        best, best_ms = None, float("inf")
        for cfg in [dict(CONFIG)] + [{**CONFIG, **c} for c in AUTOTUNE_CONFIGS]:
            try:
                ms = triton.testing.do_bench(lambda: _launch(q, k, v, o, causal, cfg), warmup=5, rep=20,
                                             return_mode="median")
            except Exception:  # does not fit (shared memory / registers): skip
                continue
            if ms < best_ms:
                best, best_ms = cfg, ms
        _TUNED[key] = best or dict(CONFIG)
    return _TUNED[key]


def flash_attention(q, k, v, causal=False, out=None, config=None):
    """Forward attention; q, k, v (B, H, S, D) contiguous, D in {16, 32, 64, 128}."""
    assert q.shape == k.shape == v.shape and q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
    o = out if out is not None else torch.empty_like(q)
    if config is None:
        config = CONFIG
        if CONFIG["AUTOTUNE"] and q.device.type == "cuda":
            config = _autotune(q, k, v, o, causal)
    return _launch(q, k, v, o, causal, {**CONFIG, **config})


# --------------------------------------------------------------------------------------------------
# references
# --------------------------------------------------------------------------------------------------
def reference(q, k, v, causal=False):
    """fp32 attention, the textbook way (materializes S x S): only for checking. q, k, v: (..., S, D)."""
    qf, kf, vf = q.float(), k.float(), v.float()
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        s = (qf @ kf.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        if causal:
            n = q.shape[-2]
            mask = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
            s = s.masked_fill(~mask, float("-inf"))
        return torch.softmax(s, dim=-1) @ vf
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def torch_sdpa_flash(q, k, v, causal=False):
    """The baseline: torch's scaled_dot_product_attention pinned to its flash backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
