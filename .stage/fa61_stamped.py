"""Branch fa61: a time-stamped diagnostic copy of flash_attention.py's persistent Gluon kernel (_attn_fwd_persist),
causal, S a multiple of 128, head dim 128 (no HALF diagonal), for the device probe (.stage/probe_fa61.py --stamps).

At 16x16x512x128 causal bf16 our kernel spends ~10% more SM cycles than cuDNN's on the same bytes (ncu, fa61's
brief), per tile rather than in the tail. This copy logs, per program and partition, a record (event code, SM
clock) at each step of a tile, so the per-phase cycles say where those go:

    consumers:  TILE (top of a tile's block loop), Q_WAIT / Q_LANDED (the next tile's Q), and per key block
                K_WAIT / K_LANDED (S's initial value built, then K's stage waited for; S issues right after),
                V_LANDED (the P V of the block before issued right after), S_DONE, SOFTMAX_DONE, PV_DONE;
                at a tile's end EPILOGUE (O normalized, before the staging tile's store_wait), STORE_WAITED,
                STORE_ISSUED; END after the last store_wait
    K/V loader: LD_K_WAIT (before a K stage's empty wait), LD_K (K's copy issued), LD_V (V's copy issued)
    all:        GT_START / GT_END carry %globaltimer (ns) instead of the clock, to line programs up

The clock is %clock64 (the SM's cycles: ncu's active-cycle figures are in the same unit, and %globaltimer ticks
too coarsely on some parts for sub-microsecond phases). One lane of the partition writes each record (a scalar
store). The code between stamps is the kernel's own (its functions imported from the kernel file), but for the
stamps themselves (a clock read and a 16-byte store each, ~8 a block) and K's wait split out of _ws_qk.
"""
import importlib.util
import os

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_kernel_file():
    spec = importlib.util.spec_from_file_location(
        "flash_attention_fa61_stamped_base", os.path.join(ROOT, "skills/kernels/flash-attention/flash_attention.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fa = _load_kernel_file()
gluon, gl = fa.gluon, fa.gl
mbarrier, tma, fence_async_shared = fa.mbarrier, fa.tma, fa.fence_async_shared
warpgroup_mma, warpgroup_mma_wait, tma_load, tma_store = fa.warpgroup_mma, fa.warpgroup_mma_wait, fa.tma_load, fa.tma_store
_persist_waves, _persist_tile_id, _persist_tile, _persist_q_slot = (fa._persist_waves, fa._persist_tile_id,
                                                                    fa._persist_tile, fa._persist_q_slot)
_persist_q_loader, _kv_barriers, _ws_softmax, _tile_first_softmax = (fa._persist_q_loader, fa._kv_barriers,
                                                                     fa._ws_softmax, fa._tile_first_softmax)
_ring_load = fa._ring_load

EVENTS = ["", "TILE", "Q_WAIT", "Q_LANDED", "K_WAIT", "K_LANDED", "V_LANDED", "S_DONE", "SOFTMAX_DONE", "PV_DONE",
          "EPILOGUE", "STORE_WAITED", "STORE_ISSUED", "END", "LD_K_WAIT", "LD_K", "LD_V", "GT_START", "GT_END"]
(TILE, Q_WAIT, Q_LANDED, K_WAIT, K_LANDED, V_LANDED, S_DONE, SOFTMAX_DONE, PV_DONE, EPILOGUE, STORE_WAITED,
 STORE_ISSUED, END, LD_K_WAIT, LD_K, LD_V, GT_START, GT_END) = [gl.constexpr(i) for i in range(1, len(EVENTS))]


@gluon.jit
def _stamp(log, n, code: gl.constexpr):
    # Record n of this partition's log: (code, SM clock). Volatile asm (is_pure False): not moved or merged.
    t = gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=gl.int64, is_pure=False, pack=1)
    gl.store(log + 2 * n, code)
    gl.store(log + 2 * n + 1, t)
    return n + 1


@gluon.jit
def _stamp_globaltimer(log, n, code: gl.constexpr):
    t = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=gl.int64, is_pure=False, pack=1)
    gl.store(log + 2 * n, code)
    gl.store(log + 2 * n + 1, t)
    return n + 1


@gluon.jit
def _block(log, n, acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, j, g, q_row,
           qk_scale, q_empty, q_done, s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr,
           M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, NEW_TILE: gl.constexpr):
    # fa._ws_block at a causal kernel's sites (the loop's unmasked blocks; NEW_TILE: the next tile's diagonal
    # block under this tile's last P V), stamped
    kbuf = g % NUM_BUFFERS
    vbuf = (g - 1) % NUM_BUFFERS
    init = gl.zeros([M, BLOCK_N], gl.float32, s_layout)
    if NEW_TILE:
        cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        last_key = q_row - j * BLOCK_N + gl.arange(0, M, layout=gl.SliceLayout(1, s_layout))
        keep = gl.expand_dims(cols, 0) <= gl.expand_dims(last_key, 1)
        init = gl.where(keep, init, gl.full([M, BLOCK_N], float("-inf"), gl.float32, s_layout))
    n = _stamp(log, n, K_WAIT)
    mbarrier.wait(k_ready.index(kbuf), (g // NUM_BUFFERS) & 1)
    n = _stamp(log, n, K_LANDED)
    s = warpgroup_mma(q, k_smem.index(kbuf).permute((1, 0)), init, use_acc=NEW_TILE, is_async=True)
    mbarrier.wait(v_ready.index(vbuf), ((g - 1) // NUM_BUFFERS) & 1)
    n = _stamp(log, n, V_LANDED)
    acc = warpgroup_mma(p16, v_smem.index(vbuf), acc, is_async=True)
    s = warpgroup_mma_wait(1, deps=(s, ))
    n = _stamp(log, n, S_DONE)
    mbarrier.arrive(k_empty.index(kbuf))
    mbarrier.arrive(q_empty, pred=q_done)
    if NEW_TILE:
        m_i, l_i, p16_next = _tile_first_softmax(s, j, q_row, qk_scale, s_layout, p_layout, M, BLOCK_N, False, False,
                                                 v_smem.dtype)
    else:
        p, alpha, m_i, l_i = _ws_softmax(s, m_i, l_i, j, q_row, qk_scale, s_layout, M, BLOCK_N, False)
        p16_next = gl.convert_layout(p.to(v_smem.dtype), p_layout)
    n = _stamp(log, n, SOFTMAX_DONE)
    acc, p16 = warpgroup_mma_wait(0, deps=(acc, p16))
    n = _stamp(log, n, PV_DONE)
    mbarrier.arrive(v_empty.index(vbuf))
    if not NEW_TILE:
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
    return acc, m_i, l_i, p16_next, n


@gluon.jit
def _first_block(log, n, q, k_smem, k_ready, k_empty, q_empty, q_done, j, q_row, qk_scale, s_layout: gl.constexpr,
                 p_layout: gl.constexpr, M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr):
    # fa._ws_first_block at the persistent causal kernel's site (tile 0's diagonal block, alone), stamped
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    last_key = q_row - j * BLOCK_N + gl.arange(0, M, layout=gl.SliceLayout(1, s_layout))
    keep = gl.expand_dims(cols, 0) <= gl.expand_dims(last_key, 1)
    init = gl.where(keep, gl.zeros([M, BLOCK_N], gl.float32, s_layout),
                    gl.full([M, BLOCK_N], float("-inf"), gl.float32, s_layout))
    n = _stamp(log, n, K_WAIT)
    mbarrier.wait(k_ready.index(0), 0)
    n = _stamp(log, n, K_LANDED)
    s = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), init, use_acc=True, is_async=True)
    s = warpgroup_mma_wait(0, deps=(s, ))
    n = _stamp(log, n, S_DONE)
    mbarrier.arrive(k_empty.index(0))
    mbarrier.arrive(q_empty, pred=q_done)
    m_i, l_i, p16 = _tile_first_softmax(s, j, q_row, qk_scale, s_layout, p_layout, M, BLOCK_N, False, False,
                                        k_smem.dtype)
    n = _stamp(log, n, SOFTMAX_DONE)
    return m_i, l_i, p16, n


@gluon.jit
def _last_pv(log, n, acc, p16, v_smem, v_ready, v_empty, g, NUM_BUFFERS: gl.constexpr):
    # fa._ws_last_pv, stamped
    vbuf = g % NUM_BUFFERS
    mbarrier.wait(v_ready.index(vbuf), (g // NUM_BUFFERS) & 1)
    n = _stamp(log, n, V_LANDED)
    acc = warpgroup_mma(p16, v_smem.index(vbuf), acc, is_async=True)
    acc, p16 = warpgroup_mma_wait(0, deps=(acc, p16))
    n = _stamp(log, n, PV_DONE)
    mbarrier.arrive(v_empty.index(vbuf))
    return acc, n


@gluon.jit
def _consumer(q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, o_desc, S, sched,
              sched_w, qk_scale, log, cap, C: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              NUM_BUFFERS: gl.constexpr, Q_SLOTS: gl.constexpr):
    # fa._persist_consumer, causal, S a multiple of the tiles, head dim 128, stamped (its log: row C of the
    # program's three)
    M: gl.constexpr = BLOCK_M // 2
    HEAD_DIM: gl.constexpr = o_desc.block_type.shape[1]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    log = log + (gl.program_id(0) * 3 + C) * cap * 2
    n = _stamp_globaltimer(log, gl.to_tensor(0), GT_START)
    o_tile = o_smem.index(C)
    n_waves = _persist_waves(sched, sched_w)
    start_m, row0, n_blocks = _persist_tile(_persist_tile_id(sched, sched_w, 0), S, BLOCK_M, BLOCK_N, True)
    q_row = start_m * BLOCK_M + C * M
    qi, lap = _persist_q_slot(0, C, Q_SLOTS)
    q = q_smem.index(qi)
    n = _stamp(log, n, Q_WAIT)
    mbarrier.wait(q_ready.index(qi), lap)
    n = _stamp(log, n, Q_LANDED)
    m_i, l_i, p16, n = _first_block(log, n, q, k_smem, k_ready, k_empty, q_empty.index(qi), n_blocks == 1, start_m,
                                    q_row, qk_scale, s_layout, p_layout, M, BLOCK_N, NUM_BUFFERS)
    g = 0
    for w in range(n_waves):
        n = _stamp(log, n, TILE)
        t_next = _persist_tile_id(sched, sched_w, w + 1)
        acc = gl.zeros([M, HEAD_DIM], gl.float32, o_layout)
        for j in range(1, n_blocks):
            acc, m_i, l_i, p16, n = _block(log, n, acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                           v_empty, j, g + j, q_row, qk_scale, q_empty.index(qi), j == n_blocks - 1,
                                           s_layout, o_layout, p_layout, M, BLOCK_N, NUM_BUFFERS, False)
        l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
        o_row0, o_q_row = row0, q_row
        g += n_blocks
        if w + 1 < n_waves:
            start_m, row0, n_blocks = _persist_tile(t_next, S, BLOCK_M, BLOCK_N, True)
            q_row = start_m * BLOCK_M + C * M
            qi, lap = _persist_q_slot(w + 1, C, Q_SLOTS)
            q = q_smem.index(qi)
            n = _stamp(log, n, Q_WAIT)
            mbarrier.wait(q_ready.index(qi), lap)
            n = _stamp(log, n, Q_LANDED)
            acc, m_i, l_i, p16, n = _block(log, n, acc, m_i, l_i, p16, q, k_smem, v_smem, k_ready, k_empty, v_ready,
                                           v_empty, start_m, g, q_row, qk_scale, q_empty.index(qi), n_blocks == 1,
                                           s_layout, o_layout, p_layout, M, BLOCK_N, NUM_BUFFERS, True)
        else:
            acc, n = _last_pv(log, n, acc, p16, v_smem, v_ready, v_empty, g - 1, NUM_BUFFERS)
        out = (acc * gl.expand_dims(1.0 / l_o, 1)).to(o_desc.dtype)
        n = _stamp(log, n, EPILOGUE)
        tma.store_wait(0)
        n = _stamp(log, n, STORE_WAITED)
        o_tile.store(out)
        fence_async_shared()
        tma_store(o_desc, [o_row0 + o_q_row, 0], o_tile)
        n = _stamp(log, n, STORE_ISSUED)
    tma.store_wait(0)
    n = _stamp(log, n, END)
    _stamp_globaltimer(log, n, GT_END)


@gluon.jit
def _loader(k_desc, v_desc, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, S, sched, sched_w, log, cap,
            BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr):
    # fa._persist_loader, causal, stamped (row 2 of the program's logs)
    log = log + (gl.program_id(0) * 3 + 2) * cap * 2
    n = _stamp_globaltimer(log, gl.to_tensor(0), GT_START)
    g = 0
    t = _persist_tile_id(sched, sched_w, 0)
    for w in range(_persist_waves(sched, sched_w)):
        t_next = _persist_tile_id(sched, sched_w, w + 1)
        start_m, row0, n_blocks = _persist_tile(t, S, BLOCK_M, BLOCK_N, True)
        for j in range(n_blocks):
            key_block = (j + start_m) % n_blocks
            n = _stamp(log, n, LD_K_WAIT)
            _ring_load(k_desc, k_smem, k_ready, k_empty, g + j, row0 + key_block * BLOCK_N, NUM_BUFFERS)
            n = _stamp(log, n, LD_K)
            _ring_load(v_desc, v_smem, v_ready, v_empty, g + j, row0 + key_block * BLOCK_N, NUM_BUFFERS)
            n = _stamp(log, n, LD_V)
        g += n_blocks
        t = t_next
    _stamp_globaltimer(log, n, GT_END)


@gluon.jit
def _attn_fwd_persist_stamped(q_desc, k_desc, v_desc, o_desc, S, sched, sched_w, qk_scale, log, cap,
                              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                              LOADER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr, Q_SLOTS: gl.constexpr):
    # fa._attn_fwd_persist's shared memory and partitions, causal, with the stamped consumers and K/V loader
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [2 * Q_SLOTS] + q_desc.block_type.shape, q_desc.layout)
    o_smem = gl.allocate_shared_memory(dtype, [2] + o_desc.block_type.shape, o_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_BUFFERS] + v_desc.block_type.shape, v_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [2 * Q_SLOTS, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2 * Q_SLOTS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2 * Q_SLOTS):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=1)
    k_ready, k_empty, v_ready, v_empty = _kv_barriers(NUM_BUFFERS, 2)
    gl.warp_specialize([
        (_consumer, (q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, o_desc, S,
                     sched, sched_w, qk_scale, log, cap, 0, BLOCK_M, BLOCK_N, NUM_BUFFERS, Q_SLOTS)),
        (_consumer, (q_smem, k_smem, v_smem, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, o_desc, S,
                     sched, sched_w, qk_scale, log, cap, 1, BLOCK_M, BLOCK_N, NUM_BUFFERS, Q_SLOTS)),
        (_loader, (k_desc, v_desc, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, S, sched, sched_w, log, cap,
                   BLOCK_M, BLOCK_N, NUM_BUFFERS)),
        (_persist_q_loader, (q_desc, q_smem, q_ready, q_empty, S, sched, sched_w, BLOCK_M, BLOCK_N, True, Q_SLOTS)),
    ], [4, 1, 1], [CONSUMER_REGS, LOADER_REGS, LOADER_REGS])


def log_capacity(n_m, rows):
    """Records a partition's log needs at most: a consumer 6 + 6 a block a tile (the loader 3 a block), and 8."""
    return 8 + max(sum(6 + 6 * (n_m - t % n_m) for t in row) for row in rows)


def run(q, k, v, o, log=None):
    """The stamped kernel on q, k, v (B, H, S, 128), causal, O into o: its log, int64 (programs, 3 partitions,
    records, (code, clock)), zeros past each partition's last record; or into log (a log of this shape's from
    before, not cleared: for timing without the clear's memset)."""
    B, H, S, D = q.shape
    assert D == 128 and S % fa.WS_BLOCK_M == 0, "the stamped copy is the causal D128 kernel's, S a tile multiple"
    n_m = S // fa.WS_BLOCK_M
    sms = fa._num_sms(q.device)
    sched = fa._schedule_on(q.device, n_m, B * H, sms, True)
    cap = log_capacity(n_m, fa.persist_schedule(n_m, B * H, sms, True))
    if log is None:
        log = torch.zeros(sched.shape[0], 3, cap, 2, dtype=torch.int64, device=q.device)
    _attn_fwd_persist_stamped[(sched.shape[0],)](
        *fa._gluon_descriptors(q, k, v, o), S, sched, sched.shape[1], fa.LOG2E / D ** 0.5, log, cap,
        BLOCK_M=fa.WS_BLOCK_M, BLOCK_N=fa.WS_BLOCK_N, NUM_BUFFERS=fa.PERSISTENT_BUFFERS[D],
        LOADER_REGS=fa.WS_LOADER_REGS, CONSUMER_REGS=fa.WS_CONSUMER_REGS, Q_SLOTS=fa.PERSISTENT_Q_SLOTS, num_warps=4)
    return log


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0


def _labeled(recs):
    """A consumer's records [(event, clock)] as [(event, clock, where)]: where in a tile the phase ending at the
    record falls (summarize's first, loop, boundary, last, epilogue)."""
    out, site, prev = [], "first", None
    for e, t in recs:
        if e == "TILE":
            site = "loop"
        elif e == "Q_WAIT" and site != "first":
            site = "boundary"
        elif e == "V_LANDED" and prev != "K_LANDED":
            site = "last"
        elif e == "EPILOGUE":
            site = "epilogue"
        out.append((e, t, site))
        prev = e
    return out


# a consumer's wgmma in flight: S issues right after K_LANDED, P V right after V_LANDED; S_DONE retires S (the wait
# for all but the P V), PV_DONE whatever is left
_IN_FLIGHT = {"K_LANDED": 1, "V_LANDED": 1, "S_DONE": -1, "PV_DONE": -1}


def _tensor_idle(consumers):
    """(cycles from a program's first consumer record to its last, cycles in which neither consumer had a wgmma
    issued and not yet waited for, {the two consumers' phases then: cycles}). A wgmma may end before its wait
    returns, so the idle cycles are a lower bound of the tensor cores' idle time."""
    events = sorted((t, c, e, site) for c, recs in enumerate(consumers) for e, t, site in recs)
    count, phase, idle, by = [0, 0], ["start", "start"], 0, {}
    for (t0, c, e, site), (t1, *_) in zip(events, events[1:]):
        count[c] += _IN_FLIGHT.get(e, 0)
        phase[c] = f"{site}: after {e}"
        if count == [0, 0]:
            idle += t1 - t0
            key = " | ".join(sorted(phase))
            by[key] = by.get(key, 0) + t1 - t0
    return events[-1][0] - events[0][0], idle, by


def summarize(log):
    """Lines: each phase of a consumer's tiles (the cycles between two consecutive stamps, by where in a tile they
    fall: first (tile 0's first block), loop (a tile's blocks 1..), boundary (the next tile's Q and diagonal block
    under this tile's last P V), last (the last tile's last P V), epilogue) with its count, median, mean and
    cycles a consumer in all, as a share of a consumer's span; the cycles from a tile's TILE to the next's (its
    blocks 1.., the next tile's diagonal block under its last P V, its epilogue) by its key blocks; the loader's
    waits for free stages; how far ahead of a consumer's wait each K and V copy was issued, and how long a copy
    that a consumer waited for took; the programs' spans in globaltimer ns and SM cycles; the cycles in which
    neither consumer had a wgmma in flight, by what the two were doing then (_tensor_idle)."""
    log = log.cpu().tolist()
    phases, tiles, spans_cyc, spans_ns, starts_ns, ends_ns = {}, {}, [], [], [], []
    loader_waits, k_lead, k_late, v_lead, v_late = {}, [], [], [], []
    idle_span, idle_by = [0, 0], {}  # cycles in all programs' spans, of them with no wgmma in flight; by phases
    for prog in log:
        ld = [(EVENTS[c], t) for c, t in prog[2] if c]
        issued = {"K": [t for e, t in ld if e == "LD_K"], "V": [t for e, t in ld if e == "LD_V"]}
        for (e0, t0), (e1, t1) in zip(ld, ld[1:]):
            if not e1.startswith("GT") and not e0.startswith("GT"):
                loader_waits.setdefault(f"loader: {e0}->{e1}", []).append(t1 - t0)
        labeled = []
        for c in (0, 1):
            recs = [(EVENTS[code], t) for code, t in prog[c] if code]
            gt = dict((e, t) for e, t in recs if e.startswith("GT"))
            recs = [(e, t) for e, t in recs if not e.startswith("GT")]
            spans_cyc.append(recs[-1][1] - recs[0][1])
            spans_ns.append(gt["GT_END"] - gt["GT_START"])
            starts_ns.append(gt["GT_START"])
            ends_ns.append(gt["GT_END"])
            labeled.append(_labeled(recs))
            tile_start, tile_blocks = None, 0
            k_g = v_g = 0
            for (e0, t0, _), (e1, t1, site) in zip(labeled[-1], labeled[-1][1:]):
                if e1 == "TILE":
                    if tile_start is not None:
                        tiles.setdefault(tile_blocks, []).append(t1 - tile_start)
                    tile_start, tile_blocks = t1, 1
                elif e1 == "K_LANDED" and site == "loop":
                    tile_blocks += 1
                phases.setdefault(f"{site}: {e0}->{e1}", []).append(t1 - t0)
                if e1 == "K_LANDED":  # K block k_g: issued by the loader at issued["K"][k_g], waited for from t0
                    if k_g < len(issued["K"]):
                        k_lead.append(t0 - issued["K"][k_g])
                        if t1 - t0 > 200:
                            k_late.append(t1 - issued["K"][k_g])
                    k_g += 1
                if e1 == "V_LANDED":
                    if v_g < len(issued["V"]):
                        v_lead.append(t0 - issued["V"][v_g])
                        if t1 - t0 > 200:
                            v_late.append(t1 - issued["V"][v_g])
                    v_g += 1
        span_p, idle_p, by_p = _tensor_idle(labeled)
        idle_span[0] += span_p
        idle_span[1] += idle_p
        for key, cycles in by_p.items():
            idle_by[key] = idle_by.get(key, 0) + cycles
    consumers = len(spans_cyc)
    span = sum(spans_cyc) / consumers
    lines = [f"stamped kernel: {len(log)} programs; a consumer's span {span:.0f} cycles (median "
             f"{_median(spans_cyc)}), {sum(spans_ns) / consumers:.0f} ns ({span / (sum(spans_ns) / consumers):.3f} "
             f"cycles/ns); first start to last end {max(ends_ns) - min(starts_ns)} ns",
             f"{'phase (consumer)':44s} {'count':>6s} {'median':>7s} {'mean':>7s} {'cyc/cons':>9s} {'% span':>6s}"]
    for key, xs in phases.items():
        lines.append(f"{key:44s} {len(xs):6d} {_median(xs):7d} {sum(xs) / len(xs):7.0f} {sum(xs) / consumers:9.0f} "
                     f"{100 * sum(xs) / consumers / span:6.1f}")
    for key, xs in loader_waits.items():
        lines.append(f"{key:44s} {len(xs):6d} {_median(xs):7d} {sum(xs) / len(xs):7.0f} {sum(xs) / len(log):9.0f} "
                     f"{100 * sum(xs) / len(log) / span:6.1f}")
    for blocks, xs in sorted(tiles.items()):
        lines.append(f"tile of {blocks} key blocks (TILE to next TILE): {len(xs)} tiles, median {_median(xs)} cycles, "
                     f"{_median(xs) / blocks:.0f} a block")
    for name, lead, late in (("K", k_lead, k_late), ("V", v_lead, v_late)):
        lines.append(f"{name} copies: issued a median {_median(lead)} cycles before a consumer's wait began "
                     f"(min {min(lead, default=0)}); {len(late)} of {len(lead)} waits over 200 cycles, those copies "
                     f"landing a median {_median(late)} cycles after their issue")
    lines.append(f"no wgmma in flight in either consumer: {idle_span[1] / len(log):.0f} cycles a program, "
                 f"{100 * idle_span[1] / idle_span[0]:.1f}% of its span (a lower bound of the tensor cores' idle "
                 f"time); the consumers' phases then, most first:")
    for key, cycles in sorted(idle_by.items(), key=lambda kv: -kv[1])[:10]:
        lines.append(f"    {cycles / len(log):7.0f} cycles a program ({100 * cycles / idle_span[0]:4.1f}%)  {key}")
    return lines
