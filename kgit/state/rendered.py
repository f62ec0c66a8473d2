"""Which committed renderings of the log are up to date with which records: what lets a step render
its own kernel's sections alone (kgit.render.readme.render_kernel) instead of every record's.

A step changes one kernel's records, but render_readme renders all of them: with 10,000 records that
was seconds per step. render_kernel gives render_readme's text only over a rendering that is what
render_readme gives for every other kernel's records as they are now. So kgit remembers, for each
rendering it committed (the README's blob), the commit of refs/notes/kgit whose records it renders
in full, rendering it again from them changing nothing. A step renders its kernel alone when the
notes changed since then in its kernel's records only; otherwise (records pulled, a note repaired, a
rendering committed by hand or by another kgit, a fresh clone) it renders every record, as `kgit
report` does, and remembers that.

.git/kgit/rendered (every worktree's: notes and blobs are the repository's): "<blob> <notes commit>"
a line, the newest last. Derived data: deleting it costs one full rendering.
"""

from __future__ import annotations

import os

from kgit.git import read, refs
from kgit.git.command import GitError, Repo, git

KEEP = 64  # lines kept: a rendering per branch, and a few before each


def notes_of(repo: Repo, blob: str | None) -> str | None:
    """The notes commit whose every record the rendering in this blob renders, if kgit knows one."""
    if blob is None:
        return None
    found = None
    for line in _lines(repo):
        words = line.split()
        if len(words) == 2 and words[0] == blob:
            found = words[1]
    return found


def remember(repo: Repo, commit: str, path: str, notes_commit: str) -> None:
    """The rendering at commit:path renders every record of notes_commit."""
    blob = read.object_ids(repo, [f"{commit}:{path}"])[0]
    if blob is None:
        return
    lines = [line for line in _lines(repo) if not line.startswith(blob)] + [f"{blob} {notes_commit}"]
    path_ = repo.shared_kgit_dir / "rendered"
    tmp = path_.with_name(f"rendered.{os.getpid()}.tmp")  # worktrees write at once: each its own file
    try:
        path_.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text("".join(f"{line}\n" for line in lines[-KEEP:]))
        os.replace(tmp, path_)
    except OSError:  # a read-only repository: the next step renders every record
        tmp.unlink(missing_ok=True)


def notes_written(repo: Repo, before: str | None) -> str | None:
    """The commit of refs/notes/kgit now, if it is before's child: one note written since (this
    command's own, under its lock), nobody else's."""
    if before is None:
        return None
    try:
        now, parent = git(repo, "rev-parse", refs.NOTES_REF, f"{refs.NOTES_REF}^").split()
    except (GitError, ValueError):
        return None
    return now if parent == before else None


def _lines(repo: Repo) -> list[str]:
    try:
        return (repo.shared_kgit_dir / "rendered").read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
