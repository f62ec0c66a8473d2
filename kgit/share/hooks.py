"""The pre-push hook: what a push of kgit's refs carries, the check that its records exist, and which
records it leaves behind (kgit.share.sync.send_records sends them beside it).

Which record governs the tip of opt/<kernel>, the rule the hook and `kgit push` apply:
  walk the branch's first parents from the tip;
  - a commit whose note holds a record of the kernel governs: it must be a kept iteration whose
    correctness check passed (an attempt commit, or a record marked failed, is a failed verification);
  - a log commit is skipped: a reverted iteration's commit (subject `<kernel>: iter N: ... (reverted: S)`)
    or a `kgit report` commit, either touching experiments/README.md only. A reverted iteration's
    record sits on its attempt commit, so iteration N must have a record somewhere;
  - a commit that does not touch the kernel file (kgit.yaml, notes of yours) is skipped: the kernel
    at the tip is still the one an earlier record measured;
  - any other commit has no record: the kernel at the tip was never measured by kgit.
The hook reads git objects and notes only: it never runs kernel code.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from kgit import config
from kgit.errors import KgitError
from kgit.git import notes, read, refs
from kgit.git.command import Repo
from kgit.loop import history
from kgit.model.record import Record, is_object_id
from kgit.model.runs import Summary, sections, summarize

# The script git runs, with the Python of the kgit that installed it (as pre-commit records its
# interpreter); hooks/pre-push in kgit's repository is pre_push_script("") (a test keeps them equal).
PRE_PUSH = """#!/bin/sh
# kgit's pre-push hook (kgit hooks install): when a push carries an opt/<kernel> branch or a
# best/<kernel> tag, print each kernel's summary, refuse a branch whose tip has no kgit record, and
# send the records and attempts the push leaves behind (git pushes no notes unless asked), as
# 'kgit push' would. It reads git's notes only, never runs kernel code. Skip it: git push --no-verify
KGIT_PYTHON={python}
if [ -n "$KGIT_PUSH" ]; then
    exit 0  # the push of 'kgit push', which checked these refs itself
fi
if [ -x "$KGIT_PYTHON" ] && "$KGIT_PYTHON" -c "import kgit" 2>/dev/null; then
    exec "$KGIT_PYTHON" -m kgit hooks pre-push "$@"
fi
if command -v kgit >/dev/null 2>&1; then
    exec kgit hooks pre-push "$@"
fi
# Without kgit only a push that carries kgit's refs stops: nothing else needs it.
while read -r local_ref local_sha remote_ref remote_sha; do
    case "$remote_ref" in
    refs/heads/opt/*|refs/tags/best/*|refs/notes/kgit)
        echo "kgit pre-push hook: this push carries $remote_ref and kgit is not on PATH to check it;" \\
             "activate the environment kgit is installed in, or push with git push --no-verify" >&2
        exit 1;;
    esac
done
exit 0
"""

HOOK_MARK = "# kgit's pre-push hook"


def pre_push_script(python: str) -> str:
    return PRE_PUSH.replace("{python}", shlex.quote(python))


# Set by `kgit push` for the git push it runs: it has already checked and summarized the same refs.
PUSHING_ENV = "KGIT_PUSH"

ZERO = "0" * 40


@dataclass
class LeftBehind:
    """What a push of opt/ branches leaves behind: their records (the push carries no notes, and the
    remote lacks some of this clone's), which kgit.share.sync.send_records sends beside it."""

    tips: dict[str, str] = field(default_factory=dict)  # kernel -> the tip pushed
    tags_carried: set[str] = field(default_factory=set)  # kernels whose best/ tag the push sends itself


def pre_push(repo: Repo, remote: str, lines: list[str]) -> tuple[list[list[str]], LeftBehind]:
    """Check a push from the lines git gives the hook; return the summary rows, and what it leaves behind.

    Raises KgitError, which refuses the push, when a pushed opt/ branch's tip has no valid record.
    """
    if os.environ.get(PUSHING_ENV):
        return [], LeftBehind()
    tips, replaced, tagged, carries_notes = {}, {}, set(), False
    for line in lines:
        words = line.split()
        if len(words) != 4 or not all(is_object_id(w) for w in (words[1], words[3])):
            raise KgitError(f"the pre-push hook's input is not git's ('{line[:80]}'): expected "
                            "'<local ref> <local sha> <remote ref> <remote sha>' a line")
        _local_ref, local_sha, remote_ref, _remote_sha = words
        if local_sha == ZERO:
            continue  # a deletion carries nothing to check
        if remote_ref.startswith(refs.BRANCHES):
            tips[remote_ref[len(refs.BRANCHES):]] = local_sha
            if _remote_sha != ZERO:
                replaced[remote_ref[len(refs.BRANCHES):]] = _remote_sha
        elif remote_ref.startswith(refs.TAGS):
            tagged.add(remote_ref[len(refs.TAGS):])
        carries_notes |= remote_ref == refs.NOTES_REF
    kernels = tagged | tips.keys()
    if not kernels:
        return [], LeftBehind()
    by_commit = notes.read_notes(repo).by_commit
    check_tips(repo, tips, by_commit, from_hook=True)
    for kernel, theirs in sorted(replaced.items()):
        check_not_dropped(repo, kernel, theirs, tips[kernel], by_commit)
    behind = LeftBehind() if carries_notes or records_on_remote(repo, remote) else LeftBehind(tips, tagged)
    return summary(by_commit, sorted(kernels)), behind


def check_tips(repo: Repo, tips: dict[str, str], by_commit: dict[str, list[Record]], from_hook: bool) -> None:
    for kernel, tip in sorted(tips.items()):
        problem = tip_problem(repo, kernel, tip, by_commit)
        if problem:
            skip = ", or push without this check: git push --no-verify" if from_hook else ""
            raise KgitError(f"refusing to push {refs.branch(kernel)}: {problem}; record kernel changes with "
                            f"'kgit step' (see 'kgit doctor'){skip}")


def check_not_dropped(repo: Repo, kernel: str, theirs: str, tip: str, by_commit: dict[str, list[Record]]) -> None:
    """Refuse a push that would replace the remote's opt/<kernel> (theirs) by a tip that lacks some of
    its kernels (a `git push --force`): a kept iteration, or a kernel change whose record has not
    reached this clone. gc on the remote would delete them. Log commits may go: the notes keep them."""
    branch = refs.branch(kernel)
    if not read.existing(repo, [theirs]):
        raise KgitError(f"refusing to push {branch}: the remote's {branch} is at {theirs[:10]}, which this clone does "
                        f"not have; a forced push would drop whatever it holds: 'kgit pull' first, which joins the "
                        f"two lines, or push without this check: git push --no-verify")
    kernel_path = _kernel_path(repo, kernel)
    # every commit theirs holds and tip does not, a join's other line too (kgit.share.join keeps the line
    # that did not go on as a second parent, kept kernels and all)
    dropped = [(sha, [r for r in by_commit.get(sha, []) if r.kernel == kernel and r.kept], kernel_path in paths)
               for sha, _subject, paths in read.only_in(repo, theirs, tip)]
    kernels = [(sha, kept) for sha, kept, changed in dropped if kept or changed]
    if kernels:
        named = ", ".join(f"iteration {kept[-1].iteration}" if kept else sha[:10] for sha, kept in kernels)
        raise KgitError(f"refusing to push {branch}: it would drop kernels the remote's {branch} holds and this tip "
                        f"does not ({named}; a forced push): 'kgit pull' joins the two lines, or push without this "
                        "check: git push --no-verify")


def _kernel_path(repo: Repo, kernel: str) -> str | None:
    try:
        return config.load(repo.root, kernel).kernel_path
    except KgitError:  # no kernel file here to tell kernel changes from others
        return None


def tip_problem(repo: Repo, kernel: str, tip: str, by_commit: dict[str, list[Record]],
                kernel_only: bool = False) -> str | None:
    """Why the tip of opt/<kernel> is not governed by a valid record (the rule in this module's doc).
    kernel_only: only whether the kernel at the tip has one (a log commit whose reverted iteration has no
    record here yet changes no kernel: kgit pull takes it, kgit push and the hook do not send it)."""
    recorded = {r.iteration for records in by_commit.values() for r in records if r.kernel == kernel}
    report = config.report_path(repo.root)
    kernel_path = _kernel_path(repo, kernel)  # None: every commit counts
    for sha, subject, paths in read.first_parent_walk(repo, tip):
        mine = [r for r in by_commit.get(sha, []) if r.kernel == kernel]
        if mine:
            kept = [r for r in mine if r.status.on_branch]
            if not kept or any(r.correctness is not True for r in kept):
                return (f"its kernel is that of commit {sha[:10]}, whose record is iteration "
                        f"{mine[-1].iteration}, {mine[-1].status}: a failed verification, not a kept iteration")
            return None
        log_only = set(paths) <= {report}
        parsed = refs.parse_subject(subject)
        if log_only and parsed and parsed.reverted and parsed.kernel == kernel:
            if parsed.iteration not in recorded and not kernel_only:
                return (f"commit {sha[:10]} logs iteration {parsed.iteration} as reverted, but that iteration has "
                        "no record in this clone (a step pushed with plain git, which sends no notes: 'kgit pull' "
                        "brings its record, once the clone that stepped it has run 'kgit push')")
            continue
        if log_only and refs.is_report_subject(subject):
            continue
        if kernel_path and kernel_path not in paths:
            continue  # not a change of the kernel
        if parsed and parsed.kernel == kernel and parsed.iteration not in recorded:
            return (f"its commit {sha[:10]} is iteration {parsed.iteration} of a kgit step whose record is not in this "
                    "clone (the commit was pushed with plain git, which sends no notes, or kgit pull refused the "
                    "record: 'kgit doctor' lists refusals); 'kgit pull' brings it once the clone that stepped it has "
                    "run 'kgit push'")
        twin = kernel_path and history.measured_twin(repo, kernel_path, sha, by_commit, kernel)
        if twin:
            return (f"its commit {sha[:10]} ({subject[:60]}) holds the kernel of iteration {twin[1].iteration} "
                    f"({twin[0][:10]}), measured on another line: a git merge the loop does not read that way "
                    "('kgit doctor' says how to make it kgit's join)")
        if len(read.parents(repo, sha)) > 1:
            return (f"its commit {sha[:10]} ({subject[:60]}) is a git merge whose kernel has no kgit record here: "
                    "'kgit pull' brings the merged line's records, then 'kgit doctor' says how to make it kgit's join")
        return f"its tip {sha[:10]} ({subject[:60]}) has no kgit record"
    return "no commit on it has a kgit record"


def summary(by_commit: dict[str, list[Record]], kernels: list[str]) -> list[Summary]:
    """One Summary per run of these kernels (a kernel on one device)."""
    runs = notes.union([r for records in by_commit.values() for r in records if r.kernel in kernels])
    return [summarize(gpu, section) for (_, gpu, _), section in sections(runs).items()]


def records_on_remote(repo: Repo, remote: str) -> bool:
    """Whether the remote had every local record when kgit last fetched from or pushed to it."""
    local = read.rev(repo, refs.NOTES_REF)
    known = read.rev(repo, refs.remote_snapshot(remote, "notes/kgit"))
    return local is None or (known is not None and read.is_ancestor(repo, local, known))


def read_hook_input(stdin_text: str, environ: dict) -> list[str]:
    """git's lines on standard input; under the pre-commit framework, the one ref it passes in variables.

    pre-commit reads git's standard input itself and hands hooks only the first pushed ref, as
    PRE_COMMIT_LOCAL_BRANCH, PRE_COMMIT_TO_REF, PRE_COMMIT_REMOTE_BRANCH and PRE_COMMIT_FROM_REF.
    """
    lines = [line for line in stdin_text.splitlines() if line.strip()]
    if not lines and environ.get("PRE_COMMIT_REMOTE_BRANCH") and environ.get("PRE_COMMIT_TO_REF"):
        lines = [" ".join([environ.get("PRE_COMMIT_LOCAL_BRANCH") or "HEAD", environ["PRE_COMMIT_TO_REF"],
                           environ["PRE_COMMIT_REMOTE_BRANCH"], environ.get("PRE_COMMIT_FROM_REF") or ZERO])]
    return lines

