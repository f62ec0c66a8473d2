"""kgit doctor --fix: each problem the doctor finds (and leaves alone without --fix), then repaired."""

import json

import pytest

from workspace import a_session


def rebase_onto_new_main(ws, *git_options):
    ws.git("checkout", "-q", "main")
    (ws.root / "NOTES.txt").write_text("a change on main\n")
    ws.git("add", "NOTES.txt")
    ws.git("commit", "-qm", "main moves on")
    ws.git("checkout", "-q", "opt/fake")
    ws.git(*git_options, "rebase", "-q", "main")


def doctor(ws):
    return ws.doctor().json()["problems"]


def test_after_a_rebase_stale_notes_and_the_tag_are_repaired(ws):
    a_session(ws)
    rebase_onto_new_main(ws)
    before = ws.snapshot()
    problems = [p["problem"] for p in doctor(ws)]
    assert any("best/fake points off its branch" in p for p in problems)
    assert sum("a copy left by a rewrite" in p for p in problems) == 2  # baseline and iteration 1
    assert ws.snapshot() == before  # without --fix nothing changes

    fixed = ws.doctor("--fix").json()
    assert fixed["problems"] == [] and len(fixed["fixed"]) == 3
    assert doctor(ws) == []
    ws.check_invariants()  # one note per iteration, best/fake on the branch's best kept commit


def test_a_rebase_without_rewrite_ref_gets_its_notes_moved(ws):
    a_session(ws)
    rebase_onto_new_main(ws, "-c", "notes.rewrite.rebase=false")
    problems = [p["problem"] for p in doctor(ws)]
    assert sum("was rewritten as" in p for p in problems) == 2
    ws.ok("doctor", "--fix")
    assert doctor(ws) == []
    ws.check_invariants()
    on_branch = ws.git("rev-list", "--first-parent", "opt/fake").split()
    assert all(r["commit"] in on_branch for r in ws.ok("log", "--json").json()["iterations"][:2])


def test_a_lone_record_on_an_unreachable_commit_is_pinned(started):
    tree = started.git("rev-parse", "HEAD^{tree}")
    orphan = started.git("commit-tree", tree, "-p", "HEAD", "-m", "fake: iter 7: lost")
    record = {**json.loads(started.git("notes", "--ref=refs/notes/kgit", "show", "HEAD")),
              "iteration": 7, "status": "REGRESSED", "started": "2030-01-01T00:00:00+00:00"}
    started.git("notes", "--ref=refs/notes/kgit", "add", "-m", json.dumps(record), orphan)
    assert any("gc would delete it" in p["problem"] for p in doctor(started))
    started.ok("doctor", "--fix")
    assert started.git("rev-parse", "refs/kgit/attempts/fake/7") == orphan
    assert doctor(started) == []


def test_an_interrupted_step_is_reported_then_recovered(started):
    started.set_kernel(METRIC=120.0)
    killed = started.kgit("step", "-m", "killed", env={"KGIT_TEST_CRASH_AT": "decided"})
    assert killed.returncode == -9
    problems = [p["problem"] for p in doctor(started)]
    assert any("interrupted step" in p for p in problems)
    assert (started.root / ".git/kgit/journal.json").exists()  # reporting recovers nothing
    fixed = started.doctor("--fix").json()["fixed"]
    assert any("finished an interrupted step" in line for line in fixed)
    assert doctor(started) == []
    started.check_invariants()


def damage_best_note(ws, how: str) -> str:
    """Damage the note of the best kept iteration (iteration 1 at 150), as a hand or a tool would."""
    best = ws.git("rev-parse", "best/fake")
    text = ws.git("notes", "--ref=refs/notes/kgit", "show", best)
    if how == "not JSON":
        damaged = text[: len(text) // 2]
    else:  # a field removed
        record = json.loads(text)
        del record["status"]
        damaged = json.dumps(record)
    ws.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", damaged, best)
    return best


@pytest.mark.parametrize("how", ["not JSON", "a field removed"])
def test_a_damaged_best_stops_the_loop_until_doctor_puts_its_last_valid_version_back(started, how):
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")
    best = damage_best_note(started, how)
    started.set_kernel(METRIC=120.0)  # better than the baseline (100), worse than the damaged best (150)
    refusal = started.refused("step", "-m", "worse than the best")
    assert f"opt/fake holds a damaged kgit record (on {best[:10]}" in refusal
    assert "kgit doctor --fix" in refusal
    problem, = [p for p in doctor(started) if "not a valid kgit record" in p["problem"]]
    assert problem["fix"].startswith("put back its last valid version, from refs/notes/kgit at ")

    started.ok("doctor", "--fix")
    assert doctor(started) == []
    record = started.ok("step", "-m", "worse than the best", "--json").json()
    assert (record["status"], record["iteration"]) == ("REGRESSED", 2)  # judged against 150, not 100
    assert started.git("rev-parse", "best/fake") == best
    started.check_invariants()


def test_a_note_damaged_at_its_first_write_is_reported_not_repaired(started):
    main = started.git("rev-parse", "main")
    started.git("notes", "--ref=refs/notes/kgit", "add", "-m", "typed by hand", main)
    before = started.snapshot()
    started.doctor("--fix")  # exit 1: the problem is left
    assert started.snapshot() == before  # nothing valid to put back: a person decides
    problem, = doctor(started)
    assert problem["fix"].startswith("none automatic")


def test_a_damaged_note_off_the_branch_does_not_stop_the_loop(started):
    orphan = started.git("commit-tree", started.git("rev-parse", "HEAD^{tree}"), "-m", "elsewhere")
    started.git("notes", "--ref=refs/notes/kgit", "add", "-m", "{broken", orphan)
    started.set_kernel(METRIC=120.0)
    assert started.ok("step", "-m", "faster", "--json").json()["status"] == "IMPROVED"


def test_a_damaged_note_of_the_branch_that_is_not_the_best_stops_the_loop_too(started):
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")
    baseline = started.git("rev-parse", "opt/fake~1")
    assert baseline != started.git("rev-parse", "best/fake")
    started.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", "{broken", baseline)
    started.set_kernel(METRIC=160.0)
    assert f"opt/fake holds a damaged kgit record (on {baseline[:10]}" in started.refused("step", "-m", "faster")


def test_a_damaged_best_that_the_branch_no_longer_holds_stops_the_loop(started):
    # opt/fake reset behind its best by hand: best/fake's commit is off the branch's line, and its
    # note may still be what a pull or a doctor --fix brings back as the best
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")
    best = damage_best_note(started, "not JSON")
    started.git("reset", "-q", "--hard", "opt/fake~1")
    assert best not in started.git("rev-list", "--first-parent", "opt/fake").split()
    started.set_kernel(METRIC=120.0)
    assert f"opt/fake holds a damaged kgit record (on {best[:10]}" in started.refused("step", "-m", "worse")
