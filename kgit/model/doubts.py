"""What in a record asks a person (or an agent) to look before trusting it. Nothing here changes a
decision: these are figures kgit measured as it should, that a broken measurement often makes.

  gain_over_2x            a gain over 2x: KernelBench treats speedups over 2x as suspicious until checked
                          (a kernel that skips work, reuses an output, or a test that times something else)
  one_significant_digit   a figure printed with one significant digit (0.02): every change smaller than a
                          step of that digit prints the same, and kgit's interval widens by the rounding
"""

from __future__ import annotations

import decimal

from kgit.model.record import Record

GAIN_OVER_2X = "gain_over_2x"
ONE_SIGNIFICANT_DIGIT = "one_significant_digit"

# A gain of +100% is twice the best's speed, whichever way the figure runs (kgit.model.decide.delta_pct).
SUSPICIOUS_GAIN_PCT = 100.0


def doubts(record: Record) -> list[str]:
    """The codes of what in this record a person should check, in a fixed order."""
    found = []
    if record.value is not None and record.delta_pct is not None and record.delta_pct > SUSPICIOUS_GAIN_PCT:
        found.append(GAIN_OVER_2X)
    printed = figures(record)
    if printed and all(significant_digits(v) == 1 for v in printed):
        found.append(ONE_SIGNIFICANT_DIGIT)
    return found


def figures(record: Record) -> list:
    """The record's own figures as the test printed them: the runs that measured it (a float reads back as
    it was printed: 0.02 stays 0.02), else its value."""
    measured = record.measurement.candidate if record.measurement else []
    if measured and all(_is_number(v) for v in measured):
        return measured
    return [record.value] if record.value is not None else []


def significant_digits(value) -> int:
    """The significant digits of a number as printed: 1 for 0.02, 3, 1e-05 and 0.9; 4 for 100.0 (its
    trailing zeros were printed); 3 for the int 100."""
    text = repr(value) if isinstance(value, float) else str(value)
    return len(decimal.Decimal(text).as_tuple().digits)


def _is_number(value) -> bool:
    return type(value) in (int, float) and value > 0
