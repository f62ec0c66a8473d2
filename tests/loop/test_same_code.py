"""kgit step measures only new kernel code: a change of comments, whitespace or docstrings, or the code of
an earlier iteration, is refused before anything is touched, and uses no iteration."""

import subprocess

import pytest

from workspace import KERNEL

NO_OPS = {
    "a comment": lambda text: text + "# why METRIC is what it is\n",
    "whitespace": lambda text: text.replace("METRIC = 100.0", "METRIC =  100.0").replace("\n", "\n\n", 1),
    "a docstring": lambda text: '"""A stand-in kernel."""\n' + text,
}


def _edit(ws, change) -> None:
    path = ws.root / KERNEL
    path.write_text(change(path.read_text()))


def _iterations(ws) -> int:
    return ws.ok("status", "--json").json()["iteration"]


@pytest.mark.parametrize("edit", NO_OPS)
def test_a_change_of_comments_whitespace_or_docstrings_is_refused_and_touches_nothing(started, edit):
    _edit(started, NO_OPS[edit])
    notes = started.git("notes", "--ref=refs/notes/kgit", "list")
    message = started.refused("step", "-m", "no-op", "--again")  # --again repeats an iteration, never HEAD's code
    assert message.startswith(f"kgit: the change touches only comments, whitespace or docstrings of {KERNEL}, "
                              "whose code stays as HEAD has it; nothing was run, no iteration used")
    # refused() checked that refs, HEAD's branch and the working tree are as they were
    assert started.git("notes", "--ref=refs/notes/kgit", "list") == notes and _iterations(started) == 0
    assert started.git("for-each-ref", "refs/kgit/attempts/") == ""


def test_either_way_the_no_op_refusal_advises_works(started):
    _edit(started, NO_OPS["a comment"])
    started.git("add", KERNEL)  # staged or not, the advice drops it
    message = started.refused("step", "-m", "a comment")
    restore = message.split("drop it with ")[1].split(" (")[0]
    assert restore == f"git restore --staged --worktree -- {KERNEL}"
    subprocess.run(restore, shell=True, cwd=started.root, check=True)
    assert started.git("status", "--porcelain") == ""  # dropped, and the loop is as it was
    assert "no change to" in started.refused("step", "-m", "x")
    # the other way: keep the comment and step it with the next change to the code
    _edit(started, NO_OPS["a comment"])
    started.set_kernel(METRIC=120.0)
    record = started.ok("step", "-m", "faster, and why", "--json").json()
    assert record["status"] == "IMPROVED" and record["iteration"] == 1
    assert "# why METRIC is what it is" in started.kernel_text("HEAD")
    started.check_invariants()


def test_a_real_change_after_a_no_op_refusal_steps_as_usual(started):
    _edit(started, NO_OPS["a docstring"])
    started.refused("step", "-m", "a docstring")
    started.set_kernel(METRIC=90.0)
    record = started.ok("step", "-m", "slower", "--json").json()
    assert record["status"] == "REGRESSED" and record["iteration"] == 1 and "repeats" not in record
    started.check_invariants()


def test_a_reverted_attempt_submitted_again_is_refused_with_its_verdict(started):
    started.set_kernel(METRIC=100.5, SPREAD=0.0)  # within the noise: reverted
    tried = started.ok("step", "-m", "tiny", "--json").json()
    assert tried["status"] == "WITHIN_NOISE"
    pairs = tried["measurement"]["pairs"]
    low, high = tried["measurement"]["interval_pct"]
    started.set_kernel(METRIC=100.5, SPREAD=0.0)
    _edit(started, NO_OPS["a comment"])  # the same code, written otherwise
    message = started.refused("step", "-m", "tiny again")
    assert message == (
        f"kgit: {KERNEL} holds the same kernel code as iteration 1 (within noise, reverted: +0.5% [{low:+.1f}, "
        f"{high:+.1f}] over {pairs} pair{'s' if pairs != 1 else ''}); nothing was run, no iteration used: make "
        "another change, or measure this one again with 'kgit step --again' (the test or the machine may have "
        "changed since; 'kgit show 1' shows that one)")
    assert _iterations(started) == 1


def test_a_kept_iteration_submitted_again_is_refused_with_its_verdict(started):
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "faster")
    started.set_kernel(METRIC=130.0)
    started.ok("step", "-m", "faster still")
    started.set_kernel(METRIC=120.0)  # back to iteration 1's kernel
    assert "the same kernel code as iteration 1 (improved: +20.0% [" in started.refused("step", "-m", "back")
    started.set_kernel(METRIC=100.0)  # back to the baseline
    assert "the same kernel code as iteration 0 (baseline);" in started.refused("step", "-m", "back")
    started.set_kernel(METRIC=90.0)
    assert started.ok("step", "-m", "new", "--json").json()["iteration"] == 3


def test_a_failed_attempt_submitted_again_is_refused_with_its_failure(started):
    started.set_kernel(CORRECT=False)
    started.ok("step", "-m", "wrong")
    started.set_kernel(CORRECT=False)
    refusal = started.refused_json("step", "-m", "wrong again")
    assert refusal["error"].startswith(f"{KERNEL} holds the same kernel code as iteration 1 (failed, reverted "
                                       "(correctness")
    assert refusal["hint"].startswith("make another change, or measure this one again with 'kgit step --again'")
    assert refusal["error"].endswith(": " + refusal["hint"])  # the one line a person reads, as every refusal


def test_again_measures_a_repeated_kernel_and_its_record_names_the_iteration_it_repeats(started):
    started.set_kernel(METRIC=90.0)
    started.ok("step", "-m", "slower")
    started.set_kernel(METRIC=90.0)
    record = started.ok("step", "-m", "slower, once more", "--again", "--json").json()
    assert record["iteration"] == 2 and record["status"] == "REGRESSED" and record["repeats"] == 1
    assert "measured again (kgit step --again): the same kernel code as iteration 1" in started.ok("show", "2").stdout
    assert started.ok("show", "2", "--json").json()["repeats"] == 1
    started.check_invariants()
    # and the next repeat names the latest verdict
    started.set_kernel(METRIC=90.0)
    assert "the same kernel code as iteration 2 (regressed" in started.refused("step", "-m", "and again")


def test_an_interrupted_attempt_is_no_verdict_and_may_be_stepped_again(started):
    started.set_kernel(METRIC=120.0)
    killed = started.kgit("step", "-m", "killed", env={"KGIT_TEST_CRASH_AT": "candidate-committed"})
    assert killed.returncode != 0
    started.ok("doctor", "--fix")  # records iteration 1 as FAILED (interrupted) and rolls it back
    assert started.ok("show", "1", "--json").json()["reason"].startswith("interrupted")
    started.git("checkout", "refs/kgit/attempts/fake/1", "--", KERNEL)  # the change back, as kgit advises
    record = started.ok("step", "-m", "faster", "--json").json()
    assert record["status"] == "IMPROVED" and "repeats" not in record
