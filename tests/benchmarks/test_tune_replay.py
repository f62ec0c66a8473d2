"""The replay of kgit tune on the committed H200 tables (benchmarks/tune/replay.py), on a seeded subset."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
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


@pytest.mark.xfail(strict=True, reason="issue 16's bar is not met by a first run: softmax 80%, gemm 78% against its "
                   "re-measured leaders (experiments/tune/replay.md)")
def test_the_bar_90_percent_of_starts_reach_97_percent_within_8_iterations():
    for table in (SOFTMAX, GEMM):
        assert replay.share_reaching(table, "model", [8], starts=12)["share"][8] >= 0.9
