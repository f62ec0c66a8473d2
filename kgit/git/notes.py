"""Reading the records in refs/notes/kgit: one note per commit, one or more JSON records per note.

A note holds several records one after another when runs share a commit (two clones that made
identical commits, or a squash whose notes git concatenated on rewrite). Whatever a note holds that
is not a valid record comes back as an InvalidNote, to be reported: it is never used to decide.

Reading is two git processes whatever the number of notes: `git ls-tree` lists them, one
`git cat-file --batch` reads the blobs. A team's notes grow to many thousands of records over many
kernels, and most commands need one kernel's: an index in .git/kgit/note-index says which kernels
each note blob holds. A blob's content never changes (its name is its hash), so an entry never goes
stale: the index only grows, by the blobs not seen before, and deleting it costs one full read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kgit.git import read, refs
from kgit.git.run import GitError, Repo, cat_blobs, git
from kgit.model.record import InvalidNote, Record, from_json, parse_note, to_json

_INDEX = "note-index"


@dataclass
class Notes:
    by_commit: dict[str, list[Record]] = field(default_factory=dict)
    invalid: list[InvalidNote] = field(default_factory=list)


def read_notes(repo: Repo, kernel: str | None = None, ref: str = refs.NOTES_REF) -> Notes:
    """The records under a notes ref by the commit each annotates (only this kernel's, if named),
    with every note that is not valid (whatever its kernel: an invalid note names none)."""
    blob_by_commit = _list(repo, ref)
    if kernel is not None:
        index = _load_index(repo)
        unknown = sorted({b for b in blob_by_commit.values() if b not in index})
        if unknown:
            texts = cat_blobs(repo, unknown)
            index.update(_add_to_index(repo, unknown, texts))
        blob_by_commit = {c: b for c, b in blob_by_commit.items()
                          if kernel in index[b][1] or not index[b][0]}
    notes = Notes()
    for (commit, blob), text in zip(blob_by_commit.items(), cat_blobs(repo, list(blob_by_commit.values()))):
        records, invalid = parse_note(commit, text)
        notes.invalid += invalid
        mine = [r for r in records if kernel is None or r.kernel == kernel]
        if mine:
            notes.by_commit[commit] = mine
    return notes


def _list(repo: Repo, ref: str) -> dict[str, str]:
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


def _load_index(repo: Repo) -> dict[str, tuple[bool, set[str]]]:
    """blob -> (whether all of it is valid, the kernels its records belong to)."""
    index = {}
    try:
        text = (repo.kgit_dir / _INDEX).read_text()
    except (OSError, UnicodeDecodeError):
        return index
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) == 3 and parts[1] in ("ok", "bad"):  # anything else (a torn write): read it again
            index[parts[0]] = (parts[1] == "ok", set(filter(None, parts[2].split(","))))
    return index


def _add_to_index(repo: Repo, blobs: list[str], texts: list[str]) -> dict[str, tuple[bool, set[str]]]:
    added, lines = {}, []
    for blob, text in zip(blobs, texts):
        records, invalid = parse_note("", text)
        kernels = {r.kernel for r in records}
        added[blob] = (not invalid, kernels)
        lines.append(f"{blob} {'bad' if invalid else 'ok'} {','.join(sorted(kernels))}\n")
    try:
        repo.kgit_dir.mkdir(exist_ok=True)
        # Appends of whole lines: two readers that add the same blob at once only repeat a line.
        with open(repo.kgit_dir / _INDEX, "a") as f:
            f.write("".join(lines))
    except OSError:
        pass  # a read-only repository: the index is only a speed-up
    return added


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
    is given the commit a branch reaches, else one another ref reaches. Which commits those are costs
    a walk of the history, paid only when there are such copies; `kgit doctor --fix` removes them.
    """
    commits_of: dict[tuple, list[str]] = {}
    copies: dict[tuple, list[Record]] = {}
    for commit, records in notes.by_commit.items():
        for record in records:
            commits_of.setdefault(record.key, []).append(commit)
            copies.setdefault(record.key, []).append(record)
    repeated = {c for commits in commits_of.values() if len(commits) > 1 for c in commits}
    on_branches = read.reachable(repo, repeated, branches_only=True)
    live = on_branches | read.reachable(repo, repeated - on_branches)
    result = []
    for key, commits in commits_of.items():
        if len(commits) > 1:
            commits = sorted(commits, key=lambda c: (c not in on_branches, c not in live))
            result.append((commits[0], union(copies[key])[0]))  # the copies merged into one record
        else:
            result.append((commits[0], copies[key][0]))
    return result



@dataclass
class History:
    """One kernel's records, each with the commit its note is on, in iteration order, and the notes
    that could not be read (reported, never used)."""

    pairs: list[tuple[str, Record]]
    invalid: list[InvalidNote]

    @property
    def records(self) -> list[Record]:
        return [r for _, r in self.pairs]


def kernel_history(repo: Repo, kernel: str) -> History:
    notes = read_notes(repo, kernel)
    pairs = sorted(records_with_commits(repo, notes), key=lambda p: (p[1].iteration, p[1].started or ""))
    return History(pairs, notes.invalid)


def deciding_history(repo: Repo, kernel: str) -> History:
    """The records that decide this kernel's loop here: every attempt, and the kept iterations of
    opt/<kernel> as it is in this clone. A clone that continued the branch elsewhere (its records
    arrive with kgit pull) has its own best: this branch is not judged by it."""
    history = kernel_history(repo, kernel)
    numbers = [r.iteration for r in history.records]
    branch = refs.branch_ref(kernel)
    # One clone numbers its iterations one after the other: only histories that forked repeat a number.
    if len(set(numbers)) == len(numbers) or read.rev(repo, branch) is None:
        return history
    on_branch = set(read.first_parents(repo, branch, limit=1_000_000))
    return History([(sha, r) for sha, r in history.pairs if not r.kept or sha in on_branch], history.invalid)
