"""softmax's shared-memory team (_softmax_smem_team, Gluon) run on the CPU by tests/kernels/softmax_team_emulator.py:
its own code, one thread a program, copies that read NaN until waited for. Small parts (chunks of 32 elements) so
that small rows take teams of 2-4 programs: whole rows and rows cut at 16-byte boundaries (y cut like x or not),
one row a team (no second row), two to five (both halves of shared memory, the loop's both rows, a row past the
last), bf16 and fp16; each launched twice on the same words (the first launch must leave them unstamped). And, so
that the check has teeth, that it fails on a team whose copies are read before they are waited for, or whose
partial of a row its siblings wait for is never published."""
import importlib.util
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from softmax_team_emulator import TeamEmulator  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHUNK, NCH = 32, 2  # parts of 64 elements


@pytest.fixture(scope="module")
def sm():
    path = os.path.join(ROOT, "skills", "kernels", "softmax", "softmax.py")
    spec = importlib.util.spec_from_file_location("softmax_for_emulation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.gluon is None:
        pytest.skip("this Triton has no Gluon")
    return module


def _rows(M, N, dtype, skew, stride, seed=0):
    """M rows of N elements, row r at element skew + r * stride of a fresh storage; the max of row 0 at its last
    element (the cut edge) and row M - 1's in its middle."""
    g = torch.Generator().manual_seed(seed)
    flat = (torch.randn(skew + M * stride, generator=g) * 3).to(dtype)
    x = flat[skew:].as_strided((M, N), (stride, 1))
    x[0, N - 1] = x[0].float().max() + 1
    x[M - 1, N // 2] = x[M - 1].float().max() + 1
    return x


def _check(sm, em, x, y, teams, cut):
    words, exits = None, None
    for launch in range(2):
        y.fill_(float("nan"))
        words, exits = em.softmax(x, y, teams, CHUNK, NCH, cut, words, exits)
        assert not torch.isnan(y).any(), f"launch {launch}: NaN in y (a copy read before it landed, or not written)"
        torch.testing.assert_close(y.double(), sm.softmax_ref(x), rtol=1e-2, atol=1e-4)
        assert (words == int(sm.UNSTAMPED.value)).all() and (exits == 0).all(), "the words are left stamped"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("M,teams", [(2, 2), (5, 2), (9, 2), (7, 3)])
def test_whole_rows(sm, dtype, M, teams):
    N = 160  # three parts, the last of 32
    x = _rows(M, N, dtype, 0, N)
    _check(sm, TeamEmulator(sm), x, torch.empty_like(x), teams, cut=False)


@pytest.mark.parametrize("y_cut", [True, False])
@pytest.mark.parametrize("M,teams,skew,stride", [(3, 3, 3, 211), (8, 3, 5, 203), (6, 2, 1, 205)])
def test_rows_cut_at_16_bytes(sm, y_cut, M, teams, skew, stride):
    N = 203  # a body of three or four parts, rows at several offsets from 16 bytes
    x = _rows(M, N, torch.bfloat16, skew, stride)
    y = _rows(M, N, torch.bfloat16, skew, stride, seed=1) if y_cut else torch.empty(M, N, dtype=torch.bfloat16)
    assert (sm._cut_args(x, y)[4]) == y_cut
    _check(sm, TeamEmulator(sm), x, y, teams, cut=True)


def test_the_emulation_fails_a_team_that_reads_copies_before_they_land(sm):
    em = TeamEmulator(sm)
    em.ns["cp"].wait_group = lambda n: None  # never waits: every chunk still NaN when read
    x = _rows(5, 160, torch.bfloat16, 0, 160)
    y = torch.empty_like(x).fill_(0)
    em.softmax(x, y, 2, CHUNK, NCH, cut=False)
    assert torch.isnan(y).any()


def test_the_emulation_fails_a_team_whose_partial_is_never_published(sm, monkeypatch):
    em = TeamEmulator(sm)
    publish = em.ns["_publish"]
    em.ns["_publish"] = lambda words, team, part, it, m, s, P: None if (it == 1 and part == 0) else \
        publish(words, team, part, it, m, s, P)
    monkeypatch.setattr(sys.modules[TeamEmulator.__module__], "SPIN", 200)  # give up soon
    x = _rows(5, 160, torch.bfloat16, 0, 160)
    y = torch.empty_like(x)
    em.softmax(x, y, 2, CHUNK, NCH, cut=False)
    ok = torch.isclose(y.double(), sm.softmax_ref(x), rtol=1e-2, atol=1e-4).all(dim=1)
    assert not ok[2] and not ok[3], "rows 2 and 3 (iteration 1 of teams 0 and 1) must come out wrong"
