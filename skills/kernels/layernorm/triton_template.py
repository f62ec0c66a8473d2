"""LayerNorm forward in Triton, with the torch reference beside it.

    mean_r = sum_j x[r, j] / N,   var_r = sum_j (x[r, j] - mean_r)^2 / N   (biased, as torch)
    y[r, j] = (x[r, j] - mean_r) / sqrt(var_r + eps) * w[j] + b[j]

fp32 arithmetic, one rounding on the store. The variance is taken around the
mean (two passes over the row IN REGISTERS, or Chan's combination of per-chunk
(mean, M2) pairs), never as E[x^2] - mean^2, which cancels catastrophically
when |mean| >> std (all-equal rows, offset data).

Minimal traffic: read x, write y (w and b are N elements each, read once per
program). ~8 flops per element: memory-bound everywhere.

Same structure as the softmax template:
  _layernorm_rows   whole rows <= BLOCK_SIZE, a tile of rows per program
                    (16-bit rows over 2048: under ROW_PIPELINED).
  _layernorm_row    rows over BLOCK_SIZE, up to WHOLE_ROW_MAX (32768): one
                    program per whole row, no loop (32 warps for rows over 32 KB,
                    w kept in L1 for rows over 64 KB: WIDE_ROW_BYTES, W_IN_L1_BYTES).
  _layernorm_split  longer fp32 rows: the row over P co-resident programs that
                    exchange (mean, M2) once per row, as the softmax template's
                    _softmax_split exchanges (max, sum): one read, one write
                    (see SPLIT for the figures).
  _layernorm_streamed longer 16-bit rows (and every longer row in Triton's
                    interpreter, where a team would wait forever): one program
                    per row, chunks' (mean, M2) merged over pipelined chunks,
                    then a second pass that re-reads: 1.5x traffic, yet faster
                    than the team in 16 bits (see STREAMED for the figures).
"""

import os

import torch
import triton
import triton.language as tl

CONFIG = {"BLOCK_SIZE": 4096, "num_warps": 4, "num_stages": 1, "PERSISTENT": 0}
CONFIG_SPACE = {
    "BLOCK_SIZE": [2048, 4096, 8192, 16384, 32768],
    "num_warps": [4, 8, 16, 32],
    "num_stages": [1, 2, 3],
    "PERSISTENT": [0, 1],
}
EPS = 1e-5
# Rows over BLOCK_SIZE and up to WHOLE_ROW_MAX elements go to _layernorm_row: one program per row, the
# whole row in registers, WHOLE_ROW_WARPS warps, no loop. Measured on the H200 (issue 15,
# experiments/memory-bound/whole-rows/): at rows of 8192-32768 the split team reached 55-79% of copy,
# whole rows in the row-tile kernel (a loop over tiles, 2-D tiles) 69-98%, and this plain kernel,
# as Triton's tutorial writes it, 89-98% (softmax 16-bit 32768: 70%, the one shape where the row-tile
# kernel did better, 72%).
WHOLE_ROW_MAX = 32768
WHOLE_ROW_WARPS = 16
# Whole rows of more than WIDE_ROW_BYTES take WIDE_ROW_WARPS warps. Measured on the H200
# (experiments/sweep-h200-2026-12-01/session9-near-misses/): at 8192x16384 fp32, 16 warps hold x, w
# and b at once (94-95 registers a thread with the H200's Triton 3.6, 128 with 3.9): one program an SM,
# 84.3% of copy. On 32 warps the same row takes 32 registers a thread, two programs share an SM: 96.0%.
# At 32768 (one program an SM either way) 32 warps read 81.4 -> 86.3% in fp32 and 75.6/74.4 ->
# 77.5/76.3% in fp16/bf16. 16-bit rows of 16384 (32 KB) fall to 55-57% on 32 warps (42 registers x 1024
# threads: one program an SM), so they keep 16.
WIDE_ROW_BYTES = 32 * 1024
WIDE_ROW_WARPS = 32
# Whole rows of more than W_IN_L1_BYTES (fp32 rows over 16384): x and b skip L1 (.cg), w is kept there
# (evict_last), y is streamed (.cs). Every program re-reads w and b; at 32768 fp32 they are 256 KB, more
# than L1 holds, so both came from L2 every row. w alone (128 KB) stays in L1: 86.3 -> 89.4% of copy at
# 4096x32768 fp32 on 32 warps (w and b both kept: 88.1%; 89.2% in the confirming sweep). In 16-bit at
# 32768 (w and b 128 KB together) it read 1.5-2 points less than the plain loads, hence the limit.
W_IN_L1_BYTES = 64 * 1024
# 16-bit rows over WHOLE_ROW_MAX go to the streamed kernel. Measured on the H200 at rows of 65536-262144
# (experiments/long-rows-h200/run1 and run2), against the split team on CONFIG's chunk and warps: in bf16
# 60-67% of copy against 34-48%. STREAMED is the leader of run 1's 10 configurations.
STREAMED = {"BLOCK_N": 8192, "num_warps": 8, "num_stages": 3}
# fp32 rows over WHOLE_ROW_MAX go to the split team on SPLIT's chunk and warps. On the H200
# (experiments/sweep-h200-2026-12-01/session10-reduce-once/team-layernorm/), 8192-element chunks on 4 warps
# read 73.7 / 73.1 / 71.9% of copy at rows of 65536 / 131072 / 262144, where the streamed kernel (which
# served them) read 65.7 / 61.3 / 60.7% and the team on CONFIG's 4096 and 4 warps (deleted for losing
# to the streamed kernel, commit 01227bd) 60.8 / 61.1 / 56.9%. In bf16 every team setting read 33-53%.
SPLIT = {"BLOCK_N": 8192, "num_warps": 4}
MAX_SPIN = 1 << 20  # bounded wait (~1 s), then give up: wrong output, which the harness catches, never a hang
# 16-bit rows of more than 2048 elements, up to BLOCK_SIZE, take ROW_PIPELINED instead of CONFIG: a
# persistent grid whose loop prefetches the next tile (num_stages) while this one reduces. Such a row
# spans several warps, so its two reductions (mean, then variance) each wait on a barrier, and a
# program of one 8 KB row has little else in flight: at 32768x4096 bf16 on the H200
# (experiments/long-rows-h200/run2/memory_configs.log) CONFIG read 77% of copy, this 88%; in fp32 CONFIG
# leads (97% against 91%), and at rows of 1024 (one warp a row, no barrier) CONFIG reads 95%.
ROW_PIPELINED = {"BLOCK_SIZE": 8192, "num_warps": 4, "num_stages": 3, "PERSISTENT": 1}


def layernorm_ref(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), w.double(), b.double(), eps)


@triton.jit
def _layernorm_rows(x_ptr, w_ptr, b_ptr, y_ptr, M, N, stride_x, stride_y, eps,
                    BLOCK_N: tl.constexpr, ROWS: tl.constexpr, NUM_STAGES: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    for tile in tl.range(pid, tl.cdiv(M, ROWS), nprog, num_stages=NUM_STAGES):
        rows = tile * ROWS + tl.arange(0, ROWS)
        ok = (rows[:, None] < M) & col_ok[None, :]
        rows64 = rows.to(tl.int64)[:, None]
        x = tl.load(x_ptr + rows64 * stride_x + cols[None, :], mask=ok, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=1) / N
        d = tl.where(ok, x - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=1) / N + eps)
        y = d * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(y_ptr + rows64 * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _layernorm_row(x_ptr, w_ptr, b_ptr, y_ptr, N, stride_x, stride_y, eps, BLOCK_N: tl.constexpr,
                   W_IN_L1: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    ok = cols < N
    if W_IN_L1:  # see W_IN_L1_BYTES: L1 keeps w across rows; x, b and y pass it by
        x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0, cache_modifier=".cg").to(tl.float32)
    else:
        x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(ok, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)
    if W_IN_L1:
        w = tl.load(w_ptr + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        b = tl.load(b_ptr + cols, mask=ok, other=0.0, cache_modifier=".cg").to(tl.float32)
        tl.store(y_ptr + row * stride_y + cols, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok,
                 cache_modifier=".cs")
    else:
        w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_y + cols, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _layernorm_split(x_ptr, w_ptr, b_ptr, y_ptr, ws_ptr, flag_ptr, M, N, stride_x, stride_y, eps,
                     BLOCK_N: tl.constexpr, P: tl.constexpr, P_POW2: tl.constexpr, MAX_SPIN: tl.constexpr):
    # The exchange protocol of the softmax template's _softmax_split: publish
    # row i+1's partial (flag = i + 2) before waiting for the siblings' row-i
    # partials (flags >= i + 1); 4 buffers of partials, indexed by iteration % 4.
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    team = pid // P
    part = pid % P
    n_teams = G // P
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = cols < N
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    n_here = tl.minimum(N - part * BLOCK_N, BLOCK_N).to(tl.float32)  # elements in this chunk
    slots = tl.arange(0, P_POW2)
    slot_ok = slots < P
    n_slot = tl.minimum(tl.maximum(N - slots * BLOCK_N, 0), BLOCK_N).to(tl.float32)
    my_flag = flag_ptr + pid
    team_flags = flag_ptr + team * P + slots
    exit_ptr = flag_ptr + G + team

    xf = tl.load(x_ptr + tl.cast(team, tl.int64) * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    cmean = tl.sum(xf, axis=0) / n_here
    cd = tl.where(ok, xf - cmean, 0.0)
    tl.store(ws_ptr + (team * 4 * P + part) * 2, cmean)
    tl.store(ws_ptr + (team * 4 * P + part) * 2 + 1, tl.sum(cd * cd, axis=0))
    tl.debug_barrier()
    tl.atomic_xchg(my_flag, 1, sem="release")
    it = 0
    for row in range(team, M, n_teams):
        nxt = row + n_teams
        xn = tl.load(x_ptr + tl.cast(nxt, tl.int64) * stride_x + cols, mask=ok & (nxt < M), other=0.0).to(tl.float32)
        nmean = tl.sum(xn, axis=0) / n_here
        nd = tl.where(ok, xn - nmean, 0.0)
        nbuf = ws_ptr + ((team * 4 + (it + 1) % 4) * P + part) * 2
        tl.store(nbuf, nmean)
        tl.store(nbuf + 1, tl.sum(nd * nd, axis=0))
        tl.debug_barrier()
        tl.atomic_xchg(my_flag, it + 2, sem="release")
        f = tl.where(slot_ok, tl.atomic_add(team_flags, 0, mask=slot_ok, sem="acquire"), it + 1)
        spins = 0
        while (tl.min(f, axis=0) < it + 1) & (spins < MAX_SPIN):
            f = tl.where(slot_ok, tl.atomic_add(team_flags, 0, mask=slot_ok, sem="acquire"), it + 1)
            spins += 1
        tl.debug_barrier()
        buf = ws_ptr + (team * 4 + it % 4) * P * 2
        pmean = tl.load(buf + slots * 2, mask=slot_ok, other=0.0, volatile=True)
        pm2 = tl.load(buf + slots * 2 + 1, mask=slot_ok, other=0.0, volatile=True)
        # Chan et al.: M2 = sum_c [M2_c + n_c (mean_c - mean)^2]
        mean = tl.sum(pmean * n_slot, axis=0) / N
        dm = pmean - mean
        rstd = 1.0 / tl.sqrt(tl.sum(pm2 + n_slot * dm * dm, axis=0) / N + eps)
        y = (xf - mean) * rstd * w + b
        tl.store(y_ptr + tl.cast(row, tl.int64) * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=ok)
        xf = xn
        it += 1
    done = tl.atomic_add(exit_ptr, 1, sem="acq_rel")
    if done == P - 1:
        tl.atomic_xchg(team_flags, tl.zeros([P_POW2], tl.int32), mask=slot_ok, sem="relaxed")
        tl.atomic_xchg(exit_ptr, 0, sem="release")


@triton.jit
def _layernorm_streamed(x_ptr, w_ptr, b_ptr, y_ptr, N, stride_x, stride_y, eps,
                        BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr):
    # One program per row, two passes in BLOCK_N chunks. Pass 1 takes each
    # chunk's mean and M2 (around the chunk's own mean, in registers) and merges
    # them into the row's by Chan et al.'s rule:
    #     n = n_a + n_b,  d = mean_b - mean_a,  mean = mean_a + d * n_b / n,
    #     M2 = M2_a + M2_b + d^2 * n_a * n_b / n
    # Pass 2 re-reads, normalizes and writes (see the softmax template's
    # _softmax_streamed).
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    n_chunks = tl.cdiv(N, BLOCK_N)
    x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
    y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
    zero = tl.sum(tl.zeros([BLOCK_N], tl.float32), axis=0)
    n, mean, m2 = zero, zero, zero
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        ok = cols < N
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        n_c = tl.minimum(N - c * BLOCK_N, BLOCK_N).to(tl.float32)
        mean_c = tl.sum(x, axis=0) / n_c
        d_c = tl.where(ok, x - mean_c, 0.0)
        n_new = n + n_c
        d = mean_c - mean
        mean = mean + d * (n_c / n_new)
        m2 = m2 + tl.sum(d_c * d_c, axis=0) + d * d * (n * n_c / n_new)
        n = n_new
    rstd = 1.0 / tl.sqrt(m2 / N + eps)
    for c in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        cols = c * BLOCK_N + offs
        ok = cols < N
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok,
                 eviction_policy="evict_first")


# ---------------------------------------------------------------------------
# launcher (the occupancy helper as in the softmax template)

_OCCUPANCY = {}
_WORKSPACE = {}


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") not in ("", "0")


def _sm_count(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def _programs_per_sm(kernel, args, consts, num_warps, num_stages, device) -> int:
    """Programs of this compiled kernel that fit on one SM at once (1 if unknown)."""
    key = (id(kernel), tuple(sorted(consts.items())), num_warps, num_stages, str(args[0].dtype), device.index)
    if key not in _OCCUPANCY:
        occ = 1
        if device.type == "cuda" and not _interpreting():
            try:
                k = kernel.warmup(*args, **consts, num_warps=num_warps, num_stages=num_stages, grid=(1,))
                k._init_handles()
                props = torch.cuda.get_device_properties(device)
                threads = 32 * num_warps
                n_regs = max(1, -(-k.n_regs // 8) * 8)
                occ = min(getattr(props, "max_threads_per_multi_processor", 2048) // threads,
                          getattr(props, "regs_per_multiprocessor", 65536) // (n_regs * threads), 32)
                if k.metadata.shared:
                    occ = min(occ, getattr(props, "shared_memory_per_multiprocessor", 228 * 1024)
                              // (k.metadata.shared + 1024))
                occ = max(1, occ)
            except Exception:
                occ = 1
        _OCCUPANCY[key] = occ
    return _OCCUPANCY[key]


def _rows_grid(M: int, rows: int, sms: int, occ: int, cfg: dict) -> int:
    """PERSISTENT: one wave of resident programs that loop over the row tiles;
    else one program per tile (the hardware schedules the waves)."""
    tiles = triton.cdiv(M, rows)
    return min(tiles, sms * occ) if int(cfg.get("PERSISTENT", 1)) else tiles


def _sync_buffers(device, n_programs: int):
    """The split team's workspace (4 buffers of (mean, M2) per program) and flags, which the kernel
    leaves at zero when it exits (see the softmax template's _sync_buffers)."""
    ws, sync = _WORKSPACE.get(device, (None, None))
    if ws is None or ws.numel() < 8 * n_programs:
        ws = torch.empty(8 * max(n_programs, 4096), device=device, dtype=torch.float32)
        sync = torch.zeros(2 * max(n_programs, 4096), device=device, dtype=torch.int32)
        _WORKSPACE[device] = (ws, sync)
    return ws, sync


def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None,
              eps: float = EPS, config: dict | None = None) -> torch.Tensor:
    cfg = dict(CONFIG, **(config or {}))
    assert x.stride(-1) == 1 and w.is_contiguous() and b.is_contiguous()
    x2 = x.reshape(-1, x.shape[-1])
    y = torch.empty_like(x) if out is None else out
    y2 = y.reshape(-1, y.shape[-1])
    M, N = x2.shape
    if M == 0 or N == 0:
        return y
    block = int(cfg["BLOCK_SIZE"])
    num_warps, num_stages = int(cfg["num_warps"]), int(cfg["num_stages"])
    dev = x.device
    sms = _sm_count(dev)
    P = triton.cdiv(N, block)
    if P == 1 and x.element_size() == 2 and N > 2048:
        cfg = {**cfg, **ROW_PIPELINED}
        block, num_warps, num_stages = cfg["BLOCK_SIZE"], cfg["num_warps"], cfg["num_stages"]
    if P == 1:
        block_n = max(16, triton.next_power_of_2(N))
        rows = max(1, block // block_n)
        args = (x2, w, b, y2, M, N, x2.stride(0), y2.stride(0), eps)
        consts = {"BLOCK_N": block_n, "ROWS": rows, "NUM_STAGES": num_stages}
        occ = _programs_per_sm(_layernorm_rows, args, consts, num_warps, num_stages, dev)
        _layernorm_rows[(_rows_grid(M, rows, sms, occ, cfg),)](*args, **consts, num_warps=num_warps,
                                                                 num_stages=num_stages)
        return y
    if N <= WHOLE_ROW_MAX:
        row_bytes = N * x.element_size()
        _layernorm_row[(M,)](x2, w, b, y2, N, x2.stride(0), y2.stride(0), eps, BLOCK_N=triton.next_power_of_2(N),
                             W_IN_L1=row_bytes > W_IN_L1_BYTES,
                             num_warps=WIDE_ROW_WARPS if row_bytes > WIDE_ROW_BYTES else WHOLE_ROW_WARPS)
        return y
    if x.element_size() == 4 and not _interpreting():
        ws, sync = _sync_buffers(dev, sms * 32)
        args = (x2, w, b, y2, ws, sync, M, N, x2.stride(0), y2.stride(0), eps)
        P = triton.cdiv(N, SPLIT["BLOCK_N"])
        consts = {"BLOCK_N": SPLIT["BLOCK_N"], "P": P, "P_POW2": triton.next_power_of_2(P), "MAX_SPIN": MAX_SPIN}
        occ = _programs_per_sm(_layernorm_split, args, consts, SPLIT["num_warps"], 1, dev)
        teams = min(M, (sms * occ) // P)
        if teams >= 1:
            _layernorm_split[(teams * P,)](*args, **consts, num_warps=SPLIT["num_warps"], num_stages=1)
            return y
    _launch_streamed(x2, w, b, y2, M, N, eps)
    return y


def _launch_streamed(x2, w, b, y2, M, N, eps):
    st = STREAMED
    _layernorm_streamed[(M,)](x2, w, b, y2, N, x2.stride(0), y2.stride(0), eps,
                              BLOCK_N=min(st["BLOCK_N"], triton.next_power_of_2(N)), NUM_STAGES=st["num_stages"],
                              num_warps=st["num_warps"], num_stages=st["num_stages"])
