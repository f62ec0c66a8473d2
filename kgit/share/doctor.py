"""kgit doctor's checks: what rewrites, crashes and clones leave behind (kgit.share.repair fixes it).

Read-only: each problem says what --fix would do about it.

  an interrupted step      a kgit killed mid-step: the loop's recovery finishes it or rolls it back
                           (the lock needs no repair: the kernel releases it when its holder dies)
  notes on lost commits    a note on a commit no branch reaches (attempts are meant to be off-branch):
                           - a copy left by a rebase or amend (its records are on a branch's commit too):
                             removed
                           - a kept iteration rewritten without notes.rewriteRef (a commit of opt/<kernel>
                             has its subject and no note): the note moves there
                           - the only copy, commit gone: reported and kept (a record is never deleted)
                           - the only copy, and no ref at all reaches the commit: pinned by an attempt ref
                             so that gc keeps it
  a best/ tag off its branch   moved to the branch's best kept iteration
  a branch diverged from a remote's   reported: two clones continued one loop; kgit pull joins them
                           (every record of both stays in the notes)
  a note that is no valid record   its last valid version put back from the notes ref's history;
                           reported where it has none (kgit decides without it, its kernel's steps refuse)
  a record kgit pull refused  reported (kgit.share.screen): kept under refs/kgit/quarantine/<remote>
                           until a person has looked and deletes that ref
  a kernel commit no step recorded   reported (a hand commit on opt/<kernel>): only a person can say
                           whether it is measured as the next step or dropped; steps refuse until then
"""

from __future__ import annotations

from dataclasses import dataclass

from kgit import config
from kgit.errors import KgitError
from kgit.git import notes, read, refs
from kgit.git.command import Repo
from kgit.loop import history
from kgit.model import decide
from kgit.model.record import InvalidNote, Record
from kgit.state import journal, lock


@dataclass(frozen=True)
class Problem:
    problem: str
    fix: str  # what --fix does about it
    # what --fix does, for kgit.share.repair: (operation, its arguments); None: nothing safe to do.
    # ("recover",): the recovery every writing command runs first (kgit.loop.recovery.locked), --fix too
    repair: tuple | None = None


def find_problems(repo: Repo) -> list[Problem]:
    """What is wrong, without changing anything (the checks of `kgit doctor`)."""
    problems = []
    unfinished = journal.path(repo).exists() or read.rev(repo, refs.SAVED_EDITS)
    if unfinished and lock.holder(repo) is None:
        problems.append(Problem("an interrupted step (kgit was killed in the middle of it)",
                                "finish or roll it back, as the next writing kgit command would", ("recover",)))
    all_notes = notes.read_notes(repo)
    return (problems + invalid_note_problems(repo, all_notes.invalid) + note_problems(repo, all_notes) + tag_problems(repo)
            + diverged_problems(repo) + quarantine_problems(repo) + ([] if unfinished else unrecorded_problems(repo)))


def quarantine_problems(repo: Repo) -> list[Problem]:
    """What kgit pull refused (kgit.share.screen): not in the records, kept aside."""
    return [Problem(f"refused by kgit pull ({ref}): {line}",
                    f"none automatic: 'git log -1 {ref}' lists what was refused, 'git show {ref}:COMMIT' "
                    f"shows its note; once settled: git update-ref -d {ref}")
            for ref in sorted(read.refs_under(repo, refs.QUARANTINE)) for line in quarantined(repo, ref)]


def quarantined(repo: Repo, ref: str) -> list[str]:
    """The refusals listed in a quarantine ref's commit (kgit.share.screen.keep writes them), a line each."""
    return [line for line in read.message(repo, ref).splitlines()[2:] if line.strip()]


def invalid_note_problems(repo: Repo, invalid: list[InvalidNote]) -> list[Problem]:
    """Notes that hold something that is not a valid record: kgit decides without them, and steps of
    the kernel whose branch holds one refuse (kgit.loop.history.damaged_notes). Where the notes ref's
    history has a valid version of the note, --fix puts it back."""
    problems = []
    for commit in dict.fromkeys(note.commit for note in invalid):  # a note may hold several invalid parts
        reasons = "; ".join(note.reason for note in invalid if note.commit == commit)
        problem = f"the note on {commit[:10]} is not a valid kgit record ({reasons})"
        earlier = notes.last_valid_version(repo, commit)
        if earlier is None:
            problems.append(Problem(problem, f"none automatic: read it with 'git notes --ref={refs.NOTES_REF} show "
                                             f"{commit}', then repair or remove it ('git notes --ref={refs.NOTES_REF} "
                                             f"remove {commit}')"))
            continue
        notes_commit, text = earlier
        problems.append(Problem(problem, f"put back its last valid version, from {refs.NOTES_REF} at {notes_commit[:10]} "
                                         f"(the damaged one stays in the notes' history)",
                                ("restore_note", commit, text)))
    return problems


def note_problems(repo: Repo, all_notes: notes.Notes) -> list[Problem]:
    """Notes on commits that a rewrite left behind, or that nothing keeps any more."""
    by_commit = all_notes.by_commit
    present = read.existing(repo, list(by_commit))
    on_branches = read.reachable(repo, present, branches_only=True)
    live = on_branches | read.reachable(repo, present - on_branches)
    keys_on_branches = {r.key for c in on_branches for r in by_commit[c]}
    off = sorted(c for c in by_commit if c not in on_branches)
    subjects = read.subjects(repo, [c for c in off if c in present])
    problems = []
    for commit in off:
        records = by_commit[commit]
        what = ", ".join(f"{r.kernel} iteration {r.iteration}" for r in records)
        where = f"note on {commit[:10]} ({what})"
        if all(r.key in keys_on_branches for r in records):
            problems.append(Problem(f"{where}: a copy left by a rewrite, the record is on a branch's commit",
                                    "remove the stale note", ("remove_note", commit)))
        elif commit not in present:
            problems.append(Problem(f"{where}: the commit is not in this clone",
                                    "none: the note is the only copy of its record and stays "
                                    "('kgit pull' may bring the commit)"))
        elif twin := _rewritten(repo, records, subjects.get(commit, ""), by_commit):
            problems.append(Problem(f"{where}: its commit was rewritten as {twin[:10]} without the note",
                                    f"move the note to {twin[:10]}", ("move_note", commit, twin)))
        elif commit not in live:
            ref = _free_attempt_ref(repo, records[0], commit)
            problems.append(Problem(f"{where}: no ref reaches the commit and gc would delete it",
                                    f"keep it with {ref}", ("set_ref", ref, commit)))
    return problems


def _rewritten(repo: Repo, records: list[Record], subject: str, by_commit: dict) -> str | None:
    """For a kept iteration's commit off its branch: the commit of opt/<kernel> with its subject and no
    note, what a rewrite without notes.rewriteRef made of it."""
    kernel = records[0].kernel
    parsed = refs.parse_subject(subject)
    if not any(r.status.on_branch for r in records) or parsed is None or parsed.kernel != kernel:
        return None
    tip = read.rev(repo, refs.branch_ref(kernel))
    if tip is None:
        return None
    for sha, candidate, _ in read.first_parent_walk(repo, tip):
        if candidate == subject and sha not in by_commit:
            return sha
        on_kernel = refs.parse_subject(candidate)
        if (on_kernel is None or on_kernel.kernel != kernel) and not refs.is_report_subject(candidate):
            return None  # past the kernel's commits: the rest is the history it started from
    return None


def _free_attempt_ref(repo: Repo, record: Record, commit: str) -> str:
    ref = refs.attempt_ref(record.kernel, record.iteration)
    return ref if read.rev(repo, ref) is None else f"{ref}-{commit[:10]}"


def tag_problems(repo: Repo) -> list[Problem]:
    problems = []
    for kernel in read.kernels_with_branches(repo):
        tag = refs.tag(kernel)
        # the kept iterations the branch holds, over its whole line (a best may lie far below a long run
        # of reverts), and where the tag is: one read (notes.deciding_history)
        history = notes.deciding_history(repo, kernel)
        found = decide.best_pair(history.pairs)
        if found is None:
            continue
        best_commit, best = found
        tagged, on_branch = history.line.tagged, history.line.first_parents
        if tagged == best_commit:
            continue
        state = ("is missing" if tagged is None else "points off its branch" if tagged not in on_branch
                 else "is not on the best kept iteration")
        problems.append(Problem(
            f"{tag} {state}", f"move it to {best_commit[:10]} (iteration {best.iteration})",
            ("set_tag", kernel, best_commit),
        ))
    return problems


def diverged_problems(repo: Repo) -> list[Problem]:
    """Loop branches that a remote's copy (as last fetched) and this clone have both continued."""
    problems = []
    for ref, theirs in sorted(read.refs_under(repo, "refs/remotes/").items()):
        remote, _, name = ref.removeprefix("refs/remotes/").partition("/")
        kernel = refs.kernel_of_branch(name)
        ours = read.rev(repo, refs.branch_ref(kernel)) if kernel else None
        if ours is None or ours == theirs:
            continue
        if read.is_ancestor(repo, theirs, ours) or read.is_ancestor(repo, ours, theirs):
            continue  # one side is behind: a push or a pull settles it
        problems.append(Problem(
            f"{name} has diverged from {remote}'s (both clones continued the loop, or this one was amended or "
            "rebased)",
            f"none automatic: 'kgit pull {remote}' joins the two lines, the one that kept kernels going on (or, "
            "where both did, says so and how to choose); every record of both stays in the notes"))
    return problems


def _merge_taking_second(repo: Repo, kernel: str, kernel_path: str, sha: str, kernel_history) -> Record | None:
    """The kept record whose kernel the merge at the branch's tip sha took from its second parent's line
    (a hand `git merge` of two lines, resolved to the other side's measured kernel), or None."""
    merged = read.parents(repo, sha)
    if len(merged) != 2 or read.rev(repo, refs.branch_ref(kernel)) != sha:
        return None
    twin = history.measured_twin(repo, kernel_path, sha, {c: [r] for c, r in kernel_history.pairs}, kernel)
    if twin is None or read.is_ancestor(repo, twin[0], merged[0]) or not read.is_ancestor(repo, twin[0], merged[1]):
        return None
    return twin[1]


def unrecorded_problems(repo: Repo) -> list[Problem]:
    """Commits of a loop's kernel file that no step measured (history.unrecorded_commits)."""
    problems = []
    for kernel in read.kernels_with_branches(repo):
        try:
            kernel_path = config.load(repo.root, kernel).kernel_path
        except KgitError:  # this checkout does not define the kernel: nothing to tell its file by
            continue
        kernel_history = notes.kernel_history(repo, kernel)
        if not kernel_history.pairs:  # every commit would read as a hand commit: the records are what is missing
            problems.append(Problem(
                f"{refs.branch(kernel)} has no kgit record in this clone ({refs.NOTES_REF} was deleted or never fetched)",
                "none automatic: 'kgit pull' brings them from a remote that has them"))
            continue
        unrecorded = history.unrecorded_commits(notes.branch_history(repo, kernel), kernel_path)
        taken = unrecorded and _merge_taking_second(repo, kernel, kernel_path, unrecorded[0][0], kernel_history)
        if taken:
            newest, subject = unrecorded[0]
            problems.append(Problem(
                f"{refs.branch(kernel)}'s tip {newest[:10]} ({subject[:50]}) is a git merge that took the kernel of "
                f"iteration {taken.iteration} from its second parent, where the loop, reading its first parents, "
                "does not look",
                f"make it the join kgit pull makes: the same tree and parents, the line of iteration {taken.iteration} "
                "first (the other stays in the branch's history)",
                ("second_parent_first", kernel, newest)))
        elif unrecorded:
            oldest, subject = unrecorded[-1]
            problems.append(Problem(
                f"{refs.branch(kernel)} has {len(unrecorded)} commit(s) of {kernel_path} that no step recorded, "
                f"from {oldest[:10]} ({subject[:50]})",
                f"none automatic: on {refs.branch(kernel)}, {history.hand_commit_advice(oldest)}"))
    return problems
