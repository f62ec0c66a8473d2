"""The records in the notes: which are the same run, how two sets merge, one copy of each.

A record is identified by (kernel, iteration, started, gpu): two clones that both reach iteration 3 of
a kernel made two different runs, and both are kept; the same run seen twice (a note copied by a
rebase, or pulled back from a remote) is one record.
"""

from __future__ import annotations

from kgit import store


def union(*groups: list[dict]) -> list[dict]:
    """The records of all groups, each run once, in first-seen order.

    Two copies of one run are merged field by field: a field only one copy has is kept (a later
    command may have added a profile in one clone), and where both have a field the earlier group wins.
    """
    merged: dict[tuple, dict] = {}
    for group in groups:
        for record in group:
            k = store.record_key(record)
            merged[k] = {**record, **merged[k]} if k in merged else record
    return list(merged.values())


def all_records(repo: store.Repo) -> list[tuple[str, dict]]:
    """Every run once, with the commit whose note holds it.

    A run found on several commits (a rebase copies notes to the new commits and leaves the old ones)
    is given the commit a branch reaches, else one another ref reaches. Which commits those are costs
    a walk of the history, paid only when there are such copies; `kgit doctor --fix` removes them.
    """
    by_commit = store.read_notes(repo)
    commits_of: dict[tuple, list[str]] = {}
    copies: dict[tuple, list[dict]] = {}
    for commit, records in by_commit.items():
        for record in records:
            commits_of.setdefault(store.record_key(record), []).append(commit)
            copies.setdefault(store.record_key(record), []).append(record)
    repeated = {c for commits in commits_of.values() if len(commits) > 1 for c in commits}
    on_branches = store.reachable(repo, repeated, branches_only=True)
    live = on_branches | store.reachable(repo, repeated - on_branches)
    result = []
    for k, commits in commits_of.items():
        if len(commits) > 1:
            commits = sorted(commits, key=lambda c: (c not in on_branches, c not in live))
        result.append((commits[0], union(copies[k])[0]))  # the copies merged into one record
    return result
