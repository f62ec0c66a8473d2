"""Cross-entropy loss forward (per row, reduction="none") in Triton, with the
torch reference beside it.

    loss[r] = logsumexp_j x[r, j] - x[r, t_r]      (0 where t_r == ignore_index)
    logsumexp_j x[r, j] = m_r + log(sum_j exp(x[r, j] - m_r)),  m_r = max_j x[r, j]

Nothing row-sized is written, so one streaming pass with an ONLINE max and
rescaled sum reads the logits exactly once:
    m' = max(m, max(chunk));  s' = s * exp(m - m') + sum(exp(chunk - m'))
The target logit is one gathered element per row. The loss is fp32 whatever the
logits' dtype (torch returns the logits' dtype).

Minimal traffic: M * V * elem (logits) + 8 M (int64 targets) + 4 M (loss).
About 4 flops per logit: memory-bound. At V = 128256 and M = 8192 the logits
are 2 GB in bf16; torch materialises log_softmax (a full extra write and read).

Kernels:
  _ce_rows   V <= CHUNK, rows enough: a tile of ROWS rows per program, looping over the
             vocabulary in BLOCK_N-wide steps. 16-bit rows of up to 4096
             logits run it on one or two warps (SHORT_16BIT).
  _ce_split  V > CHUNK, or rows too few for the GPU (see SPLIT_PROGRAMS_PER_SM):
             P = ceil(V / CHUNK) programs per row, each reduces its
             chunk to (max, sum) in a small workspace; the LAST program of a row
             to arrive (atomic counter) combines the P partials in slot order
             (deterministic) and writes the loss. Nobody waits, so this needs
             no co-residency and cannot deadlock; it gives long-vocabulary rows
             enough parallel programs when M is small; rows too few to fill a
             GPU get more, shorter chunks.
"""

import os

import torch
import triton
import triton.language as tl

# BLOCK_SIZE 2048: on the H200 (the config search,
# df8b865:experiments/long-rows-h200/run2/memory_configs.log) 97% of copy at
# 131072x1024 fp32 against 89% for 4096, the same within 1-2 points at every other timed shape.
CONFIG = {"BLOCK_SIZE": 2048, "CHUNK": 32768, "num_warps": 4, "num_stages": 1}
CONFIG_SPACE = {
    "BLOCK_SIZE": [1024, 2048, 4096, 8192, 16384],
    "CHUNK": [16384, 32768, 65536, 131072],
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1, 2, 3, 4],
}
IGNORE_INDEX = -100
# Rows too few for the GPU (a decode step's batch), unless a config is passed, on a GPU (not the
# interpreter): where M * P programs are under SPLIT_PROGRAMS_PER_SM an SM, each row is cut into more chunks,
# P the power of two (few distinct CHUNKs to compile) nearest above SPLIT_PROGRAMS_PER_SM * SMs / M, but no
# chunk under MIN_SPLIT_BLOCKS blocks of BLOCK_SIZE; the chunk ceil(V / P) rounded up to a whole block. Why:
# a program streams its chunk block by block, one block in flight, so the logits in flight are about one
# block a program, and CHUNK's 32768 gave 64x128256 256 programs (two an SM) and 32x32000 32 (the rows
# kernel, one a row). H100, one process, main -> P chunks (the A/B,
# experiments/held-out-shapes/h100-row-dispatch/explore/: the tune half's 64x128256, synthetic others): 64x128256
# bf16 21.5 -> 12.2 us (P 32; torch 34.8), 32x32000 bf16 19.5 -> 7.8 (P 8; torch 19.3), 128x65536 fp32 24.0 ->
# 17.1 (P 16), 256x200000 bf16 40.9 -> P 17, between P 14 (40.3) and 20 (40.8). Chunks of one block took 6-17%
# longer at 128x65536 and 64x128256 (7% shorter at 32x32000). Rows enough for the GPU keep CHUNK: there more
# chunks a row lost (4096x50257 bf16, two balanced chunks: 167.4 -> 174.9 us).
SPLIT_PROGRAMS_PER_SM = 16
MIN_SPLIT_BLOCKS = 2
# 16-bit rows of up to 4096 logits take these settings instead of CONFIG's (unless a config is passed):
# one or two warps a program, so that a row's max and sum reduce by shuffles within one warp, with no
# barrier. On CONFIG's four warps a row of 1024 is spread over all four, and each reduction goes
# through shared memory: 20 PTX instructions a logit against 10 (Triton 3.9 for sm_90). Measured on
# the H200 (the A/B runs, df8b865:experiments/sweep-h200-2026-12-01/session10-reduce-once/, the best of 24
# settings at each length), bf16 / fp16 % of copy: 131072x1024 58.5 / 59.9 -> 85.8 / 86.3, 65536x2048 75.6 / 77.0 ->
# 87.1 / 86.8, 32768x4096 82.5 / 83.3 -> 86.7 / 86.8. fp32 rows read 96-98% of copy on CONFIG and
# gain nothing from fewer warps; longer 16-bit rows gained under 2 points from any setting.
SHORT_16BIT = [
    (1024, {"BLOCK_SIZE": 2048, "num_warps": 1, "num_stages": 1}),
    (2048, {"BLOCK_SIZE": 1024, "num_warps": 1, "num_stages": 3}),
    (4096, {"BLOCK_SIZE": 2048, "num_warps": 2, "num_stages": 3}),
]
# exp(x - m) is computed as exp2(x * log2(e) - m * log2(e)): one fused multiply-add and one ex2 per
# logit, where exp(x - m) costs a subtract, a multiply and the ex2 (the 16-bit rows of 1024 are bound
# by instruction issue, not memory: experiments/worst-shapes-h200/).
# ALIGNED_BODY: rows whose stride is not a multiple of 16 logits (vocabularies of 50257, 30522) start
# anywhere within a 16-byte group, so Triton, which sees neither the start's alignment nor a mask constant
# over 8-element groups, loads them element by element. Where x is 16-byte aligned (_aligned_body), each
# row (each chunk, in _ce_split) is cut at those boundaries (_aligned_span): a body of whole groups, from
# its start rounded up to its end rounded down, loaded as 16-byte vectors, and the under 2 x 8 logits left
# at its two ends, loaded element by element before it. Measured on the H100 against the kernels before
# them (experiments/held-out-shapes/h100-aligned-body/), % of copy: 4096x30522 fp16 83 -> 92.5, 4096x50257
# bf16 81 -> 92; the held-out half 1.017x, the tune half 1.023x, the sweep 1.000x.
LOG2E = tl.constexpr(1.4426950408889634)  # a global a @triton.jit function reads must be a constexpr


def cross_entropy_ref(x: torch.Tensor, target: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    xd = x.double()
    keep = target != ignore_index
    t = torch.where(keep, target, 0)
    loss = torch.logsumexp(xd, dim=-1) - xd.gather(-1, t[:, None])[:, 0]
    return torch.where(keep, loss, torch.zeros_like(loss))


@triton.jit
def _aligned_span(start, end, VEC: tl.constexpr):
    # Elements [start, end) of a tensor whose base is 16-byte aligned, cut at 16-byte boundaries (see
    # ALIGNED_BODY): (a0, b0), the body's whole VEC-element groups [a0, b0), and the up to 2 (VEC - 1)
    # elements left at its ends on 2 VEC lanes (head [start, a0), then tail [b0, end)) with their mask.
    a0 = tl.multiple_of((start + VEC - 1) // VEC * VEC, VEC)
    b0 = tl.multiple_of(tl.maximum(end // VEC * VEC, a0), VEC)  # a row inside one group: no body
    j = tl.arange(0, 2 * VEC)
    edge = tl.where(j < VEC, start + j, b0 + j - VEC)
    return a0, b0, edge, edge < tl.where(j < VEC, tl.minimum(a0, end), end)


@triton.jit
def _aligned_max_sum(x_ptr, start, end, BLOCK_N: tl.constexpr, VEC: tl.constexpr, NUM_STAGES: tl.constexpr):
    # (max, sum of exp(x - max)) of elements [start, end) of x, their edge first, then their body in
    # BLOCK_N-wide steps of 16-byte vectors (see ALIGNED_BODY)
    a0, b0, edge, edge_ok = _aligned_span(start, end, VEC)
    xe = tl.load(x_ptr + edge, mask=edge_ok, other=-float("inf")).to(tl.float32)
    m = tl.max(xe, axis=0)
    s = tl.sum(tl.exp2(xe * LOG2E - tl.where(m == -float("inf"), 0.0, m) * LOG2E), axis=0)
    cols = tl.arange(0, BLOCK_N)
    for c in tl.range(0, tl.cdiv(b0 - a0, BLOCK_N), num_stages=NUM_STAGES):
        offs = a0 + c * BLOCK_N + cols
        x = tl.load(x_ptr + offs, mask=offs < b0, other=-float("inf")).to(tl.float32)
        new_m = tl.maximum(m, tl.max(x, axis=0))
        safe = tl.where(new_m == -float("inf"), 0.0, new_m) * LOG2E
        s = s * tl.exp2(m * LOG2E - safe) + tl.sum(tl.exp2(x * LOG2E - safe), axis=0)
        m = new_m
    return m, s


@triton.jit
def _ce_rows(x_ptr, t_ptr, loss_ptr, M, V, stride_x, ignore_index,
             BLOCK_N: tl.constexpr, ROWS: tl.constexpr, NUM_STAGES: tl.constexpr, EVEN: tl.constexpr,
             ALIGNED: tl.constexpr, VEC: tl.constexpr):
    # EVEN: M % ROWS == 0 and V % BLOCK_N == 0, so the logits need no mask. At rows of 1024 in 16 bits
    # this kernel is bound by instruction issue (experiments/worst-shapes-h200/: SM 82%, DRAM 46%), and
    # a mask costs a compare, an and and a select per logit. With the target loads moved first (below)
    # it took 131072x1024 bf16 from 57-58% of copy to 59% (the per-kernel sweeps,
    # df8b865:experiments/sweep-h200-2026-12-01/final):
    # neither is what bounds it.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < M
    rows64 = rows.to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    # The target and its logit are loaded first, so that their two dependent round trips to memory
    # overlap the row's loads instead of following them.
    t = tl.load(t_ptr + rows, mask=row_ok, other=ignore_index)
    keep = row_ok & (t != ignore_index)
    xt = tl.load(x_ptr + rows64 * stride_x + tl.where(keep, t, 0), mask=keep, other=0.0).to(tl.float32)
    if ALIGNED:  # one row a program (ROWS 1), cut at 16-byte boundaries: see ALIGNED_BODY
        start = tl.program_id(0).to(tl.int64) * stride_x
        m, s = _aligned_max_sum(x_ptr, start, start + V, BLOCK_N, VEC, NUM_STAGES)
    else:
        m = tl.full([ROWS], -float("inf"), tl.float32)
        s = tl.zeros([ROWS], tl.float32)
        for start in tl.range(0, V, BLOCK_N, num_stages=NUM_STAGES):
            logits = x_ptr + rows64[:, None] * stride_x + start + cols[None, :]
            if EVEN:
                x = tl.load(logits).to(tl.float32)
            else:
                ok = row_ok[:, None] & (start + cols[None, :] < V)
                x = tl.load(logits, mask=ok, other=-float("inf")).to(tl.float32)
            new_m = tl.maximum(m, tl.max(x, axis=1))
            safe = tl.where(new_m == -float("inf"), 0.0, new_m) * LOG2E  # rows of only -inf so far
            s = s * tl.exp2(m * LOG2E - safe) + tl.sum(tl.exp2(x * LOG2E - safe[:, None]), axis=1)
            m = new_m
    loss = tl.where(keep, m + tl.log(s) - xt, 0.0)
    tl.store(loss_ptr + rows, loss, mask=row_ok)


@triton.jit
def _ce_split(x_ptr, t_ptr, loss_ptr, ws_ptr, cnt_ptr, M, V, stride_x, ignore_index,
              BLOCK_N: tl.constexpr, CHUNK: tl.constexpr, P: tl.constexpr, P_POW2: tl.constexpr,
              NUM_STAGES: tl.constexpr, ALIGNED: tl.constexpr, VEC: tl.constexpr):
    pid = tl.program_id(0)
    row = pid // P
    part = pid % P
    x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
    cols = tl.arange(0, BLOCK_N)
    lo = part * CHUNK
    hi = tl.minimum(lo + CHUNK, V)
    if ALIGNED:  # see ALIGNED_BODY
        row_start = tl.cast(row, tl.int64) * stride_x
        m, s = _aligned_max_sum(x_ptr, row_start + lo, row_start + hi, BLOCK_N, VEC, NUM_STAGES)
    else:
        m = -float("inf")
        s = 0.0
        for start in tl.range(lo, hi, BLOCK_N, num_stages=NUM_STAGES):
            x = tl.load(x_row + start + cols, mask=start + cols < hi, other=-float("inf")).to(tl.float32)
            new_m = tl.maximum(m, tl.max(x, axis=0))
            safe = tl.where(new_m == -float("inf"), 0.0, new_m) * LOG2E
            s = s * tl.exp2(m * LOG2E - safe) + tl.sum(tl.exp2(x * LOG2E - safe), axis=0)
            m = new_m
    slot = ws_ptr + (tl.cast(row, tl.int64) * P + part) * 2
    tl.store(slot, m)
    tl.store(slot + 1, s)
    tl.debug_barrier()  # every thread's stores before the release
    arrived = tl.atomic_add(cnt_ptr + row, 1, sem="acq_rel")
    if arrived == P - 1:  # the last of the row's P programs: combine and write
        slots = tl.arange(0, P_POW2)
        base = ws_ptr + tl.cast(row, tl.int64) * P * 2
        pm = tl.load(base + slots * 2, mask=slots < P, other=-float("inf"), volatile=True)
        ps = tl.load(base + slots * 2 + 1, mask=slots < P, other=0.0, volatile=True)
        gm = tl.max(pm, axis=0)
        lse = gm + tl.log(tl.sum(ps * tl.exp(pm - gm), axis=0))
        t = tl.load(t_ptr + row)
        keep = t != ignore_index
        xt = tl.load(x_row + tl.where(keep, t, 0)).to(tl.float32)
        tl.store(loss_ptr + row, tl.where(keep, lse - xt, 0.0))
        tl.atomic_xchg(cnt_ptr + row, 0, sem="relaxed")  # ready for the next launch


_COUNTERS = {}


def _on_gpu(x) -> bool:
    """Whether x's kernels run on a GPU (not Triton's interpreter on the CPU)."""
    return x.is_cuda and os.environ.get("TRITON_INTERPRET", "") in ("", "0")


def _sm_count(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def _stream_key(device):
    """Where the buffers of the programs that trade partials are kept: one set a stream, since launches on
    two streams may run at once and would take each other's words from one set."""
    return device, torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None


def _counters(device, n: int) -> torch.Tensor:
    """Per-row arrival counters; the kernel leaves them at zero."""
    key = _stream_key(device)
    c = _COUNTERS.get(key)
    if c is None or c.numel() < n:
        c = torch.zeros(max(n, 1 << 16), device=device, dtype=torch.int32)
        _COUNTERS[key] = c
    return c


def _aligned_body(x) -> bool:
    """Whether x's rows can be cut at 16-byte boundaries (see ALIGNED_BODY): x 16-byte aligned (Triton then
    specializes its pointer on 16), and its row stride not a multiple of 16 elements, which Triton would
    see by itself (it specializes integers on 16)."""
    return x.data_ptr() % 16 == 0 and x.stride(0) % 16 != 0


last_config = {}  # which kernel served the latest launch (the benchmark reports it: Spec.launched)


def cross_entropy(x: torch.Tensor, target: torch.Tensor, out: torch.Tensor | None = None,
                  ignore_index: int = IGNORE_INDEX, config: dict | None = None) -> torch.Tensor:
    """Per-row loss (fp32) of logits x [M, V] against int targets [M]."""
    assert x.dim() == 2 and x.stride(-1) == 1 and target.is_contiguous()
    M, V = x.shape
    fill_gpu = config is None and _on_gpu(x)  # see SPLIT_PROGRAMS_PER_SM
    if config is None and x.element_size() == 2:
        config = next((short for longest, short in SHORT_16BIT if V <= longest), None)
    cfg = dict(CONFIG, **(config or {}))
    loss = torch.empty(M, device=x.device, dtype=torch.float32) if out is None else out
    last_config.clear()
    if M == 0:
        return loss
    block, chunk = int(cfg["BLOCK_SIZE"]), int(cfg["CHUNK"])
    num_warps, num_stages = int(cfg["num_warps"]), int(cfg["num_stages"])
    P = triton.cdiv(V, chunk)
    programs = SPLIT_PROGRAMS_PER_SM * _sm_count(x.device) if fill_gpu else 0
    if M * P < programs:
        P = max(P, min(triton.cdiv(V, MIN_SPLIT_BLOCKS * block), triton.next_power_of_2(triton.cdiv(programs, M))))
        chunk = triton.cdiv(triton.cdiv(V, P), block) * block
        P = triton.cdiv(V, chunk)
    aligned = _aligned_body(x)
    if P == 1:
        block_n = min(max(16, triton.next_power_of_2(V)), block)
        rows = max(1, block // block_n)
        aligned = aligned and rows == 1
        last_config.update(kernel="_ce_rows", ALIGNED=aligned)
        _ce_rows[(triton.cdiv(M, rows),)](x, target, loss, M, V, x.stride(0), ignore_index,
                                          BLOCK_N=block_n, ROWS=rows, NUM_STAGES=num_stages,
                                          EVEN=M % rows == 0 and V % block_n == 0, ALIGNED=aligned,
                                          VEC=16 // x.element_size(), num_warps=num_warps, num_stages=num_stages)
        return loss
    ws = torch.empty(M * P * 2, device=x.device, dtype=torch.float32)
    last_config.update(kernel="_ce_split", ALIGNED=aligned)
    _ce_split[(M * P,)](x, target, loss, ws, _counters(x.device, M), M, V, x.stride(0), ignore_index,
                        BLOCK_N=min(block, chunk), CHUNK=chunk, P=P, P_POW2=triton.next_power_of_2(P),
                        NUM_STAGES=num_stages, ALIGNED=aligned, VEC=16 // x.element_size(),
                        num_warps=num_warps, num_stages=num_stages)
    return loss
