"""A template's tunables read from its source: CONFIG, CONFIG_SPACE, CONFIG_CONSTRAINTS, and CONFIG written back."""

import pytest

from kgit.errors import KgitError
from kgit.model.tunables import declared, read_tunables, write_config


def test_write_config_changes_only_the_literal():
    source = "# head\nCONFIG = {\n    'a': 1,  # note\n    'b': 2,\n}\nSPACE = 3\n"
    out = write_config(source, "k.py", {"a": 4, "b": 2})
    assert out == '# head\nCONFIG = {"a": 4, "b": 2}\nSPACE = 3\n'


def test_read_tunables_refuses_what_it_cannot_tune():
    with pytest.raises(KgitError, match="no literal CONFIG"):
        read_tunables("X = 1\n", "k.py")
    with pytest.raises(KgitError, match="must be a literal"):
        read_tunables("CONFIG = dict(a=1)\nCONFIG_SPACE = {}\n", "k.py")
    with pytest.raises(KgitError, match="is not in CONFIG_SPACE"):
        read_tunables("CONFIG = {'a': 3}\nCONFIG_SPACE = {'a': [1, 2]}\n", "k.py")


GEMM_SMEM = "(BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2 * num_stages <= 232448"
GEMM_LIKE = ('CONFIG = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 3}\n'
             'CONFIG_SPACE = {"BLOCK_M": [64, 128, 256], "BLOCK_N": [64, 128, 256], "BLOCK_K": [64, 128], '
             '"num_stages": [3, 4]}\n')


def with_constraints(*expressions, source=GEMM_LIKE):
    return source + f"CONFIG_CONSTRAINTS = {list(expressions)!r}\n"


def test_a_constraint_is_evaluated_on_configurations():
    tunables = read_tunables(with_constraints(GEMM_SMEM), "k.py")
    assert [c.text for c in tunables.constraints] == [GEMM_SMEM]
    assert tunables.allows({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 3})  # 147456 bytes
    assert not tunables.allows({"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 4})  # 262144
    assert tunables.allows({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 3})  # 196608
    assert not tunables.allows({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 4})  # 262144
    # every operator the grammar allows, with and/or/not and a chained comparison
    other = read_tunables(with_constraints(
        "not (BLOCK_M // 64 % 2 == 1 and num_stages ** 2 > 9) or 0 < BLOCK_K / 64 - 1 + -0.5 != 5"), "k.py")
    assert other.allows({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "num_stages": 4})
    assert not other.allows({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "num_stages": 4})
    assert other.allows({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 128, "num_stages": 4})
    assert read_tunables(GEMM_LIKE, "k.py").constraints == ()  # none declared: every configuration is allowed


def test_a_config_that_breaks_its_constraints_is_refused():
    source = with_constraints(GEMM_SMEM, source=GEMM_LIKE.replace('"num_stages": 3}', '"num_stages": 4}', 1)
                              .replace('"BLOCK_M": 128', '"BLOCK_M": 256', 1))
    with pytest.raises(KgitError, match=r"k.py: CONFIG breaks its constraint .*BLOCK_M=256, BLOCK_K=64, "
                                        r"BLOCK_N=256, num_stages=4"):
        read_tunables(source, "k.py")
    assert read_tunables(source, "k.py", check_config=False).config["BLOCK_M"] == 256  # a record read back
    with pytest.raises(KgitError, match="CONFIG_CONSTRAINTS must be a literal list"):
        read_tunables(GEMM_LIKE + "CONFIG_CONSTRAINTS = 'BLOCK_M < 9'\n", "k.py")


def test_the_shipped_gemm_constraint_predicts_what_fails_on_the_h200():
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    tunables = read_tunables((root / "skills/kernels/gemm/gemm.py").read_text(), "gemm")
    shared_memory, registers = tunables.constraints
    rows = json.loads((root / "experiments/tune/h200/space-gemm.json").read_text())["rows"]
    refused = [r for r in rows if not shared_memory.holds(r["config"])]
    assert not [r for r in refused if r["correct"]]  # never a configuration that runs
    assert all("OutOfResources" in r["error"] for r in refused) and len(refused) == 104
    # the register constraint refuses configurations that run, but only those that spill: all slow
    best = max(r["value"] for r in rows if r["correct"])
    spilling = [r for r in rows if r["correct"] and not registers.holds(r["config"])]
    assert spilling and max(r["value"] for r in spilling) < 0.25 * best
    assert min(r["value"] for r in rows if r["correct"] and tunables.allows(r["config"])) > 0.25 * best


def test_the_shipped_flash_attention_constraint_refuses_exactly_what_failed_on_the_h100():
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    tunables = read_tunables((root / "skills/kernels/flash-attention/flash_attention.py").read_text(), "fa")
    rows = json.loads((root / "experiments/tune/h100/spaces/space-flash-attention.json").read_text())["rows"]
    refused = [r for r in rows if not tunables.allows(r["config"])]
    assert len(refused) == 10 and refused == [r for r in rows if not r["correct"]]


def test_declared_reads_a_template_and_leaves_any_other_source_to_its_test():
    assert declared(GEMM_LIKE, "k.py").config["BLOCK_M"] == 128
    for other in ("X = 1\n", "CONFIG = dict(a=1)\nCONFIG_SPACE = {}\n", "CONFIG = {'a': 1}\n", "def broken(:\n",
                  "CONFIG = [1]\nCONFIG_SPACE = {}\n"):
        assert declared(other, "k.py") is None, other
    with pytest.raises(KgitError, match=r"k.py: CONFIG\['a'\] = 3 is not in CONFIG_SPACE\['a'\] \(1, 2\)"):
        declared("CONFIG = {'a': 3}\nCONFIG_SPACE = {'a': [1, 2]}\n", "k.py")
