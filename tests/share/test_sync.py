"""Records that travel: kgit push / pull between two clones and a bare
remote, notes merged with no record lost, rebases and amends that keep the notes."""

import json
import subprocess
from pathlib import Path

import pytest

from workspace import KERNEL, LANDSCAPE, a_session, clone, git_run, remote_refs

REPO = Path(__file__).resolve().parents[2]


def test_a_plain_push_through_the_hook_prints_the_summary_and_sends_the_records(remote, ws, tmp_path):
    a_session(ws)
    ws.ok("hooks", "install")
    run = git_run(ws, "push", "origin", "opt/fake", "best/fake")
    assert run.returncode == 0, run.stderr
    row = next(line for line in run.stderr.splitlines() if line.startswith("fake "))
    assert row.split()[:8] == ["fake", "Fake", "GPU", "100", "GBps", "120", "GBps", "(iter"]
    assert row.split()[8:11] == ["1,", "kept", "at"] and row.split()[11].endswith("%)"), row
    assert row.split()[12:] == ["12%", "2", "1", "none", "set"], row
    assert "measured pair by pair" in run.stderr, run.stderr  # the legend under the table
    assert "kgit: the records were sent with this push" in run.stderr, run.stderr
    refs = remote_refs(remote)  # git sends no notes unless asked: the hook sent them, and the attempt
    assert refs["refs/notes/kgit"] == ws.git("rev-parse", "refs/notes/kgit")
    assert refs["refs/kgit/attempts/fake/2"] == ws.git("rev-parse", "refs/kgit/attempts/fake/2")
    assert refs["refs/heads/opt/fake"] == ws.git("rev-parse", "opt/fake")
    b = clone(remote, tmp_path / "b")  # a teammate's one pull finds the run whole
    assert "records: 3 new from origin" in b.ok("pull").stdout
    assert b.ok("best", "--json").json()["value"] == 120.0

    out = ws.ok("push").stdout  # kgit push has nothing left to send but says what the remote has
    assert "origin has: opt/fake, best/fake, refs/notes/kgit" in out and "fake " in out

    ws.set_kernel(METRIC=130.0)
    ws.ok("step", "-m", "better again")
    run = git_run(ws, "push", "origin", "opt/fake")
    assert run.returncode == 0 and "carries" in run.stderr and "records were sent" in run.stderr
    assert remote_refs(remote)["refs/notes/kgit"] == ws.git("rev-parse", "refs/notes/kgit")
    run = git_run(ws, "push", "origin", "opt/fake")  # the records are there now: nothing more to send
    assert run.returncode == 0 and "records were sent" not in run.stderr
    ws.git("commit", "--allow-empty", "-qm", "unrelated")  # on opt/fake: give it a new, unrecorded tip
    ws.git("reset", "-q", "--hard", "HEAD~1")
    run = git_run(ws, "push", "origin", "main")
    assert run.returncode == 0 and "kgit" not in run.stderr  # no kgit ref: the hook says nothing


def test_a_plain_push_whose_records_cannot_go_says_so_and_goes_on(remote, ws):
    a_session(ws)
    ws.ok("hooks", "install")
    ws.git("config", "remote.origin.pushurl", str(remote))
    ws.git("config", "remote.origin.url", str(remote) + "-gone")  # fetch fails, push works
    run = git_run(ws, "push", "origin", "opt/fake")
    assert run.returncode == 0, run.stderr
    assert "the records were not sent" in run.stderr and "'kgit push origin' sends them" in run.stderr
    assert "refs/notes/kgit" not in remote_refs(remote) and "refs/heads/opt/fake" in remote_refs(remote)


def test_pull_from_a_remote_that_got_a_plain_git_push_says_the_records_are_not_there(remote, ws, tmp_path):
    a_session(ws)
    ws.git("push", "-q", "origin", "opt/fake")  # no hook, no kgit push: the branch goes, the records stay
    b = clone(remote, tmp_path / "b")
    run = b.kgit("pull")  # exit 1: a branch whose records are not there is not taken
    assert run.returncode == 1
    assert "records: none on origin" in run.stdout and "kgit push origin" in run.stdout
    assert "refused: origin's opt/fake" in run.stdout and "whose record is not in this clone" in run.stdout
    ws.ok("push")
    out = b.ok("pull").stdout
    assert "records: 3 new from origin" in out and "opt/fake: new to" in out


# --- two clones -------------------------------------------------------------------------------------


def test_two_clones_merge_their_records_with_none_lost(remote, ws, tmp_path):
    a = ws
    (a.root / "kgit.yaml").write_text(f"other:\n  kernel_path: {KERNEL}\n  test_path: skills/kernels/fake/test_fake.py\n")
    a.git("add", "kgit.yaml")
    a.git("commit", "-qm", "a second kernel")
    a.git("push", "-q", "origin", "main")
    a.ok("start", "fake")
    a.set_kernel(METRIC=120.0)
    a.ok("step", "-m", "A: better")
    a.ok("push")

    b = clone(remote, tmp_path / "b")
    assert "opt/fake: new" in b.ok("pull").stdout
    assert b.git("rev-parse", "best/fake") == a.git("rev-parse", "best/fake")
    b.git("checkout", "-q", "opt/fake")
    b.set_kernel(METRIC=140.0)
    b.ok("step", "-m", "B: better still")  # iteration 2 in B
    b.git("checkout", "-q", "main")
    b.ok("start", "other")  # a kernel only B works on
    b.ok("push")

    a.set_kernel(METRIC=80.0)
    a.ok("step", "-m", "A: worse")  # iteration 2 in A too: the branches have diverged
    run = a.kgit("push")  # the records and attempts go, the branch does not: exit 1
    out = run.stdout
    assert run.returncode == 1 and "the push is incomplete" in run.stderr
    assert "opt/fake: not pushed" in out and "kgit pull origin" in out
    problems = a.doctor().json()["problems"]
    assert [p["problem"] for p in problems] == [
        "opt/fake has diverged from origin's (both clones continued the loop, or this one was amended or rebased)"]
    assert "'kgit pull origin' joins the two lines" in problems[0]["fix"] and "reset" not in problems[0]["fix"]
    assert "records: 2 new from origin merged first" in out
    b.ok("pull")

    for clone_ in (a, b):
        fake = [(r["iteration"], r["action"]) for r in clone_.ok("log", "fake", "--json").json()["iterations"]]
        assert fake == [(0, "baseline"), (1, "A: better"), (2, "A: worse"), (2, "B: better still")] \
            or fake == [(0, "baseline"), (1, "A: better"), (2, "B: better still"), (2, "A: worse")]
        assert [r["iteration"] for r in clone_.ok("log", "other", "--json").json()["iterations"]] == [0]
    assert a.git("rev-parse", "refs/notes/kgit") == b.git("rev-parse", "refs/notes/kgit")
    for clone_ in (a, b):  # show names the iteration's other record rather than hide it
        run = clone_.ok("show", "2", "--kernel", "fake", "--json")
        shown = run.json()
        assert {shown["action"], *(o["action"] for o in shown["others"])} == {"A: worse", "B: better still"}
        assert len(shown["others"]) == 1 and "iteration 2 has another record: " in run.stderr
    # A's reverted attempt travelled, and reached B
    assert a.git("rev-parse", "refs/kgit/attempts/fake/2") in remote_refs(remote).values()
    assert a.git("rev-parse", "refs/kgit/attempts/fake/2") in b.git("for-each-ref", "refs/kgit/remotes/origin/attempts/")


def test_two_records_on_one_commit_are_both_kept(remote, ws, tmp_path):
    ws.ok("start", "fake")
    ws.ok("push")
    b = clone(remote, tmp_path / "b")
    b.ok("pull")
    base = ws.git("rev-parse", "best/fake")

    def add_run(w, gpu, started, value):  # a second measurement of the baseline commit, on another GPU
        records = [json.loads(text) for text in [w.git("notes", "--ref=refs/notes/kgit", "show", base)]]
        extra = {**records[0], "gpu": gpu, "started": started, "value": value}
        body = "".join(json.dumps(r, indent=2) + "\n" for r in records + [extra])
        w.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", body, base)

    add_run(ws, "GPU A", "2030-01-01T00:00:00+00:00", 200.0)
    add_run(b, "GPU B", "2030-01-02T00:00:00+00:00", 300.0)
    ws.ok("push")
    b.ok("push")  # B's notes and A's annotate the same commit differently: a union, not a conflict
    ws.ok("pull")
    for w in (ws, b):
        gpus = sorted(r["gpu"] for r in w.ok("log", "fake", "--json").json()["iterations"])
        assert gpus == ["Fake GPU", "GPU A", "GPU B"]
        note = w.git("notes", "--ref=refs/notes/kgit", "show", base)
        assert note.count('"started"') == 3
    ws.git("checkout", "-q", "main")
    ws.ok("report")
    readme = (ws.root / "experiments/README.md").read_text()
    for gpu in ("Fake GPU", "GPU A", "GPU B"):
        assert f"## Optimization: fake on {gpu}" in readme
    assert readme.count("xychart-beta") == 3


def test_pull_fast_forwards_and_refuses_unknown_remotes(remote, ws, tmp_path):
    a_session(ws)
    ws.ok("push")
    b = clone(remote, tmp_path / "b")
    b.ok("pull")
    b.git("checkout", "-q", "opt/fake")
    ws.set_kernel(METRIC=150.0)
    ws.ok("step", "-m", "much better")
    ws.ok("push")
    assert "opt/fake: fast-forwarded" in b.ok("pull").stdout
    assert b.git("rev-parse", "HEAD") == ws.git("rev-parse", "HEAD")
    assert "METRIC = 150.0" in b.kernel_text()
    assert b.git("rev-parse", "best/fake") == ws.git("rev-parse", "best/fake")
    b.check_invariants()
    assert "no remote named 'nowhere'" in b.refused("pull", "nowhere")


def test_pull_leaves_a_branch_checked_out_in_another_worktree_to_that_worktree(remote, ws, tmp_path):
    # moved under it, the linked worktree would show the pulled iteration undone, staged for its next commit
    a_session(ws)
    ws.ok("push")
    b = clone(remote, tmp_path / "b")
    b.ok("pull")
    linked = tmp_path / "b-opt"
    b.git("worktree", "add", "-q", str(linked), "opt/fake")
    before = b.git("rev-parse", "opt/fake")
    ws.set_kernel(METRIC=150.0)
    ws.ok("step", "-m", "much better")
    ws.ok("push")
    run = b.kgit("pull")  # exit 1: a branch was not updated
    assert run.returncode == 1 and "the pull is incomplete" in run.stderr
    assert f"opt/fake: not updated, it is checked out in {linked}: run 'kgit pull origin' there" in run.stdout
    assert b.git("rev-parse", "opt/fake") == before
    assert git_run(b, "-C", str(linked), "status", "--porcelain").stdout == ""
    there = type(b)(linked)
    assert "opt/fake: fast-forwarded" in there.ok("pull").stdout  # the advice works
    assert "METRIC = 150.0" in there.kernel_text() and there.git("status", "--porcelain") == ""


# --- rewrites -----------------------------------------------------------------------------------------


def test_rebase_and_amend_keep_the_notes(ws):
    a_session(ws)
    ws.git("checkout", "-q", "main")
    (ws.root / "NOTES.txt").write_text("a change on main\n")
    ws.git("add", "NOTES.txt")
    ws.git("commit", "-qm", "main moves on")
    ws.git("checkout", "-q", "opt/fake")
    ws.git("rebase", "-q", "main")
    log = ws.ok("log", "--json").json()["iterations"]
    on_branch = ws.git("rev-list", "--first-parent", "opt/fake").split()
    assert [r["iteration"] for r in log] == [0, 1, 2]
    assert log[0]["commit"] in on_branch and log[1]["commit"] in on_branch  # the records moved with them
    assert log[2]["commit"] == ws.git("rev-parse", "refs/kgit/attempts/fake/2")

    ws.git("reset", "-q", "--hard", "HEAD~1")  # drop the revert's log commit: the tip is iteration 1
    ws.git("commit", "-q", "--amend", "-m", "fake: iter 1: better (reworded)")
    record = json.loads(ws.git("notes", "--ref=refs/notes/kgit", "show", "HEAD"))
    assert record["iteration"] == 1 and record["action"] == "better"


def b_moves_ahead(remote, a, tmp_path):
    """A starts fake and pushes; B clones, pulls, keeps a step to 200 and pushes it: B, a step ahead."""
    a.ok("start", "fake")
    a.ok("push")
    b = clone(remote, tmp_path / "b")
    b.ok("pull")
    b.git("checkout", "-q", "opt/fake")
    b.set_kernel(METRIC=200.0)
    b.ok("step", "-m", "B: much better")
    b.ok("push")
    return b


def test_a_clone_is_not_judged_by_the_best_of_a_branch_it_did_not_take(remote, ws, tmp_path):
    a = ws
    b_moves_ahead(remote, a, tmp_path)

    a.set_kernel(METRIC=120.0)
    a.ok("step", "-m", "A: better")
    run = a.kgit("pull")  # a fork: both kept kernels; A keeps its own line, fetches B's records, exits 1
    assert run.returncode == 1, run.stderr
    fork, = [line for line in run.stdout.splitlines() if line.startswith("opt/fake: not updated, forked")]
    assert "--take theirs" in fork and "theirs measured better" in fork and "refs/kgit/forks/fake/origin-" in fork
    a.set_kernel(METRIC=150.0)
    record = a.ok("step", "-m", "A: better still", "--json").json()
    assert record["status"] == "IMPROVED" and record["best_before"] == 120.0
    assert a.ok("best", "--json").json()["value"] == 150.0
    assert len(a.ok("log", "--json").json()["iterations"]) == 4  # B's record is still there, in the log


def test_a_clone_cannot_start_a_second_run_of_a_kernel_its_remote_already_has(remote, ws, tmp_path):
    ws.ok("start", "fake")
    ws.ok("push")
    b = clone(remote, tmp_path / "b")  # a plain git clone: origin/opt/fake is here, the records are not
    assert "no kgit records in this clone yet, but origin has opt/fake" in b.refused("log")
    why = b.refused("start", "fake")  # its baseline could never be pushed beside A's: refused, nothing run
    assert "origin already has opt/fake" in why and "'kgit pull origin'" in why and "--delete opt/fake" in why
    b.ok("pull")
    b.git("checkout", "-q", "opt/fake")
    b.set_kernel(METRIC=130.0)
    assert b.ok("step", "-m", "B: better", "--json").json()["status"] == "IMPROVED"


def test_push_sends_no_tag_off_its_branch_and_no_record_of_a_commit_that_stays_here(remote, ws, tmp_path):
    a = ws
    b = b_moves_ahead(remote, a, tmp_path)
    theirs_tag = remote_refs(remote)["refs/tags/best/fake"]

    a.set_kernel(METRIC=120.0)
    a.ok("step", "-m", "A: better")  # kept on A's opt/fake, which origin's has left behind
    mine = a.git("rev-parse", "opt/fake")
    run = a.kgit("push")  # the rest goes; a branch held back makes the push fail, as git's own does
    out = run.stdout
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip() == "kgit: the push is incomplete: 1 ref not sent (the lines above say why)"
    assert "opt/fake: not pushed" in out
    assert "records: 1 not pushed, on commits origin will not have" in out
    remote_notes = subprocess.run(["git", "notes", "--ref=refs/notes/kgit", "list"], cwd=remote, text=True,
                                  capture_output=True, check=True).stdout
    assert mine not in remote_notes  # a record of a commit origin lacks would show there as a phantom run
    assert b.git("rev-parse", "opt/fake") in remote_notes
    assert remote_refs(remote)["refs/tags/best/fake"] == theirs_tag

    a.git("reset", "-q", "--hard", "origin/opt/fake")  # A keeps B's side, as 'kgit pull' advised
    run = a.kgit("push")
    out = run.stdout
    assert run.returncode == 1 and "the push is incomplete: 1 ref not sent" in run.stderr
    assert "best/fake: not pushed, it points off opt/fake: 'kgit doctor --fix' moves it" in out
    assert remote_refs(remote)["refs/tags/best/fake"] == theirs_tag  # B's best is not replaced by A's
    assert "records: 1 not pushed" in out  # A's iteration stays in A's notes, reported by kgit doctor
    assert mine in a.git("notes", "--ref=refs/notes/kgit", "list")
    b.ok("pull")
    assert [r["action"] for r in b.ok("log", "--json").json()["iterations"]] == ["baseline", "B: much better"]
    a.ok("doctor", "--fix")
    assert "best/fake" not in a.ok("push").stdout.split("has:")[0]  # the tag is on the branch again


def test_records_committed_as_a_bundle_are_imported_by_pull(ws, tmp_path):
    a_session(ws)
    bundle = tmp_path / "h200 run.bundle"
    ws.git("bundle", "create", "-q", str(bundle), "opt/fake", "best/fake", "refs/notes/kgit", "refs/kgit/attempts/fake/2")
    ws.git("checkout", "-q", "main")
    elsewhere = clone(ws.root, tmp_path / "clone")  # a clone of main has the code, not the records
    assert "no kgit records in this clone yet, but origin has opt/fake: 'kgit pull origin'" in elsewhere.refused("log")
    run = elsewhere.ok("pull", str(bundle))
    assert "records: 3 new from bundle-h200-run" in run.stdout and "opt/fake: new to" in run.stdout
    log = elsewhere.ok("log", "fake", "--json").json()["iterations"]
    assert [r["status"] for r in log] == ["BASELINE", "IMPROVED", "REGRESSED"]
    assert elsewhere.ok("show", "2").stdout  # the reverted attempt's commit came with it
    assert elsewhere.ok("best", "--json").json()["iteration"] == 1
    elsewhere.git("gc", "-q", "--prune=now")  # its refs keep what it brought
    assert "METRIC = 90.0" in elsewhere.ok("show", "2", "--json").json()["diff"]
    not_a_bundle = tmp_path / "notes.txt"
    not_a_bundle.write_text("hello\n")
    assert "neither a remote of this repository nor a git bundle" in elsewhere.refused("pull", str(not_a_bundle))


def another_repository(tmp_path):
    """A repository of its own (no history shared with ws) holding the same fake kernel."""
    import shutil

    from workspace import FAKE, Workspace

    root = tmp_path / "elsewhere"
    (root / "skills/kernels/fake").mkdir(parents=True)
    for name in ("fake.py", "test_fake.py"):
        shutil.copy(FAKE / name, root / "skills/kernels/fake" / name)
    return Workspace(root).init("another repository")


def test_a_bundle_of_another_repositorys_run_merges_its_records_and_leaves_the_branch(ws, tmp_path):
    """The README's first command runs softmax here (a CPU run on opt/softmax); the repository's bundle of
    an H200 run of softmax was made in another repository: no history to join the two branches at."""
    elsewhere = another_repository(tmp_path)
    elsewhere.set_kernel(MODE="h200")
    elsewhere.git("commit", "-qam", "on an H200")
    a_session(elsewhere)
    bundle = tmp_path / "h200.bundle"
    elsewhere.git("bundle", "create", "-q", str(bundle), "opt/fake", "best/fake", "refs/notes/kgit",
                  "refs/kgit/attempts/fake/2")
    ws.ok("start", "fake")  # the run here
    before = ws.git("rev-parse", "opt/fake")
    run = ws.kgit("pull", str(bundle))
    assert run.returncode == 1 and "Traceback" not in run.stderr and "merge-base" not in run.stderr
    assert "opt/fake: not updated, bundle-h200's shares no history with this clone's" in run.stdout
    assert ws.git("rev-parse", "opt/fake") == before
    runs = ws.ok("log", "fake", "--json").json()["runs"]  # both runs' records, each apart
    assert [(r["gpu"], r["iterations"]) for r in runs] == [("Fake GPU", [0]), ("NVIDIA H200", [0, 1, 2])]
    assert ws.ok("best", "--json").json()["gpu"] == "Fake GPU"  # the branch here is judged by what it holds
    text = ws.ok("log").stdout  # each run's own final line: the other repository's best is its run's
    assert "Final: 100 GBps (10% of peak; iteration 0's own runs, " in text and "0 iterations, in progress." in text
    assert "Final: 120 GBps" in text and "2 iterations, in progress." in text


def test_push_to_a_remote_that_is_a_bundle_is_refused_with_a_command_that_works(ws, tmp_path):
    a_session(ws)
    bundle = tmp_path / "run.bundle"
    ws.git("bundle", "create", "-q", str(bundle), "opt/fake", "best/fake", "refs/notes/kgit", "refs/kgit/attempts/fake/2")
    from_bundle = clone(bundle, tmp_path / "from-bundle")  # git clone FILE.bundle: origin is the bundle
    from_bundle.ok("pull", "origin")
    message = from_bundle.refused("push", "origin")
    assert message.startswith(f"kgit: origin is a git bundle ({bundle}), which git cannot push to")
    command = message.split("'")[1].replace("FILE", str(tmp_path / "again.bundle")).split()
    from_bundle.git(*command[1:])  # the advised bundle holds every kgit ref
    assert from_bundle.git("bundle", "list-heads", str(tmp_path / "again.bundle")).count("refs/") == 3


def test_tune_tries_first_the_best_that_another_clone_found(remote, ws, tmp_path):
    pytest.importorskip("scipy")
    a = ws
    (a.root / KERNEL).write_text(LANDSCAPE)
    a.git("commit", "-qam", "a tunable kernel")
    a.git("push", "-q", "origin", "main")
    a.ok("start", "fake")
    a.ok("push")
    b = clone(remote, tmp_path / "b")
    b.ok("pull")
    b.git("checkout", "-q", "opt/fake")
    (b.root / KERNEL).write_text(LANDSCAPE.replace('"BLOCK": 256, "WARPS": 2', '"BLOCK": 2048, "WARPS": 8'))
    b.ok("step", "-m", "B: the bottom of the bowl")
    b.ok("push")

    (a.root / KERNEL).write_text(LANDSCAPE.replace('"BLOCK": 256, "WARPS": 2', '"BLOCK": 512, "WARPS": 2'))
    a.ok("step", "-m", "A: a little better")
    assert a.kgit("pull").returncode == 1  # a fork: A keeps its own line, and fetches B's records
    tuned = a.ok("tune", "--max-iterations", "2", "--json").json()  # iteration 1 is A's step
    assert [r["action"] for r in tuned["iterations"]] == [
        "BLOCK 512->2048, WARPS 2->8 (2 keys at once: another run's best on this GPU)"]
    assert tuned["iterations"][0]["status"] == "IMPROVED"  # measured again here, and kept here


def test_a_push_stopped_midway_leaves_no_git_process_behind(remote, ws, tmp_path):
    import signal
    import sys
    import time

    from workspace import alive

    a_session(ws)
    started = tmp_path / "hook.pid"
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho $$ > {started}\nexec sleep 60\n")  # a slow remote: the push hangs here
    hook.chmod(0o755)
    push = subprocess.Popen([sys.executable, "-m", "kgit", "push"], cwd=ws.root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (started.exists() and started.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.1)
    hook_pid = int(started.read_text())
    push.send_signal(signal.SIGTERM)
    _, err = push.communicate(timeout=30)
    assert push.returncode == 130 and b"interrupted" in err and b"Traceback" not in err
    deadline = time.monotonic() + 10
    while alive(hook_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(hook_pid), "the remote's hook, a child of kgit's git push, outlived kgit"
    assert "refs/heads/opt/fake" not in remote_refs(remote)


def test_a_pulled_run_of_another_repository_does_not_count_toward_this_loops_iterations(ws, tmp_path):
    elsewhere = another_repository(tmp_path)
    a_session(elsewhere)  # iterations 1 (kept) and 2 (reverted) there
    bundle = tmp_path / "there.bundle"
    elsewhere.git("bundle", "create", "-q", str(bundle), "opt/fake", "refs/notes/kgit", "refs/kgit/attempts/fake/2")
    ws.ok("start", "fake", "--max-iterations", "2")
    ws.kgit("pull", str(bundle))
    assert ws.ok("status", "--json").json()["iteration"] == 0  # their 2 steps are not this loop's
    ws.set_kernel(METRIC=130.0)
    step = ws.ok("step", "-m", "one", "--json").json()
    assert step["status"] == "IMPROVED" and step["stop_reason"] is None
    assert ws.ok("status", "--json").json()["iteration"] == 1
    ws.set_kernel(METRIC=140.0)
    assert ws.ok("step", "-m", "two", "--json").json()["stop_reason"] == "MAX_ITERATIONS"  # two of its own


def test_a_push_that_meets_another_push_at_the_remote_says_to_run_it_again(remote, ws):
    """Two clones pushing at once: git on the remote refuses the ref the other push holds locked
    ('failed to update ref'); nothing is wrong with this push, and the next one goes through."""
    a_session(ws)
    lock = Path(remote) / "refs/heads/opt/fake.lock"  # what a push in flight holds on the remote
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    run = ws.kgit("push")
    assert run.returncode == 1
    assert "refs/heads/opt/fake: rejected by origin" in run.stdout, run.stdout
    assert ("another push was updating origin at the same moment: run 'kgit push origin' again (it says if "
            "'kgit pull origin' must come first)") in run.stdout
    lock.unlink()
    again = ws.ok("push").stdout
    assert "another push" not in again and "opt/fake" in again.split("origin has:")[1]
