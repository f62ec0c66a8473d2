"""When two copies of one run meet (a pull, a rebase's copied notes), the copy already here wins every
field both have; a field only the other has is added. A merge that let the later copy win would let a
pulled note rewrite this clone's records."""

import json

from kgit.git import notes
from kgit.model.record import Record, Status
from workspace import a_session, clone

STARTED = "2026-11-30T10:00:00.000001+00:00"


def run(value, **fields):
    return Record("fake", 1, "better", Status.IMPROVED, started=STARTED, gpu="Fake GPU", value=value, **fields)


def test_the_first_groups_copy_wins_each_field_both_have_and_the_others_fields_are_added():
    ours = run(120.0, duration_s=4.0, spread_pct=0.5)
    theirs = run(1e9, duration_s=999.0, profile={"tool": "ncu"}, spread_pct=None)
    merged = notes.union([ours], [theirs])
    assert len(merged) == 1
    assert merged[0].value == 120.0 and merged[0].duration_s == 4.0 and merged[0].spread_pct == 0.5
    assert merged[0].profile == {"tool": "ncu"}
    # the other way round, theirs is the earlier group: it wins
    assert notes.union([theirs], [ours])[0].value == 1e9 and notes.union([theirs], [ours])[0].duration_s == 999.0
    assert notes.union([theirs], [ours])[0].spread_pct == 0.5  # None is no value: ours fills it


def test_two_runs_are_both_kept_in_first_seen_order():
    one, other = run(120.0), run(130.0).replace(started="2026-11-30T11:00:00.000001+00:00")
    assert [r.value for r in notes.union([one], [other, one])] == [120.0, 130.0]
    assert [r.value for r in notes.union([other], [one])] == [130.0, 120.0]


def note_of(ws, rev):
    return json.loads(ws.git("notes", "--ref=refs/notes/kgit", "show", rev))


def test_a_pulled_copy_of_a_run_does_not_overwrite_this_clones_fields(remote, ws, tmp_path):
    a_session(ws)
    ws.ok("push")
    b = clone(remote, tmp_path / "b")
    b.ok("pull")
    # B edits its copy of iteration 1's record: its duration changes, a profile is added
    commit = ws.git("rev-parse", "best/fake")
    mine = note_of(ws, commit)
    edited = {**mine, "duration_s": mine["duration_s"] + 1000.0, "profile": {"tool": "ncu", "note": "from B"}}
    b.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", json.dumps(edited), commit)
    b.ok("push")
    # A's notes move on too: the pull merges two histories, not a fast-forward
    ws.set_kernel(METRIC=130.0)
    ws.ok("step", "-m", "better again")
    ws.ok("pull")
    merged = note_of(ws, commit)
    assert merged["duration_s"] == mine["duration_s"]  # A's own value, not B's later one
    assert merged["profile"] == {"tool": "ncu", "note": "from B"}  # what only B had is added
    assert {k: v for k, v in merged.items() if k != "profile"} == mine
    ws.check_invariants()
