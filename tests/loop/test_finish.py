"""kgit finish: the best kernel into the branch the loop started from, as one commit, without kgit's own files."""

import subprocess

from workspace import KERNEL, TEST, Workspace

README = "experiments/README.md"


def changed_by(ws, commit: str) -> list[str]:
    return sorted(ws.git("show", "--format=", "--name-only", commit).split())


def test_the_best_goes_into_main_as_one_commit_with_what_it_changed_and_none_of_kgits_files(started):
    # what else the best changed: a test case committed on the loop's branch (the skill's rule 6), and
    # kgit.yaml's loop settings, which stay kgit's
    (started.root / TEST).write_text((started.root / TEST).read_text() + "# a shape the test now checks\n")
    started.git("commit", "-qm", "test: one more shape", TEST)
    (started.root / "kgit.yaml").write_text("fake:\n  max_iterations: 9\n")
    started.git("add", "kgit.yaml")
    started.git("commit", "-qm", "more iterations")
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "faster")
    started.set_kernel(METRIC=90.0)
    started.ok("step", "-m", "slower")  # reverted: the branch's tip is a log commit
    loop = started.snapshot()["refs"]
    started.git("checkout", "-q", "main")
    main = started.git("rev-parse", "main")
    run = started.ok("finish", "fake")
    tip = started.git("rev-parse", "main")
    assert run.stdout.startswith(f"main: {tip[:10]} brings fake's best (iteration 1, 120 GBps against the "
                                 f"baseline's 100 GBps): {KERNEL}, {TEST}")
    assert started.git("rev-parse", "main~1") == main  # one commit, on main as it was
    assert changed_by(started, "main") == sorted([KERNEL, TEST])  # not the log, not kgit.yaml
    assert started.git("diff", "main", "best/fake", "--", KERNEL, TEST) == ""
    message = started.git("log", "-1", "--format=%B", "main")
    assert message.startswith("fake: the best of opt/fake, iteration 1: faster\n\n100 -> 120 gbps on Fake GPU")
    assert "- iteration 1: faster (IMPROVED, +20.0%)" in message and "slower" not in message
    assert started.git("status", "--porcelain") == "" and "METRIC = 120.0" in started.kernel_text()
    assert not (started.root / README).exists() and not (started.root / "kgit.yaml").exists()
    # every ref but main as it was: the loop's branch, tag, attempts and records
    after = dict(line.split() for line in started.snapshot()["refs"].splitlines())
    assert {k: v for k, v in after.items() if k != "refs/heads/main"} == \
        {k: v for k, v in (line.split() for line in loop.splitlines()) if k != "refs/heads/main"}
    again = started.ok("finish", "fake", "--json").json()  # twice: nothing to do, said so
    assert again["commit"] is None and again["branch"] == "main" and started.git("rev-parse", "main") == tip


def test_a_later_best_finishes_over_an_earlier_finish(started):
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "faster")
    started.ok("finish", "fake")  # from the loop's branch: main is the one branch that holds its start
    assert "METRIC = 120.0" in started.git("show", f"main:{KERNEL}") and started.git("status", "--porcelain") == ""
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster still")
    done = started.ok("finish", "fake", "--json").json()  # main's kernel is the loop's own earlier best
    assert done["best"]["iteration"] == 2 and done["paths"] == [KERNEL]
    assert "METRIC = 150.0" in started.git("show", f"main:{KERNEL}")
    assert started.git("rev-parse", "main~2") == started.git("rev-parse", "opt/fake~3")  # two finishes on the start


def test_a_branch_that_changed_the_kernel_since_the_loop_started_is_refused(started):
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "faster")
    started.git("checkout", "-q", "main")
    started.set_kernel(SPREAD=0.7)  # a teammate's change of the kernel file on main
    started.git("commit", "-qam", "a change of the kernel on main")
    line = started.refused("finish", "fake")
    assert line.startswith(f"kgit: the branch changed {KERNEL} since fake's loop started from ")
    assert "a finish does not merge" in line and "git merge best/fake" in line
    assert started.refused_json("finish", "fake")["error"].startswith("the branch changed")
    started.git("reset", "-q", "--hard", "HEAD~1")
    (started.root / "NOTES.md").write_text("another file changed on main: no conflict\n")
    started.git("add", "NOTES.md")
    started.git("commit", "-qm", "notes")
    started.ok("finish", "fake")
    assert changed_by(started, "main") == [KERNEL] and (started.root / "NOTES.md").exists()


def test_refusals_change_nothing(started):
    assert "nothing to bring: fake's best is its baseline" in started.refused("finish", "fake")
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "faster")
    assert "--into opt/fake: a loop's branch" in started.refused("finish", "fake", "--into", "opt/fake")
    assert "no local branch 'nowhere'" in started.refused("finish", "fake", "--into", "nowhere")
    assert "no records for nope" in started.refused("finish", "nope")
    started.git("branch", "release", "main")  # two branches hold the loop's start: which one is not clear
    assert "--into BRANCH" in started.refused("finish", "fake")
    started.git("checkout", "-q", "main")
    started.set_kernel(METRIC=7.0)  # an edit on main that the finish would replace
    assert "uncommitted edits to" in started.refused("finish", "fake")
    started.git("checkout", "-q", "--", KERNEL)
    assert started.ok("finish", "fake", "--into", "release", "--json").json()["branch"] == "release"
    assert "METRIC = 120.0" in started.git("show", f"release:{KERNEL}")


def test_a_clone_whose_main_is_its_remotes_only_finishes_into_it_as_git_switch_would(started, tmp_path):
    """A teammate's clone of the loop's branch (git clone -b opt/fake) has main only as origin/main: the
    finish makes the local main that follows it, as 'git switch main' would, once nothing refused."""
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "faster")
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    started.git("push", "-q", str(bare), "main", "opt/fake", "best/fake", "refs/notes/kgit")
    subprocess.run(["git", "clone", "-q", "-b", "opt/fake", str(bare), str(tmp_path / "b")], check=True)
    b = Workspace(tmp_path / "b")
    b.git("config", "user.name", "b")
    b.git("config", "user.email", "b@example.com")
    b.git("fetch", "-q", "origin", "refs/notes/kgit:refs/notes/kgit")
    assert b.git("branch", "--list", "main") == ""
    assert "no local branch 'elsewhere'" in b.refused("finish", "fake", "--into", "elsewhere")
    assert b.git("branch", "--list", "main") == ""  # a refusal makes no branch
    done = b.ok("finish", "fake", "--json").json()
    assert done["branch"] == "main" and done["paths"] == [KERNEL]
    assert b.git("rev-parse", "main~1") == b.git("rev-parse", "origin/main")
    assert b.git("rev-parse", "--abbrev-ref", "main@{upstream}") == "origin/main"
    assert "METRIC = 120.0" in b.git("show", f"main:{KERNEL}")
