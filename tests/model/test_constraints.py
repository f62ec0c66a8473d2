"""CONFIG_CONSTRAINTS: what an expression may contain, and its value on configurations."""

import pytest

from kgit.errors import KgitError
from kgit.model.constraints import Constraint

KEYS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3}
PATH = "skills/kernels/k/k.py"


@pytest.mark.parametrize("expression, why", [
    ("__import__('os').system('true') == 0", "call \"__import__('os').system('true')\" is not allowed"),
    ("BLOCK_M.bit_length() < 9", "call 'BLOCK_M.bit_length()' is not allowed"),
    ("BLOCK_M.real < 9", "attribute 'BLOCK_M.real' is not allowed"),
    ("BLOCK_Q * 2 <= 512", "'BLOCK_Q' is not a CONFIG key"),
    ("BLOCK_M[0] < 9", "subscript 'BLOCK_M[0]' is not allowed"),
    ("(lambda: 1)() == 1", "is not allowed"),
    ("BLOCK_M < 'x'", "'x' is not a number"),
    ("BLOCK_M * 2", "not a comparison"),
    ("BLOCK_M <", "not a Python expression"),
])
def test_a_constraint_that_is_not_plain_arithmetic_is_refused(expression, why):
    with pytest.raises(KgitError) as caught:
        Constraint.parse(expression, KEYS, PATH)
    message = str(caught.value)
    assert "\n" not in message and why in message, message
    assert message.startswith(f"{PATH}: CONFIG_CONSTRAINTS {expression!r}: ")


def test_a_constraint_that_cannot_be_evaluated_on_a_configuration_says_on_which():
    smem = Constraint.parse("(BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2 * num_stages <= 232448", KEYS, PATH)
    assert smem.holds(KEYS) and not smem.holds({**KEYS, "num_stages": 4, "BLOCK_M": 256, "BLOCK_N": 256})
    ratio = Constraint.parse("BLOCK_M / (num_stages - 3) < 100", KEYS, PATH)
    with pytest.raises(KgitError, match=r"cannot be evaluated on BLOCK_M=128, num_stages=3: division by zero"):
        ratio.holds(KEYS)
    with pytest.raises(KgitError, match="exponent of 100 is too large"):
        Constraint.parse("BLOCK_M ** 100 > 1", KEYS, PATH).holds(KEYS)
