"""The repository's kgit lock: one writing kgit at a time.

An flock on the folder .git/kgit/: the kernel releases it when its holder exits, even by kill -9, so it
is never stale and two processes can never both hold it; deleting a file cannot undo it. The holder's
pid is written to .git/kgit/lock, for messages only. It lies in
the main repository's git directory, whichever worktree kgit runs in: the branches, tags and notes it
writes are the whole repository's, and two worktrees stepping at once would judge each other's notes
moving as a test that tampers with them.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from kgit.errors import KgitError
from kgit.git.command import Repo

_held: dict[Path, list[int]] = {}  # lock file -> [open descriptor, depth], in this process

# Set in the environment of an agent's turn under `kgit run --agent`, which holds the lock meanwhile.
AGENT_TURN = "KGIT_AGENT_TURN"


def acquire(repo: Repo) -> None:
    """Take the lock, or refuse while another kgit holds it.

    Re-entrant: a tuning run holds it across its rounds, and each step inside takes it again.
    """
    repo.shared_kgit_dir.mkdir(exist_ok=True)
    target = _locked(repo)
    if target in _held:
        _held[target][1] += 1
        return
    fd = os.open(target, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = _pid_in(_pid_file(repo))
        if os.environ.get(AGENT_TURN):
            raise KgitError("kgit run --agent is driving this loop and steps on your change itself",
                            "edit the kernel, write what you changed to $KGIT_ACTION_FILE, and end your turn") from None
        raise KgitError(f"another kgit process{f' (pid {holder})' if holder else ''} is working in this repository",
                        "wait for it to finish") from None
    _pid_file(repo).write_text(str(os.getpid()))
    _held[target] = [fd, 1]


def release(repo: Repo) -> None:
    target = _locked(repo)
    held = _held.get(target)
    if held is None:
        return
    held[1] -= 1
    if held[1] == 0:
        del _held[target]
        _pid_file(repo).write_text("")
        os.close(held[0])  # releases the flock


def is_held(repo: Repo) -> bool:
    """Whether this process holds the lock."""
    return _locked(repo) in _held


def holder(repo: Repo) -> int | None:
    """The pid of the process holding the lock (0 when it did not say), or None when the lock is free."""
    target = _locked(repo)
    if target in _held:
        return os.getpid()
    try:
        fd = os.open(target, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a probe: released by the close below
    except BlockingIOError:
        return _pid_in(_pid_file(repo)) or 0
    finally:
        os.close(fd)
    return None


def _locked(repo: Repo) -> Path:
    """What the flock is taken on: the repository's kgit folder itself, which a kgit at work keeps
    (its journal, its worktrees), so that deleting the lock file cannot let a second kgit in."""
    return repo.shared_kgit_dir


def _pid_file(repo: Repo) -> Path:
    return repo.shared_kgit_dir / "lock"


def _pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
