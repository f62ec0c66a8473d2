"""Running git: one function starts every git process kgit needs, and one reads many blobs at once.

kgit talks to git through its plumbing rather than GitPython: importing GitPython alone takes about
135 ms, more than the whole start-up budget of a command that runs no test.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kgit.errors import KgitError


@dataclass(frozen=True)
class Repo:
    root: Path
    git_dir: Path
    common_dir: Path | None = None  # the main repository's git directory, where git_dir is a worktree's

    @property
    def kgit_dir(self) -> Path:
        """kgit's own files of this worktree (journal, caches, temporary worktrees), in its git directory."""
        return self.git_dir / "kgit"

    @property
    def shared_kgit_dir(self) -> Path:
        """kgit's files of the whole repository, every worktree's (the lock), in the common git directory."""
        return (self.common_dir or self.git_dir) / "kgit"


class GitError(KgitError):
    pass


def git(repo: Repo | Path, *args: str, input: bytes | None = None, env: dict | None = None) -> str:
    """Run one git command in the repository and return its stdout; a failure becomes a GitError."""
    return git_bytes(repo, *args, input=input, env=env).decode(errors="replace")


def git_bytes(repo: Repo | Path, *args: str, input: bytes | None = None, env: dict | None = None) -> bytes:
    """git() for output that must stay bytes (a file's content)."""
    cwd = repo.root if isinstance(repo, Repo) else repo
    proc = subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, env={**os.environ, **(env or {})}
    )
    if proc.returncode != 0:
        reason = _complaint(proc.stderr.decode(errors="replace"), proc.returncode)
        raise GitError(f"git {_command(args)} failed: {reason}")
    return proc.stdout


def _command(args: tuple[str, ...]) -> str:
    """The git command of these arguments, past the '-c key=value' settings that may come first."""
    i = 0
    while i < len(args) - 1 and args[i] == "-c":
        i += 2
    return args[i] if i < len(args) else "?"


def _complaint(stderr: str, returncode: int) -> str:
    """git's own reason in one line: its error: or fatal: line with what it lists after it."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    first = next((i for i, line in enumerate(lines) if line.startswith(("error:", "fatal:"))), None)
    if first is None:
        return lines[-1] if lines else f"exit status {returncode}"
    return " ".join(lines[first:])[:300]


def find_repo(start: Path) -> Repo:
    if not start.is_dir():
        raise KgitError(f"no such directory: {start}")
    try:
        out = git(start, "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir")
    except GitError as e:
        if "work tree" in str(e):
            raise KgitError(f"kgit needs a work tree; {start} is a bare repository") from None
        raise KgitError(f"not a git repository: {start}") from None
    except FileNotFoundError:
        raise KgitError("git is not installed or not on PATH") from None
    root, git_dir, common_dir = out.splitlines()
    return Repo(Path(root), Path(git_dir), (Path(start) / common_dir).resolve())  # relative to start


def cat_blobs(repo: Repo, shas: list[str]) -> list[str]:
    """The text of each of these blobs, in order, from one `git cat-file --batch`.

    The output is parsed by its headers ("<sha> blob <size>", or "<name> missing"): a blob that went
    missing meanwhile reads as empty text instead of shifting every later blob.
    """
    if not shas:
        return []
    proc = subprocess.run(
        ["git", "cat-file", "--batch"], cwd=repo.root, input="\n".join(shas).encode() + b"\n",
        capture_output=True,
    )
    if proc.returncode != 0:
        raise GitError(f"git cat-file failed: {_complaint(proc.stderr.decode(errors='replace'), proc.returncode)}")
    out, texts, pos = proc.stdout, [], 0
    for _ in shas:
        header_end = out.find(b"\n", pos)
        if header_end < 0:
            raise GitError("git cat-file --batch ended early")
        header = out[pos:header_end].split()
        if len(header) != 3:  # "<name> missing" or "<name> ambiguous"
            texts.append("")
            pos = header_end + 1
            continue
        size = int(header[2])
        start = header_end + 1
        texts.append(out[start:start + size].decode(errors="replace"))
        pos = start + size + 1  # the content is followed by a newline
    return texts


def config_values(repo: Repo, key: str) -> list[str]:
    try:
        return git(repo, "config", "--get-all", key).split()
    except GitError:  # exit status 1: not set
        return []
