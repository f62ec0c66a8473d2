"""A repository's remotes and hooks: fetch, push, and where git looks for hooks."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from kgit.git.command import GitError, Repo, git, git_bytes


def remotes(repo: Repo) -> list[str]:
    return git(repo, "remote").split()


def url(repo: Repo, remote: str) -> str:
    return git(repo, "remote", "get-url", "--", remote).strip()


def bundle(repo: Repo, rev: str) -> bytes:
    """A git bundle of rev and its history, as bytes: a repository's state, shipped to another machine."""
    return git_bytes(repo, "bundle", "create", "--quiet", "-", rev)


def clone_bundle(data: bytes, path: Path) -> Repo:
    """A repository at path holding what a bundle of bundle() holds (its commits; nothing checked out)."""
    path.mkdir(parents=True)
    (path / "kgit.bundle").write_bytes(data)
    git(path, "init", "--quiet")
    git(path, "fetch", "--quiet", "--no-tags", str(path / "kgit.bundle"), "+HEAD:refs/kgit/shipped")
    (path / "kgit.bundle").unlink()
    return Repo(path.resolve(), (path / ".git").resolve())


def is_bundle(repo: Repo, path: Path) -> bool:
    try:
        git(repo, "bundle", "verify", "--quiet", str(path))
    except GitError:
        return False
    return True


def fetch(repo: Repo, remote: str, refspecs: list[str]) -> None:
    git(repo, "fetch", "--quiet", "--no-tags", remote, *refspecs)


def push(repo: Repo, remote: str, refspecs: list[str], env: dict) -> dict[str, str]:
    """Push; the result of each remote ref: '' when it was updated or up to date, else git's reason.

    A ref the remote rejects is no error here: the caller says which and why, the others are pushed.
    """
    # Its own process group, killed whole if kgit is interrupted or stopped: a push left running (git
    # push, its receive-pack and the remote's hooks) would move refs after kgit has said it did not.
    proc = subprocess.Popen(["git", "push", "--porcelain", remote, *refspecs], cwd=repo.root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **env}, start_new_session=True)
    try:
        stdout, stderr = proc.communicate()
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    results = {}
    for line in stdout.decode(errors="replace").splitlines():
        parts = line.split("\t")  # "<flag>\t<local>:<remote>\t<summary>", flag "!" for a rejection
        if len(parts) == 3 and ":" in parts[1]:
            results[parts[1].split(":", 1)[1]] = parts[2] if parts[0] == "!" else ""
    if proc.returncode != 0 and not results:  # it never got as far as the refs: a hook or the network
        message = stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"git push failed: {message[-1] if message else 'exit status ' + str(proc.returncode)}")
    return results


def set_upstream(repo: Repo, branch: str, remote: str) -> None:
    """Make remote's branch of the same name the upstream of branch (git status then says ahead or behind)."""
    git(repo, "config", f"branch.{branch}.remote", remote)
    git(repo, "config", f"branch.{branch}.merge", f"refs/heads/{branch}")


def hooks_dir(repo: Repo) -> Path:
    """Where git looks for this repository's hooks: core.hooksPath if set, else .git/hooks."""
    return repo.root / git(repo, "rev-parse", "--git-path", "hooks").strip()
