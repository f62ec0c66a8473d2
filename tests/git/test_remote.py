"""A repository's remotes: push's answer for each ref, fetch, and where git looks for hooks."""

import subprocess

import pytest

from kgit.git import remote
from kgit.git.command import GitError, find_repo


@pytest.fixture
def bare(ws, tmp_path):
    path = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    ws.git("remote", "add", "origin", str(path))
    return path


def test_push_answers_for_each_ref_and_pushes_the_others(ws, bare):
    repo = find_repo(ws.root)
    assert remote.remotes(repo) == ["origin"]
    ws.git("branch", "side")
    assert remote.push(repo, "origin", ["main", "side"], {}) == {"refs/heads/main": "", "refs/heads/side": ""}
    ws.git("commit", "--allow-empty", "-qm", "ahead")
    ws.git("push", "-q", "origin", "HEAD:side")  # the remote's side moves on
    ws.git("reset", "-q", "--hard", "HEAD~1")
    ws.git("commit", "--allow-empty", "-qm", "diverged")
    ws.git("branch", "-f", "side", "HEAD")
    results = remote.push(repo, "origin", ["main", "side"], {})
    assert results["refs/heads/main"] == ""  # pushed, although side was rejected
    assert "rejected" in results["refs/heads/side"] or "fetch first" in results["refs/heads/side"]


def test_push_that_never_reaches_the_refs_is_a_git_error(ws, tmp_path):
    repo = find_repo(ws.root)
    ws.git("remote", "add", "gone", str(tmp_path / "missing.git"))
    with pytest.raises(GitError, match="git push failed: "):
        remote.push(repo, "gone", ["main"], {})


def test_fetch(ws, bare, tmp_path):
    repo = find_repo(ws.root)
    remote.push(repo, "origin", ["main:refs/heads/elsewhere"], {})
    remote.fetch(repo, "origin", ["refs/heads/elsewhere:refs/kgit/remotes/origin/x"])
    assert ws.git("rev-parse", "refs/kgit/remotes/origin/x") == ws.git("rev-parse", "main")


def test_hooks_dir_follows_core_hookspath(ws):
    repo = find_repo(ws.root)
    assert remote.hooks_dir(repo).resolve() == (ws.root / ".git/hooks").resolve()
    ws.git("config", "core.hooksPath", "my hooks")
    assert remote.hooks_dir(repo).resolve() == (ws.root / "my hooks").resolve()
