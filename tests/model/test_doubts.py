"""What in a record asks a person to look before trusting it: a gain over 2x, a figure of one digit."""

import pytest

from kgit.model.doubts import GAIN_OVER_2X, ONE_SIGNIFICANT_DIGIT, doubts, significant_digits
from kgit.model.record import Measurement, Record, Status


def record(value=120.0, delta=20.0, candidate=None, status=Status.IMPROVED) -> Record:
    measurement = Measurement(candidate=candidate) if candidate is not None else None
    return Record("k", 1, "x", status, value=value, delta_pct=delta, measurement=measurement)


@pytest.mark.parametrize("value, digits", [(0.02, 1), (3, 1), (1e-05, 1), (0.9, 1), (100.0, 4), (100, 3),
                                           (0.0021355, 5), (2.5, 2), (812.5, 4)])
def test_significant_digits_as_printed(value, digits):
    assert significant_digits(value) == digits


def test_a_gain_over_2x_asks_for_a_look():
    assert doubts(record(delta=100.0)) == []  # exactly twice the speed: at the line, not over it
    assert doubts(record(delta=100.1)) == [GAIN_OVER_2X]
    assert doubts(record(value=None, delta=250.0, status=Status.FAILED)) == []  # nothing measured: nothing to doubt


def test_a_figure_of_one_significant_digit_asks_for_a_look():
    assert doubts(record(value=0.02, delta=None)) == [ONE_SIGNIFICANT_DIGIT]
    # the runs as printed decide: a median of 0.015 from runs that printed 0.01 and 0.02 is one digit too
    assert doubts(record(value=0.015, delta=None, candidate=[0.01, 0.02])) == [ONE_SIGNIFICANT_DIGIT]
    assert doubts(record(value=0.02, delta=None, candidate=[0.02, 0.021])) == []  # one run printed two digits
    assert doubts(record(value=0.4, delta=300.0, candidate=[0.4, 0.4])) == [GAIN_OVER_2X, ONE_SIGNIFICANT_DIGIT]
