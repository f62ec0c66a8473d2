"""The repository's kgit lock: one writing kgit at a time.

An flock on .git/kgit/lock: the kernel releases it when its holder exits, even by kill -9, so it is
never stale and two processes can never both hold it. The pid inside is for messages only.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from kgit.errors import KgitError
from kgit.git.run import Repo

_held: dict[Path, list[int]] = {}  # lock file -> [open descriptor, depth], in this process

# Set in the environment of an agent's turn under `kgit run --agent`, which holds the lock meanwhile.
AGENT_TURN = "KGIT_AGENT_TURN"


def acquire(repo: Repo) -> None:
    """Take the lock, or refuse while another kgit holds it.

    Re-entrant: a tuning run holds it across its rounds, and each step inside takes it again.
    """
    repo.kgit_dir.mkdir(exist_ok=True)
    path = repo.kgit_dir / "lock"
    if path in _held:
        _held[path][1] += 1
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = _pid_in(path)
        if os.environ.get(AGENT_TURN):
            raise KgitError("kgit run --agent is driving this loop and steps on your change itself",
                            "edit the kernel, write what you changed to $KGIT_ACTION_FILE, and end your turn") from None
        raise KgitError(f"another kgit process{f' (pid {holder})' if holder else ''} is working in this repository",
                        "wait for it to finish") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    _held[path] = [fd, 1]


def release(repo: Repo) -> None:
    path = repo.kgit_dir / "lock"
    held = _held.get(path)
    if held is None:
        return
    held[1] -= 1
    if held[1] == 0:
        del _held[path]
        os.ftruncate(held[0], 0)
        os.close(held[0])  # releases the flock


def holder(repo: Repo) -> int | None:
    """The pid of the process holding the lock (0 when it did not say), or None when the lock is free."""
    path = repo.kgit_dir / "lock"
    if path in _held:
        return os.getpid()
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a probe: released by the close below
    except BlockingIOError:
        return _pid_in(path) or 0
    finally:
        os.close(fd)
    return None


def _pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
