"""Fused mixture-of-experts layer (Mixtral-style SwiGLU experts, top-k routing), forward.

Inputs: x (T, Hd) tokens; router_logits (T, E) fp32; w13 (E, 2I, Hd) = [gate; up] weights per expert
(nn.Linear layout, rows 0..I-1 gate, I..2I-1 up); w2 (E, Hd, I) down weights. fp16/bf16.

The math, per token t:
    p        = softmax(router_logits[t])                    (fp32)
    ids, wts = top_k(p); wts = wts / sum(wts)                 (Mixtral renormalizes the k kept weights)
    out[t]   = sum_{j<k} wts[j] * W2[e] @ (silu(W1[e] x_t) * (W3[e] x_t)),   e = ids[j]
    silu(g)  = g * sigmoid(g) = g / (1 + exp(-g))
FLOPs: 2*T*k*Hd*2I (gate+up) + 2*T*k*I*Hd (down) = 6*T*k*Hd*I.

How it runs (three steps, no per-expert Python loop, no host synchronization):
  1. align (a few small torch ops): the T*k (token, slot) pairs are sorted by expert, and each
     expert's run is padded to a multiple of BLOCK_M with a sentinel id (T*k). block_expert[b] says
     which expert owns row-block b (-1: past the end; those programs exit at once).
  2. gate_up kernel: program (b, n) gathers BLOCK_M token rows of x (pointer loads: the rows are
     scattered), multiplies them by the gate rows and the up rows of expert block_expert[b]
     (TMA descriptor loads on Hopper: weights are dense), and writes h = silu(gate) * up for its
     BLOCK_N columns, in the padded sorted order (one rounding to the input dtype, as every
     implementation does between the two GEMMs).
  3. down kernel: h (contiguous rows) @ W2[e]^T, scaled by the pair's routing weight, stored to
     y[pair] (T*k, Hd); then out = y.view(T, k, Hd).sum(1).
Grouped ordering (GROUP_M row-blocks of one expert per column of weight tiles) keeps a weight tile in
L2 while the expert's row-blocks use it: each weight byte is read from DRAM about once.
"""

import torch
import triton
import triton.language as tl

CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 4,
          "DOWN_BLOCK_N": 256, "DOWN_num_stages": 4,
          # few rows per expert (many small experts): smaller row blocks waste less padding
          "SMALL_ROWS_PER_EXPERT": 256, "SMALL_BLOCK_M": 64, "SMALL_num_warps": 4}
CONFIG_SPACE = {"BLOCK_M": [64, 128], "BLOCK_N": [64, 128, 256], "BLOCK_K": [32, 64, 128], "GROUP_M": [1, 4, 8, 16],
                "num_warps": [4, 8], "num_stages": [2, 3, 4, 5], "DOWN_BLOCK_N": [64, 128, 256],
                "DOWN_num_stages": [2, 3, 4, 5], "SMALL_ROWS_PER_EXPERT": [0, 128, 256, 512],
                "SMALL_BLOCK_M": [16, 32, 64], "SMALL_num_warps": [4, 8]}


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # Grouped ordering: GROUP_M row-blocks share one column of weight tiles before moving right.
    in_group = GROUP_M * num_pid_n
    group = tile_id // in_group
    first_m = group * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    return first_m + (tile_id % in_group) % group_m, (tile_id % in_group) // group_m


@triton.jit
def moe_gate_up_kernel(x_ptr, w_ptr, h_ptr, sorted_ids_ptr, block_expert_ptr, n_pairs, HD, I, num_m_blocks,
                       stride_x, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, USE_TMA: tl.constexpr):
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_m_blocks, tl.cdiv(I, BLOCK_N), GROUP_M)
    e = tl.load(block_expert_ptr + pid_m)
    if e < 0:
        return
    offs_r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pair = tl.load(sorted_ids_ptr + offs_r)
    valid = pair < n_pairs
    tok = (pair // TOP_K).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    x_ptrs = x_ptr + tok[:, None] * stride_x + offs_k[None, :]
    gate_row = e * 2 * I + pid_n * BLOCK_N                           # first gate row of this tile in (E*2I, HD)
    if USE_TMA:
        # rows past this expert's 2I read as zero; gate rows past I read up rows: those columns are not stored
        w_desc = tl.make_tensor_descriptor(w_ptr, shape=[(e + 1) * 2 * I, HD], strides=[HD, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
    else:
        wg_ptrs = w_ptr + (gate_row.to(tl.int64) + tl.arange(0, BLOCK_N))[:, None] * HD + offs_k[None, :]
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, HD, BLOCK_K):
        a = tl.load(x_ptrs, mask=valid[:, None] & (offs_k[None, :] + k0 < HD), other=0.0)
        if USE_TMA:
            wg = w_desc.load([gate_row, k0])
            wu = w_desc.load([gate_row + I, k0])
        else:
            wmask = (offs_n[:, None] < I) & (offs_k[None, :] + k0 < HD)
            wg = tl.load(wg_ptrs, mask=wmask, other=0.0)
            wu = tl.load(wg_ptrs + I * HD, mask=wmask, other=0.0)
            wg_ptrs += BLOCK_K
        acc_g = tl.dot(a, tl.trans(wg), acc_g)
        acc_u = tl.dot(a, tl.trans(wu), acc_u)
        x_ptrs += BLOCK_K
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u                        # silu(gate) * up, fp32
    h_ptrs = h_ptr + offs_r.to(tl.int64)[:, None] * I + offs_n[None, :]
    tl.store(h_ptrs, h.to(h_ptr.dtype.element_ty), mask=offs_n[None, :] < I)


@triton.jit
def moe_down_kernel(h_ptr, w_ptr, y_ptr, sorted_ids_ptr, block_expert_ptr, topk_w_ptr, n_pairs, HD, I,
                    num_m_blocks, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    GROUP_M: tl.constexpr, USE_TMA: tl.constexpr):
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_m_blocks, tl.cdiv(HD, BLOCK_N), GROUP_M)
    e = tl.load(block_expert_ptr + pid_m)
    if e < 0:
        return
    offs_r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    w_row = e * HD + pid_n * BLOCK_N                                  # first row of this tile in (E*HD, I)
    if USE_TMA:
        h_desc = tl.make_tensor_descriptor(h_ptr, shape=[num_m_blocks * BLOCK_M, I], strides=[I, 1],
                                           block_shape=[BLOCK_M, BLOCK_K])
        w_desc = tl.make_tensor_descriptor(w_ptr, shape=[(e + 1) * HD, I], strides=[I, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
    else:
        h_ptrs = h_ptr + offs_r.to(tl.int64)[:, None] * I + offs_k[None, :]
        w_ptrs = w_ptr + (w_row.to(tl.int64) + tl.arange(0, BLOCK_N))[:, None] * I + offs_k[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, I, BLOCK_K):
        if USE_TMA:
            a = h_desc.load([pid_m * BLOCK_M, k0])
            w = w_desc.load([w_row, k0])
        else:
            kmask = offs_k[None, :] + k0 < I
            a = tl.load(h_ptrs, mask=kmask, other=0.0)
            w = tl.load(w_ptrs, mask=(offs_n[:, None] < HD) & kmask, other=0.0)
            h_ptrs += BLOCK_K
            w_ptrs += BLOCK_K
        acc = tl.dot(a, tl.trans(w), acc)
    pair = tl.load(sorted_ids_ptr + offs_r)
    valid = pair < n_pairs
    wt = tl.load(topk_w_ptr + pair, mask=valid, other=0.0)
    acc = acc * wt[:, None]
    y_ptrs = y_ptr + pair.to(tl.int64)[:, None] * HD + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < HD))


# --------------------------------------------------------------------------------------------------
# launcher
# --------------------------------------------------------------------------------------------------
_ALLOCATOR_SET = False
last_config = {}  # the config of the latest launch (the benchmark reports it)


def route(router_logits, top_k):
    """softmax over experts, keep the top k, renormalize them (fp32). Returns (weights, ids), (T, k)."""
    probs = torch.softmax(router_logits.float(), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), ids


def align_by_expert(ids, num_experts, block_m):
    """Sort the T*k (token, slot) pairs by expert and pad each expert's run to a multiple of block_m.

    Returns sorted_ids (num_m_blocks*block_m,) int32 pair ids, the sentinel T*k marking padding;
    block_expert (num_m_blocks,) int32, -1 past the last used block; num_m_blocks (an upper bound
    known without reading the counts back to the host: sum_e ceil(c_e / BM) <= ceil(T*k / BM) + E)."""
    n = ids.numel()
    flat = ids.reshape(-1)
    dev = ids.device
    counts = torch.zeros(num_experts, dtype=torch.int64, device=dev)
    counts.scatter_add_(0, flat, torch.ones_like(flat))              # bincount without a host sync
    padded = (counts + block_m - 1) // block_m * block_m
    pad_end = torch.cumsum(padded, 0)
    pad_start = pad_end - padded
    order = torch.argsort(flat, stable=True)                           # pair ids grouped by expert
    sorted_e = flat[order]
    rank = torch.arange(n, device=dev) - (torch.cumsum(counts, 0) - counts)[sorted_e]
    num_m_blocks = triton.cdiv(n, block_m) + num_experts
    sorted_ids = torch.full((num_m_blocks * block_m,), n, dtype=torch.int32, device=dev)
    sorted_ids[pad_start[sorted_e] + rank] = order.to(torch.int32)
    block_start = torch.arange(num_m_blocks, device=dev) * block_m
    block_expert = torch.searchsorted(pad_end, block_start, right=True)
    block_expert = torch.where(block_expert < num_experts, block_expert, -1).to(torch.int32)
    return sorted_ids, block_expert, num_m_blocks


def _tma_ok(*tensors):
    dev = tensors[0].device
    if dev.type == "cuda" and (torch.version.hip or torch.cuda.get_device_capability(dev)[0] < 9):
        return False
    return all(t.is_contiguous() and (t.shape[-1] * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0
               for t in tensors)


def fused_moe(x, w13, w2, router_logits, top_k, out=None, config=None, use_tma=None):
    """out (T, Hd) = the MoE layer of the module docstring."""
    global _ALLOCATOR_SET
    T, HD = x.shape
    E, I2, _ = w13.shape
    I = I2 // 2
    assert w2.shape == (E, HD, I) and x.is_contiguous() and w13.is_contiguous() and w2.is_contiguous()
    cfg = {**CONFIG, **(config or {})}
    block_m, warps = cfg["BLOCK_M"], cfg["num_warps"]
    if T * top_k < cfg["SMALL_ROWS_PER_EXPERT"] * E:
        block_m, warps = cfg["SMALL_BLOCK_M"], cfg["SMALL_num_warps"]
    weights, ids = route(router_logits, top_k)
    sorted_ids, block_expert, num_m_blocks = align_by_expert(ids, E, block_m)
    n_pairs = T * top_k
    h = torch.empty((num_m_blocks * block_m, I), device=x.device, dtype=x.dtype)
    y = torch.empty((n_pairs, HD), device=x.device, dtype=x.dtype)
    tma = _tma_ok(w13, w2, h) if use_tma is None else use_tma
    if tma and not _ALLOCATOR_SET:
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=x.device))
        _ALLOCATOR_SET = True
    bn, bk = cfg["BLOCK_N"], cfg["BLOCK_K"]
    last_config.clear()
    last_config.update(cfg, BLOCK_M=block_m, num_warps=warps, USE_TMA=tma)
    moe_gate_up_kernel[(num_m_blocks * triton.cdiv(I, bn),)](
        x, w13, h, sorted_ids, block_expert, n_pairs, HD, I, num_m_blocks, x.stride(0),
        TOP_K=top_k, BLOCK_M=block_m, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg["GROUP_M"], USE_TMA=tma,
        num_warps=warps, num_stages=cfg["num_stages"])
    dbn = cfg["DOWN_BLOCK_N"]
    moe_down_kernel[(num_m_blocks * triton.cdiv(HD, dbn),)](
        h, w2, y, sorted_ids, block_expert, weights.reshape(-1), n_pairs, HD, I, num_m_blocks,
        BLOCK_M=block_m, BLOCK_N=dbn, BLOCK_K=bk, GROUP_M=cfg["GROUP_M"], USE_TMA=tma,
        num_warps=warps, num_stages=cfg["DOWN_num_stages"])
    if out is None:
        out = torch.empty((T, HD), device=x.device, dtype=x.dtype)
    torch.sum(y.view(T, top_k, HD), dim=1, out=out)                   # the k expert outputs of a token
    return out


# --------------------------------------------------------------------------------------------------
# references
# --------------------------------------------------------------------------------------------------
def _expert_loop(x, w13, w2, router_logits, top_k, dtype):
    """Per-expert loop (the Hugging Face Mixtral way): gather the expert's tokens, three matmuls, scatter."""
    T, HD = x.shape
    E, I2, _ = w13.shape
    I = I2 // 2
    weights, ids = route(router_logits, top_k)
    xs = x.to(dtype)
    out = torch.zeros((T, HD), device=x.device, dtype=dtype)
    for e in range(E):
        tok, slot = torch.where(ids == e)
        if tok.numel() == 0:
            continue
        xe = xs[tok]
        w = w13[e].to(dtype)
        g = xe @ w[:I].T
        u = xe @ w[I:].T
        h = torch.nn.functional.silu(g) * u
        out.index_add_(0, tok, (h @ w2[e].to(dtype).T) * weights[tok, slot, None].to(dtype))
    return out


def reference(x, w13, w2, router_logits, top_k):
    """fp32 reference from the same rounded inputs (TF32 off)."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return _expert_loop(x, w13, w2, router_logits, top_k, torch.float32)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def torch_expert_loop(x, w13, w2, router_logits, top_k):
    """The baseline the bar is set against: the per-expert loop in the input dtype."""
    return _expert_loop(x, w13, w2, router_logits, top_k, x.dtype)


def dense_equivalent(x_rep, w13_0, h_rep, w2_0):
    """One dense GEMM pair of the same work (T*k rows through one expert): the ceiling to compare to."""
    torch.matmul(x_rep, w13_0.T)
    return torch.matmul(h_rep, w2_0.T)
