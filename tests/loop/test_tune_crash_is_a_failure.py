"""kgit tune learns from a crash as from a failure, not as a measurement without a figure.

A failed configuration (a crash, OutOfResources, a wrong result) has score None: the search keeps away
from what lies beyond it and lowers its chance to run there. A measurement without a figure (NaN) is
only never measured again. A crash read as NaN would let the search walk on past it.
"""

import math

import pytest

from kgit.git.command import find_repo
from kgit.loop import tune
from kgit.model import search
from kgit.model.record import Record, Status
from workspace import KERNEL, LANDSCAPE


def commit_config(ws, block, warps):
    text = LANDSCAPE.replace('CONFIG = {"BLOCK": 256, "WARPS": 2}', f'CONFIG = {{"BLOCK": {block}, "WARPS": {warps}}}')
    (ws.root / KERNEL).write_text(text)
    ws.git("commit", "-qam", f"BLOCK {block} WARPS {warps}")
    return ws.git("rev-parse", "HEAD")


@pytest.mark.parametrize("status, correctness, value, score", [
    (Status.FAILED, None, None, None),          # a crash: the test never said
    (Status.FAILED, False, None, None),         # a wrong result
    (Status.FAILED, None, 900.0, None),         # failed, whatever figure it printed
    (Status.REGRESSED, False, 800.0, None),     # a figure, but a wrong result: a failure too
    (Status.WITHIN_NOISE, True, None, "nan"),   # measured, no figure: never again, learnt from never
    (Status.REGRESSED, True, 800.0, math.log(800.0)),
])
def test_a_steps_score_for_the_search(ws, status, correctness, value, score):
    base = commit_config(ws, 256, 2)
    tried = commit_config(ws, 512, 2)
    records = [
        (base, Record("fake", 0, "baseline", Status.BASELINE, value=900.0, correctness=True)),
        (tried, Record("fake", 1, "BLOCK 256->512", status, value=value, correctness=correctness, base=base)),
    ]
    points = tune._measured(find_repo(ws.root), KERNEL, records)
    assert [p.config for p in points] == [{"BLOCK": 256, "WARPS": 2}, {"BLOCK": 512, "WARPS": 2}]
    assert points[1].origin == {"BLOCK": 256, "WARPS": 2} and points[0].score == math.log(900.0)
    found = points[1].score
    if score is None:
        assert found is None
    elif score == "nan":
        assert math.isnan(found)
    else:
        assert found == pytest.approx(score)


@pytest.mark.parametrize("score, proposed", [(None, 2048), (float("nan"), 128)])
def test_the_search_keeps_off_what_lies_beyond_a_crash_and_not_beyond_a_missing_figure(score, proposed):
    """BLOCK 512 -> 256 crashed (None) or printed no figure (NaN); 1024 gave no figure. Of the two left,
    128 lies beyond the crash (further the way it moved) and sorts first: only a failure keeps it off."""
    space = {"BLOCK": [128, 256, 512, 1024, 2048]}
    best = {"BLOCK": 512}
    measured = [search.Point({"BLOCK": 256}, best, False, score),
                search.Point({"BLOCK": 1024}, best, False, float("nan"))]
    assert search.propose_model(best, space, measured).config == {"BLOCK": proposed}
