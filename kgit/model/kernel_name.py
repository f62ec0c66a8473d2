"""What a kernel may be called. Its name becomes a branch (opt/<name>), a tag (best/<name>), an attempt
ref, a folder and a file of the notes' index, and a key of kgit.yaml beside its top-level settings: the
name is checked wherever one enters (a command's argument, kgit.yaml, a note, a remote's branch)."""

from __future__ import annotations

import re

from kgit.errors import KgitError

# Characters safe in a branch, a tag, a ref and a path alike: no '/', '..', spaces, shell or ref
# metacharacters.
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

RESERVED = ("report_path",)  # kgit.yaml's top-level keys that are not kernels


def check(name: str) -> str:
    """The name, or a KgitError that says why it cannot name a kernel."""
    if not _SAFE.fullmatch(name) or ".." in name or name.endswith((".", ".lock")):
        raise KgitError(
            f"invalid kernel name {name!r}: use letters, digits, '.', '_' and '-' "
            "(it becomes a branch, a tag and a path)"
        )
    if name in RESERVED:
        raise KgitError(f"invalid kernel name {name!r}: kgit.yaml's top-level {name} is a setting, not a kernel")
    return name
