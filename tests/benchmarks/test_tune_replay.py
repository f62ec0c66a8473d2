"""The replay of kgit tune on the committed H200 tables (benchmarks/tune/replay.py), on a seeded subset."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("scipy")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "tune"))
import replay  # noqa: E402

SOFTMAX = str(ROOT / "experiments/tune/h200/space-softmax.json")
GEMM = str(ROOT / "experiments/tune/h200/space-gemm.json")


def test_the_model_beats_coordinate_descent_on_softmax():
    model = replay.share_reaching(SOFTMAX, "model", [8], starts=20)["share"][8]
    descent = replay.share_reaching(SOFTMAX, "descent", [8], starts=20)["share"][8]
    assert model >= 0.7 and model >= descent + 0.25, (model, descent)


def test_the_gemm_constraint_spares_every_run_that_would_not_fit():
    # the template's CONFIG_CONSTRAINTS bound the replayed search as they bound kgit tune
    bound = replay.share_reaching(GEMM, "model", [8], starts=12)
    free = replay.share_reaching(GEMM, "model", [8], starts=12, use_constraints=False)
    assert bound["failed"][8] == 0 and free["failed"][8] > 0, (bound["failed"], free["failed"])
    assert bound["median_final"][8] > free["median_final"][8], (bound["median_final"], free["median_final"])


TABLES = [(SOFTMAX, None), (GEMM, str(ROOT / "experiments/tune/h200/remeasured-gemm.json"))] + [
    (str(ROOT / f"experiments/tune/h200/spaces/space-{name}.json"), None)
    for name in ("softmax", "rmsnorm", "layernorm")]


@pytest.mark.parametrize("table, reference", TABLES, ids=["softmax-old", "gemm", "softmax", "rmsnorm", "layernorm"])
def test_the_model_keeps_97_percent_within_8_iterations_from_more_starts_than_descent(table, reference):
    # from every correct start of each measured space (gemm against its re-measured leaders: the table's own
    # best is its luckiest draw). The bar of 90% is not met on these spaces: the figures, and the same
    # left out one space at a time beside random and TPE, are in experiments/tune/leave-one-out/. A failure
    # is a constraint the model learns from, not a figure: about one run per start fails (BLOCK_SIZE 32768 at
    # 3 stages, on the row kernels), none on gemm, whose template declares its constraint
    model = replay.share_reaching(table, "model", [8], reference=reference)
    descent = replay.share_reaching(table, "descent", [8], reference=reference)
    assert model["share"][8] > descent["share"][8], (model["reached"], descent["reached"])
    assert model["failed"][8] <= model["starts"] and (model["failed"][8] == 0) == (reference is not None), model
