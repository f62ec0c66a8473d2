"""Every change kgit makes to a repository: none loses an uncommitted edit or touches what it must not."""

import json

import pytest

from kgit.git import write
from kgit.git.command import GitError, find_repo
from kgit.model.record import Record, Status, parse_note
from workspace import KERNEL

BINARY = bytes(range(256)) * 4 + b"\0\xff\xfe"


@pytest.fixture
def repo(ws):
    return find_repo(ws.root)


def snapshot_of_worktree(ws):
    return {p.relative_to(ws.root): p.read_bytes() for p in ws.root.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(ws.root).parts}


def test_move_head_keeps_uncommitted_edits_binary_files_included(ws, repo):
    (ws.root / "data.bin").write_bytes(b"old")
    ws.git("add", "data.bin")
    ws.git("commit", "-qm", "binary")
    base = ws.git("rev-parse", "HEAD")
    (ws.root / "other.txt").write_text("committed later\n")
    ws.git("add", "other.txt")
    ws.git("commit", "-qm", "later")
    ws.set_kernel(METRIC=7.0)  # an edit of a tracked file
    (ws.root / "data.bin").write_bytes(BINARY)  # a binary one
    (ws.root / "untracked.txt").write_text("mine\n")
    write.move_head(repo, base)
    assert ws.git("rev-parse", "HEAD") == base and not (ws.root / "other.txt").exists()
    assert "METRIC = 7.0" in ws.kernel_text()
    assert (ws.root / "data.bin").read_bytes() == BINARY
    assert (ws.root / "untracked.txt").read_text() == "mine\n"
    assert ws.git("for-each-ref", "refs/kgit/saved-edits") == ""  # nothing left to restore


def test_move_head_without_edits_is_a_plain_reset(ws, repo):
    base = ws.git("rev-parse", "HEAD")
    ws.set_kernel(METRIC=7.0)
    ws.git("commit", "-qam", "edit")
    write.move_head(repo, base)
    assert ws.git("status", "--porcelain") == "" and "METRIC = 100.0" in ws.kernel_text()


def test_commit_with_files_touches_no_working_tree_file_index_or_ref(ws, repo):
    ws.set_kernel(METRIC=5.0)  # an uncommitted edit, which must stay as it is
    (ws.root / "staged.txt").write_text("staged\n")
    ws.git("add", "staged.txt")
    repo.kgit_dir.mkdir()  # as under the lock, which every writing command holds
    before = (snapshot_of_worktree(ws), ws.git("status", "--porcelain"), ws.snapshot()["refs"])
    head = ws.git("rev-parse", "HEAD")
    sha = write.commit_with_files(repo, head, head, {"experiments/README.md": "# log\n", KERNEL: "METRIC = 1\n"},
                                  "a commit of its own")
    assert (snapshot_of_worktree(ws), ws.git("status", "--porcelain"), ws.snapshot()["refs"]) == before
    assert ws.git("show", f"{sha}:experiments/README.md") == "# log"
    assert ws.git("show", f"{sha}:{KERNEL}") == "METRIC = 1"
    assert ws.git("rev-parse", f"{sha}^") == head and ws.git("log", "-1", "--format=%s", sha) == "a commit of its own"
    assert not (repo.kgit_dir / "index.tmp").exists()


def test_set_ref_with_old_refuses_a_ref_that_moved(ws, repo):
    head = ws.git("rev-parse", "HEAD")
    other = ws.git("commit-tree", ws.git("rev-parse", "HEAD^{tree}"), "-m", "other")
    write.set_ref(repo, "refs/kgit/x", head)
    with pytest.raises(GitError):
        write.set_ref(repo, "refs/kgit/x", other, old=other)
    assert ws.git("rev-parse", "refs/kgit/x") == head
    write.set_ref(repo, "refs/kgit/x", other, old=head)
    assert ws.git("rev-parse", "refs/kgit/x") == other
    write.create_branch(repo, "fake", head)
    with pytest.raises(GitError):
        write.create_branch(repo, "fake", other)  # never over an existing branch
    assert ws.git("rev-parse", "opt/fake") == head


def test_write_note_replaces_its_run_and_keeps_another(ws, repo):
    head = ws.git("rev-parse", "HEAD")
    mine = Record("fake", 0, "baseline", Status.BASELINE, started="2030-01-01T00:00:00+00:00", value=1.0)
    theirs = mine.replace(gpu="Other GPU", value=2.0)
    write.write_note(repo, head, mine)
    write.write_note(repo, head, theirs)
    write.write_note(repo, head, mine.replace(value=3.0))
    records, invalid = parse_note(head, ws.git("notes", "--ref=refs/notes/kgit", "show", head))
    assert invalid == [] and sorted(r.value for r in records) == [2.0, 3.0]


def test_write_notes_sets_many_in_one_commit(ws, repo):
    head = ws.git("rev-parse", "HEAD")
    other = ws.git("commit-tree", ws.git("rev-parse", "HEAD^{tree}"), "-m", "other")
    record = Record("fake", 1, "x", Status.REGRESSED)
    write.write_notes(repo, {head: [record], other: [record.replace(iteration=2)]}, "two notes")
    assert ws.git("log", "--format=%s", "refs/notes/kgit") == "two notes"
    assert json.loads(ws.git("notes", "--ref=refs/notes/kgit", "show", other))["iteration"] == 2
    write.remove_notes(repo, [head, other])
    assert ws.git("notes", "--ref=refs/notes/kgit", "list") == ""


def test_worktrees_added_and_removed_from_several_threads_at_once(ws, repo):
    # kgit tune tests one proposal a GPU at once, each in its own worktree; `git worktree add` and the
    # prune after a removal read and write .git/worktrees/ with no lock of their own. A prune that read
    # a sibling's half-made entry failed ("failed to read .git/worktrees/best-0/commondir") once
    # under load.
    from concurrent.futures import ThreadPoolExecutor

    head = ws.git("rev-parse", "HEAD")

    def churn(i):
        for n in range(20):
            path = repo.kgit_dir / "worktrees" / f"t{i}-{n}"
            write.add_worktree(repo, path, head)
            assert (path / KERNEL).exists()
            write.remove_worktree(repo, path)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(churn, range(4)))
    assert ws.git("worktree", "list").count("\n") == 0  # only the main one is left


def test_a_failing_post_checkout_hook_of_the_user_does_not_stop_a_start(ws, tmp_path):
    # git-lfs installs one that fails where git-lfs is not on PATH; kgit's test checkouts are its own
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "post-checkout").write_text("#!/bin/sh\necho 'this repository needs git-lfs' >&2\nexit 1\n")
    (hooks / "post-checkout").chmod(0o755)
    ws.git("config", "core.hooksPath", str(hooks))
    assert ws.ok("start", "fake", "--json").json()["status"] == "BASELINE"
    assert ws.git("worktree", "list").count("\n") == 0  # none left registered
