"""Two clones stepping one kernel at once, met through a remote: kgit pull joins their lines (the one
that kept kernels goes on), a fork (both kept) is said, pinned and settled by one kgit command, and no
record, attempt or kept kernel is lost, even after git gc on every side."""

import subprocess

from workspace import KERNEL, clone, git_run, remote_refs


def two_clones(remote, ws, tmp_path):
    """A (ws) and B, a clone of the remote, both at iteration 1 (kept at 120) of fake's loop."""
    ws.ok("start", "fake")
    ws.set_kernel(METRIC=120.0)
    ws.ok("step", "-m", "better")
    ws.ok("push")
    b = clone(remote, tmp_path / "b")
    b.ok("pull")
    b.git("checkout", "-q", "opt/fake")
    return ws, b


def step(w, metric, message):
    w.set_kernel(METRIC=metric)
    return w.ok("step", "-m", message, "--json").json()["status"]


def on_best(w):
    """A clean checkout of the branch's best kernel, best/fake on the best of the records on its line."""
    assert w.git("status", "--porcelain") == ""
    best = w.ok("best", "--json").json()
    assert w.git("rev-parse", "best/fake") == best["commit"]
    assert w.kernel_text("HEAD") == w.kernel_text("best/fake")


def gc_everywhere(remote, *clones):
    for w in clones:
        w.git("gc", "-q", "--prune=now")
    subprocess.run(["git", "gc", "-q", "--prune=now"], cwd=remote, check=True)


def kept_commits_exist(w):
    """Every record's commit is still in w (a kept kernel, an attempt, a log commit)."""
    for record in w.ok("log", "--json").json()["iterations"]:
        assert w.git("cat-file", "-t", record["commit"]) == "commit", record


def agree(remote, *clones):
    """Every clone and the remote agree on the branch, its best and the records."""
    there = remote_refs(remote)
    for w in clones:
        assert w.git("rev-parse", "opt/fake") == there["refs/heads/opt/fake"]
        assert w.git("rev-parse", "best/fake") == there["refs/tags/best/fake"]
        assert w.git("rev-parse", "refs/notes/kgit") == there["refs/notes/kgit"]


def test_two_reverted_steps_at_once_are_joined_by_pull_and_push_with_no_git_command(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    assert step(a, 90.0, "A: worse") == "REGRESSED"  # each adds a log commit: the branches diverge
    assert step(b, 80.0, "B: worse") == "REGRESSED"
    b.ok("push")
    assert a.kgit("push").returncode == 1  # origin has B's log commit, which A lacks
    out = a.ok("pull").stdout
    assert "opt/fake: joined with origin's at " in out and "origin's line goes on: this clone's kept no kernel" in out
    a.ok("push")
    assert "opt/fake: fast-forwarded" in b.ok("pull").stdout
    agree(remote, a, b)
    for w in (a, b):
        on_best(w)
    readme = (a.root / "experiments/README.md").read_text()
    assert "A: worse" in readme and "B: worse" in readme  # rendered again from the merged records
    gc_everywhere(remote, a, b)
    for w in (a, b):
        kept_commits_exist(w)
        assert w.ok("best", "--json").json()["value"] == 120.0


def test_the_line_that_kept_a_kernel_goes_on_whichever_clone_pulls(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    assert step(a, 90.0, "A: worse") == "REGRESSED"
    assert step(b, 150.0, "B: better") == "IMPROVED"
    a.ok("push")  # A's log commit reaches origin first
    out = b.ok("pull").stdout  # B kept a kernel, origin's line only logged: B's line goes on
    assert "this clone's line goes on: origin's kept no kernel" in out
    assert b.ok("best", "--json").json()["value"] == 150.0
    b.ok("push")
    a.ok("pull")
    agree(remote, a, b)
    assert a.ok("best", "--json").json()["value"] == 150.0
    assert "METRIC = 150.0" in a.kernel_text()  # A's checkout holds the best kernel now
    assert step(a, 160.0, "A: better still") == "IMPROVED"  # judged against 150, on from B's kernel
    a.ok("push")
    b.ok("pull")
    agree(remote, a, b)
    gc_everywhere(remote, a, b)
    kept_commits_exist(b)


def test_a_fork_is_said_pinned_and_settled_by_one_kgit_command(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    assert step(a, 130.0, "A: better") == "IMPROVED"
    assert step(b, 150.0, "B: much better") == "IMPROVED"
    b.ok("push")
    before = a.git("rev-parse", "opt/fake")
    run = a.kgit("pull")
    assert run.returncode == 1 and "the pull is incomplete" in run.stderr
    fork, = [line for line in run.stdout.splitlines() if "forked" in line]
    pinned = f"refs/kgit/forks/fake/origin-{b.git('rev-parse', 'opt/fake')[:10]}"
    assert f"origin's line is pinned at {pinned}" in fork and "theirs measured better" in fork
    assert "this clone's best 130 GBps, theirs 150 GBps on the same device" in fork  # as kgit prints figures
    assert f"'git checkout {pinned} -- {KERNEL}', then 'kgit step'" in fork
    assert a.git("rev-parse", "opt/fake") == before and a.ok("best", "--json").json()["value"] == 130.0

    out = a.ok("pull", "--take", "theirs").stdout
    assert "origin's line goes on, as asked" in out
    assert a.ok("best", "--json").json()["value"] == 150.0 and "METRIC = 150.0" in a.kernel_text()
    assert a.git("merge-base", "--is-ancestor", before, "opt/fake") == ""  # A's kept kernel stays in the history
    a.ok("push")
    b.ok("pull")
    agree(remote, a, b)
    gc_everywhere(remote, a, b)
    for w in (a, b):
        kept_commits_exist(w)
    assert b.git("cat-file", "-t", before) == "commit"  # A's kernel reached B and the remote with the join


def test_take_ours_keeps_this_clones_line_and_push_sends_it(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    assert step(a, 150.0, "A: much better") == "IMPROVED"
    assert step(b, 130.0, "B: better") == "IMPROVED"
    b.ok("push")
    assert a.kgit("pull").returncode == 1
    assert "origin's line taken in below it" in a.ok("pull", "--take", "ours").stdout
    a.ok("push")
    b.ok("pull")
    agree(remote, a, b)
    assert b.ok("best", "--json").json()["value"] == 150.0


def test_an_uncommitted_kernel_edit_in_the_way_stops_the_pull_and_is_kept(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    assert step(b, 150.0, "B: better") == "IMPROVED"
    b.ok("push")
    a.set_kernel(METRIC=333.0)  # an edit in progress
    before = a.git("rev-parse", "opt/fake")
    run = a.kgit("pull")
    assert run.returncode == 1
    assert "opt/fake: not updated, uncommitted edits in this checkout are in the way" in run.stdout
    assert a.git("rev-parse", "opt/fake") == before and "METRIC = 333.0" in a.kernel_text()
    a.git("stash", "-q")
    assert "fast-forwarded" in a.ok("pull").stdout


def test_commits_whose_records_have_not_arrived_are_named_so_and_push_never_sends_a_stale_tag(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    assert step(b, 150.0, "B: better") == "IMPROVED"
    b.ok("push")
    a.git("pull", "-q", "--no-rebase", "origin", "opt/fake")  # plain git: B's commit, not its record, nor the tag
    why = a.refused("push")
    assert "is iteration 2 of a kgit step whose record is not in this clone" in why and "'kgit pull'" in why
    assert "opt/fake: up to date" in a.ok("pull").stdout  # the records arrive; best/fake follows them
    assert a.git("rev-parse", "best/fake") == b.git("rev-parse", "best/fake")
    a.ok("push")

    best_there = remote_refs(remote)["refs/tags/best/fake"]
    a.git("tag", "-f", "best/fake", "opt/fake~2")  # moved back by hand: iteration 1, a worse kernel
    run = a.kgit("push")
    assert run.returncode == 1 and "best/fake: not pushed, it is not on the best kept iteration of opt/fake" in run.stdout
    assert remote_refs(remote)["refs/tags/best/fake"] == best_there  # the remote's best did not move back
    a.ok("doctor", "--fix")
    assert a.git("rev-parse", "best/fake") == best_there


def test_a_branch_pull_creates_tracks_the_remote(remote, ws, tmp_path):
    ws.ok("start", "fake")
    ws.ok("push")
    b = clone(remote, tmp_path / "b")
    b.ok("pull")
    assert b.git("config", "branch.opt/fake.remote") == "origin"
    assert b.git("config", "branch.opt/fake.merge") == "refs/heads/opt/fake"


def test_the_hook_refuses_a_forced_push_that_would_drop_a_kept_kernel(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    a.ok("hooks", "install")
    assert step(a, 130.0, "A: better") == "IMPROVED"
    assert step(b, 150.0, "B: much better") == "IMPROVED"
    b.ok("push")
    before = remote_refs(remote)
    run = git_run(a, "push", "-f", "origin", "opt/fake")  # A has not fetched B's commit
    assert run.returncode != 0 and "which this clone does not have" in run.stderr and "'kgit pull' first" in run.stderr
    a.git("fetch", "-q", "origin")
    run = git_run(a, "push", "-f", "origin", "opt/fake")
    assert run.returncode != 0 and "it would drop kernels the remote's opt/fake holds and this tip does not" in run.stderr
    assert a.kgit("pull").returncode == 1  # a fork; B's records arrive, and the refusal names its kept iteration
    run = git_run(a, "push", "-f", "origin", "opt/fake")
    assert run.returncode != 0 and "(iteration 2; a forced push)" in run.stderr
    assert remote_refs(remote) == before
    a.ok("pull", "--take", "ours")
    assert git_run(a, "push", "origin", "opt/fake").returncode == 0  # the join holds B's kernel: nothing dropped


def test_json_refusals_of_push_and_pull_carry_a_hint(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    assert step(a, 130.0, "A: better") == "IMPROVED"
    assert step(b, 150.0, "B: much better") == "IMPROVED"
    b.ok("push")
    refusal = a.kgit("push", "--json").json()  # origin has B's commit: the branch is held back
    assert refusal["error"].startswith("the push is incomplete") and "kgit push origin" in refusal["hint"]
    refusal = a.kgit("pull", "--json").json()  # the fork
    assert "forked" in refusal["error"] and "kgit doctor" in refusal["hint"]


def test_the_log_marks_the_kept_kernels_of_a_line_not_taken(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    assert step(a, 160.0, "A: best of all, not taken") == "IMPROVED"
    assert step(b, 150.0, "B: taken") == "IMPROVED"
    b.ok("push")
    a.ok("pull", "--take", "theirs")
    rows = {r["action"]: r for r in a.ok("log", "--json").json()["iterations"]}
    assert rows["A: best of all, not taken"]["left_behind"] and not rows["A: best of all, not taken"]["kept"]
    assert rows["B: taken"]["kept"] and not rows["B: taken"]["left_behind"]
    text = a.ok("log").stdout
    line, = [row for row in text.splitlines() if "A: best of all" in row]
    assert "(on a line not taken)" in line
    assert "Final: 150" in text  # the branch's best, not the line left behind
    assert a.ok("best", "--json").json()["value"] == 150.0


def test_two_iterations_numbered_alike_are_shown_by_their_commit(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    assert step(a, 90.0, "A: worse") == "REGRESSED"
    assert step(b, 150.0, "B: better") == "IMPROVED"
    b.ok("push")
    a.ok("pull")
    run = a.ok("show", "2", "--json")
    other = run.json()["others"][0]
    assert f"'kgit show {other['commit'][:10]}' shows it" in run.stderr
    shown = a.ok("show", other["commit"][:10], "--json").json()
    assert shown["action"] == other["action"] and shown["commit"] == other["commit"]
    assert "no record of fake is on a commit named 'main'" in a.refused("show", "main")


def test_a_branch_amended_after_its_push_is_joined_not_forked(remote, ws, tmp_path):
    """git copies the notes of an amended or rebased commit (notes.rewriteRef): the same runs on both
    lines are no fork; this clone's rewrite goes on, the remote's earlier commits below it."""
    a, b = two_clones(remote, ws, tmp_path)
    pushed = a.git("rev-parse", "HEAD")
    a.git("commit", "-q", "--amend", "-m", "fake: iter 1: better (reworded)")
    assert a.ok("status").stdout.count("no step recorded") == 0
    pulled = a.kgit("pull")
    assert pulled.returncode == 0 and "rewrite goes on" in pulled.stdout, (pulled.stdout, pulled.stderr)
    a.ok("push")
    b.ok("pull")
    agree(remote, a, b)
    for w in (a, b):
        assert w.doctor().json()["problems"] == []
        on_best(w)
        log = w.ok("log", "--json").json()["iterations"]
        assert [r["iteration"] for r in log] == [0, 1]
        assert log[1]["commit"] == w.git("rev-parse", "opt/fake^1")  # the amended copy, on the loop's line
        assert w.git("merge-base", "--is-ancestor", pushed, "opt/fake") == ""  # the old commit stays
    gc_everywhere(remote, a, b)
    kept_commits_exist(a)


def test_a_rewrite_meeting_a_kernel_kept_on_the_old_line_lets_that_line_go_on(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    a.git("commit", "-q", "--amend", "-m", "fake: iter 1: better (reworded)")
    assert step(b, 150.0, "B: faster") == "IMPROVED"  # on the old iteration 1
    b.ok("push")
    pulled = a.kgit("pull")
    assert pulled.returncode == 0 and "origin's line goes on" in pulled.stdout, (pulled.stdout, pulled.stderr)
    a.ok("push")
    b.ok("pull")
    agree(remote, a, b)
    for w in (a, b):
        assert w.ok("best", "--json").json()["value"] == 150.0
        assert w.doctor().json()["problems"] == []


def test_two_runs_numbered_alike_are_named_apart_in_log_and_readme_with_where_they_ran(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    assert step(a, 90.0, "A: worse") == "REGRESSED"
    assert step(b, 150.0, "B: better") == "IMPROVED"
    b.ok("push")
    a.ok("pull")
    twins = [r for r in a.ok("log", "--json").json()["iterations"] if r["iteration"] == 2]
    assert len(twins) == 2
    names = [f"2 ({r['environment']['host']}, {r['started'][:23].replace('T', ' ')})" for r in twins]
    assert names[0] != names[1]
    log = a.ok("log").stdout
    readme = (a.root / "experiments/README.md").read_text()
    for name in names:
        assert name in log and f"| {name} " in readme
    assert "\n1 " in log or " 1  " in log  # an iteration only one run has keeps its plain number
    host = twins[0]["environment"]["host"]
    assert f"on Fake GPU ({host}), commit" in a.ok("best").stdout


def test_a_hand_merge_that_took_the_other_lines_kernel_is_made_kgits_join_by_doctor(remote, ws, tmp_path):
    a, b = two_clones(remote, ws, tmp_path)
    a.ok("hooks", "install")
    assert step(a, 150.0, "A: faster") == "IMPROVED"
    assert step(b, 170.0, "B: faster still") == "IMPROVED"
    b.ok("push")
    merged = git_run(a, "pull", "--no-rebase", "origin", "opt/fake")  # both changed the kernel and the log
    assert merged.returncode != 0 and "CONFLICT" in merged.stdout
    a.git("checkout", "--theirs", "--", KERNEL, "experiments/README.md")  # B's measured kernel, by hand
    a.git("commit", "-qam", "merge B's line, B's kernel")
    pushed = git_run(a, "push", "origin", "opt/fake")  # git pull brought B's commits, not its records
    assert pushed.returncode != 0 and "is a git merge whose kernel has no kgit record here" in pushed.stderr
    a.ok("pull")  # the records; the branch is ahead of origin's
    pushed = git_run(a, "push", "origin", "opt/fake")
    assert pushed.returncode != 0 and "measured on another line" in pushed.stderr, pushed.stderr
    problems = a.doctor().json()["problems"]
    assert any("took the kernel of iteration 2 from its second parent" in p["problem"] for p in problems), problems
    a.ok("doctor", "--fix")
    assert a.doctor().json()["problems"] == []
    assert a.ok("best", "--json").json()["value"] == 170.0
    assert a.git("rev-parse", "opt/fake^1") == b.git("rev-parse", "opt/fake")  # B's line first, A's below
    assert git_run(a, "push", "origin", "opt/fake").returncode == 0
    a.ok("push")
    b.ok("pull")
    agree(remote, a, b)
    on_best(a)
    log = a.ok("log").stdout
    assert "A: faster" in log and "(on a line not taken)" in log
