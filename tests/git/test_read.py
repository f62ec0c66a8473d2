"""Questions kgit asks git: refs, the working tree, history, what a ref reaches."""

import pytest

from kgit.git import read
from kgit.git.command import find_repo


@pytest.fixture
def repo(ws):
    return find_repo(ws.root)


def commit_file(ws, name, text, message):
    (ws.root / name).parent.mkdir(parents=True, exist_ok=True)
    (ws.root / name).write_text(text)
    ws.git("add", "--", name)
    ws.git("commit", "-qm", message)
    return ws.git("rev-parse", "HEAD")


def orphan(ws, message):
    """A commit that no ref reaches."""
    return ws.git("commit-tree", ws.git("rev-parse", "HEAD^{tree}"), "-p", "HEAD", "-m", message)


def test_modified_tracked_files_with_renames_and_spaces(ws, repo):
    commit_file(ws, "a b.txt", "one\n", "a b")
    commit_file(ws, "e f.py", "two\n", "e f")
    commit_file(ws, "R weird ->.txt", "three\n", "weird")
    assert read.modified_tracked_files(repo) == []
    ws.git("mv", "a b.txt", "c d.txt")  # a staged rename
    (ws.root / "e f.py").write_text("changed\n")  # an unstaged edit
    (ws.root / "R weird ->.txt").write_text("changed too\n")
    (ws.root / "new file.txt").write_text("untracked\n")  # untracked: not counted
    (ws.root / "staged new.txt").write_text("added\n")
    ws.git("add", "staged new.txt")
    assert sorted(read.modified_tracked_files(repo)) == ["R weird ->.txt", "c d.txt", "e f.py", "staged new.txt"]


def test_reachable_counts_branches_and_kgit_refs_but_not_best_tags(ws, repo):
    on_main = ws.git("rev-parse", "HEAD")
    tagged_best = orphan(ws, "only best/ reaches me")
    attempt = orphan(ws, "an attempt")
    plain_tag = orphan(ws, "a tag of the user's")
    remote = orphan(ws, "on a remote-tracking branch")
    lost = orphan(ws, "nothing reaches me")
    ws.git("update-ref", "refs/tags/best/fake", tagged_best)
    ws.git("update-ref", "refs/kgit/attempts/fake/3", attempt)
    ws.git("update-ref", "refs/tags/v1", plain_tag)
    ws.git("update-ref", "refs/remotes/origin/opt/fake", remote)
    every = {on_main, tagged_best, attempt, plain_tag, remote, lost}
    assert read.reachable(repo, every) == {on_main, attempt, plain_tag, remote}
    assert read.reachable(repo, every, branches_only=True) == {on_main, remote}
    assert read.reachable(repo, set()) == set()


def test_rev_current_branch_and_kernel(ws, repo):
    head = ws.git("rev-parse", "HEAD")
    assert read.rev(repo, "HEAD") == head and read.rev(repo, head) == head
    assert read.rev(repo, "no-such-ref") is None and read.rev(repo, "--all") is None
    assert read.rev(repo, ws.git("rev-parse", "HEAD^{tree}")) is None  # not a commit
    assert read.current_branch(repo) == "main" and read.current_kernel(repo) is None
    ws.git("checkout", "-qb", "opt/fake")
    assert read.current_kernel(repo) == "fake" and read.kernels_with_branches(repo) == ["fake"]
    ws.git("checkout", "-q", "--detach")
    assert read.current_branch(repo) is None and read.current_kernel(repo) is None


def test_first_parent_walk_pages_through_history(ws, repo):
    shas = [ws.git("rev-parse", "HEAD")]
    for i in range(6):
        shas.append(commit_file(ws, f"f{i}.txt", f"{i}\n", f"commit {i}: with spaces"))
    walked = list(read.first_parent_walk(repo, shas[-1], page=2))
    assert [sha for sha, _, _ in walked] == list(reversed(shas))
    assert walked[0][1:] == ("commit 5: with spaces", ["f5.txt"])
    assert read.first_parents(repo, shas[-1], limit=3) == list(reversed(shas))[:3]
    assert read.subjects(repo, shas[1:3]) == {shas[1]: "commit 0: with spaces", shas[2]: "commit 1: with spaces"}
    assert read.is_ancestor(repo, shas[0], shas[-1]) and not read.is_ancestor(repo, shas[-1], shas[0])
    assert read.existing(repo, [shas[0], "0" * 40]) == {shas[0]}


def test_first_parent_walk_gives_paths_as_they_are_and_commits_without_any(ws, repo):
    # git quotes a non-ASCII path in --name-only ("my ops/k\303\251rnel.py") unless -z: a kernel path
    # that matched no commit would let an unrecorded change of it through (kgit push, kgit step)
    odd = "my ops/kérnel ü \"1\".py"
    two = commit_file(ws, odd, "1\n", "odd path")
    (ws.root / "a.txt").write_text("a\n")
    (ws.root / odd).write_text("2\n")
    ws.git("add", "-A")
    ws.git("commit", "-qm", "two paths")
    ws.git("commit", "-q", "--allow-empty", "-m", "nothing")
    walked = list(read.first_parent_walk(repo, "HEAD", page=2))
    assert [(subject, sorted(paths)) for _, subject, paths in walked[:3]] == [
        ("nothing", []), ("two paths", sorted(["a.txt", odd])), ("odd path", [odd])]
    assert walked[2][0] == two and len(walked) == 4


def test_file_at_and_is_tracked(ws, repo):
    sha = commit_file(ws, "dir/x.txt", "first\n", "x")
    (ws.root / "dir/x.txt").write_text("second\n")
    assert read.file_at(repo, "dir/x.txt") == "first\n"
    assert read.file_at(repo, "dir/x.txt", sha + "^") is None
    assert read.is_tracked(repo, "dir/x.txt") and not read.is_tracked(repo, "dir/y.txt")
