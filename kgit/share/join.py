"""Two clones' lines of one kernel's loop, met at kgit pull: what each kept since they parted, and the
commit that joins them.

Two clones that step the same branch at once both add commits to it. Most of the time one side only
logged reverted attempts (a revert adds a commit that renders experiments/README.md, its attempt is
pinned under refs/kgit/attempts/), and nothing on it needs choosing: the line that kept kernels goes on.
kgit joins the two with a merge commit whose first parent is that line and whose tree is that line's,
the README rendered again from the merged records. The loop reads a branch by its first parents, so it
goes on from that line's best; the other line stays reachable (second parent) on every clone and remote
that has the branch, so that no record's commit is ever dropped by gc; the remote can take the join as
a fast-forward, so push needs no force, and a later pull elsewhere is a fast-forward too.

When both lines kept kernels (a real fork), which goes on is a person's choice: pull keeps this clone's
line, pins the other's at refs/kgit/forks/<kernel>/<remote> and says which measured better; `kgit pull
--take theirs` (or `ours`) then joins them with the chosen line first.

A branch rewritten after it was pushed (an amend, a rebase) parts from the remote's too, but git copied
the notes to the new commits (notes.rewriteRef, which kgit sets): the same runs are on both lines. A
kept run counts for a line only where the other line does not hold it; where neither holds one the
other lacks, this clone's rewrite goes on, the remote's old commits below it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kgit import config
from kgit.git import read, refs, write
from kgit.git.command import Repo
from kgit.model.record import Record, same_environment
from kgit.render.text import metric
from kgit.loop import report

OURS, THEIRS = "ours", "theirs"


@dataclass
class Lines:
    """Both lines of a kernel's branch since the commit they share: each line's kept iterations, latest last."""

    kernel: str
    ours: str
    theirs: str
    kept_ours: list[tuple[str, Record]]  # kept since they parted, and not on the other line
    kept_theirs: list[tuple[str, Record]]
    rewritten: bool = False  # this clone's line holds copies of runs kept on the other since they parted

    @property
    def forked(self) -> bool:
        return bool(self.kept_ours and self.kept_theirs)

    def going_on(self, take: str | None) -> str:
        """Which line the join puts first: the one that kept kernels, or the one taken in a fork."""
        if self.forked:
            return take or OURS
        if self.kept_ours or self.kept_theirs:
            return OURS if self.kept_ours else THEIRS
        return OURS if self.rewritten else THEIRS


def lines(repo: Repo, kernel: str, ours: str, theirs: str, by_commit: dict[str, list[Record]]) -> Lines:
    base = read.merge_base(repo, ours, theirs)
    shared = set(read.first_parents(repo, base, limit=1_000_000)) if base else set()

    def kept_on(tip: str, since: bool) -> list[tuple[str, Record]]:
        kept = []
        for sha in read.first_parents(repo, tip, limit=1_000_000):
            if since and sha in shared:
                break
            kept += [(sha, r) for r in by_commit.get(sha, []) if r.kernel == kernel and r.kept]
        return sorted(kept, key=lambda pair: pair[1].iteration)

    kept_ours, kept_theirs = kept_on(ours, since=True), kept_on(theirs, since=True)
    if not (kept_ours and kept_theirs):
        return Lines(kernel, ours, theirs, kept_ours, kept_theirs)
    # both kept runs since they parted: those the other line holds too are copies, not a fork
    on_ours, on_theirs = ({r.key for _, r in kept_on(tip, since=False)} for tip in (ours, theirs))
    return Lines(kernel, ours, theirs, [p for p in kept_ours if p[1].key not in on_theirs],
                 [p for p in kept_theirs if p[1].key not in on_ours],
                 rewritten=any(r.key in on_theirs for _, r in kept_ours))


def join(repo: Repo, found: Lines, first: str, remote: str) -> str:
    """The merge commit of both lines, first's line first, with first's tree and the README rendered
    from every record here (the pulled ones merged already)."""
    head, other = (found.ours, found.theirs) if first == OURS else (found.theirs, found.ours)
    path = config.report_path(repo.root)
    files = {}
    if read.file_at(repo, path, head) is not None:  # a README kgit renders: show both lines' records
        files[path], _ = report.readme_text(repo, path, head)
    message = (f"{refs.report_subject(path)} on joining {remote}'s {refs.branch(found.kernel)} "
               f"({'this clone' if first == OURS else remote}'s line goes on)")
    return write.commit_with_files(repo, head, head, files, message, also_parent=other)


def pin(repo: Repo, kernel: str, remote: str, tip: str) -> str:
    """Keep a line of the kernel that does not go on reachable under refs/kgit/forks/, which gc keeps."""
    ref = f"{refs.FORKS}/{kernel}/{remote}-{tip[:10]}"
    write.set_ref(repo, ref, tip)
    return ref


def which_measured_better(found: Lines, lower_is_better: bool) -> str:
    """A few words on the two lines' bests: which is ahead, and whether the figures can be compared."""
    (_, ours), (_, theirs) = found.kept_ours[-1], found.kept_theirs[-1]
    if ours.metric != theirs.metric:
        return f"they report different figures ({ours.metric}, {theirs.metric})"
    figures = (f"this clone's best {metric(ours.value, ours.metric, ours.cpu_timing)}, theirs "
               f"{metric(theirs.value, theirs.metric, theirs.cpu_timing)}")
    if not same_environment(ours.environment, theirs.environment):
        return f"{figures}, measured in different environments: not comparable as they stand"
    ahead = "theirs" if (theirs.value < ours.value) == lower_is_better and theirs.value != ours.value else "this clone's"
    return f"{figures} on the same device: {ahead} measured better"

