"""What kgit pull lets in: a pulled record is checked against what was pulled before it joins refs/notes/kgit.

Anyone can write a note, so a record from a remote or a bundle is untrusted twice over: as JSON
(kgit.model.record checks its keys, types, kernel name and sizes) and as a claim about history, which
only the pulled commits can back. A pulled record is refused when
  - its note is no valid record (not JSON, a wrong key, a text of megabytes);
  - its commit did not come with the pull: nothing here shows where the iteration was made;
  - its iteration is past what its kernel's history holds: each iteration adds a commit to
    opt/<kernel> and a record, so an iteration above the branch's commits plus the kernel's records is
    made up (a forged 1000000 would end every loop at max_iterations);
  - it is kept (its status puts it on the branch) and its commit is on no opt/<kernel> branch;
  - its figure is over ten times its GPU's peak, the one it states or kgit's table's for its GPU
    (a figure far above this clone's is no reason: another GPU may well be faster);
  - it would be its kernel's best, and the best/ tag that came with it names another commit.
A refused note is not merged: its blob stays under refs/kgit/quarantine/<remote> (nothing is lost),
the pull says what and why and exits 1, and `kgit doctor` lists it until that ref is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from kgit.git import notes, read, refs, write
from kgit.share.doctor import quarantined
from kgit.git.command import Repo, cat_blobs
from kgit.model import decide, peaks
from kgit.model.record import Record, parse_note

PEAK_FACTOR = 10  # a figure may pass its GPU's datasheet peak (data in the L2), not tenfold


@dataclass(frozen=True)
class Refused:
    commit: str
    what: str  # "fake iteration 3", or "the note" when it holds no valid record
    why: str

    def describe(self) -> str:
        return f"{self.what} on {self.commit[:10]}: {self.why}"


def screen(repo: Repo, remote: str, theirs_ref: str, mine: dict[str, list[Record]]
           ) -> tuple[dict[str, list[Record]], list[Refused]]:
    """The remote's records that may join ours (by commit), and what is refused."""
    ours_blobs = notes.note_blobs(repo, refs.NOTES_REF)
    new = {c: b for c, b in notes.note_blobs(repo, theirs_ref).items() if ours_blobs.get(c) != b}
    theirs, refused = {}, []
    for (commit, blob), text in zip(new.items(), cat_blobs(repo, list(new.values()))):
        records, invalid = parse_note(commit, text)
        refused += [Refused(commit, "the note", f"no valid record ({note.reason})") for note in invalid]
        if records:
            theirs[commit] = records
    known = {r.key for records in mine.values() for r in records}
    candidates = [(c, r) for c, records in theirs.items() for r in records if r.key not in known]
    present = read.existing(repo, sorted({c for c, _ in candidates}))
    history = _History(repo, remote, known | {r.key for _, r in candidates})
    for commit, record in candidates:
        why = _implausible(commit, record, present, history)
        if why:
            refused.append(Refused(commit, f"{record.kernel} iteration {record.iteration}", why))
    out = {(c, r.key) for c, r in _out(refused, candidates)}
    refused += _unlike_the_tag(repo, remote, mine, [(c, r) for c, r in candidates if (c, r.key) not in out])
    out = {(c, r.key) for c, r in _out(refused, candidates)}
    accepted = {c: [r for r in records if (c, r.key) not in out] for c, records in theirs.items()}
    return {c: records for c, records in accepted.items() if records}, refused


def _out(refused: list[Refused], candidates: list[tuple[str, Record]]) -> list[tuple[str, Record]]:
    names = {(r.commit, r.what) for r in refused}
    return [(c, r) for c, r in candidates if (c, f"{r.kernel} iteration {r.iteration}") in names]


class _History:
    """Per kernel, what the pulled history can hold: its branches (ours and the remote's) and how many
    iterations its commits and records allow."""

    def __init__(self, repo: Repo, remote: str, keys: set[tuple]):
        self.repo, self.remote = repo, remote
        self.runs: dict[str, int] = {}
        for key in keys:
            self.runs[key[0]] = self.runs.get(key[0], 0) + 1
        self._tips: dict[str, list[str]] = {}
        self._depth: dict[str, int] = {}

    def tips(self, kernel: str) -> list[str]:
        if kernel not in self._tips:
            found = (read.rev(self.repo, refs.branch_ref(kernel)),
                     read.rev(self.repo, refs.remote_branch_ref(self.remote, kernel)))
            self._tips[kernel] = [tip for tip in found if tip]
        return self._tips[kernel]

    def most_iterations(self, kernel: str) -> int:
        if kernel not in self._depth:
            self._depth[kernel] = max((len(read.first_parents(self.repo, tip, limit=1_000_000))
                                       for tip in self.tips(kernel)), default=0)
        return self._depth[kernel] + self.runs.get(kernel, 0)


def _implausible(commit: str, record: Record, present: set[str], history: _History) -> str | None:
    kernel = record.kernel
    if commit not in present:
        return "its commit did not come with the pull"
    most = history.most_iterations(kernel)
    if record.iteration > most:
        return f"iteration {record.iteration} is past what the history of {refs.branch(kernel)} holds (at most {most})"
    if record.status.on_branch and not read.reachable_from(history.repo, {commit}, history.tips(kernel)):
        return f"a kept iteration ({record.status.value}) whose commit is on no {refs.branch(kernel)}"
    return _implausible_figure(record)


def _implausible_figure(record: Record) -> str | None:
    if record.value is None or record.metric not in ("gbps", "tflops"):
        return None
    known = peaks.peak_for(record.gpu, record.metric) if record.gpu else None
    for peak in (record.peak, known):
        if peak and record.value > PEAK_FACTOR * peak:
            return f"its figure {record.value:g} is over {PEAK_FACTOR} times its GPU's peak ({peak:g})"
    return None


def _unlike_the_tag(repo: Repo, remote: str, mine: dict[str, list[Record]],
                    candidates: list[tuple[str, Record]]) -> list[Refused]:
    """Pulled records that would be their kernel's best on the remote's branch while the remote's best/
    tag names another commit: the tag is what the remote's loop decided."""
    refused = []
    for kernel in sorted({r.kernel for _, r in candidates if r.kept}):
        tip = read.rev(repo, refs.remote_branch_ref(remote, kernel))
        tag = read.rev(repo, refs.remote_snapshot(remote, refs.tag(kernel)))
        if tip is None or tag is None:
            continue
        on_branch = set(read.first_parents(repo, tip, limit=1_000_000))
        pairs = [(c, r) for c, records in mine.items() for r in records if r.kernel == kernel]
        pairs += [(c, r) for c, r in candidates if r.kernel == kernel]
        pairs = [(c, r) for c, r in pairs if c in on_branch]
        tagged = decide.best_pair([(c, r) for c, r in pairs if c == tag])
        if tagged is None:
            continue  # a tag on no kept record: kgit pull refuses the tag itself
        rank = (tagged[1].iteration, tagged[1].started or "")
        for commit, record in candidates:
            if record.kernel == kernel and record.kept and commit in on_branch and commit != tag \
                    and (record.iteration, record.started or "") > rank:
                refused.append(Refused(commit, f"{kernel} iteration {record.iteration}",
                                       f"it would be the best, but {remote}'s {refs.tag(kernel)} is on {tag[:10]}"))
    return refused


def keep(repo: Repo, remote: str, theirs_notes: str, refused: list[Refused]) -> None:
    """Keep the refused notes, as they came, under refs/kgit/quarantine/<remote>; the commit's message
    names each refusal (what `kgit doctor` lists), and its parents keep the remote's notes whole."""
    ref = refs.QUARANTINE + remote
    blobs = notes.note_blobs(repo, theirs_notes)
    previous = read.rev(repo, ref)
    kept = quarantined(repo, ref) if previous else []  # the earlier pulls' refusals stay listed
    lines = "".join(f"{line}\n" for line in dict.fromkeys(kept + [r.describe() for r in refused]))
    write.keep_blobs(repo, ref, {r.commit: blobs[r.commit] for r in refused if r.commit in blobs},
                     f"kgit pull refused from {remote}\n\n{lines}", [p for p in (previous, theirs_notes) if p])
