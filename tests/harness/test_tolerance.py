"""The tolerance model: where each kind's boundary lies, and what always fails."""

import pytest
import torch

from kgit.harness.tolerance import ELEMENTWISE, NORM, Elementwise, Norm, compare


def test_elementwise_allows_rtol_of_the_element_plus_atol_of_the_row_max():
    tol = Elementwise(rtol=1e-2, atol=1e-3, floor=0.0)
    ref = torch.tensor([[1.0, 0.5, -2.0]], dtype=torch.float64)
    allowed = 1e-2 * ref.abs() + 1e-3 * 2.0  # the row's largest |ref| is 2
    assert compare(ref + 0.99 * allowed, ref, tol) is None
    over = ref.clone()
    over[0, 1] += 1.01 * allowed[0, 1]
    assert compare(over, ref, tol).startswith("1 of 3 elements out of tolerance in 1 of 1 rows (first at row 0 col 1")


def test_elementwise_rows_are_the_last_dimension():
    tol = Elementwise(rtol=0.0, atol=1e-2, floor=0.0)
    ref = torch.tensor([[100.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    err = torch.tensor([[0.0, 0.5], [0.0, 0.5]], dtype=torch.float64)
    # 0.5 is within 1% of row 0's max (100), not of row 1's (1)
    assert "in 1 of 2 rows (first at row 1 col 1" in compare(ref + err, ref, tol)


def test_elementwise_floor_is_absolute():
    tol = Elementwise(rtol=0.0, atol=0.0, floor=1e-6)
    ref = torch.zeros(2, 3, dtype=torch.float64)
    assert compare(ref + 0.9e-6, ref, tol) is None
    assert compare(ref + 1.1e-6, ref, tol) is not None


def test_norm_bounds_the_relative_frobenius_error():
    tol = Norm(rel=1e-2)
    ref = torch.randn(100, 64, dtype=torch.float64)
    assert compare(ref * (1 + 0.99e-2), ref, tol) is None
    assert compare(ref * (1 + 1.01e-2), ref, tol).startswith("relative error 0.0101")


def test_norm_bounds_the_worst_row_at_row_factor_times_the_tolerance():
    tol = Norm(rel=1e-2, row_factor=3.0)
    ref = torch.randn(400, 64, dtype=torch.float64)
    inside, outside = ref.clone(), ref.clone()
    inside[7] *= 1 + 2.9e-2
    outside[7] *= 1 + 3.1e-2  # the whole output's error stays ~1.6e-3: only the row check sees it
    assert compare(inside, ref, tol) is None
    assert "worst row 0.031" in compare(outside, ref, tol)


@pytest.mark.parametrize("tol", [ELEMENTWISE["fp32"], NORM["fp32"]])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_and_inf_never_pass(tol, bad):
    ref = torch.ones(2, 3, dtype=torch.float64)
    out = torch.ones(2, 3)
    out[1, 2] = bad
    assert "1 of 6 elements not finite" in compare(out, ref, tol)


def test_shape_and_integers_are_exact():
    assert "shape (2, 3) != reference (3, 2)" in compare(torch.ones(2, 3), torch.ones(3, 2), NORM["fp32"])
    ints = torch.tensor([1, 2, 3])
    assert compare(ints, ints.double(), None) is None
    assert compare(ints, torch.tensor([1.0, 2.0, 4.0]), None) == "1 of 3 integer elements differ"


def test_tables_cover_the_dtypes_and_tighten_with_precision():
    assert set(NORM) <= set(ELEMENTWISE) == {"fp32", "fp16", "bf16", "fp64"}
    assert ELEMENTWISE["fp32"].rtol < ELEMENTWISE["fp16"].rtol < ELEMENTWISE["bf16"].rtol
    assert NORM["fp32"].rel < NORM["fp16"].rel == NORM["bf16"].rel
