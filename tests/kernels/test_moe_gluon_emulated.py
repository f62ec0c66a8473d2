"""The fused-moe template's Gluon GEMM (moe_gemm_gluon_kernel) run on the CPU by tests/kernels/gluon_emulator.py:
its loader and consumer partitions in threads over mocked mbarriers, TMA copies landing in a random order and
asynchronous wgmma, on a persistent grid of fewer programs than tiles. Checks every pair's row of C against torch,
and (moe59) that a 64-row half of padding alone, the last half of an expert's last 128-row block where the expert's
pairs end in its first, is neither loaded, computed nor stored, while the ring's stages and phases run on across it:
experts of 150 pairs (a second block of 22 pairs), exactly 64 (one block, its second half empty) and 65 (one pair in
the second half), none, and 128 (whole). The tiles past the grid's first round are dealt every sms-th, or claimed
from the launch's counter (CLAIM): here the programs run one after another, so the first claims all that is left
after the others' first tiles, and the loader posts each program's tiles to its consumers through its ring of two."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from gluon_emulator import Emulator, template  # noqa: E402

COUNTS = [150, 64, 65, 0, 128]
K = 192  # 3 k-steps of 64: on 2 stages a tile starts mid-lap


@pytest.fixture(scope="module")
def m():
    return template("fused-moe", "fused_moe.py")


def _layout(counts, block_m):
    """Each expert's first row in the padded, expert-sorted order, and the rows in use."""
    starts, row = [], 0
    for c in counts:
        starts.append(row)
        row += -(-c // block_m) * block_m
    return starts, row


def _reference(a, w, counts, block_m, swiglu):
    """C's pairs' rows: silu(A W_gate^T) * (A W_up^T) (w: (E * 2, I, K)), or A W_e^T (w: (E, N, K))."""
    starts, _ = _layout(counts, block_m)
    c = torch.full((a.shape[0], w.shape[1]), float("nan"))
    for e, (start, n) in enumerate(zip(starts, counts)):
        rows = a[start:start + n]
        if swiglu:
            g, u = rows @ w[2 * e].T, rows @ w[2 * e + 1].T
            c[start:start + n] = torch.nn.functional.silu(g) * u
        else:
            c[start:start + n] = rows @ w[e].T
    return c


def _operands(counts, block_m, cols, swiglu):
    torch.manual_seed(len(counts) * 31 + cols)
    starts, rows = _layout(counts, block_m)
    num_m_blocks = -(-sum(counts) // block_m) + len(counts)
    a = torch.randn(num_m_blocks * block_m, K)
    for start, n in zip(starts, counts):  # padding rows: garbage, finite (x_sorted's and h's are left unwritten)
        a[start + n:start + -(-n // block_m) * block_m] = 1e3
    a[rows:] = 1e3
    w = torch.randn((2 if swiglu else 1) * len(counts), cols, K) / K ** 0.5
    return a, w


# (swiglu, consumers, block_n, stages, sms, pairs_only, pdl, claim): the gate/up GEMM (its SwiGLU epilogue) and the
# down GEMM (two stores a tile, no SwiGLU) on two consumers, PAIRS_ONLY on and off, tiles dealt and claimed; PDL on
# (the first tile's weight boxes issued before any A box: program 1's first tile is expert 0's second block, a half
# of padding alone); one consumer, where no half is skipped
CASES = [(1, 2, 16, 2, 4, 1, 0, 0), (0, 2, 32, 2, 3, 0, 0, 1), (1, 2, 16, 3, 4, 0, 1, 1), (0, 2, 32, 2, 4, 1, 1, 0),
         (1, 2, 16, 2, 3, 1, 0, 1), (1, 1, 16, 2, 4, 1, 0, 0)]


@pytest.mark.parametrize("swiglu, consumers, block_n, stages, sms, pairs_only, pdl, claim", CASES)
def test_the_moe_gluon_gemm_skips_halves_of_padding_alone(m, swiglu, consumers, block_n, stages, sms, pairs_only, pdl,
                                                          claim):
    block_m = 64 * consumers
    cols = 40  # gate/up: I = 40 in 16-wide tiles (the last partly past I); down: N = 40 in 32-wide tiles
    a, w = _operands(COUNTS, block_m, cols, swiglu)
    emu = Emulator(m, seed=10 * stages + sms)
    c = emu.moe_gemm(a, w, COUNTS, swiglu, consumers, block_n, stages, sms, pairs_only=pairs_only, pdl=pdl,
                     claim=claim)
    ref = _reference(a, w, COUNTS, block_m, swiglu)
    pairs = ~torch.isnan(ref[:, 0])
    assert (c[pairs] - ref[pairs]).abs().max().item() < 1e-4  # every pair's row stored, right
    # the halves that hold a pair: (start of the expert's run + 64 j) for each j < ceil(count / 64)
    starts, _ = _layout(COUNTS, block_m)
    halves = [s + 64 * j for s, n in zip(starts, COUNTS) for j in range(-(-n // 64))]
    blocks = sum(-(-n // block_m) for n in COUNTS)
    empty = [b * 64 for b in range(blocks * consumers) if b * 64 not in halves]
    assert len(empty) == (2 if consumers == 2 else 0)  # expert 0's second block and expert 1's: half 1 of each
    for row in empty:  # a half of padding alone: stored nothing, its A box never loaded
        assert torch.isnan(c[row:row + 64]).all(), row
    a_rows = {coord[0] for desc, coord in emu.loads if desc.tensor is a}
    assert a_rows == set(halves)
    n_tiles = -(-cols // block_n)
    assert emu.wgmmas == len(halves) * n_tiles * (K // 64)  # one wgmma a k-step of each half that holds a pair
    # the tiles: each once (above), and claimed: all past the first round by program 0, the others one each
    w_loads = [sum(1 for desc, _ in loads if desc.tensor is w) for loads in emu.program_loads]
    tiles_a_program = [n // (K // 64) for n in w_loads]
    total = (-(-sum(COUNTS) // block_m) + len(COUNTS)) * n_tiles
    if claim:
        assert tiles_a_program[1:] == [1] * (sms - 1) and sum(tiles_a_program) == blocks * n_tiles
    else:
        assert tiles_a_program == [sum(1 for t in range(p, total, sms) if t // n_tiles < blocks) for p in range(sms)]
