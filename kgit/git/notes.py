"""Reading the records in refs/notes/kgit: one note per commit, one or more JSON records per note.

A note holds several records one after another when runs share a commit (two clones that made
identical commits, or a squash whose notes git concatenated on rewrite). Whatever a note holds that
is not a valid record comes back as an InvalidNote, to be reported: it is never used to decide.

Reading every note is two git processes whatever their number: `git ls-tree` lists them, one
`git cat-file --batch` reads the blobs. A team's notes grow to many thousands of records over many
kernels, and most commands need one kernel's, so kgit keeps an index in .git/kgit/note-index/:
  tip              the commit of refs/notes/kgit the index describes, then "<sha256> <file>" of each
                   file below: what it held when kgit wrote it
  kernels/<hex>    "<commit> <blob>" of each note holding a record of one kernel (its name in hex)
  invalid          "<commit> <blob>" of each note holding something that is not a valid record
When refs/notes/kgit has moved, `git diff-tree` between the old tip and the new one names the notes
that changed, and only those are read; without an index (or with an old tip gc removed) it is built
from every note once. The index is derived data: deleting the folder costs one full read. It is
checked before it is used: a file that is not what kgit wrote (a truncated write, a disk error, a
hand edit) would hide records, and a loop that misses its kept iterations moves best/ to a worse one
and calls its commits unrecorded; such an index is built again from the notes.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from kgit.errors import KgitError
from kgit.git import read, refs
from kgit.git.command import GitError, Repo, cat_blobs, git
from kgit.model.record import InvalidNote, Record, from_json, parse_note, to_json


@dataclass
class Notes:
    by_commit: dict[str, list[Record]] = field(default_factory=dict)
    invalid: list[InvalidNote] = field(default_factory=list)


def read_notes(repo: Repo, ref: str = refs.NOTES_REF) -> Notes:
    """Every record under a notes ref by the commit it annotates, and every note that is not valid."""
    return _read(repo, note_blobs(repo, ref), None)


def kernels_with_records(repo: Repo) -> list[str]:
    """The kernels that have records in refs/notes/kgit, by name."""
    return sorted({r.kernel for records in read_notes(repo).by_commit.values() for r in records})


def read_kernel_notes(repo: Repo, kernel: str) -> Notes:
    """One kernel's records in refs/notes/kgit, through the index, and every note that is not valid
    (whatever its kernel: an invalid note names none)."""
    return _read(repo, _indexed(repo, kernel), kernel)


# (commit, note blob) -> what the note parses to. A step reads a kernel's notes twice, for its loop's
# state and for the rendering (with 10,000 records, 1.6 s each); a blob never changes, and records are
# frozen, so one process parses each note once.
_parsed: dict[tuple[str, str], tuple[list[Record], list[InvalidNote]]] = {}


def _read(repo: Repo, blob_by_commit: dict[str, str], kernel: str | None) -> Notes:
    missing = [(c, b) for c, b in blob_by_commit.items() if (c, b) not in _parsed]
    texts = dict(zip(missing, cat_blobs(repo, [b for _, b in missing])))
    for key, text in texts.items():
        if text:  # empty: a blob gone meanwhile, which another repository of this process may hold
            _parsed[key] = parse_note(key[0], text)
    notes = Notes()
    for commit, blob in blob_by_commit.items():
        records, invalid = _parsed.get((commit, blob)) or parse_note(commit, texts[commit, blob])
        notes.invalid += invalid
        mine = [r for r in records if kernel is None or r.kernel == kernel]
        if mine:
            notes.by_commit[commit] = mine
    return notes


def note_blobs(repo: Repo, ref: str) -> dict[str, str]:
    """commit -> note blob, for every note under ref."""
    try:
        listing = git(repo, "ls-tree", "-r", "--full-tree", ref)
    except GitError:
        return {}  # no notes yet
    blob_by_commit = {}
    for line in listing.splitlines():
        meta, _, path = line.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob":
            blob_by_commit[path.replace("/", "")] = parts[2]
    return blob_by_commit


def last_valid_version(repo: Repo, commit: str) -> tuple[str, str] | None:
    """(notes commit, note text) of the newest version of commit's note in refs/notes/kgit's history
    that holds valid records and nothing else, or None. Every write of a note is a commit of the notes
    ref, so a note damaged since (by hand, a tool, a bad merge) usually has an intact version there."""
    # git stores a note at the commit's hex name, split into folders of two characters as notes grow
    paths = [commit, f"{commit[:2]}/{commit[2:]}", f"{commit[:2]}/{commit[2:4]}/{commit[4:]}"]
    try:
        changed = git(repo, "log", "--format=%H", refs.NOTES_REF, "--", *paths).split()  # newest first
    except GitError:
        return None
    versions = [(notes_commit, path) for notes_commit in changed for path in paths]
    for (notes_commit, _), text in zip(versions, cat_blobs(repo, [f"{c}:{path}" for c, path in versions])):
        records, invalid = parse_note(commit, text) if text else ([], [])
        if records and not invalid:
            return notes_commit, text
    return None


# --- the index of one kernel's notes -------------------------------------------------------------


def _indexed(repo: Repo, kernel: str) -> dict[str, str]:
    """commit -> blob of the notes that hold this kernel's records, or something invalid."""
    tip = read.rev(repo, refs.NOTES_REF)
    if tip is None:
        return {}
    folder = repo.kgit_dir / "note-index"
    try:
        folder.joinpath("kernels").mkdir(parents=True, exist_ok=True)
        with open(folder / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one reader brings the index up to date, the others wait
            old_tip, digests = _manifest(folder)
            if not _intact(folder, digests):
                _update(repo, folder, None, tip)
            elif old_tip != tip:
                _update(repo, folder, old_tip, tip)
    except OSError:  # a read-only repository: read every note instead
        return note_blobs(repo, refs.NOTES_REF)
    return _read_pairs(folder / "kernels" / _file_name(kernel)) | _read_pairs(folder / "invalid")


def _manifest(folder: Path) -> tuple[str | None, dict[str, str] | None]:
    """The tip the index describes and the digest of each of its files; None, None for no index."""
    words = _read_lines(folder / "tip")
    if len(words) % 2 != 1:
        return None, None
    return words[0], dict(zip(words[2::2], words[1::2]))


def _intact(folder: Path, digests: dict[str, str] | None) -> bool:
    """Whether every file of the index holds what kgit wrote, and no other file is there."""
    return digests is not None and digests == _digests(folder)


def _digests(folder: Path) -> dict[str, str]:
    files = [*sorted(folder.joinpath("kernels").iterdir()), folder / "invalid"]
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.exists()}


def _update(repo: Repo, folder: Path, old_tip: str | None, tip: str) -> None:
    changes = _changes(repo, old_tip, tip) if old_tip else None
    if changes is None:  # no index yet, one not intact, or its tip is gone: build it from every note
        for path in folder.joinpath("kernels").iterdir():
            path.unlink()
        (folder / "invalid").unlink(missing_ok=True)
        changes = {commit: (None, blob) for commit, blob in note_blobs(repo, refs.NOTES_REF).items()}
    blobs = sorted({b for pair in changes.values() for b in pair if b})
    holders = {blob: _holders(text) for blob, text in zip(blobs, cat_blobs(repo, blobs))}
    edits: dict[str, dict[str, str | None]] = {}  # index file -> commit -> new blob (None: remove)
    for commit, (old_blob, new_blob) in changes.items():
        for name in holders.get(old_blob, ()):
            edits.setdefault(name, {})[commit] = None
        for name in holders.get(new_blob, ()):
            edits.setdefault(name, {})[commit] = new_blob
    for name, edit in edits.items():
        path = folder / name
        pairs = {**_read_pairs(path), **edit}
        _write(path, "".join(f"{c} {b}\n" for c, b in pairs.items() if b))
    manifest = "".join(f"{digest} {name}\n" for name, digest in _digests(folder).items())
    _write(folder / "tip", f"{tip}\n{manifest}")  # last: an index interrupted before this line is redone


def _changes(repo: Repo, old_tip: str, tip: str) -> dict[str, tuple[str | None, str | None]] | None:
    """commit -> (old blob, new blob) of the notes that differ between two tips; None if old_tip is gone."""
    try:
        out = git(repo, "diff-tree", "-r", "--no-renames", "--end-of-options", old_tip, tip)
    except GitError:
        return None
    changes = {}
    for line in out.splitlines():
        meta, _, path = line.partition("\t")
        parts = meta.split()
        if len(parts) == 5:
            zero = "0" * len(parts[2])
            changes[path.replace("/", "")] = (None if parts[2] == zero else parts[2],
                                              None if parts[3] == zero else parts[3])
    return changes


def kernels_changed(repo: Repo, old_tip: str, tip: str) -> set[str] | None:
    """The kernels whose records differ between two commits of refs/notes/kgit (those of every note that
    changed, before and after); None if old_tip is gone. Reads the changed notes only."""
    if old_tip == tip:
        return set()
    changes = _changes(repo, old_tip, tip)
    if changes is None:
        return None
    blobs = sorted({b for pair in changes.values() for b in pair if b})
    return {r.kernel for text in cat_blobs(repo, blobs) for r in parse_note("", text)[0]}


def _holders(text: str) -> list[str]:
    """The index files a note's text belongs in: one per kernel it has records of, and 'invalid'."""
    records, invalid = parse_note("", text)
    names = {f"kernels/{_file_name(r.kernel)}" for r in records}
    return sorted(names | ({"invalid"} if invalid else set()))


def _file_name(kernel: str) -> str:
    # A record's kernel name comes from a note: written in hex it is always a safe file name.
    return kernel.encode().hex()


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except (OSError, UnicodeDecodeError):
        return []


def _read_pairs(path: Path) -> dict[str, str]:
    words = _read_lines(path)
    return dict(zip(words[0::2], words[1::2]))


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def union(*groups: list[Record]) -> list[Record]:
    """The records of all groups, each run once, in first-seen order.

    Two copies of one run are merged field by field: a field only one copy has is kept (a later
    command may have added a profile in one clone), and where both have a field the earlier group wins.
    """
    merged: dict[tuple, dict] = {}
    for group in groups:
        for record in group:
            data = {k: v for k, v in to_json(record).items() if v is not None}
            merged[record.key] = {**data, **merged[record.key]} if record.key in merged else data
    return [from_json(data) for data in merged.values()]


def records_with_commits(repo: Repo, notes: Notes) -> list[tuple[str, Record]]:
    """Every run once, with the commit whose note holds it.

    A run found on several commits (a rebase copies notes to the new commits and leaves the old ones)
    is given the one on its kernel's branch's line of first parents (the loop's line: a rewrite joined
    with the remote's earlier copy holds both), else one a local branch reaches (a branch rewritten
    after it was pushed: the remote's copy is the old one), else a remote-tracking one, else another
    ref. Which commits those are costs a walk of the history, paid only when there are such copies;
    `kgit doctor --fix` removes them.
    """
    commits_of: dict[tuple, list[str]] = {}
    copies: dict[tuple, list[Record]] = {}
    for commit, records in notes.by_commit.items():
        for record in records:
            commits_of.setdefault(record.key, []).append(commit)
            copies.setdefault(record.key, []).append(record)
    repeated = {c for commits in commits_of.values() if len(commits) > 1 for c in commits}
    on_local = read.reachable(repo, repeated, local_only=True)
    on_branches = on_local | read.reachable(repo, repeated - on_local, branches_only=True)
    live = on_branches | read.reachable(repo, repeated - on_branches)
    lines = {}  # kernel -> its branch's first parents, for the kernels with copies
    for key, commits in commits_of.items():
        if len(commits) > 1 and (kernel := copies[key][0].kernel) not in lines:
            tip = read.rev(repo, refs.branch_ref(kernel))
            lines[kernel] = set(read.first_parents(repo, tip, limit=1_000_000)) if tip else set()
    result = []
    for key, commits in commits_of.items():
        if len(commits) > 1:
            line = lines[copies[key][0].kernel]
            commits = sorted(commits, key=lambda c: (c not in line, c not in on_local, c not in on_branches,
                                                     c not in live))
            result.append((commits[0], union(copies[key])[0]))  # the copies merged into one record
        else:
            result.append((commits[0], copies[key][0]))
    return result



@dataclass(frozen=True)
class Line:
    """opt/<kernel> as this clone has it, read beside the kernel's records: what they are judged by."""

    tip: str | None = None  # None: no such branch here (a clone that fetched the records only)
    first_parents: frozenset[str] = frozenset()  # the loop's line: the tip and its first parents
    tagged: str | None = None  # best/<kernel>'s commit
    # read by branch_history alone:
    held_bases: frozenset[str] = frozenset()  # the records' bases that the tip reaches (a joined line's too)
    # (sha, subject, changed paths) of the commits above the newest one with a note, newest first
    above_recorded: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


@dataclass
class History:
    """One kernel's records, each with the commit its note is on, in iteration order, and the notes
    that could not be read (reported, never used)."""

    pairs: list[tuple[str, Record]]
    invalid: list[InvalidNote]
    # the highest iteration number of the kernel, those left out of pairs included: never reused
    last_iteration: int = -1
    line: Line = Line()  # read by deciding_history and branch_history; kernel_history leaves it empty

    @property
    def records(self) -> list[Record]:
        return [r for _, r in self.pairs]


def nonempty(history: History, kernel: str, repo: Repo) -> History:
    """history, refused where it holds no record of kernel: with why (its branch is here and its notes
    are not), or the kernels that have records (a typo, most likely)."""
    if history.pairs:
        return history
    if read.rev(repo, refs.branch_ref(kernel)):  # the records are gone, or were never fetched here
        raise KgitError(f"{refs.branch(kernel)} exists but no kgit record of {kernel} is here ({refs.NOTES_REF} "
                        "was deleted or not fetched)",
                        "'kgit pull' brings them from a remote; to start over instead, check out the branch you "
                        f"started from, then: git branch -D {refs.branch(kernel)}")
    known = kernels_with_records(repo)
    if known:  # a typo, most likely: name the kernels that have records rather than start a new loop
        raise KgitError(f"no records for {kernel}", f"the kernels with records here: {', '.join(known)}; "
                                                    f"'kgit start {kernel}' begins a loop for {kernel}")
    raise KgitError(f"no records for {kernel}", f"run 'kgit start {kernel}' first")


def kernel_history(repo: Repo, kernel: str) -> History:
    notes = read_kernel_notes(repo, kernel)
    pairs = sorted(records_with_commits(repo, notes), key=lambda p: (p[1].iteration, p[1].started or ""))
    return History(pairs, notes.invalid, max((r.iteration for _, r in pairs), default=-1))


def deciding_history(repo: Repo, kernel: str) -> History:
    """The records that decide this kernel's loop here: every attempt, and the kept iterations of
    opt/<kernel> as it is in this clone. A kept iteration the branch no longer holds (a clone that
    continued it elsewhere, whose records arrive with kgit pull, or a `git reset` that dropped it)
    cannot be the best here: the branch is judged by what it holds."""
    history = kernel_history(repo, kernel)
    tip, tagged = read.object_ids(repo, [f"{refs.branch_ref(kernel)}^{{commit}}", f"{refs.tag_ref(kernel)}^{{commit}}"])
    if tip is None:  # no branch (yet) in this clone: nothing to judge it by
        return dataclasses.replace(history, line=Line(tagged=tagged))
    on_branch = frozenset(read.first_parents(repo, tip, limit=1_000_000))
    pairs = [(sha, r) for sha, r in history.pairs if not r.status.on_branch or sha in on_branch]
    return History(pairs, history.invalid, history.last_iteration, Line(tip, on_branch, tagged))


def branch_history(repo: Repo, kernel: str) -> History:
    """deciding_history, with what a step checks the branch for read in the same pass: which of the
    records' bases the branch holds (how many steps it took) and its commits above the newest recorded
    one (a hand commit no step measured)."""
    history = deciding_history(repo, kernel)
    line = history.line
    if line.tip is None:
        return history
    bases = {r.base for _, r in history.pairs if r.base}
    recorded = {sha for sha, _ in history.pairs} | {note.commit for note in history.invalid}
    above = []
    for sha, subject, paths in read.first_parent_walk(repo, line.tip):
        if sha in recorded:
            break
        above.append((sha, subject, tuple(paths)))
    line = dataclasses.replace(line, held_bases=frozenset(read.reachable_from(repo, bases, [line.tip])),
                               above_recorded=tuple(above))
    return dataclasses.replace(history, line=line)
