"""A step renders its own kernel's sections alone over a log that is up to date, and the whole log
otherwise: either way the log it commits is `kgit report`'s (kgit.state.rendered)."""

import json

import pytest

OTHER = {"kernel": "other", "iteration": 0, "action": "baseline", "status": "BASELINE", "gpu": "Fake GPU",
         "metric": "gbps", "value": 5.0, "correctness": True, "started": "2026-11-30T08:00:00+00:00"}


@pytest.mark.parametrize("change", ["another kernel's record", "no record of the log", "a log edited by hand"])
def test_a_step_renders_every_record_where_the_log_is_not_up_to_date(started, change):
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")
    if change == "another kernel's record":  # pulled, say: the log in HEAD does not show it
        started.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", json.dumps(OTHER), "main")
    elif change == "no record of the log":  # a fresh clone: .git/kgit is not cloned
        (started.root / ".git/kgit/rendered").unlink()
    else:  # another kernel's section changed by hand: only a rendering of every record puts it back
        started.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", json.dumps(OTHER), "main")
        started.ok("report")
        readme = started.root / "experiments/README.md"
        readme.write_text(readme.read_text().replace("| baseline ", "| hand-edited "))
        started.git("commit", "-qam", "edit the log")
    started.set_kernel(METRIC=200.0)
    started.ok("step", "-m", "faster again")
    assert "up to date" in started.ok("report").stdout
    readme = started.git("show", "HEAD:experiments/README.md")
    assert ("## Optimization: other on Fake GPU" in readme) == (change != "no record of the log")
    assert "hand-edited" not in readme
