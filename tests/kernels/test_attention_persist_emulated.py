"""The flash-attention template's persistent Gluon kernel (GLUON 2) run on the CPU by tests/kernels/gluon_emulator.py:
its own partition code (the consumers, the K/V loader, the Q loader), in threads, over mocked mbarriers, TMA
copies landing in a random order and asynchronous wgmma. Checks that the partitions agree on each tile, Q slot,
K/V stage and barrier phase at the shapes the H100 check of branch fa56 ran (issue 52: GLUON 2 wrong at every
causal shape there), causal and not, ragged and not, two and four K/V stages, 1 to 16 tiles a program (causal
tiles run their diagonal key block first, fa59); and, so that the check has teeth, that it fails on deliberate
faults of the kinds suspected: a Q loader that walks the tiles in another order than the consumers, a Q phase off
by a lap, a Q slot overwritten before its consumer is done with it, a K/V loader in key order."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from gluon_emulator import Emulator, EmulatorError, template  # noqa: E402


@pytest.fixture(scope="module")
def fa():
    return template("flash-attention", "flash_attention.py")


def _inputs(B, H, S, D=16):
    torch.manual_seed(B * 1009 + H * 31 + S)
    return [torch.randn(B, H, S, D) for _ in range(3)]


def _run(fa, B, H, S, causal, buffers, sms, seed=0, overrides=None, q_slots=None):
    q, k, v = _inputs(B, H, S)
    out = Emulator(fa, seed=seed, overrides=overrides).attention(q, k, v, causal, buffers, sms=sms, q_slots=q_slots)
    return out, fa.reference(q, k, v, causal)


# The H100 check's shapes at head dim 16 (the kernel's tiles, 128 rows, are the same at any D), each on as many
# SMs as gives its programs the same tile counts there (or, where heads are many, 1-16 tiles a program):
# 2x3x640 causal (pairs and middles, ragged), 1x5x197 causal (two tiles a program, ragged), 3x7x384 causal (odd
# n_m), 64x16x256 causal (15-16 tiles a program there: eight laps of each Q slot) as 4x16x256 on 4 SMs (32 a
# program here), 8x16x512
# causal as 1x8x512 on 4 SMs, 2x3x1000 ragged without causal (one tile a program), 64x12x512 without causal
# (23 tiles a program) as 1x6x512 on 2 SMs
SHAPES = [(2, 3, 640, True, 132), (1, 5, 197, True, 132), (3, 7, 384, True, 132), (4, 16, 256, True, 4),
          (1, 8, 512, True, 4), (2, 3, 1000, False, 132), (1, 6, 512, False, 2)]


@pytest.mark.parametrize("buffers", [2, 4])
@pytest.mark.parametrize("B, H, S, causal, sms", SHAPES)
def test_the_persistent_kernels_partitions_agree_on_every_tile(fa, B, H, S, causal, sms, buffers):
    out, ref = _run(fa, B, H, S, causal, buffers, sms)
    assert not torch.isnan(out).any()
    assert (out - ref).abs().max().item() < 1e-4


@pytest.mark.parametrize("B, H, S, causal, sms", [SHAPES[1], SHAPES[3], SHAPES[6]])
def test_one_q_tile_a_consumer_agrees_too(fa, B, H, S, causal, sms):
    """PERSISTENT_Q_SLOTS = 1 (the device's switch between the second slot and the Q loader's partition): each
    tile's Q in its consumer's one slot once the tile before handed it back."""
    out, ref = _run(fa, B, H, S, causal, 4, sms, q_slots=1)
    assert not torch.isnan(out).any()
    assert (out - ref).abs().max().item() < 1e-4


def _counting_half_scores(fa):
    """An Emulator whose _diag_half_qk records the shape of each S it returns, and that list."""
    emulator = Emulator(fa)
    as_written = emulator.ns["_diag_half_qk"]
    scored = []

    def _diag_half_qk(*args):
        s = as_written(*args)
        scored.append(tuple(s.value.shape))
        return s

    emulator.ns["_diag_half_qk"] = _diag_half_qk
    return emulator, scored


def test_consumer_0_scores_its_diagonal_block_over_its_first_keys_alone(fa):
    """Issue 52 (fa60): in a causal tile's diagonal block, consumer 0's rows (the tile's first 64) see no key past the
    block's first 64, so its S there is a 64 x 64 wgmma on the first 64 rows of K's stage (_diag_half_qk), its P
    padded with zeros for the other keys (_diag_half_softmax). Those rows right at every tile, and consumer 0 took
    that path once a tile, tile 0's first block and every later tile's (under the tile before's last P V) alike."""
    emulator, scored = _counting_half_scores(fa)
    B, H, S = 1, 8, 512
    q, k, v = _inputs(B, H, S)
    out = emulator.attention(q, k, v, True, 2, sms=4)
    consumer_0_rows = torch.arange(S) % fa.WS_BLOCK_M < fa.WS_BLOCK_M // 2
    assert (out - fa.reference(q, k, v, True))[:, :, consumer_0_rows].abs().max().item() < 1e-4
    assert scored == [(64, 64)] * (B * H * S // fa.WS_BLOCK_M)


@pytest.mark.parametrize("D, halved", [(64, True), (128, False)])
def test_the_half_diagonal_runs_at_head_dim_64_and_below_only(fa, D, halved):
    """The half diagonal's gate (_persist_consumer's HALF, fa60): at head dim 64 a block's exponentials take as long
    as its tensor work and halving consumer 0's diagonal ones ran 1.04-1.05x main on the H100; at 128 it ran
    0.98-0.99x, so there consumer 0 scores its diagonal block over all 128 keys, as main does."""
    emulator, scored = _counting_half_scores(fa)
    B, H, S = 1, 2, 384
    q, k, v = _inputs(B, H, S, D)
    out = emulator.attention(q, k, v, True, 2, sms=2)
    assert (out - fa.reference(q, k, v, True)).abs().max().item() < 1e-4
    assert scored == ([(64, 64)] * (B * H * S // fa.WS_BLOCK_M) if halved else [])


def test_the_emulation_walks_several_interleavings(fa):
    """The same shape under other seeds (other copy orders and delays) agrees too."""
    for seed in (1, 2, 3):
        out, ref = _run(fa, 4, 16, 256, True, 4, 4, seed=seed)
        assert (out - ref).abs().max().item() < 1e-4


# Deliberate faults, in the kernel's own words with one thing changed each

def _q_loader_in_noncausal_order(q_desc, q_smem, q_ready, q_empty, S, sched, sched_w, BLOCK_M, BLOCK_N, CAUSAL,
                                 Q_SLOTS):
    # the Q loader walking each tile's query blocks as without causal (the consumers count them from a head's last)
    for w in range(_persist_waves(sched, sched_w)):  # noqa: F821 (the emulator's namespace)
        start_m, row0, n_blocks = _persist_tile(_persist_tile_id(sched, sched_w, w), S, BLOCK_M,  # noqa: F821
                                                BLOCK_N, False)
        for c in range(2):
            i, lap = _persist_q_slot(w, c, Q_SLOTS)  # noqa: F821
            mbarrier.wait(q_empty.index(i), lap ^ 1)  # noqa: F821
            mbarrier.expect(q_ready.index(i), q_desc.block_type.nbytes)  # noqa: F821
            tma_load(q_desc, [row0 + start_m * BLOCK_M + c * (BLOCK_M // 2), 0], q_ready.index(i),  # noqa: F821
                     q_smem.index(i))


def _kv_loader_in_key_order(k_desc, v_desc, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, S, sched, sched_w,
                            BLOCK_M, BLOCK_N, NUM_BUFFERS, CAUSAL):
    # the K/V loader streaming each tile's key blocks 0, 1, .. (the order before fa59), where the consumers run a
    # causal tile's diagonal block first: they mask and weigh the wrong keys
    g = 0
    for w in range(_persist_waves(sched, sched_w)):  # noqa: F821
        start_m, row0, n_blocks = _persist_tile(_persist_tile_id(sched, sched_w, w), S, BLOCK_M, BLOCK_N,  # noqa: F821
                                                CAUSAL)
        for j in range(n_blocks):
            _ring_load(k_desc, k_smem, k_ready, k_empty, g + j, row0 + j * BLOCK_N, NUM_BUFFERS)  # noqa: F821
            _ring_load(v_desc, v_smem, v_ready, v_empty, g + j, row0 + j * BLOCK_N, NUM_BUFFERS)  # noqa: F821
        g += n_blocks


def _q_slot_lap_stuck_at_zero(w, C, Q_SLOTS):
    return (w % Q_SLOTS) * 2 + C, 0


def _q_loader_without_the_release(q_desc, q_smem, q_ready, q_empty, S, sched, sched_w, BLOCK_M, BLOCK_N, CAUSAL,
                                  Q_SLOTS):
    # each Q loaded as soon as the loader gets to it, not once its slot's tile before handed the slot back
    for w in range(_persist_waves(sched, sched_w)):  # noqa: F821
        start_m, row0, n_blocks = _persist_tile(_persist_tile_id(sched, sched_w, w), S, BLOCK_M,  # noqa: F821
                                                BLOCK_N, CAUSAL)
        for c in range(2):
            i, lap = _persist_q_slot(w, c, Q_SLOTS)  # noqa: F821
            mbarrier.expect(q_ready.index(i), q_desc.block_type.nbytes)  # noqa: F821
            tma_load(q_desc, [row0 + start_m * BLOCK_M + c * (BLOCK_M // 2), 0], q_ready.index(i),  # noqa: F821
                     q_smem.index(i))


@pytest.mark.parametrize("fault", [{"_persist_q_loader": _q_loader_in_noncausal_order},
                                   {"_persist_q_slot": _q_slot_lap_stuck_at_zero},
                                   {"_persist_q_loader": _q_loader_without_the_release},
                                   {"_persist_loader": _kv_loader_in_key_order}],
                         ids=["q-loader-order", "q-lap", "q-slot-early", "kv-loader-key-order"])
def test_the_emulation_fails_on_a_partition_that_disagrees(fa, fault):
    """Each fault, at a causal shape of many tiles a program, either breaks a barrier's rules or the output."""
    try:
        out, ref = _run(fa, 4, 16, 256, True, 4, 4, overrides=fault)
    except EmulatorError:
        return
    assert torch.isnan(out).any() or (out - ref).abs().max().item() > 1e-2
