"""kgit push / kgit pull: the branches, tags, records and attempts of every kernel, to and from a remote.

What travels, and where a clone keeps what it last saw of a remote:
  refs/heads/opt/*           <-> refs/remotes/<remote>/opt/*        fast-forward only, never forced
  refs/tags/best/*           <-> refs/kgit/remotes/<remote>/best/*  moves with its branch
  refs/notes/kgit            <-> refs/kgit/remotes/<remote>/notes/kgit
  refs/kgit/attempts/*       <-> refs/kgit/remotes/<remote>/attempts/*
Records are merged, never replaced: the remote's notes are fetched beside ours and every record of
both sides is kept (notes.union), in a merge commit on refs/notes/kgit that the remote can then take
as a fast-forward. git's own `git notes merge` would stop at the first commit both sides annotated.
Attempts keep their commits reachable on both sides; an attempt whose name is taken on the remote by a
different commit (two clones both reverted their iteration 3) is pushed as <N>-<short sha> beside it.
"""

from __future__ import annotations

from kgit import hooks, notes, store
from kgit.errors import KgitError


def check_remote(repo: store.Repo, remote: str) -> None:
    if remote not in store.remotes(repo):
        raise KgitError(f"no remote named {remote!r} in this repository ('git remote -v' lists them)")


def fetch(repo: store.Repo, remote: str) -> None:
    """Fetch the remote's kgit refs beside ours; globs, so that a remote without some of them is fine."""
    snapshot = f"refs/kgit/remotes/{remote}"
    store.fetch(repo, remote, [
        f"+refs/heads/{store.BRANCH_PREFIX}*:refs/remotes/{remote}/{store.BRANCH_PREFIX}*",
        f"+refs/tags/{store.TAG_PREFIX}*:{snapshot}/{store.TAG_PREFIX}*",
        f"+refs/notes/*:{snapshot}/notes/*",
        f"+{store.ATTEMPTS_PREFIX}/*:{snapshot}/attempts/*",
    ])


def merge_notes(repo: store.Repo, remote: str) -> int:
    """Bring the remote's records into refs/notes/kgit; the number of records that were new here."""
    theirs = store.rev(repo, hooks.remote_ref(remote, "notes/kgit"))
    ours = store.rev(repo, store.NOTES_REF)
    if theirs is None or theirs == ours or (ours and store.is_ancestor(repo, theirs, ours)):
        return 0
    mine = store.read_notes(repo)
    changed = {}
    for commit, records in store.read_notes(repo, hooks.remote_ref(remote, "notes/kgit")).items():
        merged = notes.union(mine.get(commit, []), records)
        if merged != mine.get(commit):
            changed[commit] = merged
    if ours is None or store.is_ancestor(repo, ours, theirs):
        store.set_ref(repo, store.NOTES_REF, theirs)  # nothing of ours is missing there: fast-forward
    else:
        store.write_notes(repo, changed, f"kgit: merge the records of {remote}", merge=theirs)
    return sum(len(records) - len(mine.get(commit, [])) for commit, records in changed.items())


def pull(repo: store.Repo, remote: str) -> list[str]:
    """Fetch and merge the remote's kgit refs; what happened, a line each."""
    check_remote(repo, remote)
    store.configure_notes(repo)  # a clone that never ran 'kgit start' rebases pulled branches too
    fetch(repo, remote)
    done = [f"records: {merge_notes(repo, remote)} new from {remote}"]
    theirs_by_branch = store.refs(repo, f"refs/remotes/{remote}/{store.BRANCH_PREFIX}")
    for ref, theirs in sorted(theirs_by_branch.items()):
        kernel = ref[len(f"refs/remotes/{remote}/{store.BRANCH_PREFIX}"):]
        done.append(_pull_branch(repo, remote, kernel, theirs))
    return done


def _pull_branch(repo: store.Repo, remote: str, kernel: str, theirs: str) -> str:
    branch = store.branch_name(kernel)
    ours = store.rev(repo, f"refs/heads/{branch}")
    if ours == theirs:
        return f"{branch}: up to date"
    if ours is not None and store.is_ancestor(repo, theirs, ours):
        return f"{branch}: ahead of {remote} ('kgit push {remote}' sends it)"
    if ours is not None and not store.is_ancestor(repo, ours, theirs):
        return (f"{branch}: not updated, it has diverged from {remote}'s (both clones continued it); every "
                f"record of both is kept in the notes; keep one side, e.g. git reset --hard {remote}/{branch}")
    if ours is None:
        store.create_branch(repo, branch, theirs)
        what = "new"
    else:
        try:
            store.fast_forward(repo, branch, ours, theirs)
        except store.GitError as e:
            return f"{branch}: not updated ({e})"
        what = "fast-forwarded"
    tag = store.rev(repo, hooks.remote_ref(remote, store.tag_name(kernel)))
    if tag is not None:
        store.set_tag(repo, kernel, tag)  # the branch is now theirs: so is its best
    return f"{branch}: {what} to {theirs[:10]}"


def push(repo: store.Repo, remote: str) -> tuple[list[list[str]], list[str]]:
    """Send every kernel's branch, tag, records and attempts; the summary rows, and a line per outcome.

    Refuses before touching anything when a branch's tip has no valid record (hooks.tip_problem).
    """
    check_remote(repo, remote)
    branches = store.refs(repo, f"refs/heads/{store.BRANCH_PREFIX}")
    tips = {ref[len("refs/heads/" + store.BRANCH_PREFIX):]: sha for ref, sha in branches.items()}
    hooks.check_tips(repo, tips, store.read_notes(repo))
    fetch(repo, remote)
    added = merge_notes(repo, remote)
    done = [f"records: {added} new from {remote} merged first"] if added else []

    refspecs = []
    for kernel, tip in sorted(tips.items()):
        branch, tag = store.branch_name(kernel), store.tag_name(kernel)
        theirs = store.rev(repo, f"refs/remotes/{remote}/{branch}")
        if theirs is not None and not store.is_ancestor(repo, theirs, tip):
            done.append(f"{branch}: not pushed, {remote}'s has commits this clone lacks: 'kgit pull {remote}' first")
            continue
        refspecs.append(f"refs/heads/{branch}:refs/heads/{branch}")
        if store.rev(repo, f"refs/tags/{tag}"):
            refspecs.append(f"+refs/tags/{tag}:refs/tags/{tag}")  # best/ moves by design
    notes_sha = store.rev(repo, store.NOTES_REF)
    if notes_sha:
        refspecs.append(f"{store.NOTES_REF}:{store.NOTES_REF}")
    refspecs += _attempt_refspecs(repo, remote)
    if not refspecs:
        return [], done + ["nothing to push"]

    results = store.push(repo, remote, refspecs, env={hooks.PUSHING_ENV: "1"})
    for spec in refspecs:
        source, target = spec.lstrip("+").split(":", 1)
        outcome = results.get(target)
        if outcome:
            done.append(f"{target}: rejected by {remote} {outcome}")
        elif outcome == "" and target.startswith(store.ATTEMPTS_PREFIX + "/"):
            store.set_ref(repo, hooks.remote_ref(remote, "attempts/" + target[len(store.ATTEMPTS_PREFIX) + 1:]), source)
    if results.get(store.NOTES_REF) == "":
        store.set_ref(repo, hooks.remote_ref(remote, "notes/kgit"), notes_sha)  # what the hook checks
    pushed = [t for t in (s.lstrip("+").split(":", 1)[1] for s in refspecs) if results.get(t) == ""]
    names = [t.removeprefix("refs/heads/").removeprefix("refs/tags/") for t in pushed
             if not t.startswith(store.ATTEMPTS_PREFIX)]
    attempts = len(pushed) - len(names)
    done.append(f"{remote} has: {', '.join(names) or 'nothing new'}" + (f", {attempts} attempts" if attempts else ""))
    rows = hooks.summary(store.read_notes(repo), sorted(tips))
    return rows, done


def _attempt_refspecs(repo: store.Repo, remote: str) -> list[str]:
    """Push each attempt the remote lacks, under its own name unless another commit has that name there."""
    prefix = store.ATTEMPTS_PREFIX + "/"
    known = {ref[len(hooks.remote_ref(remote, "attempts/")):]: sha
             for ref, sha in store.refs(repo, hooks.remote_ref(remote, "attempts/")).items()}
    there = set(known.values())
    specs = []
    for ref, sha in sorted(store.refs(repo, prefix).items()):
        if sha in there:
            continue
        name = ref[len(prefix):]
        if name in known:
            name = f"{name}-{sha[:10]}"
        specs.append(f"{sha}:{prefix}{name}")
    return specs
