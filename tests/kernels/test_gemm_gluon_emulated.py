"""The gemm template's Gluon kernels run on the CPU by tests/kernels/gluon_emulator.py (Gluon has no interpreter):
their own partition code in threads over mocked mbarriers, TMA copies landing in a random order and asynchronous
wgmma. gemm_gluon_swap_kernel (issue 52, gemm59: 80- and 96-row tiles computed as C's transpose, two accumulators a
consumer, A's rows and C's in boxes of REST rows) and gemm_gluon_kernel's tiles, on ragged shapes whose boxes stick
out of M, N and K and whose rings wrap more than once: every element of C written, and exactly (small integers:
every product and sum exact in fp16). And that the check has teeth: a consumer that hands its stage back before its
wgmmas retire, and a loader that puts the rest piece's rows one box too high, are caught."""
import importlib.util
import os
import sys
import time

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


def _operands(M, N, K):
    torch.manual_seed(M * 1009 + N * 31 + K)
    return (torch.randint(-2, 3, (M, K)).half(), torch.randint(-2, 3, (K, N)).half())


# (M, N, K): 200 rows are 2 tiles of 96 and 8 rows of a third (its rest piece wholly outside A), 3 of 80 and 40 of a
# fourth; 300 columns are 2 tiles of 128 and 44 of a third (its second consumer's columns wholly outside B); K=200 is
# 4 k-steps of 64, the last 8 deep, on rings of 2 and 3 stages (laps 2 and 1)
@pytest.mark.parametrize("block_m, stages", [(96, 2), (80, 3), (96, 6), (128, 2), (64, 3)])
@pytest.mark.parametrize("M, N, K", [(200, 300, 200), (96, 128, 64)])
def test_gemm_gluon_kernels_write_every_element_of_c_exactly(g, M, N, K, block_m, stages):
    a, b = _operands(M, N, K)
    c = Emulator(g, seed=M + stages).gemm(a, b, block_m, 128, stages)
    assert not torch.isnan(c).any(), "an element of C no program stored"
    assert torch.equal(c.float(), a.float() @ b.float())


def _consumer_releasing_early(a_top, a_rest, b_smem, c_top, c_rest, ready, empty, c_desc, off_m, off_n, K, C, BLOCK_M,
                              BLOCK_K, NUM_STAGES, CONSUMERS, _hold=time.sleep):
    # _gluon_swap_consumer's loop with the stage handed back as soon as its wgmmas are issued, before they retire;
    # held there 5 ms (_hold), so that the loader's next copy into the stage lands inside the window whatever the
    # machine's load (on a busy CPU the threads' own timing hid the race in 12 seeds of 12)
    REST = BLOCK_M - 64
    acc_top = gl.zeros([64, 64], gl.float32)  # noqa: F821 (the emulator's namespace)
    acc_rest = gl.zeros([64, REST], gl.float32)  # noqa: F821
    for ki in range(gl.cdiv(K, BLOCK_K)):  # noqa: F821
        s = ki % NUM_STAGES
        mbarrier.wait(ready.index(s), (ki // NUM_STAGES) & 1)  # noqa: F821
        b_t = b_smem.index(CONSUMERS * s + C).permute((1, 0)).load(None)
        acc_top = warpgroup_mma(b_t, a_top.index(s).permute((1, 0)), acc_top, is_async=True)  # noqa: F821
        acc_rest = warpgroup_mma(b_t, a_rest.index(s).permute((1, 0)), acc_rest, is_async=True)  # noqa: F821
        mbarrier.arrive(empty.index(s))  # noqa: F821
        _hold(0.005)
        acc_top, acc_rest, b_t = warpgroup_mma_wait(0, deps=(acc_top, acc_rest, b_t))  # noqa: F821


def _loader_rest_one_box_high(a_desc, b_desc, a_top, a_rest, b_smem, ready, empty, off_m, off_n, K, BLOCK_M, BLOCK_K,
                              NUM_STAGES, CONSUMERS):
    # _gluon_swap_loader with the rest piece's rows loaded from one box above where they are
    REST = BLOCK_M - 64
    for ki in range(gl.cdiv(K, BLOCK_K)):  # noqa: F821
        s = ki % NUM_STAGES
        mbarrier.wait(empty.index(s), ((ki // NUM_STAGES) & 1) ^ 1)  # noqa: F821
        mbarrier.expect(ready.index(s), (BLOCK_M // REST) * a_desc.block_type.nbytes  # noqa: F821
                        + CONSUMERS * b_desc.block_type.nbytes)
        for r in range(64 // REST):
            tma_load(a_desc, [off_m + r * REST, ki * BLOCK_K], ready.index(s),  # noqa: F821
                     a_top.index(s).slice(r * REST, REST))
        tma_load(a_desc, [off_m + 64 - REST, ki * BLOCK_K], ready.index(s), a_rest.index(s))  # noqa: F821
        for c in range(CONSUMERS):
            tma_load(b_desc, [ki * BLOCK_K, off_n + c * 64], ready.index(s),  # noqa: F821
                     b_smem.index(CONSUMERS * s + c))


def test_the_emulated_swap_kernel_catches_an_early_release(g):
    """A race: the loader's next copy into the stage lands before the wgmmas that read it retire (the consumer held
    between handing the stage back and waiting on its wgmmas); one catch in up to 4 seeds is asked for."""
    a, b = _operands(200, 300, 320)  # 5 k-steps on 2 stages: each stage refilled twice
    for seed in range(4):
        try:
            Emulator(g, seed=seed, overrides={"_gluon_swap_consumer": _consumer_releasing_early}).gemm(a, b, 96, 128, 2)
        except EmulatorError as e:
            assert "written while a wgmma issued before reads it" in str(e)
            return
    pytest.fail("a stage handed back before its wgmmas retired went unnoticed")


def test_the_emulated_swap_kernel_catches_rows_from_the_wrong_box(g):
    a, b = _operands(200, 300, 200)
    c = Emulator(g, overrides={"_gluon_swap_loader": _loader_rest_one_box_high}).gemm(a, b, 96, 128, 2)
    assert not torch.equal(c.float(), a.float() @ b.float())
