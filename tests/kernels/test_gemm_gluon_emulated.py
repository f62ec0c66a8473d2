"""The gemm template's Gluon kernel (gemm_gluon_kernel) run on the CPU by tests/kernels/gluon_emulator.py: its loader
and consumer partitions in threads over mocked mbarriers, TMA copies landing in a random order and asynchronous
wgmma. Checks that every element of C is computed once right, on one-box tiles and on tiles whose width is two boxes
(gemm61: 192 = 128 + 64, 160 = 128 + 32), at ragged edges: M and N not multiples of the tile, K not of BLOCK_K, the
last tile's second box partly or wholly past N, rings of 2 stages that K laps several times. And the persistent kernel
(gemm62: PERSISTENT, 128-row tiles) on a grid of fewer programs than tiles, each walking several tiles with its ring's
stages and phases running on across them, its C staging tiles rewritten only once the store before is waited for. And
its mixed tile list (gemm63: MIXED): two-box tiles and one-box ones in one launch, the ring shared across both."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from gluon_emulator import Emulator, template  # noqa: E402


@pytest.fixture(scope="module")
def g():
    return template("gemm", "gemm.py")


def _run(g, M, N, K, block_m, block_n, stages, seed=0, persistent_sms=None):
    torch.manual_seed(M * 1009 + N * 31 + K)
    a, b = torch.randn(M, K), torch.randn(K, N)
    return Emulator(g, seed=seed).gemm(a, b, block_m, block_n, stages, persistent_sms=persistent_sms), a @ b


# (M, N, K, tile, stages): the last tile-row 2 rows deep and the last tile-column's second box wholly past N (N=400
# on 192: columns 384-399 in its first box, 512-575 its second); N=260 on 160 (the second tile's first box holds
# 160-259, its second 288-319 lies outside) with K=300, 5 k-steps, lapping 2 stages; the second box partly inside
# (N=330: 320-329 of 320-351), one k-step on 5 stages; whole tiles; and one-box tiles (64 and 128 rows) as before
CASES = [(130, 400, 200, (128, 192), 4), (100, 260, 300, (128, 160), 2), (129, 330, 64, (128, 160), 5),
         (256, 384, 192, (128, 192), 2), (70, 200, 130, (64, 128), 3), (200, 130, 100, (128, 128), 2)]


@pytest.mark.parametrize("M, N, K, tile, stages", CASES)
def test_the_gluon_gemm_computes_every_element_of_c(g, M, N, K, tile, stages):
    c, ref = _run(g, M, N, K, *tile, stages)
    assert not torch.isnan(c).any()  # every element stored
    assert (c - ref).abs().max().item() < 1e-4


# (M, N, K, tile, stages, sms): the persistent grid (persistent_programs) on `sms` SMs, more tiles than programs.
# 130 x 850 on 128x192: 2 x 5 = 10 tiles, 3 waves on 4 SMs, 4 programs of 3, 3, 2 and 2 tiles; the last tile-row 2 rows
# deep, the last tile-column's first box holding 768-849 and its second (896-959) wholly past N; K 200, 4 k-steps a
# tile on 2 stages: the laps run on across tiles. 300 x 900 x 130 on 3 SMs: 3 x 5 = 15 tiles, 5 waves, 3 programs of 5;
# the last box partly inside N (896-959 holds 896-899), 3 k-steps a tile on 2 stages, so a tile starts mid-lap.
# 200 x 300 x 100 on one-box 128x128 tiles: 6 tiles, 2 waves on 4 SMs, 3 programs of 2; 2 k-steps a tile on 3 stages.
PERSISTENT_CASES = [(130, 850, 200, (128, 192), 2, 4), (300, 900, 130, (128, 192), 2, 3),
                    (200, 300, 100, (128, 128), 3, 4)]


@pytest.mark.parametrize("M, N, K, tile, stages, sms", PERSISTENT_CASES)
def test_the_persistent_gluon_gemm_computes_every_element_of_c(g, M, N, K, tile, stages, sms):
    tiles = -(-M // tile[0]) * -(-N // tile[1])
    assert g.persistent_programs(tiles, sms) < tiles  # programs that run several tiles each
    c, ref = _run(g, M, N, K, *tile, stages, persistent_sms=sms)
    assert not torch.isnan(c).any()
    assert (c - ref).abs().max().item() < 1e-4


# (M, N, K, n_big, programs, stages): the mixed tile list (gemm63: 128x256 tiles over C[:, :n_big], 128x128 past it).
# 130 x 700, n_big 512: 2 x 2 wide tiles, then 2 x 2 narrow (512-639, 640-767 holding 640-699) on 4 programs, a wide
# tile and a narrow one each; K 200, 4 k-steps on 2 stages, so the stages a narrow tile's k-steps fill held a wide
# tile's two boxes the lap before. 130 x 700, n_big 256: 2 wide, 8 narrow on 4 programs: programs 2 and 3 run narrow
# tiles alone. 300 x 600, n_big 512: 3 x 2 wide, 3 narrow (512-599) on 4 programs: program 1 runs two wide tiles alone;
# K 130, 3 k-steps on 2 stages (a tile starts mid-lap).
MIXED_CASES = [(130, 700, 200, 512, 4, 2), (130, 700, 200, 256, 4, 2), (300, 600, 130, 512, 4, 2)]


@pytest.mark.parametrize("M, N, K, n_big, programs, stages", MIXED_CASES)
def test_the_mixed_gluon_gemm_computes_every_element_of_c(g, M, N, K, n_big, programs, stages):
    torch.manual_seed(M * 1009 + N * 31 + K)
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = Emulator(g).gemm(a, b, 128, 256, stages, mixed=(n_big, programs))
    assert not torch.isnan(c).any()
    assert (c - a @ b).abs().max().item() < 1e-4


def test_a_wide_tile_is_two_boxes_of_b_and_c(g):
    """The launcher's split of a tile's width into B's and C's boxes (gluon_widths): powers of two one box, 192 and
    160 two; widths with no such split, or past wgmma's 256, none (the Gluon kernel does not take them)."""
    assert [g.gluon_widths(n) for n in (32, 64, 128, 256)] == [(32, 0), (64, 0), (128, 0), (256, 0)]
    assert g.gluon_widths(192) == (128, 64) and g.gluon_widths(160) == (128, 32) and g.gluon_widths(144) == (128, 16)
    assert g.gluon_widths(224) is None and g.gluon_widths(96 + 8) is None and g.gluon_widths(384) is None
