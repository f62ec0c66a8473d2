"""kgit doctor: the problems it finds, read-only (their repair, kgit doctor --fix, is in test_repair.py)."""


def doctor(ws):
    return ws.doctor().json()["problems"]


def test_a_healthy_repository(started):
    assert doctor(started) == []
    assert "no problems found" in started.ok("doctor").stdout




def test_an_invalid_note_is_listed_with_how_to_read_it_and_nothing_changes(started):
    main = started.git("rev-parse", "main")
    started.git("notes", "--ref=refs/notes/kgit", "add", "-m", "typed by hand", main)
    before = started.snapshot()
    problems = doctor(started)
    assert len(problems) == 1
    assert problems[0]["problem"].startswith(f"the note on {main[:10]} is not a valid kgit record (")
    assert f"git notes --ref=refs/notes/kgit show {main}" in problems[0]["fix"]
    assert started.snapshot() == before


def test_a_tag_missing_or_off_the_best_is_found(started):
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "faster")
    best = started.git("rev-parse", "HEAD")
    started.git("tag", "-f", "best/fake", "HEAD~1")  # the baseline, on the branch but not the best
    assert [(p["problem"], p["fix"]) for p in doctor(started)] == [
        ("best/fake is not on the best kept iteration", f"move it to {best[:10]} (iteration 1)")]
    started.git("tag", "-d", "best/fake")
    assert [p["problem"] for p in doctor(started)] == ["best/fake is missing"]


def test_a_hand_commit_of_the_kernel_is_reported_with_what_a_person_can_do(started):
    started.set_kernel(METRIC=120.0)
    started.git("commit", "-qam", "hand edit")
    hand = started.git("rev-parse", "HEAD")
    before = started.snapshot()
    assert [(p["problem"], p["fix"]) for p in doctor(started)] == [(
        f"opt/fake has 1 commit(s) of skills/kernels/fake/fake.py that no step recorded, from {hand[:10]} "
        "(hand edit)",
        f"none automatic: on opt/fake, 'git reset --soft {hand[:10]}~1' puts the change back in the working tree, "
        "staged, for 'kgit step' to measure (or for you to discard)")]
    started.doctor("--fix")  # nothing automatic (exit 1): the commit stays for a person to settle
    assert started.snapshot() == before and len(doctor(started)) == 1


def test_a_killed_steps_candidate_is_an_interrupted_step_not_a_hand_commit(started):
    import signal

    started.set_kernel(METRIC=120.0)
    assert started.kgit("step", "-m", "x", env={"KGIT_TEST_CRASH_AT": "candidate-committed"}).returncode == \
        -signal.SIGKILL
    assert [(p["problem"], p["automatic"]) for p in doctor(started)] == \
        [("an interrupted step (kgit was killed in the middle of it)", True)]
    # --fix repairs it: the doctor says so, never "none of these is repaired automatically"
    told = started.kgit("doctor").stdout
    assert told.endswith("run 'kgit doctor --fix' to repair\n") and "none of these" not in told
    status = started.ok("status", "--json").json()
    assert status["pending"] and status["unrecorded"] == []
    assert "git reset --soft" not in started.ok("context", "--json").json()["next_step"]
    started.ok("doctor", "--fix")  # rolled back or finished: either way no hand commit is left
    assert doctor(started) == []


def test_deleted_records_are_named_as_such_not_as_hand_commits_to_reset(started):
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "faster")
    started.git("update-ref", "-d", "refs/notes/kgit")
    problem, = doctor(started)
    assert problem["problem"] == "opt/fake has no kgit record in this clone (refs/notes/kgit was deleted or never fetched)"
    assert "'kgit pull'" in problem["fix"] and "reset" not in problem["fix"]
