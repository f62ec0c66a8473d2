"""The fp32 tolerances, pinned at their numbers: an fp32 output is allowed 1e-4 of the element plus 1e-4
of its row's largest (Elementwise), or a relative Frobenius error of 5e-3 and 1.5e-2 in its worst row
(Norm). The tables are read by value here, never through ELEMENTWISE/NORM themselves, so a table
loosened 10x (or tightened) fails a test: a looser fp32 bound passes a kernel that rounds through fp16."""

import pytest
import torch

from kgit.harness.tolerance import ELEMENTWISE, NORM, compare

FP32_ELEMENTWISE = ELEMENTWISE["fp32"]
FP32_NORM = NORM["fp32"]


def test_the_fp32_elementwise_allowance_is_1e_4_of_the_element_plus_1e_4_of_the_row_max():
    ref = torch.tensor([[1000.0, 1.0, -0.5]], dtype=torch.float64)
    rowmax_part = 1e-4 * 1000.0
    for col, value in ((0, 1000.0), (1, 1.0), (2, -0.5)):
        allowed = 1e-4 * abs(value) + rowmax_part
        inside, outside = ref.clone(), ref.clone()
        inside[0, col] += 0.98 * allowed
        outside[0, col] += 1.02 * allowed
        assert compare(inside, ref, FP32_ELEMENTWISE) is None, (col, allowed)
        assert compare(outside, ref, FP32_ELEMENTWISE).startswith(
            f"1 of 3 elements out of tolerance in 1 of 1 rows (first at row 0 col {col}"), (col, allowed)


def test_an_fp32_row_of_one_value_is_allowed_2e_4_relative():
    ref = torch.full((4, 8), 3.0, dtype=torch.float64)
    assert compare(ref * (1 + 1.9e-4), ref, FP32_ELEMENTWISE) is None
    assert compare(ref * (1 + 2.1e-4), ref, FP32_ELEMENTWISE) is not None
    assert compare(ref * (1 - 2.1e-4), ref, FP32_ELEMENTWISE) is not None


def test_an_fp32_output_that_went_through_fp16_fails_the_elementwise_check():
    """What the fp32 bound is for: a kernel that computes or stores in fp16 and hands back fp32 is off by
    up to half an fp16 ulp (4.9e-4 relative), over 2e-4 at the row's largest elements."""
    torch.manual_seed(0)
    ref = torch.randn(16, 256, dtype=torch.float32)
    rounded = ref.half().float()
    assert compare(rounded, ref, FP32_ELEMENTWISE) is not None
    assert compare(ref.double().float(), ref, FP32_ELEMENTWISE) is None


@pytest.mark.parametrize("scale, passes", [(4.9e-3, True), (5.1e-3, False), (-5.1e-3, False)])
def test_the_fp32_norm_bound_is_5e_3_relative(scale, passes):
    torch.manual_seed(1)
    ref = torch.randn(64, 64, dtype=torch.float64)
    found = compare(ref * (1 + scale), ref, FP32_NORM)
    assert (found is None) == passes, found
    if not passes:
        assert found.startswith(f"relative error {abs(scale):.3g}") and "over tolerance 0.005" in found


@pytest.mark.parametrize("row_error, passes", [(1.45e-2, True), (1.55e-2, False)])
def test_the_fp32_norm_bound_of_the_worst_row_is_1_5e_2(row_error, passes):
    torch.manual_seed(2)
    ref = torch.randn(400, 64, dtype=torch.float64)
    out = ref.clone()
    out[11] *= 1 + row_error  # the whole output's error stays ~7.5e-4: only the row check sees it
    found = compare(out, ref, FP32_NORM)
    assert (found is None) == passes, found


def test_a_wrong_tile_of_an_fp32_matmul_fails_the_norm_check():
    """A 16x16 tile of a 256x256 output off by 30%: the whole output's error is ~1.9e-2, over 5e-3 but
    under the 5e-2 of a bound loosened 10x."""
    torch.manual_seed(3)
    ref = torch.randn(256, 256, dtype=torch.float64)
    out = ref.clone()
    out[:16, :16] *= 1.3
    assert compare(out, ref, FP32_NORM) is not None
    assert compare(ref, ref, FP32_NORM) is None
