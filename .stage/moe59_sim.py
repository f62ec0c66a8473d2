"""The padding half-tiles' arithmetic (CPU, random logits, torch.topk): rows computed over pairs, and the
persistent grid's makespan (each program takes every 132nd tile id, in moe_gemm_gluon_kernel's expert-grouped
order; a tile costs 1, a half-tile alpha) before and after the skip, dealt every 132nd or claimed (CLAIM).
python .stage/moe59_sim.py"""
import torch

SMS = 132


def tiles_of(counts, n_tiles):
    # _gluon_tile's order: an expert's tiles walk down its blocks in one column, then the next column
    half = []
    for c in counts:
        blocks = -(-c // 128)
        if blocks == 0:
            continue
        last_half = 0 < c % 128 <= 64
        for col in range(n_tiles):
            for b in range(blocks):
                half.append(last_half and b == blocks - 1)
    return half


def makespan(half, alpha):
    grid = min(SMS, len(half))
    return max(sum(alpha if half[t] else 1.0 for t in range(p, len(half), grid)) for p in range(grid))


def claimed(half, alpha):
    """CLAIM: program p's first tile is p; each program claims its next tile when it starts one (the loader claims
    at the start of a tile's loads), so it holds one claimed tile ahead. Returns the makespan."""
    import heapq
    grid = min(SMS, len(half))
    cost = [alpha if h else 1.0 for h in half]
    # (time the program starts its held tile, program, held tile)
    events = [(0.0, p, p) for p in range(grid)]
    heapq.heapify(events)
    nxt, end = grid, 0.0
    while events:
        t, p, tile = heapq.heappop(events)
        finish = t + cost[tile]
        end = max(end, finish)
        if nxt < len(half):  # claimed at t (the start of `tile`), run at `finish`
            heapq.heappush(events, (finish, p, nxt))
            nxt += 1
    return end


for T, E, k, H, I in [(4096, 60, 4, 2048, 1408), (4096, 64, 6, 2048, 1408), (2048, 64, 8, 3584, 2560),
                      (2048, 8, 2, 4096, 14336), (1024, 8, 2, 6144, 32768)]:
    torch.manual_seed(0)
    ids = torch.topk(torch.randn(T, E), k, dim=-1).indices
    counts = torch.bincount(ids.flatten(), minlength=E).tolist()
    pairs = T * k
    rows128 = sum(-(-c // 128) * 128 for c in counts)
    rows64 = sum(-(-c // 64) * 64 for c in counts)
    out = [f"{T}x{E}x{k}x{H}x{I}: rows/pairs 128 {rows128 / pairs:.3f}  64 {rows64 / pairs:.3f}"]
    flops = {"gate/up": 2 * H * 2 * I, "down": 2 * I * H}
    tot_old = tot_new = {0.5: 0, 0.6: 0}
    tot_old, tot_new5, tot_new6, tot_ideal, tot_c5, tot_c6 = 0, 0, 0, 0, 0, 0
    for name, n_tiles in (("gate/up", -(-I // 128)), ("down", -(-H // 256))):
        half = tiles_of(counts, n_tiles)
        per_tile = flops[name] * 128 * (I if name == "down" else H) / (I if name == "down" else H)  # unused scale
        old, new5, new6 = makespan(half, 1.0), makespan(half, 0.5), makespan(half, 0.6)
        ideal = (len(half) - 0.5 * sum(half)) / min(SMS, len(half))
        claim5, claim6 = claimed(half, 0.5), claimed(half, 0.6)
        claim_old = claimed(half, 1.0)
        w = flops[name] / n_tiles  # flops a row of a tile column, to weight the two GEMMs by their tile cost
        tot_old += old * w; tot_new5 += new5 * w; tot_new6 += new6 * w; tot_ideal += ideal * w
        tot_c5 += claim5 * w; tot_c6 += claim6 * w
        out.append(f"  {name}: {len(half)} tiles ({sum(half)} half), rounds {len(half) / SMS:.2f}; makespan old {old:.1f}"
                   f" new(a=.5) {new5:.1f} new(a=.6) {new6:.1f} balanced {ideal:.2f}  -> old/new {old / new5:.3f}"
                   f" / {old / new6:.3f}; claimed (a=.5/.6) {claim5:.2f} / {claim6:.2f} (whole tiles claimed {claim_old:.1f})")
    out.append(f"  both GEMMs: old/new {tot_old / tot_new5:.3f} (a=.5) {tot_old / tot_new6:.3f} (a=.6) dealt;"
               f" claimed {tot_old / tot_c5:.3f} (a=.5) {tot_old / tot_c6:.3f} (a=.6); balanced {tot_old / tot_ideal:.3f}")
    print("\n".join(out))
