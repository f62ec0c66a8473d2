"""Every change kgit makes to a repository: refs, commits, the working tree, notes, worktrees, config.

kgit's commits never depend on a user's signing setup or hooks, and none of its changes lose an
uncommitted edit: a reset saves the edits in a commit object first (move_head).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kgit.git import read, refs
from kgit.git.command import GitError, Repo, config_values, git, git_bytes
from kgit.model.record import Record, note_text, parse_note

_NO_HOOKS = ["-c", "core.hooksPath=/dev/null"]  # kgit's own commits and checkouts run none of the user's hooks
_COMMIT_CONFIG = ["-c", "commit.gpgsign=false", *_NO_HOOKS]


# --- refs -------------------------------------------------------------------------------------------


def set_ref(repo: Repo, ref: str, sha: str, old: str | None = None) -> None:
    """Point ref at sha; with old, only if it still points at old (git checks and locks)."""
    git(repo, "update-ref", "--end-of-options", ref, sha, *([old] if old else []))


def delete_ref(repo: Repo, ref: str) -> None:
    git(repo, "update-ref", "-d", "--end-of-options", ref)


def set_tag(repo: Repo, kernel: str, sha: str) -> None:
    set_ref(repo, refs.tag_ref(kernel), sha)


def create_branch(repo: Repo, kernel: str, sha: str) -> None:
    set_ref(repo, refs.branch_ref(kernel), sha, old="0" * len(sha))  # only if it does not exist yet


def track_branch(repo: Repo, branch: str, remote_branch: str) -> None:
    """Create the local branch that follows '<remote>/<branch>', as 'git switch <branch>' would."""
    git(repo, "branch", "--quiet", "--track", "--end-of-options", branch, f"refs/remotes/{remote_branch}")


def switch(repo: Repo, kernel: str) -> None:
    # The start's last move (the branch is the commit it left, plus kgit's log): a post-checkout hook that
    # fails there (git-lfs's, git-lfs not installed) would fail a start that is done; hooks are skipped.
    git(repo, *_NO_HOOKS, "checkout", "--quiet", refs.branch(kernel), "--")


# --- commits ----------------------------------------------------------------------------------------


def commit_paths(repo: Repo, paths: list[str], message: str) -> str:
    """Commit the working-tree content of these paths (and nothing else staged) on the current branch."""
    git(repo, *_COMMIT_CONFIG, "commit", "--quiet", "--no-verify", "--only", "-m", message, "--", *paths)
    return read.rev(repo, "HEAD")


def commit_all(repo: Repo, message: str) -> str:
    """Commit every modified tracked file, or an empty commit when there is none."""
    git(repo, *_COMMIT_CONFIG, "commit", "--quiet", "--no-verify", "--all", "--allow-empty", "-m", message)
    return read.rev(repo, "HEAD")


def uncommit(repo: Repo, sha: str) -> None:
    """Move the current branch back to sha, keeping what the later commits changed as staged edits."""
    git(repo, "reset", "--quiet", "--soft", sha, "--")


def commit_with_files(repo: Repo, tree_of: str, parent: str, files: dict[str, str], message: str,
                      also_parent: str | None = None) -> str:
    """A new commit object on parent (and also_parent, a merge's second): the tree of commit tree_of
    with these files replaced.

    Touches no ref, no index and no file in the working tree.
    """
    index = repo.kgit_dir / "index.tmp"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git(repo, "read-tree", "--end-of-options", tree_of, env=env)
        for path, text in files.items():
            blob = git(repo, "hash-object", "-w", "--stdin", input=text.encode()).strip()
            git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        tree = git(repo, "write-tree", env=env).strip()
    finally:
        index.unlink(missing_ok=True)
    parents = ["-p", parent] + (["-p", also_parent] if also_parent else [])
    return git(repo, *_COMMIT_CONFIG, "commit-tree", tree, *parents, "-m", message).strip()


def commit_paths_of(repo: Repo, parent: str, source: str, paths: list[str], message: str) -> str:
    """A new commit object on parent: parent's tree with these paths as commit source has them (removed
    where source has none), modes included.

    Touches no ref, no index and no file in the working tree.
    """
    index = repo.kgit_dir / "index.tmp"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git(repo, "read-tree", "--end-of-options", parent, env=env)
        for path in paths:
            entry = git(repo, "ls-tree", "-z", "--end-of-options", source, "--", path).rstrip("\0")
            if entry:
                mode, _, rest = entry.partition(" ")
                blob = rest.split(" ", 1)[1].split("\t", 1)[0]
                git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=env)
            else:
                git(repo, "update-index", "--force-remove", "--", path, env=env)
        tree = git(repo, "write-tree", env=env).strip()
    finally:
        index.unlink(missing_ok=True)
    return git(repo, *_COMMIT_CONFIG, "commit-tree", tree, "-p", parent, "-m", message).strip()


def fast_forward(repo: Repo, kernel: str, old: str, new: str) -> None:
    """Move opt/<kernel> from old to its descendant new (fast_forward_branch)."""
    fast_forward_branch(repo, refs.branch(kernel), old, new)


def fast_forward_branch(repo: Repo, branch: str, old: str, new: str) -> None:
    """Move a local branch from old to its descendant new; the checked-out branch takes its files along.

    `git merge --ff-only` refuses, rather than overwrite, uncommitted edits the move would touch.
    """
    if read.current_branch(repo) == branch:
        git(repo, "merge", "--ff-only", "--quiet", "--end-of-options", new)
    else:
        set_ref(repo, f"refs/heads/{branch}", new, old)


# --- the working tree ---------------------------------------------------------------------------


def move_head(repo: Repo, sha: str) -> None:
    """Move the current branch to sha and its files into the working tree, keeping uncommitted edits.

    A user may edit the kernel while its test runs, or after kgit was killed: those edits are saved in
    a commit object (`git stash create`, reachable from refs/kgit/saved-edits until they are back), the
    tree is reset, and the edited files are written back on top. Nothing that is not in a commit is lost.
    """
    if read.modified_tracked_files(repo):
        saved = git(repo, "stash", "create", "kgit: edits kept across a reset").strip()
        set_ref(repo, refs.SAVED_EDITS, saved)
    git(repo, "reset", "--quiet", "--hard", sha, "--")
    restore_saved_edits(repo)


@dataclass
class Restored:
    paths: list[str]  # written back
    kept_aside: list[str]  # edited again since kgit saved them: left as they are
    ref: str | None = None  # where the saved edits of kept_aside paths stay


def restore_saved_edits(repo: Repo) -> Restored:
    """Write back the files saved by move_head, if any; safe to repeat after a crash.

    A kgit killed between its reset and this write-back leaves the saved edits in their ref, and the
    user may edit the same file again before the next kgit runs: such a file (its content no longer
    the one the reset wrote) is never overwritten. Its saved version stays under a ref of its own."""
    saved = read.rev(repo, refs.SAVED_EDITS)
    if saved is None:
        return Restored([], [])
    paths = [p for p in git(repo, "diff", "--name-only", "-z", f"{saved}^1", saved).split("\0") if p]
    done = Restored([], [])
    for path in paths:
        target = repo.root / path
        # compared as git stores them: with core.autocrlf or an eol attribute the file on disk has CRLF
        # where the blob has LF, and a byte comparison would take every file for edited again
        current = _worktree_object(repo, path)
        if current != _object(repo, "HEAD", path):
            if current != _object(repo, saved, path):
                done.kept_aside.append(path)
            continue
        if _object(repo, saved, path) is None:
            target.unlink(missing_ok=True)  # the user had deleted it
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        # as checkout writes it (line endings and filters of the path), as it was on disk when saved
        target.write_bytes(git_bytes(repo, "cat-file", "--filters", f"{saved}:{path}"))
        done.paths.append(path)
    if done.kept_aside:
        done.ref = f"{refs.UNRESTORED_EDITS}/{saved}"
        set_ref(repo, done.ref, saved)
    delete_ref(repo, refs.SAVED_EDITS)
    return done


def _object(repo: Repo, commit: str, path: str) -> str | None:
    """The object id of path in commit, or None where the commit has no such file."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{commit}:{path}").strip()
    except GitError:
        return None


def _worktree_object(repo: Repo, path: str) -> str | None:
    """The object id the working tree's file would have as git stores it (its clean filters and line
    endings applied), or None where there is no file."""
    if not (repo.root / path).is_file():
        return None
    return git(repo, "hash-object", f"--path={path}", "--", str(repo.root / path)).strip()


# `git worktree add` and `prune` read and write .git/worktrees/ with no lock of their own: a prune that
# meets a sibling's half-made entry fails ("failed to read .git/worktrees/<name>/commondir"). kgit tune
# adds and removes one worktree a GPU from threads at once, so they take turns here.
_WORKTREES = threading.Lock()


def add_worktree(repo: Repo, path: Path, commit: str) -> None:
    """A detached checkout of commit at path: the user's own working tree is not touched."""
    with _WORKTREES:
        if path.exists():  # left by a killed run
            _remove_worktree(repo, path)
        # without the user's hooks: a post-checkout hook that fails (git-lfs's, where git-lfs is not
        # installed) would fail the add, and this checkout is kgit's own, for a test to run in
        git(repo, *_NO_HOOKS, "worktree", "add", "--quiet", "--detach", "--end-of-options", str(path), commit)


def remove_worktree(repo: Repo, path: Path) -> None:
    with _WORKTREES:
        _remove_worktree(repo, path)


def _remove_worktree(repo: Repo, path: Path) -> None:
    try:
        git(repo, "worktree", "remove", "--force", str(path))
    finally:
        git(repo, "worktree", "prune")


# --- notes -----------------------------------------------------------------------------------------


def write_note(repo: Repo, sha: str, record: Record) -> None:
    """Put the record on sha, replacing its earlier version and keeping any other run's record there."""
    try:
        existing, _ = parse_note(sha, git(repo, "notes", f"--ref={refs.NOTES_REF}", "show", sha))
    except GitError:
        existing = []  # no note yet
    body = note_text([r for r in existing if r.key != record.key] + [record])
    git(repo, "notes", f"--ref={refs.NOTES_REF}", "add", "--force", "--file=-", sha, input=body.encode())


_CURRENT = object()


def write_notes(repo: Repo, notes: dict[str, list[Record]], message: str, merge: str | None = None,
                ref: str = refs.NOTES_REF, parent: str | None | object = _CURRENT) -> str:
    """One commit on ref (the notes ref) that sets these notes on top of parent (ref's commit unless
    given; None: a first commit), and, given merge, has it as a second parent.

    git fast-import writes all the notes in one process and keeps the notes tree's fan-out right,
    however many notes there are; `git notes add` would cost a process per note.
    """
    if parent is _CURRENT:
        parent = read.rev(repo, ref)
    lines = [f"commit {ref}", f"committer {_ident(repo)}", _data(message)]
    if parent:
        lines.append(f"from {parent}")
    if merge:
        lines.append(f"merge {merge}")
    for commit, records in notes.items():
        lines += [f"N inline {commit}", _data(note_text(records))]
    git(repo, "fast-import", "--quiet", "--done", input=("\n".join(lines) + "\ndone\n").encode())
    return read.rev(repo, ref)


def keep_blobs(repo: Repo, ref: str, blob_by_name: dict[str, str], message: str, parents: list[str]) -> str:
    """One commit on ref whose tree holds these blobs as they are, by name, with these parents (one at least,
    and ref's commit among them if it has one): what kgit keeps of something it refused (a name each, a commit's id for a note's blob)."""
    lines = [f"commit {ref}", f"committer {_ident(repo)}", _data(message)]
    lines += [f"from {parents[0]}"] + [f"merge {p}" for p in parents[1:]]
    lines += [f"M 100644 {blob} {name}" for name, blob in blob_by_name.items()]
    git(repo, "fast-import", "--quiet", "--done", input=("\n".join(lines) + "\ndone\n").encode())
    return read.rev(repo, ref)


def _data(text: str) -> str:
    return f"data {len(text.encode())}\n{text}"


def _ident(repo: Repo) -> str:
    try:
        return git(repo, "var", "GIT_COMMITTER_IDENT").strip()
    except GitError:  # no user configured: the notes commit still needs a committer
        return f"kgit <kgit@localhost> {int(time.time())} +0000"


def remove_notes(repo: Repo, commits: list[str]) -> None:
    git(repo, "notes", f"--ref={refs.NOTES_REF}", "remove", "--ignore-missing", "--stdin",
        input="\n".join(commits).encode() + b"\n")


def configure_notes(repo: Repo) -> None:
    """Have rebase and amend carry kgit's notes to the rewritten commits (git drops them otherwise).

    notes.rewriteMode stays 'concatenate' (git's default): cat_sort_uniq would sort the lines of the
    JSON records into nonsense, while concatenated records are what the notes reader expects.
    """
    if refs.NOTES_REF not in config_values(repo, "notes.rewriteRef"):
        git(repo, "config", "--add", "notes.rewriteRef", refs.NOTES_REF)  # several refs may be rewritten
    for key, value in (("notes.rewrite.rebase", "true"), ("notes.rewrite.amend", "true"),
                       ("notes.rewriteMode", "concatenate")):
        if config_values(repo, key) != [value]:
            git(repo, "config", key, value)
