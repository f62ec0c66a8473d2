"""Device probe for sm60, step 1: what bounds softmax's shared-memory team (_softmax_smem_team) at few long rows.

    cd <worktree> && PYTHONPATH=$PWD python .stage/probe_sm60_diag.py OUT [SECONDS]    (one H100, about 2 min)
    PYTHONPATH=$PWD python .stage/probe_sm60_diag.py --compile-only                  (CPU: compiles the copy for sm_90)

The instrument: a copy of the shipped kernel (below, `_team_timed`; the shipped helpers are called as they are)
that stamps %globaltimer and %clock64 per program at each phase boundary into a buffer:
    start | first copies issued | row 0 landed | row 0 published |
    per row iteration it: row it+1 landed (wait_group) | row it+1 published | row it's partials seen (gather) |
                          row it written (its stores and the refill with row it+2 issued) |
    loop done | exit | (smid, rows)
Compiled with STAMP=False it is the shipped kernel again; both are timed beside the shipped launch, so that the
stamps' cost shows (the stamped total must be within a few % of the others).

For each shape (bf16): the shipped launch (kgit's softmax), the copy unstamped and stamped on the same grid,
torch.softmax and a torch copy of the same bytes, every output checked against float64 first, then timed by
kgit.harness.timing.gpu_median_ms (L2 cleared) in two rounds of opposite order. Then three stamped launches,
each after an L2 clear; the one of median span is analysed:
  - programs an SM (from %smid) and SMs a team spans; teams (rows at once), rows a team;
  - the start skew, each phase's distribution (median / p90 / max over programs and rows), by row iteration;
  - the exchange: siblings' publish skew, and the latency from the last sibling's publish to a program's gather;
  - a traffic timeline: reads spread over [issue, landed] of each part of a row, writes over the phase that
    issues them, in GB/s and % of copy per time bin, with the programs active / waiting for a landing / in gather;
  - the time the first, middle two and last quarters of the bytes took, against the copy's pace.
Writes probe_sm60_diag.txt (and .jsonl: one record a shape) under OUT, line by line; shapes left when SECONDS
(default 110) have passed are skipped and said so. Predictions: .stage/sm60_notes.md (written before any run).
"""
import importlib.util
import json
import math
import os
import statistics
import sys
import time

import torch
import triton

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sm = _load(os.path.join(ROOT, "skills", "kernels", "softmax", "softmax.py"), "softmax_sm60")
if sm.gluon is None:
    sys.exit("this Triton has no Gluon: the team does not run here")
gluon, gl, cp = sm.gluon, sm.gl, sm.cp
# the shipped kernel's helpers and globals, by the names the copy below uses
copy_to_shared, cta_barrier, LOG2E, UNSTAMPED = sm.copy_to_shared, sm.cta_barrier, sm.LOG2E, sm.UNSTAMPED
_part_max_sum, _publish, _gather, _row_body, _y_body = sm._part_max_sum, sm._publish, sm._gather, sm._row_body, sm._y_body
_edge_load, _with_edge, _cut_edge = sm._edge_load, sm._with_edge, sm._cut_edge

B = torch.bfloat16
# (M, N, why): the three team shapes at 512-2048 rows; 512x32000 ships on the pipelined loop (rows of 16-element
# groups up to 32768), so there the team is launched by hand for contrast (P = 4, 3.1 rows a team)
SHAPES = [(512, 50257, "shipped: team, rows cut"), (2048, 50257, "shipped: team, rows cut"),
          (512, 128256, "shipped: team, whole rows"), (512, 32000, "team launched by hand (ships on the loop)")]
HEAD = 4  # stamps before the rows: start, copies issued, row 0 landed, row 0 published
PHASES = ("landed", "published", "seen", "written")  # the 4 stamps of a row iteration, in order
TAIL = 3  # stamps after the rows: loop done, exit, (smid, rows)


@gluon.jit
def _mark(stamps, at, ON: gl.constexpr):
    # (globaltimer ns, clock64 cycles) into the program's slot `at`; nothing when not ON
    if ON:
        t = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=gl.int64, is_pure=False, pack=1)
        c = gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=gl.int64, is_pure=False, pack=1)
        gl.store(stamps + 2 * at, t)
        gl.store(stamps + 2 * at + 1, c)


@gluon.jit(do_not_specialize=["off_x", "off_y"])
def _team_timed(x_ptr, y_ptr, words, exits, M, N, stride_x, stride_y, off_x, off_y, stamps,
                CHUNK: gl.constexpr, NCH: gl.constexpr, P: gl.constexpr, P_POW2: gl.constexpr,
                SPIN: gl.constexpr, CUT: gl.constexpr, Y_CUT: gl.constexpr, VEC: gl.constexpr,
                S: gl.constexpr, STAMP: gl.constexpr):
    # softmax.py's _softmax_smem_team line for line (see its comments), with _mark at the phase boundaries:
    # program pid's slots are stamps[pid * S .. pid * S + S - 1], two int64 each
    layout: gl.constexpr = gl.BlockedLayout([8], [32], [gl.num_warps()], [0])
    slot_layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    buf = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [2 * NCH, CHUNK],
                                    gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    pid = gl.program_id(0)
    mine_at = stamps + pid.to(gl.int64) * (2 * S)
    _mark(mine_at, 0, STAMP)
    G = gl.num_programs(0)
    team = pid // P
    part = pid % P
    n_teams = G // P
    offs = part * (NCH * CHUNK) + gl.arange(0, CHUNK, layout)
    out_layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    SUB: gl.constexpr = CHUNK // 4
    lane_offs = gl.arange(0, SUB, out_layout)
    slots = gl.arange(0, P_POW2, slot_layout)
    zeros = gl.zeros([P_POW2], gl.int32, slot_layout)
    if CUT:
        lanes = gl.arange(0, 2 * VEC, slot_layout)
        mine = part == P - 1
        e_row = _edge_load(x_ptr, team, stride_x, off_x, N, mine, lanes, VEC)
        e_nxt = _edge_load(x_ptr, team + n_teams, stride_x, off_x, N, mine & (team + n_teams < M), lanes, VEC)

    for h in gl.static_range(2):
        r = team + h * n_teams
        src, n = _row_body(x_ptr, r, stride_x, off_x, N, CUT, VEC)
        for c in gl.static_range(NCH):
            cols = c * CHUNK + offs
            copy_to_shared(buf.index(h * NCH + c), src + cols, mask=(cols < n) & (r < M))
            cp.commit_group()
    _mark(mine_at, 1, STAMP)
    cp.wait_group(NCH)
    cta_barrier()
    _mark(mine_at, 2, STAMP)
    n = _row_body(x_ptr, team, stride_x, off_x, N, CUT, VEC)[1]
    m, s = _part_max_sum(buf, 0, offs, team < M, n, NCH, CHUNK, layout)
    if CUT:
        m, s = _with_edge(m, s, e_row)
    _publish(words, team, part, 0, m, s, P)
    _mark(mine_at, 3, STAMP)

    it = 0
    for pair in range(team, M, 2 * n_teams):
        for half in gl.static_range(2):
            row = pair + half * n_teams
            if row < M:
                nxt = row + n_teams
                cp.wait_group(0)
                cta_barrier()
                _mark(mine_at, 4 + 4 * it, STAMP)
                n = _row_body(x_ptr, nxt, stride_x, off_x, N, CUT, VEC)[1]
                mn, sn = _part_max_sum(buf, (1 - half) * NCH, offs, nxt < M, n, NCH, CHUNK, layout)
                if CUT:
                    mn, sn = _with_edge(mn, sn, e_nxt)
                _publish(words, team, part, it + 1, mn, sn, P)
                _mark(mine_at, 5 + 4 * it, STAMP)
                pm, ps = _gather(words, team, it, slots, P, SPIN)
                gm = gl.max(pm, axis=0)
                shift = gm * LOG2E + gl.log2(gl.sum(ps * gl.exp2((pm - gm) * LOG2E), axis=0))
                _mark(mine_at, 6 + 4 * it, STAMP)
                ahead = row + 2 * n_teams
                if CUT:
                    e_ahead = _edge_load(x_ptr, ahead, stride_x, off_x, N, mine & (ahead < M), lanes, VEC)
                src, n_ahead = _row_body(x_ptr, ahead, stride_x, off_x, N, CUT, VEC)
                n = _row_body(x_ptr, row, stride_x, off_x, N, CUT, VEC)[1]
                y_row = _y_body(y_ptr, row, stride_x, stride_y, off_x, off_y, N, CUT, Y_CUT, VEC)
                for c in gl.static_range(NCH):
                    cols = c * CHUNK + offs
                    if CUT and not Y_CUT:
                        for q in gl.static_range(CHUNK // SUB):
                            first = part * (NCH * CHUNK) + c * CHUNK + q * SUB
                            x = buf.index(half * NCH + c).slice(q * SUB, SUB).load(out_layout).to(gl.float32)
                            gl.store(y_row + first + lane_offs,
                                     gl.exp2(x * LOG2E - shift).to(y_ptr.dtype.element_ty),
                                     mask=lane_offs < n - first)
                        cta_barrier()
                        copy_to_shared(buf.index(half * NCH + c), src + cols,
                                       mask=(cols < n_ahead) & (ahead < M))
                        cp.commit_group()
                    else:
                        x = buf.index(half * NCH + c).load(layout).to(gl.float32)
                        cta_barrier()
                        copy_to_shared(buf.index(half * NCH + c), src + cols,
                                       mask=(cols < n_ahead) & (ahead < M))
                        cp.commit_group()
                        gl.store(y_row + cols, gl.exp2(x * LOG2E - shift).to(y_ptr.dtype.element_ty),
                                 mask=cols < n)
                if CUT:
                    col, ok = _cut_edge(row.to(gl.int64) * stride_x + off_x, N, lanes, VEC)
                    gl.store(y_ptr + (row.to(gl.int64) * stride_y + off_y) + col,
                             gl.exp2(e_row.to(gl.float32) * LOG2E - shift).to(y_ptr.dtype.element_ty),
                             mask=ok & mine)
                    e_row = e_nxt
                    e_nxt = e_ahead
                _mark(mine_at, 7 + 4 * it, STAMP)
                it += 1
    cp.wait_group(0)
    _mark(mine_at, S - 3, STAMP)
    done = gl.atomic_add(exits + team, 1, sem="acq_rel")
    if done == P - 1:
        for k in gl.static_range(4):
            gl.atomic_xchg(words + (team * 4 + k) * P + slots, (zeros + UNSTAMPED).to(gl.int64),
                           mask=slots < P, sem="relaxed")
        gl.atomic_xchg(exits + team, 0, sem="release")
    _mark(mine_at, S - 2, STAMP)
    if STAMP:
        sm_id = gl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=gl.int32, is_pure=True, pack=1)
        gl.store(mine_at + 2 * (S - 1), sm_id.to(gl.int64))
        gl.store(mine_at + 2 * (S - 1) + 1, it.to(gl.int64))


def team_launch(x2, y2, stamped_slots=None):
    """(launch(stamp) -> None, facts) for the team on x2 -> y2 exactly as softmax.py's _launch_smem_team sizes it
    (its programs an SM, teams, parts, cut), running the copy above; stamp: a [grid, S, 2] int64 buffer or None."""
    M, N = x2.shape
    st = sm.SMEM_TEAM
    dev = x2.device
    sms = sm._sm_count(dev)
    cut = not sm._rows_of_16(x2, y2)
    vec = 16 // x2.element_size()
    P = sm._team_parts(N, st["CHUNK"] * st["NCH"], vec if cut else 1)
    words, exits = sm._team_words(dev, sms * 32)
    x_arg, off_x, y_arg, off_y, y_cut = sm._cut_args(x2, y2) if cut else (x2, 0, y2, 0, False)
    args = (x_arg, y_arg, words, exits, M, N, x2.stride(0), y2.stride(0), off_x, off_y)
    consts = {"CHUNK": st["CHUNK"], "NCH": st["NCH"], "P": P, "P_POW2": triton.next_power_of_2(P), "SPIN": sm.MAX_SPIN,
              "CUT": cut, "Y_CUT": y_cut, "VEC": vec, "maxnreg": st["maxnreg"]}
    occ = min(st["PROGRAMS_PER_SM"], sm._programs_per_sm(sm._softmax_smem_team, args, consts, st["num_warps"], 1, dev))
    teams = min(M, (sms * occ) // P)
    rows_max = -(-M // teams)
    S = HEAD + 4 * rows_max + TAIL
    grid = teams * P
    scratch = torch.zeros(1, dtype=torch.int64, device=dev)  # the unstamped copy's (never written)

    def launch(stamps=None):
        _team_timed[(grid,)](*args, stamps if stamps is not None else scratch, **consts, S=S,
                             STAMP=stamps is not None, num_warps=st["num_warps"])
    facts = {"P": P, "teams": teams, "grid": grid, "occ": occ, "sms": sms, "cut": cut, "y_cut": y_cut,
             "rows_max": rows_max, "rows_min": M // teams, "S": S, "part_elems": st["CHUNK"] * st["NCH"]}
    return launch, facts


# ---------------------------------------------------------------------------------------------------------------
# analysis of one stamped launch

def q(values, f):
    v = sorted(values)
    return v[min(len(v) - 1, int(f * (len(v) - 1) + 0.5))] if v else float("nan")


def dist(values):
    return f"med {q(values, .5):6.2f}  p90 {q(values, .9):6.2f}  max {q(values, 1):6.2f}" if values else "none"


def to_times(raw, S):
    """[grid][S] times in us from the launch's first start, from (globaltimer, clock64) stamps: each program's
    clock (exact within the program) placed on the common globaltimer by the mean offset over its stamps (which
    averages a coarse globaltimer's steps). Returns (times, smid, rows, facts about the timers)."""
    gt, clk = raw[:, :, 0].tolist(), raw[:, :, 1].tolist()
    n_used = [int(r[S - 1]) for r in clk]  # rows this program ran
    smid = [int(r[S - 1]) for r in gt]
    used = [list(range(HEAD)) + list(range(HEAD, HEAD + 4 * n)) + [S - 3, S - 2] for n in n_used]
    steps = [b - a for g, u in zip(gt, used) for a, b in zip([g[i] for i in u], [g[i] for i in u][1:]) if b > a]
    zero = sum(1 for g, u in zip(gt, used) for a, b in zip(u, u[1:]) if g[b] == g[a])
    pairs = sum(len(u) - 1 for u in used)
    ghz = statistics.median((c[u[-1]] - c[u[0]]) / (g[u[-1]] - g[u[0]]) for g, c, u in zip(gt, clk, used)
                            if g[u[-1]] > g[u[0]])
    gmin = min(g[0] for g in gt)  # globaltimer counts ns since an epoch: too many digits for a double's sums
    times = []
    for g, c, u in zip(gt, clk, used):
        off = statistics.fmean((g[i] - gmin) - (c[i] - c[u[0]]) / ghz for i in u)
        times.append([(off + (c[i] - c[u[0]]) / ghz) if i in u else float("nan") for i in range(S)])
    t0 = min(t[0] for t in times)
    times = [[(v - t0) / 1e3 for v in t] for t in times]
    facts = {"clock_ghz": ghz, "gt_min_step_ns": min(steps) if steps else None, "gt_equal_pairs": zero / max(1, pairs)}
    return times, smid, n_used, facts


def analyse(raw, f, nbytes_elem, N, copy_gbps, say):
    """Print the phase distributions, the exchange, the timeline and the quarters of one stamped launch."""
    S, P, teams = f["S"], f["P"], f["teams"]
    times, smid, n_rows, tf = to_times(raw, S)
    grid = len(times)
    say(f"    timers: clock {tf['clock_ghz']:.3f} GHz; globaltimer's smallest step {tf['gt_min_step_ns']} ns, "
        f"{100 * tf['gt_equal_pairs']:.0f}% of successive stamps equal (coarse: the clock carries the phases)")
    span = max(t[S - 2] for t in times)
    per_sm = {}
    for s in smid:
        per_sm[s] = per_sm.get(s, 0) + 1
    hist = {}
    for c in per_sm.values():
        hist[c] = hist.get(c, 0) + 1
    team_sms = [len({smid[t * P + p] for p in range(P)}) for t in range(teams)]
    say(f"    span {span:.2f} us (first start -> last exit); {grid} programs on {len(per_sm)} SMs, programs an SM "
        f"{dict(sorted(hist.items()))}; teams (rows at once) {teams} of P={P}; rows a team "
        f"{min(n_rows)}-{max(n_rows)}; SMs a team spans {dist(team_sms)}")
    # sizes: each program's part of a row in bytes (the last part the rest of the row)
    part_bytes = [min(f["part_elems"], max(0, N - p * f["part_elems"])) * nbytes_elem for p in range(P)]
    starts = [t[0] for t in times]
    say(f"    start (us from the first):       {dist(starts)}")
    say(f"    copies issued (from start):      {dist([t[1] - t[0] for t in times])}")
    say(f"    row 0 landed (from issue):       {dist([t[2] - t[1] for t in times])}")
    say(f"    row 0 reduced + published:       {dist([t[3] - t[2] for t in times])}")
    burst = sum(2 * part_bytes[pid % P] for pid in range(grid) if n_rows[pid] > 1)
    first, row1 = min(t[1] for t in times), [t[HEAD] for t, n in zip(times, n_rows) if n > 1]
    say(f"    first burst (rows 0 and 1 of every team, {burst / 1e6:.1f} MB, read only): row 1 seen landed at "
        f"{dist(row1)} us; implied read rate to the last {burst / (max(row1) - first) / 1e3:.0f} GB/s, to the "
        f"median {burst / 2 / (q(row1, .5) - first) / 1e3:.0f} GB/s (half the bytes)")
    rows_most = max(n_rows)
    phase = {k: [[] for _ in range(rows_most)] for k in ("wait landing", "reduce+publish", "gather wait", "write")}
    for t, n in zip(times, n_rows):
        prev = t[3]
        for it in range(n):
            land, pub, seen, wrote = (t[HEAD + 4 * it + k] for k in range(4))
            phase["wait landing"][it].append(land - prev)
            phase["reduce+publish"][it].append(pub - land)
            phase["gather wait"][it].append(seen - pub)
            phase["write"][it].append(wrote - seen)
            prev = wrote
    say("    per row iteration it (us; 'wait landing' = row it+1's copies, 'gather wait' = row it's partials):")
    shown = list(range(min(3, rows_most))) + [i for i in range(max(3, rows_most - 3), rows_most)]
    for name, by_it in phase.items():
        every = [v for vs in by_it for v in vs]
        say(f"      {name:15s} all: {dist(every)}   by it (median): "
            + " ".join(f"{i}:{q(by_it[i], .5):.2f}" for i in shown))
    say(f"    loop done -> exit:               {dist([t[S - 2] - t[S - 3] for t in times])}")
    ends = sorted(t[S - 2] for t in times)
    by_rows = {}
    for t, n in zip(times, n_rows):
        by_rows.setdefault(n, []).append(t[S - 2])
    say("    exit by rows a program ran: " + "; ".join(f"{n} rows: {len(v)} programs, {dist(v)}"
                                                        for n, v in sorted(by_rows.items())))
    # the exchange: row it's publish by each sibling (row 0: the head's stamp; row it+1: iteration it's)
    skew, vis, late = [], [], []
    for team in range(teams):
        sib = [times[team * P + p] for p in range(P)]
        n = n_rows[team * P]
        for it in range(n):
            pubs = [s[3] if it == 0 else s[HEAD + 4 * (it - 1) + 1] for s in sib]
            last = max(pubs)
            skew.append(last - min(pubs))
            for s in sib:
                seen, own_next = s[HEAD + 4 * it + 2], s[HEAD + 4 * it + 1]
                vis.append(seen - max(last, own_next))  # from when it could see all (and was asking) to seen
                late.append(max(0.0, last - own_next))  # of its gather wait, the part a late sibling explains
    say(f"    exchange: siblings' publish skew a row {dist(skew)}; gather wait explained by a sibling publishing after "
        f"the program asked {dist(late)}; last publish (or asking) -> seen {dist(vis)}")
    # traffic: reads over [issued, landed] of each part-row, writes over the phase that issued them
    bins = 1.0 if span < 80 else 2.0
    nb = int(math.ceil(span / bins)) + 1
    rd, wr = [0.0] * nb, [0.0] * nb
    act, landw, gathw, inflight = [0] * nb, [0.0] * nb, [0.0] * nb, [0.0] * nb

    def spread(arr, a, b, amount):
        if not (b > a):
            b = a + 1e-3
        for k in range(int(a // bins), int(b // bins) + 1):
            lo, hi = max(a, k * bins), min(b, (k + 1) * bins)
            if hi > lo and k < nb:
                arr[k] += amount * (hi - lo) / (b - a)

    def occupy(arr, a, b):  # program-us spent in [a, b) per bin, as an average count of programs
        for k in range(int(a // bins), int(b // bins) + 1):
            lo, hi = max(a, k * bins), min(b, (k + 1) * bins)
            if hi > lo and k < nb:
                arr[k] += (hi - lo) / bins

    for pid, (t, n) in enumerate(zip(times, n_rows)):
        pb = part_bytes[pid % P]
        issue = {0: t[1], 1: t[1]}
        landed = {0: t[2]}
        occupy(act, t[0], t[S - 2])
        prev = t[3]
        for it in range(n):
            land, pub, seen, wrote = (t[HEAD + 4 * it + k] for k in range(4))
            landed[it + 1] = land
            issue[it + 2] = seen
            spread(wr, seen, wrote, pb)
            occupy(landw, prev, land)
            occupy(gathw, pub, seen)
            prev = wrote
        for r in range(n):
            if r in issue and r in landed:
                spread(rd, issue[r], landed[r], pb)
                occupy(inflight, issue[r], landed[r])
    say(f"    timeline, {bins:g} us bins (GB/s: reads spread over issued->seen landed, writes over their issue; % of "
        f"copy {copy_gbps:.0f}; programs: active / waiting for a landing / in gather / with a row in flight, counted "
        f"to when the program saw it land, so an upper bound):")
    cum, total = [], 0.0
    for k in range(nb):
        total += rd[k] + wr[k]
        cum.append(total)
        gbps = (rd[k] + wr[k]) / (bins * 1e3)
        say(f"      {k * bins:5.0f} {rd[k] / (bins * 1e3):6.0f} + {wr[k] / (bins * 1e3):6.0f} = {gbps:6.0f} "
            f"({100 * gbps / copy_gbps:3.0f}%)  {act[k]:5.0f} {landw[k]:5.0f} {gathw[k]:5.0f} {inflight[k]:5.0f}")

    def when(frac):
        for k, c in enumerate(cum):
            if c >= frac * total:
                before = cum[k - 1] if k else 0.0
                return (k + (frac * total - before) / max(1e-9, c - before)) * bins
        return span
    qs = [0.0] + [when(fr) for fr in (.25, .5, .75)] + [span]
    pace = total / 4 / (copy_gbps * 1e3)
    say(f"    quarters of the bytes took (us): " + ", ".join(f"{b - a:.2f}" for a, b in zip(qs, qs[1:]))
        + f" (at copy's pace {pace:.2f} each); middle half at {100 * 2 * pace / (qs[3] - qs[1]):.0f}% of copy")
    return {"span_us": span, "phases_median": {k: [q(v, .5) for v in by] for k, by in phase.items()},
            "skew_med": q(skew, .5), "vis_med": q(vis, .5), "late_med": q(late, .5), "quarters_us": qs,
            "programs_an_sm": hist, "timers": tf}


# ---------------------------------------------------------------------------------------------------------------

def compile_only():
    """Compile the copy, unstamped and stamped, for sm_90 as the shipped team is launched at 512x50257 (cut) and
    512x128256 (whole rows); print its registers, stack and shared memory (no GPU needed)."""
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import native_specialize_impl
    st = sm.SMEM_TEAM
    ok = True
    for N, cut in ((50257, True), (128256, False)):
        for stamp in (False, True):
            P = sm._team_parts(N, st["CHUNK"] * st["NCH"], 8 if cut else 1)
            x = torch.empty(4, N, dtype=B)
            values = dict(x_ptr=x, y_ptr=torch.empty_like(x), words=torch.empty(64, dtype=torch.int64),
                          exits=torch.empty(64, dtype=torch.int32), M=512, N=N, stride_x=N, stride_y=N, off_x=0,
                          off_y=0, stamps=torch.empty(64, dtype=torch.int64))
            consts = dict(CHUNK=st["CHUNK"], NCH=st["NCH"], P=P, P_POW2=triton.next_power_of_2(P), SPIN=sm.MAX_SPIN,
                          CUT=cut, Y_CUT=cut, VEC=8, S=HEAD + 4 * 6 + TAIL, STAMP=stamp)
            fn = _team_timed
            signature, attrs = {}, {}
            for i, name in enumerate(fn.arg_names):
                if name in consts:
                    signature[name] = "constexpr"
                    continue
                if name in ("off_x", "off_y"):
                    signature[name] = "i32"
                    continue
                signature[name], s = native_specialize_impl(BaseBackend, values[name], False, True, True)
                if signature[name] == "constexpr":
                    consts[name] = s
                elif s == "D":
                    attrs[(i,)] = [["tt.divisibility", 16]]
            k = triton.compile(GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                               target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": st["num_warps"], "maxnreg": st["maxnreg"]})
            import re
            import subprocess
            import tempfile
            cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
            with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
                fh.write(k.asm["cubin"])
                fh.flush()
                usage = subprocess.run([cuobjdump, "-res-usage", fh.name], capture_output=True, text=True,
                                       check=True).stdout
            regs, stack = (int(re.search(rf"{w}:(\d+)", usage).group(1)) for w in ("REG", "STACK"))
            timers = k.asm["ptx"].count("%globaltimer")
            print(f"N={N} cut={cut} STAMP={stamp}: {regs} registers, {stack} bytes of stack, "
                  f"{k.metadata.shared} bytes of shared memory, {timers} globaltimer reads in the PTX", flush=True)
            ok &= regs <= st["maxnreg"] and (timers > 0) == stamp
    return 0 if ok else 1


def main():
    out_dir = sys.argv[1]
    deadline = time.time() + (float(sys.argv[2]) if len(sys.argv) > 2 else 110.0)
    t_start = time.time()
    os.makedirs(out_dir, exist_ok=True)
    txt = open(os.path.join(out_dir, "probe_sm60_diag.txt"), "w")
    jsonl = open(os.path.join(out_dir, "probe_sm60_diag.jsonl"), "w")

    def say(line):
        print(line, flush=True)
        txt.write(line + "\n")
        txt.flush()

    from kgit.harness import device
    from kgit.harness.timing import _l2_clear, gpu_median_ms
    copy_gbps = device.measured_copy_gbps(refresh=True)
    say(f"sm60 diagnostic on {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; "
        f"SMEM_TEAM {sm.SMEM_TEAM}; copy {copy_gbps:.0f} GB/s")
    clear = _l2_clear()
    wrong = []
    for M, N, why in SHAPES:
        if time.time() > deadline:
            say(f"{M}x{N} bf16: skipped, out of time")
            continue
        x = (torch.randn(M, N, device="cuda") * 3).to(B)
        x[0, N - 1] = x[0].float().max() + 1  # the max at the row's last element (the cut edge, P - 1's)
        x[1, 0] = x[1].float().max() + 1
        y = torch.empty_like(x)
        ref = sm.softmax_ref(x)
        launch, f = team_launch(x, y)
        stamps = torch.zeros(f["grid"], f["S"], 2, dtype=torch.int64, device="cuda")
        calls = {"shipped": lambda: sm.softmax(x, out=y), "copy": lambda: launch(),
                 "copy stamped": lambda: launch(stamps), "torch": lambda: torch.softmax(x, dim=-1)}
        nbytes = 2 * x.numel() * x.element_size()
        src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        good = {}
        for name, fn in list(calls.items()):  # every output right first (NaN-poisoned, twice: the words come back)
            worst = 0.0
            try:
                for _ in range(2):
                    y.fill_(float("nan"))
                    got = fn()
                    got = y if got is None or name == "shipped" else got
                    torch.cuda.synchronize()
                    err = (got.double() - ref).abs() / (1e-2 * ref.abs() + 2e-38)
                    worst = max(worst, float(torch.nan_to_num(err, nan=float("inf")).max()))
            except Exception as e:  # the copy failing to compile must not hide the shipped figures
                say(f"{M}x{N} {name}: {type(e).__name__}: {str(e).strip().splitlines()[-1][:300] if str(e).strip() else ''}")
                worst = float("inf")
                del calls[name]
            good[name] = worst <= 1
            if not good[name]:
                wrong.append(f"{M}x{N} {name}")
        sm.last_config.clear()
        sm.softmax(x, out=y)
        path = dict(sm.last_config)
        calls["copy of bytes"] = lambda: dst.copy_(src)
        times = {name: [] for name in calls}
        for order in (list(calls), list(reversed(calls))):
            for name in order:
                times[name].append(gpu_median_ms(calls[name], 10, 40, clear) * 1e3)
        us = {n: statistics.fmean(t) for n, t in times.items()}
        say(f"{M}x{N} bf16 ({why}; shipped path {path}): {nbytes / 1e6:.1f} MB, {nbytes / copy_gbps / 1e3:.2f} us "
            f"at copy's pace; P={f['P']} teams={f['teams']} grid={f['grid']} ({f['occ']} an SM by the launcher) "
            f"rows a team {f['rows_min']}-{f['rows_max']}")
        say("    " + "  ".join(f"{n} {us[n]:.2f}us {100 * nbytes / (us[n] * 1e3) / copy_gbps:.1f}% "
                               f"(rounds {' / '.join(f'{v:.2f}' for v in times[n])})" for n in calls)
            + (f"  stamped/unstamped {us['copy stamped'] / us['copy']:.3f}" if "copy stamped" in us and "copy" in us
               else "")
            + ("" if all(good.values()) else f"  WRONG: {[n for n, g in good.items() if not g]}"))
        if not good["copy stamped"]:
            continue  # nothing stamped to analyse
        runs = []
        for _ in range(3):
            clear()
            stamps.zero_()
            launch(stamps)
            torch.cuda.synchronize()
            runs.append(stamps.cpu())
        spans = []
        for raw in runs:
            g = raw[:, :, 0]
            spans.append((int(g[:, f["S"] - 2].max()) - int(g[:, 0].min())) / 1e3)
        med = sorted(range(3), key=lambda i: spans[i])[1]
        say(f"    three stamped launches, globaltimer spans (us): {' '.join(f'{s:.2f}' for s in spans)}; analysed: "
            f"the median one")
        record = {"M": M, "N": N, "why": why, "path": path, "facts": f, "us": us, "rounds": times, "bytes": nbytes,
                  "copy_gbps": copy_gbps, "good": good, "spans": spans}
        try:
            record["analysis"] = analyse(runs[med], f, x.element_size(), N, copy_gbps, say)
        except Exception as e:  # the timings above stand without it
            say(f"    analysis failed: {type(e).__name__}: {e}")
        jsonl.write(json.dumps(record, default=str) + "\n")
        jsonl.flush()
        torch.save(runs[med], os.path.join(out_dir, f"stamps_{M}x{N}.pt"))
        del x, y, ref, src, dst, stamps
        torch.cuda.empty_cache()
    say(f"done in {time.time() - t_start:.0f} s; " + ("WRONG: " + ", ".join(wrong) if wrong else "every output right"))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(compile_only() if sys.argv[1:2] == ["--compile-only"] else main())
