"""The gemm template's cluster kernel (gemm_gluon_cluster_kernel, CLUSTER 2) run on the CPU by
tests/kernels/gluon_emulator.py: both CTAs of each cluster at once, each its two consumers and its loader in threads,
over mocked mbarriers, TMA copies landing in a random order (the multicast copy of A's box into both CTAs) and
asynchronous wgmma. Checks that the two CTAs agree on every stage and barrier phase at a ragged M (the last tile-row
short), an odd number of tile-columns (the last pair's second tile past N), K of fewer steps than stages and of
several laps of the ring; and, so that the check has teeth, that it fails on deliberate faults: a consumer that
releases a stage to its own CTA only, a loader that leaves before the peer's last arrive, one that copies before the
peer has initialized its barriers, A's boxes swapped between the CTAs."""
import importlib.util
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from gluon_emulator import Emulator, EmulatorError  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="module")
def g():
    path = os.path.join(ROOT, "skills", "kernels", "gemm", "gemm.py")
    spec = importlib.util.spec_from_file_location("gemm_for_emulation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.gluon is None:
        pytest.skip("this Triton has no Gluon")
    return module


def _run(g, M, N, K, block_n=32, block_k=16, stages=3, seed=0, **emulator):
    """The kernel's C at small tiles (its 128 rows a tile, two consumers of 64, are fixed; the widths are not), and
    the fp32 product."""
    torch.manual_seed(M * 31 + N * 7 + K)
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = Emulator(g, seed=seed, **emulator).gemm_cluster(a, b, block_n, block_k, stages)
    return c, a @ b


# (M, N, K): M 130 (two tile-rows, the second 2 rows deep) and 256; N 3 tile-columns of 32 less 8 (an odd count: the
# second pair's second tile lies past N) and 4 (two whole pairs); K 2 steps of 16 on 3 stages (the final waits find
# stages never used) and 14 (four laps of the ring, each barrier's parity flipping)
SHAPES = [(130, 88, 224), (256, 128, 32), (130, 64, 40), (256, 96, 224)]


@pytest.mark.parametrize("M, N, K", SHAPES)
def test_the_cluster_kernels_two_ctas_agree_on_every_stage(g, M, N, K):
    c, ref = _run(g, M, N, K)
    assert not torch.isnan(c).any()  # every element written: the pairs cover C, a tile past N stores nothing
    assert (c - ref).abs().max().item() < 1e-3


def test_the_emulation_walks_several_interleavings(g):
    """Other seeds (copy orders, delays), and either CTA late and slow at every barrier operation."""
    for seed, slow in [(1, None), (2, 0), (3, 1)]:
        c, ref = _run(g, 130, 88, 224, seed=seed, slow_cta=slow)
        assert (c - ref).abs().max().item() < 1e-3


# Deliberate faults, in the kernel's own words with one thing changed each

def _release_stage_to_this_cta_only(empty, s, peer, smem, EMPTY_OFF):
    mbarrier.arrive(empty.index(s))  # noqa: F821 (the emulator's namespace)


def _loader_without_the_final_waits(a_desc, b_desc, b_smem, ready, empty, rank, smem, off_m, off_n, K, BLOCK_K,
                                    NUM_STAGES, A_OFF, READY_OFF):
    # leaves once its copies are issued: its CTA may exit before the peer's consumers' last arrive on it
    _ptx(_CLUSTER_SYNC, [rank])  # noqa: F821
    A_BYTES = a_desc.block_type.nbytes
    for ki in range(gl.cdiv(K, BLOCK_K)):  # noqa: F821
        s = ki % NUM_STAGES
        mbarrier.wait(empty.index(s), ((ki // NUM_STAGES) & 1) ^ 1)  # noqa: F821
        mbarrier.expect(ready.index(s), 2 * A_BYTES + b_desc.block_type.nbytes)  # noqa: F821
        _ptx(_A_MULTICAST, [smem + A_OFF + (2 * s + rank) * A_BYTES, ki * BLOCK_K, off_m + rank * 64,  # noqa: F821
                            smem + READY_OFF + 8 * s])
        tma_load(b_desc, [ki * BLOCK_K, off_n], ready.index(s), b_smem.index(s))  # noqa: F821


def _loader_before_the_cluster_barrier(a_desc, b_desc, b_smem, ready, empty, rank, smem, off_m, off_n, K, BLOCK_K,
                                       NUM_STAGES, A_OFF, READY_OFF):
    # copies into the peer at once, then meets it at the cluster barrier (every thread must, once)
    A_BYTES = a_desc.block_type.nbytes
    _ptx(_A_MULTICAST, [smem + A_OFF + rank * A_BYTES, 0, off_m + rank * 64, smem + READY_OFF])  # noqa: F821
    _ptx(_CLUSTER_SYNC, [rank])  # noqa: F821


def _loader_with_a_swapped(a_desc, b_desc, b_smem, ready, empty, rank, smem, off_m, off_n, K, BLOCK_K, NUM_STAGES,
                           A_OFF, READY_OFF):
    # each CTA sends the other's box of A's rows into its own box's place
    _ptx(_CLUSTER_SYNC, [rank])  # noqa: F821
    A_BYTES = a_desc.block_type.nbytes
    k_tiles = gl.cdiv(K, BLOCK_K)  # noqa: F821
    for ki in range(k_tiles):
        s = ki % NUM_STAGES
        mbarrier.wait(empty.index(s), ((ki // NUM_STAGES) & 1) ^ 1)  # noqa: F821
        mbarrier.expect(ready.index(s), 2 * A_BYTES + b_desc.block_type.nbytes)  # noqa: F821
        _ptx(_A_MULTICAST, [smem + A_OFF + (2 * s + rank) * A_BYTES, ki * BLOCK_K,  # noqa: F821
                            off_m + (1 - rank) * 64, smem + READY_OFF + 8 * s])
        tma_load(b_desc, [ki * BLOCK_K, off_n], ready.index(s), b_smem.index(s))  # noqa: F821
    for i in gl.static_range(NUM_STAGES):  # noqa: F821
        mbarrier.wait(empty.index((k_tiles + i) % NUM_STAGES), (((k_tiles + i) // NUM_STAGES) & 1) ^ 1)  # noqa: F821


@pytest.mark.parametrize("fault, slow", [({"_release_stage": _release_stage_to_this_cta_only}, None),
                                         ({"_cluster_loader": _loader_without_the_final_waits}, 1),
                                         ({"_cluster_loader": _loader_before_the_cluster_barrier}, 1),
                                         ({"_cluster_loader": _loader_with_a_swapped}, None)],
                         ids=["release-own-only", "exit-early", "copy-before-init", "a-swapped"])
def test_the_emulation_fails_on_a_cluster_protocol_fault(g, fault, slow):
    """Each fault (with CTA 1 late and slow where the fault is a race it must lose) breaks a barrier's rules, an exited
    CTA's, or the output: releasing to its own CTA only deadlocks the loaders (each empty barrier counts four
    arrivals), an early exit takes the peer's last arrives, copying before the cluster barrier lands in a CTA that has
    not laid out its shared memory, swapped boxes compute another product."""
    try:
        c, ref = _run(g, 130, 88, 224, overrides=fault, slow_cta=slow)
    except EmulatorError:
        return
    assert torch.isnan(c).any() or (c - ref).abs().max().item() > 1e-2
