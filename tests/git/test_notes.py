"""Reading records from notes: one kernel's notes through the index, and every invalid note reported."""

import json

import pytest

from kgit.git import notes
from kgit.git.command import find_repo
from workspace import KERNEL, a_session

BROKEN = {
    "not JSON": "this note was typed by hand",
    "truncated": '{"kernel": "fake", "iteration": 1, "action": "faster", "sta',
    "wrong type": json.dumps({"kernel": "fake", "iteration": "1", "action": "faster", "status": "IMPROVED",
                              "value": 150.0}),
    "missing key": json.dumps({"kernel": "fake", "iteration": 1, "action": "faster", "value": 150.0}),
}
REASONS = {"not JSON": "not JSON", "truncated": "not JSON", "wrong type": "iteration must be an integer",
           "missing key": "missing key 'status'"}


def set_note(ws, rev, text):
    ws.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", text, rev)


@pytest.mark.parametrize("kind", list(BROKEN))
def test_an_invalid_note_is_reported_everywhere_and_the_loop_decides_on_the_valid_ones(started, kind):
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")  # iteration 1: the best, 150
    commit = started.git("rev-parse", "HEAD")
    set_note(started, "HEAD", BROKEN[kind])
    reason = REASONS[kind]

    log = started.ok("log", "--json")
    assert [r["iteration"] for r in log.json()["iterations"]] == [0]
    assert log.json()["invalid_notes"][0]["commit"] == commit
    assert reason in log.json()["invalid_notes"][0]["reason"]
    assert f"the note on {commit[:10]} is not a valid kgit record ({reason}" in log.stderr
    for command in (["status"], ["best"], ["context"]):
        run = started.ok(*command)
        assert commit[:10] in run.stderr and "Traceback" not in run.stderr

    doctor = started.doctor().json()
    assert any(commit[:10] in p["problem"] and reason in p["problem"] for p in doctor["problems"])

    # the damaged note may have been the best's: no step decides without it (a worse kernel could be kept)
    started.set_kernel(METRIC=120.0)
    assert "holds a damaged kgit record" in started.refused("step", "-m", "again")
    started.doctor("--fix")  # its last valid version, from the notes' history
    step = started.ok("step", "-m", "again", "--json")
    assert step.json()["best_before"] == 150.0 and step.json()["iteration"] == 2


def test_a_note_of_another_tool_on_an_unrelated_commit_is_reported_not_fatal(started):
    set_note(started, "main", "reviewed-by: someone")
    run = started.ok("status")
    assert "is not a valid kgit record (not JSON" in run.stderr


def test_one_kernels_read_uses_the_index_and_finds_only_its_records(started):
    repo = find_repo(started.root)
    other = json.dumps({"kernel": "other", "iteration": 0, "action": "baseline", "status": "BASELINE",
                        "value": 5.0})
    set_note(started, "main", other)
    assert sorted(r.kernel for rs in notes.read_notes(repo).by_commit.values() for r in rs) == ["fake", "other"]
    mine = notes.read_kernel_notes(repo, "fake")
    assert [r.kernel for rs in mine.by_commit.values() for r in rs] == ["fake"]
    index = started.root / ".git/kgit/note-index"
    assert sorted(p.name for p in (index / "kernels").iterdir()) == ["66616b65", "6f74686572"]  # hex names
    assert (index / "tip").read_text().split()[0] == started.git("rev-parse", "refs/notes/kgit")


def test_the_index_follows_every_change_of_the_notes(started):
    """Added, replaced and removed notes reach the index through the diff between its tip and the new."""
    repo = find_repo(started.root)

    def kernels_read():
        return sorted((r.kernel, r.iteration) for rs in notes.read_kernel_notes(repo, "other").by_commit.values()
                      for r in rs)

    record = {"kernel": "other", "iteration": 0, "action": "baseline", "status": "BASELINE", "value": 5.0}
    assert kernels_read() == []
    set_note(started, "main", json.dumps(record))
    assert kernels_read() == [("other", 0)]
    set_note(started, "main", json.dumps({**record, "iteration": 4}))  # the note replaced
    assert kernels_read() == [("other", 4)]
    started.git("notes", "--ref=refs/notes/kgit", "remove", "main")
    assert kernels_read() == []
    set_note(started, "main", "garbage")  # invalid: reported to every kernel's reader
    assert notes.read_kernel_notes(repo, "other").invalid[0].commit == started.git("rev-parse", "main")
    # an index whose tip is gone (gc after a forced rewrite) is built again from every note
    (started.root / ".git/kgit/note-index/tip").write_text("0" * 40 + "\n")
    set_note(started, "main", json.dumps(record))
    assert kernels_read() == [("other", 0)]
    assert [r.iteration for r in notes.kernel_history(repo, "fake").records] == [0]


def test_a_copy_left_by_a_rebase_counts_once(started):
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")
    started.git("commit", "--amend", "-q", "--no-edit", "--allow-empty")  # notes.rewriteRef copies the note
    log = started.ok("log", "--json").json()
    assert [r["iteration"] for r in log["iterations"]] == [0, 1]
    assert log["iterations"][1]["commit"] == started.git("rev-parse", "HEAD")


@pytest.mark.parametrize("damage", ["truncated", "emptied", "removed", "line dropped from the manifest"])
def test_a_damaged_index_is_built_again_rather_than_trusted(ws, damage):
    """An index file that hides a kept iteration made doctor move best/ to the baseline and call the
    iteration a hand commit to reset away (and with every record hidden, advise 'git branch -D')."""
    a_session(ws)
    index = ws.root / ".git/kgit/note-index"
    kernel_file = index / "kernels" / "fake".encode().hex()
    assert ws.ok("log", "--json").json()["iterations"]  # the index is written
    if damage == "truncated":
        kernel_file.write_text(kernel_file.read_text().splitlines()[0][:50] + "\n")
    elif damage == "emptied":
        kernel_file.write_text("")
    elif damage == "removed":
        kernel_file.unlink()
    else:
        tip = index / "tip"
        tip.write_text("".join(line + "\n" for line in tip.read_text().splitlines() if "kernels/" not in line))
    assert [r["iteration"] for r in ws.ok("log", "--json").json()["iterations"]] == [0, 1, 2]
    assert ws.doctor().json()["problems"] == []
    assert ws.ok("best", "--json").json()["iteration"] == 1


def test_a_process_parses_each_note_once(started, monkeypatch):
    repo = find_repo(started.root)
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")
    monkeypatch.setattr(notes, "_parsed", {})
    first = notes.kernel_history(repo, "fake").records
    assert len(notes._parsed) == 2

    def no_git(repo, shas):
        assert shas == [], "a note parsed already was read again"
        return []

    monkeypatch.setattr(notes, "cat_blobs", no_git)
    assert notes.kernel_history(repo, "fake").records == first


def test_a_note_whose_blob_went_missing_is_not_remembered(started, monkeypatch):
    repo = find_repo(started.root)
    notes.kernel_history(repo, "fake")  # the index of the kernel's notes, as it is
    monkeypatch.setattr(notes, "_parsed", {})
    monkeypatch.setattr(notes, "cat_blobs", lambda repo, shas: [""] * len(shas))  # gone meanwhile
    assert notes.kernel_history(repo, "fake").records == []
    assert notes._parsed == {}
    monkeypatch.undo()
    monkeypatch.setattr(notes, "_parsed", {})
    assert [r.iteration for r in notes.kernel_history(repo, "fake").records] == [0]


def test_branch_history_reads_the_branch_its_records_are_judged_by(started):
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")  # iteration 1 kept: the tip, tagged
    started.set_kernel(METRIC=160.0)
    started.git("commit", "-qam", "a hand commit")  # above the newest recorded commit
    started.git("commit", "-q", "--allow-empty", "-m", "another, touching nothing")
    repo = find_repo(started.root)
    history = notes.branch_history(repo, "fake")
    line = history.line
    tip, hand, kept, baseline = (started.git("rev-parse", f"opt/fake~{n}") for n in range(4))
    assert line.tip == tip and line.tagged == kept == started.git("rev-parse", "best/fake")
    assert {tip, hand, kept, baseline} <= line.first_parents
    assert [(sha, subject) for sha, subject, _ in line.above_recorded] == [
        (tip, "another, touching nothing"), (hand, "a hand commit")]
    assert line.above_recorded[1][2] == (KERNEL,) and line.above_recorded[0][2] == ()
    assert line.held_bases == {r.base for r in history.records if r.base}
    # deciding_history reads the same line but not what only a step checks; kernel_history reads none
    deciding = notes.deciding_history(repo, "fake").line
    assert (deciding.tip, deciding.first_parents, deciding.above_recorded) == (tip, line.first_parents, ())
    assert notes.kernel_history(repo, "fake").line == notes.Line()
