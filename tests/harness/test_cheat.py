"""The cheat check's parts: the poison, and the ops a call dispatches."""

import torch

from kgit.harness.cheat import computing_ops, poison, torch_ops_called


def test_poison_fills_floats_with_nan_and_integers_with_their_minimum():
    f, i = poison((torch.zeros(3), torch.zeros(3, dtype=torch.int32)))
    assert torch.isnan(f).all() and (i == torch.iinfo(torch.int32).min).all()


def test_the_recorder_names_the_aten_ops_a_call_dispatches():
    x = torch.randn(4, 4)
    assert {"mm", "exp"} <= torch_ops_called(lambda: (x @ x).exp())


def test_allocation_views_and_copies_are_not_computing():
    x = torch.randn(4, 4)
    assert computing_ops(lambda: torch.empty_like(x).copy_(x.t()).view(16)) == []


def test_computing_ops_are_listed_unless_the_spec_allows_them():
    x = torch.randn(4, 4)
    assert computing_ops(lambda: x.sum(0).exp()) == ["exp", "sum"]
    assert computing_ops(lambda: x.sum(0).exp(), allowed_extra=("sum",)) == ["exp"]
