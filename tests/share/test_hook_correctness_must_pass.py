"""The pre-push hook lets a tip through only when its record says the correctness check passed: true.
A record that says false, null or nothing at all is a failed verification (a test that never said its
output was right has not shown it)."""

import json

import pytest

from kgit.git import notes
from kgit.git.command import find_repo
from kgit.share import hooks
from workspace import a_session, git_run, remote_refs


def set_correctness(ws, commit, value):
    record = json.loads(ws.git("notes", "--ref=refs/notes/kgit", "show", commit))
    if value == "missing":
        del record["correctness"]
    else:
        record["correctness"] = value
    ws.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", json.dumps(record), commit)


@pytest.mark.parametrize("correctness, passes", [(True, True), (False, False), (None, False), ("missing", False)])
def test_the_tips_record_must_say_its_correctness_passed(ws, correctness, passes):
    a_session(ws)
    kept = ws.git("rev-parse", "best/fake")
    set_correctness(ws, kept, correctness)
    repo = find_repo(ws.root)
    by_commit = notes.read_notes(repo).by_commit
    assert by_commit[kept][0].correctness is (True if correctness is True else False if correctness is False else None)
    for tip in (ws.git("rev-parse", "opt/fake"), kept):  # through the reverted iteration's log commit, and at it
        problem = hooks.tip_problem(repo, "fake", tip, by_commit)
        if passes:
            assert problem is None
        else:
            assert problem == (f"its kernel is that of commit {kept[:10]}, whose record is iteration 1, IMPROVED: "
                               "a failed verification, not a kept iteration")


def test_a_push_of_a_tip_whose_record_lacks_its_correctness_is_refused(remote, ws):
    a_session(ws)
    ws.ok("hooks", "install")
    set_correctness(ws, ws.git("rev-parse", "best/fake"), "missing")
    before = remote_refs(remote)
    run = git_run(ws, "push", "origin", "opt/fake")
    assert run.returncode == 1 and "a failed verification, not a kept iteration" in run.stderr
    assert remote_refs(remote) == before
    assert "a failed verification" in ws.refused("push")
    assert remote_refs(remote) == before
