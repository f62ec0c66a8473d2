"""Value regimes and the seed."""

import pytest
import torch

from kgit.harness.inputs import rand, seed_everything


def test_cases_generate_what_they_say():
    x = rand((4, 64), torch.float32, "cpu", "equal")
    assert torch.all(x == x[:, :1])
    y = rand((4, 64), torch.float32, "cpu", "neginf")
    assert torch.isinf(y).any() and torch.isfinite(y).any(dim=-1).all()
    z = rand((4, 64), torch.float16, "cpu", "large")
    assert torch.isfinite(z).all() and z.abs().max() > 100
    t = rand((4, 64), torch.float32, "cpu", "tiny")
    assert 0 < t.abs().max() < 1e-4


def test_scale_is_applied_before_rounding():
    x = rand((256, 256), torch.bfloat16, "cpu", scale=1e-3)
    assert x.dtype == torch.bfloat16 and 0.5e-3 < x.float().std() < 2e-3


def test_an_unknown_case_is_refused():
    with pytest.raises(ValueError, match="unknown case 'huge'"):
        rand((2, 2), torch.float32, "cpu", "huge")


def test_kgit_seed_makes_inputs_reproducible(monkeypatch):
    monkeypatch.setenv("KGIT_SEED", "1234")
    assert seed_everything() == 1234
    first = rand((3, 3), torch.float32, "cpu")
    seed_everything()
    assert torch.equal(first, rand((3, 3), torch.float32, "cpu"))
