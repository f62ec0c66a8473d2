"""Git, and nothing but git: every git command kgit runs goes through this module.

kgit keeps all its state in git:
  refs/heads/opt/<kernel>           the kept iterations, one commit each (plus log commits for reverts)
  refs/tags/best/<kernel>           the best kept iteration
  refs/kgit/attempts/<kernel>/<N>   every reverted attempt, so that gc never loses it
  refs/notes/kgit                   one JSON record per iteration, on its commit
and, while a command runs, two files in the git directory: a lock and a journal of the step in flight.

It talks to git through its plumbing commands rather than GitPython: importing GitPython alone takes
about 135 ms, more than the whole start-up budget of a command that runs no test.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kgit.errors import KgitError

NOTES_REF = "refs/notes/kgit"
ATTEMPTS_PREFIX = "refs/kgit/attempts"
SAVED_EDITS_REF = "refs/kgit/saved-edits"
BRANCH_PREFIX = "opt/"
TAG_PREFIX = "best/"

# kgit's commits should not depend on a user's signing setup or hooks.
_COMMIT_CONFIG = ["-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null"]


@dataclass(frozen=True)
class Repo:
    root: Path
    git_dir: Path

    @property
    def kgit_dir(self) -> Path:
        return self.git_dir / "kgit"


class GitError(KgitError):
    pass


def git(repo: Repo | Path, *args: str, input: bytes | None = None, env: dict | None = None) -> str:
    """Run one git command in the repository and return its stdout; a failure becomes a GitError."""
    cwd = repo.root if isinstance(repo, Repo) else repo
    proc = subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, env={**os.environ, **(env or {})}
    )
    if proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {message[-1] if message else 'exit status ' + str(proc.returncode)}")
    return proc.stdout.decode(errors="replace")


def find_repo(start: Path) -> Repo:
    try:
        out = git(start, "rev-parse", "--show-toplevel", "--absolute-git-dir")
    except GitError:
        raise KgitError(f"not a git repository: {start}") from None
    except FileNotFoundError:
        raise KgitError("git is not installed or not on PATH") from None
    root, git_dir = out.splitlines()
    if not root:
        raise KgitError("kgit needs a work tree; this is a bare repository")
    return Repo(Path(root), Path(git_dir))


# --- refs -------------------------------------------------------------------------------------


def rev(repo: Repo, ref: str) -> str | None:
    """The commit a ref points at, or None when it does not exist."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip() or None
    except GitError:
        return None


def current_branch(repo: Repo) -> str | None:
    try:
        return git(repo, "symbolic-ref", "--quiet", "--short", "HEAD").strip()
    except GitError:
        return None  # detached HEAD


def branch_name(kernel: str) -> str:
    return BRANCH_PREFIX + kernel


def tag_name(kernel: str) -> str:
    return TAG_PREFIX + kernel


def attempt_ref(kernel: str, iteration: int) -> str:
    return f"{ATTEMPTS_PREFIX}/{kernel}/{iteration}"


def set_ref(repo: Repo, ref: str, sha: str) -> None:
    git(repo, "update-ref", ref, sha)


def set_tag(repo: Repo, kernel: str, sha: str) -> None:
    set_ref(repo, f"refs/tags/{tag_name(kernel)}", sha)


def kernels_with_branches(repo: Repo) -> list[str]:
    out = git(repo, "for-each-ref", "--format=%(refname:strip=3)", f"refs/heads/{BRANCH_PREFIX}")
    return out.split()


# --- the working tree ---------------------------------------------------------------------------


def modified_tracked_files(repo: Repo) -> list[str]:
    """Tracked files whose working-tree or staged content differs from HEAD."""
    out = git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=no")
    entries = out.split("\0")
    paths = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        if not entry:
            i += 1
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":  # a rename is followed by its source path
            i += 1
        i += 1
    return paths


def is_tracked(repo: Repo, path: str) -> bool:
    return bool(git(repo, "ls-files", "--", path).strip())


def head_file(repo: Repo, path: str, commit: str = "HEAD") -> str | None:
    try:
        return git(repo, "show", f"{commit}:{path}")
    except GitError:
        return None


def commit_paths(repo: Repo, paths: list[str], message: str) -> str:
    """Commit the working-tree content of these paths (and nothing else staged) on the current branch."""
    git(repo, *_COMMIT_CONFIG, "commit", "--quiet", "--no-verify", "--only", "-m", message, "--", *paths)
    return rev(repo, "HEAD")


def commit_all(repo: Repo, message: str) -> str:
    """Commit every modified tracked file, or an empty commit when there is none."""
    git(repo, *_COMMIT_CONFIG, "commit", "--quiet", "--no-verify", "--all", "--allow-empty", "-m", message)
    return rev(repo, "HEAD")


def commit_with_files(repo: Repo, tree_of: str, parent: str, files: dict[str, str], message: str) -> str:
    """A new commit object on parent: the tree of commit tree_of with these files replaced.

    Touches no ref, no index and no file in the working tree.
    """
    index = repo.kgit_dir / "index.tmp"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git(repo, "read-tree", tree_of, env=env)
        for path, text in files.items():
            blob = git(repo, "hash-object", "-w", "--stdin", input=text.encode()).strip()
            git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        tree = git(repo, "write-tree", env=env).strip()
    finally:
        index.unlink(missing_ok=True)
    return git(repo, *_COMMIT_CONFIG, "commit-tree", tree, "-p", parent, "-m", message).strip()


def move_head(repo: Repo, sha: str) -> None:
    """Move the current branch to sha and its files into the working tree, keeping uncommitted edits.

    A user may edit the kernel while its test runs, or after kgit was killed: those edits are saved in
    a commit object (`git stash create`, reachable from SAVED_EDITS_REF until they are back), the tree is
    reset, and the edited files are written back on top. Nothing that is not in a commit is lost.
    """
    if modified_tracked_files(repo):
        saved = git(repo, "stash", "create", "kgit: edits kept across a reset").strip()
        set_ref(repo, SAVED_EDITS_REF, saved)
    git(repo, "reset", "--quiet", "--hard", sha)
    restore_saved_edits(repo)


def restore_saved_edits(repo: Repo) -> list[str]:
    """Write back the files saved by move_head, if any; safe to repeat after a crash."""
    saved = rev(repo, SAVED_EDITS_REF)
    if saved is None:
        return []
    paths = git(repo, "diff", "--name-only", "-z", f"{saved}^1", saved).split("\0")
    paths = [p for p in paths if p]
    for path in paths:
        content = subprocess.run(
            ["git", "cat-file", "blob", f"{saved}:{path}"], cwd=repo.root, capture_output=True
        )
        target = repo.root / path
        if content.returncode == 0:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.stdout)
        else:
            target.unlink(missing_ok=True)  # the user had deleted it
    git(repo, "update-ref", "-d", SAVED_EDITS_REF)
    return paths


def add_worktree(repo: Repo, path: Path, commit: str) -> None:
    """A detached checkout of commit at path: the user's own working tree is not touched."""
    if path.exists():  # left by a killed run
        remove_worktree(repo, path)
    git(repo, "worktree", "add", "--quiet", "--detach", str(path), commit)


def remove_worktree(repo: Repo, path: Path) -> None:
    try:
        git(repo, "worktree", "remove", "--force", str(path))
    finally:
        git(repo, "worktree", "prune")


def create_branch(repo: Repo, name: str, sha: str) -> None:
    git(repo, "branch", name, sha)


def switch(repo: Repo, branch: str) -> None:
    git(repo, "checkout", "--quiet", branch)


def diff(repo: Repo, base: str, commit: str, exclude: list[str]) -> str:
    return git(repo, "diff", base, commit, "--", ".", *(f":(exclude){p}" for p in exclude))


def first_parent(repo: Repo, sha: str) -> str | None:
    return rev(repo, f"{sha}^")


# --- notes: one JSON record per iteration -----------------------------------------------------------


def write_note(repo: Repo, sha: str, record: dict) -> None:
    body = json.dumps(record, indent=2, sort_keys=True) + "\n"
    git(repo, "notes", f"--ref={NOTES_REF}", "add", "--force", "--file=-", sha, input=body.encode())


def read_notes(repo: Repo) -> dict[str, dict]:
    """Every kgit record, by the commit it annotates.

    Two git processes whatever the number of notes: one lists the notes tree, one `cat-file --batch`
    reads all the blobs.
    """
    try:
        listing = git(repo, "ls-tree", "-r", "--full-tree", NOTES_REF)
    except GitError:
        return {}  # no notes yet
    blob_by_commit = {}
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        blob_by_commit[path.replace("/", "")] = meta.split()[2]
    records = {}
    for commit, text in zip(blob_by_commit, _cat_blobs(repo, list(blob_by_commit.values()))):
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            continue  # someone else's note text under our ref: not a kgit record
        if isinstance(record, dict) and "iteration" in record and "kernel" in record:
            records[commit] = record
    return records


def _cat_blobs(repo: Repo, shas: list[str]) -> list[str]:
    if not shas:
        return []
    proc = subprocess.run(
        ["git", "cat-file", "--batch"], cwd=repo.root, input="\n".join(shas).encode() + b"\n",
        capture_output=True, check=True,
    )
    out, texts, pos = proc.stdout, [], 0
    for _ in shas:
        header_end = out.index(b"\n", pos)
        size = int(out[pos:header_end].split()[2])
        start = header_end + 1
        texts.append(out[start:start + size].decode(errors="replace"))
        pos = start + size + 1  # the content is followed by a newline
    return texts


# --- the lock and the journal of a step in flight ------------------------------------------------


def acquire_lock(repo: Repo) -> None:
    """Take the repository's kgit lock, or refuse while another live kgit holds it."""
    repo.kgit_dir.mkdir(exist_ok=True)
    path = repo.kgit_dir / "lock"
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = lock_holder(repo)
            if holder is not None:
                raise KgitError(
                    f"another kgit process (pid {holder}) is working in this repository; wait for it to finish"
                ) from None
            path.unlink(missing_ok=True)  # its holder died without releasing it
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return
    raise KgitError(f"could not take the lock {path}")


def release_lock(repo: Repo) -> None:
    path = repo.kgit_dir / "lock"
    if lock_holder(repo) == os.getpid():
        path.unlink(missing_ok=True)


def lock_holder(repo: Repo) -> int | None:
    """The pid of the live process holding the lock, or None."""
    try:
        pid = int((repo.kgit_dir / "lock").read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, owned by another user
    return pid


def read_journal(repo: Repo) -> dict | None:
    try:
        return json.loads((repo.kgit_dir / "journal.json").read_text())
    except FileNotFoundError:
        return None


def write_journal(repo: Repo, journal: dict) -> None:
    repo.kgit_dir.mkdir(exist_ok=True)
    tmp = repo.kgit_dir / "journal.json.tmp"
    tmp.write_text(json.dumps(journal, indent=2))
    os.replace(tmp, repo.kgit_dir / "journal.json")  # atomic: a reader sees the old or the new


def clear_journal(repo: Repo) -> None:
    (repo.kgit_dir / "journal.json").unlink(missing_ok=True)


# --- reading history and old trees (profile, context) ---------------------------------------------


def first_parents(repo: Repo, sha: str, limit: int = 200) -> list[str]:
    """sha and its first-parent ancestors, newest first (at most limit commits)."""
    return git(repo, "rev-list", "--first-parent", f"--max-count={limit}", sha).split()
