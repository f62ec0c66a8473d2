"""The fused MoE template's tail tiles (CONFIG TAIL_M) in Triton's interpreter: the layout route_and_align
writes (each expert's last rest of at most TAIL_M rows on a TAIL_M-row block, the tail list appended
after the blocks), and the layer's output with and without them, TMA and pointer paths. Tiny shapes,
CPU only."""

import importlib.util
import os

import pytest
import torch

from kgit.harness.tolerance import NORM, compare

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_spec = importlib.util.spec_from_file_location(
    "fused_moe_template_for_tail_tests", os.path.join(ROOT, "skills/kernels/fused-moe/triton_template.py"))
M = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M)

# pairs per expert, top 2, at the GPU's tiles (128-row blocks, 64-row tails): rests of exactly 64 (a
# tail tile, full), 65 (a 128-row block), 1 after a full block, 0 (two full blocks), an empty expert,
# and 128 + 64. 706 pairs: 353 tokens, six routing chunks of 64.
COUNTS = (64, 65, 129, 256, 0, 192)


def built_logits(counts, seed=0):
    """Top-2 logits that put counts[e] pairs on expert e: each token takes the two experts with the
    most pairs left (possible while no count exceeds the tokens left), its first pick above its second."""
    E, T = len(counts), sum(counts) // 2
    left = list(counts)
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(T, E, generator=g) - 10.0
    for t in range(T):
        a, b = sorted(range(E), key=lambda e: -left[e])[:2]
        left[a] -= 1
        left[b] -= 1
        first, second = (a, b) if torch.rand(1, generator=g).item() < 0.5 else (b, a)
        logits[t, first], logits[t, second] = 2.0, 1.0
    assert left == [0] * E, left
    return logits


def check_layout(logits, top_k, block_m, tail_m, sorted_ids, blocks, num_m_blocks):
    """Raise AssertionError unless route_and_align's layout holds: the blocks in use are a prefix of the
    block list, each expert's blocks back to back in expert order and in rows; every block's rows hold
    its expert's pairs, then sentinels (T*k) to its end; every pair in exactly one block; tail blocks
    (tail_m rows) last in their expert and holding 1..tail_m pairs, block_m-row blocks more than tail_m;
    each expert's run no longer than that requires; the tail list, from column num_m_blocks, the tail
    blocks again, in order. tail_m 0: blocks is block_expert, every block block_m rows."""
    T, E = logits.shape
    n_pairs = T * top_k
    expert_of_pair = M.route(logits, top_k)[1].flatten().tolist()
    sid = sorted_ids.tolist()
    if tail_m:
        expert, start, rows = (b.tolist() for b in blocks)
    else:
        expert = blocks.tolist()
        start, rows = [b * block_m for b in range(num_m_blocks)], [block_m] * num_m_blocks
    used = [b for b in range(num_m_blocks) if expert[b] >= 0]
    assert used == list(range(len(used))), f"blocks in use are not a prefix: {expert[:num_m_blocks]}"
    assert [expert[b] for b in used] == sorted(expert[b] for b in used), "experts' blocks out of order"
    seen, row, tails = [], 0, []
    run = [0] * E
    for b in used:
        e = expert[b]
        assert start[b] == row, f"block {b} starts at row {start[b]}, the previous block ends at {row}"
        assert rows[b] in ((block_m, tail_m) if tail_m else (block_m,)), f"block {b}: {rows[b]} rows"
        pairs = sid[start[b]:start[b] + rows[b]]
        real = [p for p in pairs if p != n_pairs]
        assert pairs == real + [n_pairs] * (rows[b] - len(real)), f"block {b}: padding not at the end: {pairs}"
        assert real and all(0 <= p < n_pairs and expert_of_pair[p] == e for p in real), \
            f"block {b} of expert {e} holds pairs of other experts or none: {pairs}"
        last = b + 1 == len(used) or expert[b + 1] != e
        assert last or len(real) == rows[b], f"block {b} is padded but not its expert's last"
        if rows[b] == tail_m:
            assert last and len(real) <= tail_m, f"tail block {b}: {len(real)} pairs, last of its expert: {last}"
            tails.append((e, start[b], rows[b]))
        elif tail_m:
            assert len(real) > tail_m, f"block {b}: {len(real)} pairs on {block_m} rows, not on a tail tile"
        seen += real
        run[e] += rows[b]
        row += rows[b]
    assert sorted(seen) == list(range(n_pairs)), \
        f"{len(seen)} pair slots, {len(set(seen))} distinct, of {n_pairs} pairs"
    counts = torch.bincount(torch.tensor(expert_of_pair), minlength=E).tolist()
    for e, c in enumerate(counts):
        rest = c % block_m
        need = (c // block_m + (rest > tail_m)) * block_m + (0 < rest <= tail_m) * tail_m
        assert run[e] == need, f"expert {e}: {c} pairs on {run[e]} rows, {need} needed"
    if tail_m:
        listed = [(expert[j], start[j], rows[j]) for j in range(num_m_blocks, num_m_blocks + E)]
        assert listed == tails + [(-1, *x[1:]) for x in listed[len(tails):]], \
            f"tail list {listed}, tail blocks {tails}"


def layout(logits, top_k, block_m, tail_m, block_t):
    _, sorted_ids, blocks, num_m_blocks = M.route_and_align(logits, top_k, block_m, block_t, tail_m)
    return sorted_ids, blocks, num_m_blocks


# random: 111 pairs, per expert 37, 37, 27, 9, 1 (experts' biases skew them): on 32-row blocks rests
# of 5, 5, 9 and 1 on 16-row tails, 27 on a 32-row block
ROUTINGS = {
    "built": (built_logits(COUNTS), 2),
    "random": (torch.randn(37, 5, generator=torch.Generator().manual_seed(1)) + torch.tensor([2, 1, 0, -1, -2]), 3),
}


@pytest.mark.parametrize("routing", sorted(ROUTINGS))
@pytest.mark.parametrize("block_m, tail_m, block_t", [(128, 64, 64), (128, 0, 64), (32, 16, 16), (32, 0, 16)])
def test_route_and_align_layout(routing, block_m, tail_m, block_t):
    logits, top_k = ROUTINGS[routing]
    check_layout(logits, top_k, block_m, tail_m, *layout(logits, top_k, block_m, tail_m, block_t))


def test_built_routing_puts_a_tail_of_64_and_of_1_on_tail_tiles_only():
    sorted_ids, blocks, nb = layout(ROUTINGS["built"][0], 2, 128, 64, 64)
    expert, start, rows = blocks.tolist()
    in_use = [(e, r) for e, r in zip(expert[:nb], rows[:nb]) if e >= 0]
    assert in_use == [(0, 64), (1, 128), (2, 128), (2, 64), (3, 128), (3, 128), (5, 128), (5, 64)]
    assert expert[nb:] == [0, 2, 5, -1, -1, -1]


def test_layout_check_fails_on_a_dropped_tail_block_or_a_duplicated_pair():
    logits, top_k = ROUTINGS["built"]
    sorted_ids, blocks, nb = layout(logits, top_k, 128, 64, 64)
    check_layout(logits, top_k, 128, 64, sorted_ids, blocks, nb)
    expert, rows = blocks[0].tolist(), blocks[2].tolist()
    tail = next(b for b in range(nb) if expert[b] >= 0 and rows[b] == 64)
    dropped = blocks.clone()  # the tail block gone from the block list: the blocks after it move up
    dropped[:, tail:nb - 1] = blocks[:, tail + 1:nb].clone()
    with pytest.raises(AssertionError):
        check_layout(logits, top_k, 128, 64, sorted_ids, dropped, nb)
    unlisted = blocks.clone()  # gone from the tail list only
    unlisted[0, nb] = -1
    with pytest.raises(AssertionError, match="tail list"):
        check_layout(logits, top_k, 128, 64, sorted_ids, unlisted, nb)
    twice = sorted_ids.clone()  # expert 1's first pair in its second slot too (rows 64.. are expert 1's)
    twice[65] = twice[64]
    with pytest.raises(AssertionError, match="distinct"):
        check_layout(logits, top_k, 128, 64, twice, blocks, nb)


def _inputs(T, E, HD, I, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(T, HD, generator=g), torch.randn(E, 2 * I, HD, generator=g) / HD ** 0.5,
            torch.randn(E, HD, I, generator=g) / I ** 0.5)


@pytest.mark.parametrize("use_tma", [True, False], ids=["tma", "pointers"])
@pytest.mark.parametrize("tail_m", [64, 0])
def test_fused_moe_matches_reference_at_the_gpu_row_tiles(tail_m, use_tma):
    """The built routing on 128-row blocks: the tails of 64 and 1 rows on 64-row tiles (TAIL_M 64)."""
    logits, top_k = ROUTINGS["built"]
    x, w13, w2 = _inputs(logits.shape[0], logits.shape[1], 32, 40)
    out = torch.full_like(x, float("nan"))
    M.fused_moe(x, w13, w2, logits, top_k, out=out, use_tma=use_tma,
                config={"TAIL_M": tail_m, "BLOCK_N": 32, "BLOCK_K": 16, "DOWN_BLOCK_N": 32})
    assert M.last_config["TAIL_M"] == tail_m and M.last_config["USE_TMA"] == use_tma
    assert compare(out, M.reference(x, w13, w2, logits, top_k), NORM["fp32"]) is None


@pytest.mark.parametrize("use_tma", [True, False], ids=["tma", "pointers"])
@pytest.mark.parametrize("tail_m", [16, 0])
def test_fused_moe_matches_reference_with_small_tiles(tail_m, use_tma):
    """The random routing on 32-row blocks, 16-row tails (TAIL_M 16), fp16 as the GPU runs it."""
    logits, top_k = ROUTINGS["random"]
    x, w13, w2 = (t.half() for t in _inputs(37, 5, 32, 48))
    out = torch.full_like(x, float("nan"))
    M.fused_moe(x, w13, w2, logits, top_k, out=out, use_tma=use_tma,
                config={"BLOCK_M": 32, "TAIL_M": tail_m, "BLOCK_N": 32, "BLOCK_K": 16, "DOWN_BLOCK_N": 32})
    assert M.last_config["TAIL_M"] == tail_m
    assert compare(out.float(), M.reference(x, w13, w2, logits, top_k), NORM["fp16"]) is None


def test_a_tail_as_tall_as_the_block_is_no_tail():
    x, w13, w2 = _inputs(12, 4, 16, 24)
    logits = torch.randn(12, 4)
    out = M.fused_moe(x, w13, w2, logits, 2, config={"BLOCK_M": 64, "TAIL_M": 64, "BLOCK_N": 32, "BLOCK_K": 16,
                                                       "DOWN_BLOCK_N": 32})
    assert M.last_config["TAIL_M"] == 0
    assert compare(out, M.reference(x, w13, w2, logits, 2), NORM["fp32"]) is None
