"""The digest of a kernel file's code (kgit.model.kernel_code) in each blob, remembered by blob id: what
lets a step compare its kernel with every earlier iteration's without parsing them all again.

A step refuses a kernel whose code is an earlier iteration's. Parsing each earlier kernel took 3.7 s of
a 12.8 s step at 10,000 iterations of one kernel (experiments/history-scale/); a blob's code never
changes, so its digest is worked out once per repository.

.git/kgit/code-digests (every worktree's: blobs are the repository's): "<blob> <suffix> <digest>" a
line, where suffix is the file's extension (how kernel_code reads a text depends on it). Derived data:
deleting it costs one parse of every earlier kernel.
"""

from __future__ import annotations

import hashlib
import os

from kgit.git.command import Repo, cat_blobs
from kgit.model import kernel_code


def digest(path: str, text: str) -> str:
    return hashlib.sha256(kernel_code.code(path, text).encode()).hexdigest()


def of_blobs(repo: Repo, path: str, blobs: list[str | None], texts: dict[str, str] | None = None) -> list[str | None]:
    """The digest of the code in each blob (None for None: a kernel file missing at that commit), as
    a file named like path; those not remembered yet are taken from texts (blob -> text, what the caller
    has read already) or read by one git process, and remembered."""
    suffix = os.path.splitext(path)[1] or "-"
    known = _read(repo, suffix)
    texts = dict(texts or {})
    missing = sorted({b for b in blobs if b and b not in known})
    unread = [b for b in missing if b not in texts]
    if unread:
        texts.update(zip(unread, cat_blobs(repo, unread)))
    if missing:
        new = {blob: digest(path, texts[blob]) for blob in missing}
        known.update(new)
        _append(repo, suffix, new)
    return [known.get(b) if b else None for b in blobs]


def _file(repo: Repo):
    return repo.shared_kgit_dir / "code-digests"


def _read(repo: Repo, suffix: str) -> dict[str, str]:
    try:
        lines = _file(repo).read_text().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        words = line.split()
        if len(words) == 3 and words[1] == suffix:
            found[words[0]] = words[2]
    return found


def _append(repo: Repo, suffix: str, digests: dict[str, str]) -> None:
    """One write of whole lines: two steps appending at once leave both their lines (or a line twice)."""
    try:
        _file(repo).parent.mkdir(parents=True, exist_ok=True)
        with open(_file(repo), "a") as out:
            out.write("".join(f"{blob} {suffix} {d}\n" for blob, d in digests.items()))
    except OSError:  # a read-only repository: the next step parses them again
        pass
