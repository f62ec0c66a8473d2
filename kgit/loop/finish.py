"""kgit finish: a loop's best kernel brought into the branch the loop started from, as one commit.

    opt/<kernel>:  base -- iter 0 -- iter 1 -- ... -- best -- (reverts' log commits)
    main:          base -- ... (the team's own commits) -- finish

The commit carries what the best changed since the loop's start (the kernel file, and a test committed
on the loop's branch, say), and none of kgit's own files: experiments/README.md is rendered from the
records (`kgit report` renders it wherever it is wanted) and kgit.yaml holds the loop's settings, so
neither can conflict with what the branch holds of them. A path that the branch changed too since the
loop started is refused, not merged: the best was measured against the file as the loop found it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kgit import config
from kgit.errors import KgitError
from kgit.git import read, refs, write
from kgit.git.command import GitError, Repo
from kgit.loop.history import deciding
from kgit.model import decide
from kgit.model.record import Record, Status


@dataclass
class Finished:
    kernel: str
    branch: str  # the branch the best went into
    commit: str | None  # its one commit; None where the branch held the best already
    paths: list[str]  # what the commit changes
    best: Record
    best_commit: str
    baseline: Record


def finish(repo: Repo, kernel: str, into: str | None) -> Finished:
    """Commit the best's changes since the loop's start on the branch `into` (by default the branch it
    started from) and move that branch there; refuse, changing nothing, where that branch changed the
    same files meanwhile."""
    history = deciding(repo, kernel)
    found = decide.best_pair(history.pairs)
    start = next(((sha, r) for sha, r in history.pairs if r.status == Status.BASELINE), None)
    if found is None or start is None:
        raise KgitError(f"{refs.branch(kernel)} holds no baseline of {kernel}: no best to finish with",
                        "'kgit log' says what its records hold; 'kgit doctor' what is wrong")
    (best_commit, best), (baseline_commit, baseline) = found, start
    base = baseline.base or read.first_parent(repo, baseline_commit)  # the commit `kgit start` found
    branch = into or _started_from(repo, kernel, base)
    tip, followed = _branch_tip(repo, branch)
    if not read.is_ancestor(repo, base, tip):
        raise KgitError(f"{branch} does not hold the commit {kernel}'s loop started from ({base[:10]})",
                        "name the branch the loop started from with --into")
    kgits = {config.report_path(repo.root), config.CONFIG_FILE}
    paths = [p for p in read.changed_paths(repo, base, best_commit) if p not in kgits]
    if not paths:
        raise KgitError(f"nothing to bring: {kernel}'s best is its baseline (iteration {best.iteration})",
                        "a kept step makes a best to finish with")
    waiting = _waiting(repo, kernel, base, best_commit, tip, paths)
    if not waiting:
        return Finished(kernel, branch, None, paths, best, best_commit, baseline)
    if read.current_branch(repo) == branch:
        edited = sorted(set(waiting) & set(read.modified_tracked_files(repo)))
        if edited:
            raise KgitError(f"uncommitted edits to {', '.join(edited)} on {branch}, which the finish would replace",
                            "commit or stash them first")
    elsewhere = read.checked_out_elsewhere(repo, f"refs/heads/{branch}")
    if elsewhere:  # moved under it, that checkout would show the finish undone
        raise KgitError(f"{branch} is checked out in {elsewhere}", f"run 'kgit finish {kernel}' there")
    commit = write.commit_paths_of(repo, tip, best_commit, waiting, _message(kernel, best, baseline, history.pairs))
    if followed:  # the branch is a remote's only: made here, as git switch makes it, once nothing refused
        write.track_branch(repo, branch, followed)
    try:
        write.fast_forward_branch(repo, branch, tip, commit)
    except GitError as e:  # untracked files the commit would overwrite, or a commit made on the branch meanwhile
        raise KgitError(f"{branch} was not moved to the finish's commit ({e})",
                        "move aside what git names (git status lists it), then finish again") from None
    return Finished(kernel, branch, commit, waiting, best, best_commit, baseline)


def _started_from(repo: Repo, kernel: str, base: str) -> str:
    """The branch the loop started from: the one checked out (other than a loop's), else the only local
    branch that holds the loop's base and is no loop's."""
    current = read.current_branch(repo)
    if current and refs.kernel_of_branch(current) is None:
        return current
    holders = _holders(repo, read.local_branches(repo), base)
    if not holders:  # a clone whose checkout was a loop's branch: the branch it started from is a remote's
        remote = {name.split("/", 1)[1]: sha for name, sha in read.remote_branches(repo).items()}
        holders = _holders(repo, remote, base)
    if len(holders) == 1:
        return holders[0]
    raise KgitError(f"which branch {kernel}'s loop started from is not clear: "
                    + (f"{', '.join(holders)} all hold its start" if holders else "no branch holds its start"),
                    "name it: kgit finish " + kernel + " --into BRANCH")


def _holders(repo: Repo, branches: dict[str, str], base: str) -> list[str]:
    """Those of these branches (by name) that hold the commit a loop started from and are no loop's."""
    return sorted(name for name, sha in branches.items()
                  if refs.kernel_of_branch(name) is None and read.is_ancestor(repo, base, sha))


def _branch_tip(repo: Repo, branch: str) -> tuple[str, str | None]:
    """The branch's tip, and where it is only a remote's, the '<remote>/<branch>' it will follow."""
    if refs.kernel_of_branch(branch) is not None:
        raise KgitError(f"--into {branch}: a loop's branch; a finish goes into the branch a loop started from",
                        "name that branch (main, say)")
    tip = read.rev(repo, f"refs/heads/{branch}")
    if tip is not None:
        return tip, None
    remote = sorted(name for name in read.remote_branches(repo) if name.split("/", 1)[1] == branch)
    if len(remote) == 1:
        return read.rev(repo, f"refs/remotes/{remote[0]}"), remote[0]
    raise KgitError(f"no local branch {branch!r}" + (f", and {' and '.join(remote)} both have one" if remote else ""),
                    "'git branch -a' lists them" + ("; 'git branch BRANCH REMOTE/BRANCH' makes the one to finish into"
                                                    if remote else ""))


def _waiting(repo: Repo, kernel: str, base: str, best_commit: str, tip: str, paths: list[str]) -> list[str]:
    """The paths whose best version the branch lacks; refused where the branch changed one since the loop
    started into something the loop never held (a finish before, of an earlier best, is the loop's own)."""
    line = read.first_parents(repo, best_commit, limit=1_000_000)
    line = line[:line.index(base) + 1] if base in line else [best_commit, base]
    waiting, diverged = [], []
    for path in paths:
        held = read.objects_at(repo, [tip, best_commit, *line], path)
        if held[tip] == held[best_commit]:
            continue
        if held[tip] not in {held[c] for c in line}:
            diverged.append(path)
        waiting.append(path)
    if diverged:
        raise KgitError(f"the branch changed {', '.join(diverged)} since {kernel}'s loop started from {base[:10]}: "
                        "the best was measured against the file as the loop found it, and a finish does not merge",
                        f"see the branch's change with 'git diff {base[:10]} -- {diverged[0]}'; merge "
                        f"{refs.tag(kernel)} by hand (git merge {refs.tag(kernel)}), or start a new loop from the "
                        "branch as it is now")
    return waiting


def _message(kernel: str, best: Record, baseline: Record, pairs: list[tuple[str, Record]]) -> str:
    """The finish's commit message: the best, how far it came from the baseline, and the changes kept."""
    kept = [r for _, r in pairs if r.status.on_branch and 0 < r.iteration <= best.iteration]
    lines = [refs.finish_subject(kernel, best.iteration, best.action), "",
             f"{baseline.value:g} -> {best.value:g} {best.metric} on {best.gpu or 'an unknown device'} "
             f"(iteration 0 -> {best.iteration}); the changes it holds, each decided by kgit's paired runs:"]
    lines += [f"- iteration {r.iteration}: {r.action} ({r.status.value}"
              + (f", {r.delta_pct:+.1f}%)" if r.delta_pct is not None else ")") for r in kept]
    lines += ["", f"The records: 'kgit log {kernel}' (refs/notes/kgit); the loop: {refs.branch(kernel)}, "
                  f"best at {refs.tag(kernel)}."]
    return "\n".join(lines)
