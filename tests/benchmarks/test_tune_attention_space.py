"""flash-attention's whole space from the configurations that decide its figures
(benchmarks/tune/attention_space.py)."""

import importlib.util
import itertools
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_spec = importlib.util.spec_from_file_location("benchmarks_tune_attention_space",
                                               os.path.join(ROOT, "benchmarks", "tune", "attention_space.py"))
attention_space = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(attention_space)

SHIPPED = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "GLUON": 1, "NUM_BUFFERS": 2, "AUTOTUNE": 1}
SPACE = {"BLOCK_M": [64, 128], "BLOCK_N": [64, 128], "num_warps": [8], "num_stages": [3], "GLUON": [0, 1],
         "NUM_BUFFERS": [2, 3], "AUTOTUNE": [0, 1]}


def _row(config, value, error=None):
    return {"config": config, "correct": error is None, "value": None if error else value, "spread_pct": 1.0,
            "error": error}


def _representatives():
    """What spaces_h100.sh measures, on SPACE: the Triton kernel whole, the rest at the shipped Triton keys."""
    rows = []
    for bm, bn in itertools.product([64, 128], [64, 128]):
        config = {**SHIPPED, "BLOCK_M": bm, "BLOCK_N": bn, "GLUON": 0, "NUM_BUFFERS": 2, "AUTOTUNE": 0}
        rows.append(_row(config, bm + bn, "AssertionError: BM % BN" if bm % bn else None))
    for gluon, buffers, autotune in itertools.product([0, 1], [2, 3], [0, 1]):
        config = {**SHIPPED, "GLUON": gluon, "NUM_BUFFERS": buffers, "AUTOTUNE": autotune}
        if gluon or autotune:
            rows.append(_row(config, 1000 + 100 * gluon + 10 * buffers + autotune))
    return rows


def test_every_configuration_takes_the_figure_of_the_one_that_decides_it():
    rows = {attention_space.key(r["config"]): r for r in attention_space.whole(_representatives(), SPACE, SHIPPED)}
    assert len(rows) == 2 * 2 * 2 * 2 * 2
    triton = {**SHIPPED, "BLOCK_M": 128, "BLOCK_N": 64, "GLUON": 0, "AUTOTUNE": 0}
    assert rows[attention_space.key({**triton, "NUM_BUFFERS": 3})]["value"] == 192  # the Triton kernel reads no buffers
    gluon = {**triton, "GLUON": 1, "NUM_BUFFERS": 3}
    assert rows[attention_space.key(gluon)]["value"] == 1130  # the Gluon kernel's, not the Triton keys'
    assert rows[attention_space.key(gluon)]["from"] == {**SHIPPED, "GLUON": 1, "NUM_BUFFERS": 3, "AUTOTUNE": 0}
    assert rows[attention_space.key({**triton, "AUTOTUNE": 1})]["value"] == 1021  # autotuned: the shipped keys'


def test_a_gluon_configuration_fails_where_its_triton_twin_fails_the_checks_unless_it_autotunes():
    rows = {attention_space.key(r["config"]): r for r in attention_space.whole(_representatives(), SPACE, SHIPPED)}
    broken = {**SHIPPED, "BLOCK_M": 64, "BLOCK_N": 128, "GLUON": 1, "NUM_BUFFERS": 2}
    failed = rows[attention_space.key({**broken, "AUTOTUNE": 0})]
    assert not failed["correct"] and failed["value"] is None and "BM % BN" in failed["error"]
    assert rows[attention_space.key({**broken, "AUTOTUNE": 1})]["value"] == 1121  # its candidates drop the failing one


def test_a_configuration_measured_itself_keeps_its_own_row():
    own = _row({**SHIPPED, "BLOCK_M": 64, "BLOCK_N": 64, "GLUON": 1, "NUM_BUFFERS": 3, "AUTOTUNE": 0}, 1127)
    rows = attention_space.whole(_representatives() + [own], SPACE, SHIPPED)
    rows = {attention_space.key(r["config"]): r for r in rows}
    assert rows[attention_space.key(own["config"])] is own


def test_a_representative_not_measured_is_refused():
    with pytest.raises(SystemExit, match="representatives not measured"):
        attention_space.whole(_representatives()[1:], SPACE, SHIPPED)
