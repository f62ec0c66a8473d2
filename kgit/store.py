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

import fcntl
import json
import os
import subprocess
import time
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
        raise GitError(f"git {args[0]} failed: {_git_complaint(proc.stderr.decode(errors='replace'), proc.returncode)}")
    return proc.stdout.decode(errors="replace")


def _git_complaint(stderr: str, returncode: int) -> str:
    """git's own reason in one line: its error: or fatal: line with what it lists after it."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    first = next((i for i, line in enumerate(lines) if line.startswith(("error:", "fatal:"))), None)
    if first is None:
        return lines[-1] if lines else f"exit status {returncode}"
    return " ".join(lines[first:])[:300]


def find_repo(start: Path) -> Repo:
    if not start.is_dir():
        raise KgitError(f"no such directory: {start}")
    try:
        out = git(start, "rev-parse", "--show-toplevel", "--absolute-git-dir")
    except GitError as e:
        if "work tree" in str(e):
            raise KgitError(f"kgit needs a work tree; {start} is a bare repository") from None
        raise KgitError(f"not a git repository: {start}") from None
    except FileNotFoundError:
        raise KgitError("git is not installed or not on PATH") from None
    root, git_dir = out.splitlines()
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


def set_ref(repo: Repo, ref: str, sha: str, old: str | None = None) -> None:
    """Point ref at sha; with old, only if it still points at old (git checks and locks)."""
    git(repo, "update-ref", ref, sha, *([old] if old else []))


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


def uncommit(repo: Repo, sha: str) -> None:
    """Move the current branch back to sha, keeping what the later commits changed as staged edits."""
    git(repo, "reset", "--quiet", "--soft", sha)


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
    delete_ref(repo, SAVED_EDITS_REF)
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


def fast_forward(repo: Repo, branch: str, old: str, new: str) -> None:
    """Move branch from old to its descendant new; the checked-out branch takes its files along.

    `git merge --ff-only` refuses, rather than overwrite, uncommitted edits the move would touch.
    """
    if current_branch(repo) == branch:
        git(repo, "merge", "--ff-only", "--quiet", new)
    else:
        git(repo, "update-ref", f"refs/heads/{branch}", new, old)


def switch(repo: Repo, branch: str) -> None:
    git(repo, "checkout", "--quiet", branch)


def diff(repo: Repo, base: str, commit: str, exclude: list[str]) -> str:
    return git(repo, "diff", base, commit, "--", ".", *(f":(exclude){p}" for p in exclude))


def first_parent(repo: Repo, sha: str) -> str | None:
    return rev(repo, f"{sha}^")


# --- notes: one JSON record per iteration -----------------------------------------------------------
#
# A note holds one kgit record, or several one after another when two records annotate the same commit
# (two clones that made identical commits, or a squash whose notes git concatenated on rewrite).


def note_text(records: list[dict]) -> str:
    return "".join(json.dumps(r, indent=2, sort_keys=True) + "\n" for r in records)


def record_key(record: dict) -> tuple:
    """What makes two records the same run: two clones that both reach iteration 3 made two runs."""
    return record["kernel"], record["iteration"], record.get("started"), record.get("gpu")


def write_note(repo: Repo, sha: str, record: dict) -> None:
    """Put the record on sha, replacing its earlier version and keeping any other run's record there."""
    try:
        others = [r for r in _parse_records(git(repo, "notes", f"--ref={NOTES_REF}", "show", sha))
                  if record_key(r) != record_key(record)]
    except GitError:
        others = []  # no note yet
    body = note_text(others + [record])
    git(repo, "notes", f"--ref={NOTES_REF}", "add", "--force", "--file=-", sha, input=body.encode())


def read_notes(repo: Repo, ref: str = NOTES_REF) -> dict[str, list[dict]]:
    """Every kgit record under a notes ref, by the commit it annotates.

    Two git processes whatever the number of notes: one lists the notes tree, one `cat-file --batch`
    reads all the blobs.
    """
    try:
        listing = git(repo, "ls-tree", "-r", "--full-tree", ref)
    except GitError:
        return {}  # no notes yet
    blob_by_commit = {}
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        blob_by_commit[path.replace("/", "")] = meta.split()[2]
    notes = {}
    for commit, text in zip(blob_by_commit, _cat_blobs(repo, list(blob_by_commit.values()))):
        records = _parse_records(text)
        if records:
            notes[commit] = records
    return notes


def _parse_records(text: str) -> list[dict]:
    """The kgit records in a note's text: JSON objects one after another; anything else is not ours."""
    decoder, records, pos = json.JSONDecoder(), [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return records
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return records  # someone else's note text under our ref: not a kgit record
        if isinstance(value, dict) and "iteration" in value and "kernel" in value:
            records.append(value)


def write_notes(repo: Repo, notes: dict[str, list[dict]], message: str, merge: str | None = None) -> str:
    """One commit on the notes ref that sets these notes (and, given merge, has it as a second parent).

    git fast-import writes all the notes in one process and keeps the notes tree's fan-out right,
    however many notes there are; `git notes add` would cost a process per note.
    """
    parent = rev(repo, NOTES_REF)
    lines = [f"commit {NOTES_REF}", f"committer {_ident(repo)}", _data(message)]
    if parent:
        lines.append(f"from {parent}")
    if merge:
        lines.append(f"merge {merge}")
    for commit, records in notes.items():
        lines += [f"N inline {commit}", _data(note_text(records))]
    stream = "\n".join(lines) + "\ndone\n"
    git(repo, "fast-import", "--quiet", "--done", input=stream.encode())
    return rev(repo, NOTES_REF)


def _data(text: str) -> str:
    return f"data {len(text.encode())}\n{text}"


def _ident(repo: Repo) -> str:
    try:
        return git(repo, "var", "GIT_COMMITTER_IDENT").strip()
    except GitError:  # no user configured: the notes commit still needs a committer
        return f"kgit <kgit@localhost> {int(time.time())} +0000"


def remove_notes(repo: Repo, commits: list[str]) -> None:
    git(repo, "notes", f"--ref={NOTES_REF}", "remove", "--ignore-missing", "--stdin",
        input="\n".join(commits).encode() + b"\n")


def configure_notes(repo: Repo) -> None:
    """Have rebase and amend carry kgit's notes to the rewritten commits (git drops them otherwise).

    notes.rewriteMode stays 'concatenate' (git's default): cat_sort_uniq would sort the lines of the
    JSON records into nonsense, while concatenated records are what read_notes expects.
    """
    if NOTES_REF not in config_values(repo, "notes.rewriteRef"):
        git(repo, "config", "--add", "notes.rewriteRef", NOTES_REF)  # several refs may be rewritten
    for key, value in (("notes.rewrite.rebase", "true"), ("notes.rewrite.amend", "true"),
                       ("notes.rewriteMode", "concatenate")):
        if config_values(repo, key) != [value]:
            git(repo, "config", key, value)


def config_values(repo: Repo, key: str) -> list[str]:
    try:
        return git(repo, "config", "--get-all", key).split()
    except GitError:  # exit status 1: not set
        return []


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


# --- history: what a branch holds, what still exists -----------------------------------------------


def refs(repo: Repo, prefix: str) -> dict[str, str]:
    """Every ref under prefix (a full ref name ending in '/'), by name, with the object it points at."""
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ", 1) for line in out.splitlines())


def delete_ref(repo: Repo, ref: str) -> None:
    git(repo, "update-ref", "-d", ref)


def is_ancestor(repo: Repo, ancestor: str, descendant: str) -> bool:
    try:
        git(repo, "merge-base", "--is-ancestor", ancestor, descendant)
        return True
    except GitError:  # exit status 1: not an ancestor
        return False


def existing(repo: Repo, shas: list[str]) -> set[str]:
    """Those of these objects that are in the repository's object database (one git process)."""
    if not shas:
        return set()
    out = git(repo, "cat-file", "--batch-check=%(objectname) %(objecttype)", input="\n".join(shas).encode() + b"\n")
    return {line.split()[0] for line in out.splitlines() if not line.endswith(" missing")}


def reachable(repo: Repo, shas: set[str], branches_only: bool = False) -> set[str]:
    """Those of these commits that a branch (local or remote-tracking) reaches, or with branches_only
    False, any ref but a best/ tag: kgit moves those itself, and one left on a rewritten commit does
    not make that commit current.

    A commit that only the reflog or a note reaches is on its way out: gc will delete it.
    """
    if not shas:
        return set()
    refs = ["--branches", "--remotes"]
    if not branches_only:
        refs += ["--glob=refs/kgit", f"--exclude=refs/tags/{TAG_PREFIX}*", "--tags"]
    return shas & set(git(repo, "rev-list", *refs).split())


def first_parent_walk(repo: Repo, tip: str, page: int = 50):
    """(sha, subject, changed paths) of tip, its first parent, and so on, read a page at a time."""
    start = tip
    while start:
        out = git(repo, "log", "--first-parent", f"-n{page}", "--format=%x00%H %s", "--name-only", start, "--")
        sha = None
        for entry in out.split("\0")[1:]:
            head, _, paths = entry.partition("\n")
            sha, _, subject = head.partition(" ")
            yield sha, subject, [p for p in paths.splitlines() if p]
        start = first_parent(repo, sha) if sha and out.count("\0") == page else None


def subjects(repo: Repo, shas: list[str]) -> dict[str, str]:
    """The subject line of each of these commits (which must exist), in one git process."""
    if not shas:
        return {}
    out = git(repo, "log", "--no-walk=unsorted", "--format=%H %s", *shas, "--")
    return dict(line.split(" ", 1) if " " in line else (line, "") for line in out.splitlines())


# --- remotes and hooks ------------------------------------------------------------------------------


def remotes(repo: Repo) -> list[str]:
    return git(repo, "remote").split()


def fetch(repo: Repo, remote: str, refspecs: list[str]) -> None:
    git(repo, "fetch", "--quiet", "--no-tags", remote, *refspecs)


def push(repo: Repo, remote: str, refspecs: list[str], env: dict) -> dict[str, str]:
    """Push; the result of each remote ref: '' when it was updated or up to date, else git's reason.

    A ref the remote rejects is no error here: the caller says which and why, the others are pushed.
    """
    proc = subprocess.run(
        ["git", "push", "--porcelain", remote, *refspecs], cwd=repo.root, capture_output=True,
        env={**os.environ, **env},
    )
    results = {}
    for line in proc.stdout.decode(errors="replace").splitlines():
        parts = line.split("\t")  # "<flag>\t<local>:<remote>\t<summary>", flag "!" for a rejection
        if len(parts) == 3 and ":" in parts[1]:
            results[parts[1].split(":", 1)[1]] = parts[2] if parts[0] == "!" else ""
    if proc.returncode != 0 and not results:  # it never got as far as the refs: a hook or the network
        message = proc.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"git push failed: {message[-1] if message else 'exit status ' + str(proc.returncode)}")
    return results


def hooks_dir(repo: Repo) -> Path:
    """Where git looks for this repository's hooks: core.hooksPath if set, else .git/hooks."""
    return repo.root / git(repo, "rev-parse", "--git-path", "hooks").strip()


# --- the lock and the journal of a step in flight ------------------------------------------------


# The lock is an flock on .git/kgit/lock: the kernel releases it when its holder exits, even by kill -9,
# so it is never stale and two processes can never both hold it. The pid inside is for messages only.
_held_locks: dict[Path, list[int]] = {}  # lock file -> [open descriptor, depth], in this process


def acquire_lock(repo: Repo) -> None:
    """Take the repository's kgit lock, or refuse while another kgit holds it.

    Re-entrant: a tuning run holds it across its rounds, and each step inside takes it again.
    """
    repo.kgit_dir.mkdir(exist_ok=True)
    path = repo.kgit_dir / "lock"
    if path in _held_locks:
        _held_locks[path][1] += 1
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = _lock_pid(path)
        raise KgitError(
            f"another kgit process{f' (pid {holder})' if holder else ''} is working in this repository; "
            "wait for it to finish"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    _held_locks[path] = [fd, 1]


def release_lock(repo: Repo) -> None:
    path = repo.kgit_dir / "lock"
    held = _held_locks.get(path)
    if held is None:
        return
    held[1] -= 1
    if held[1] == 0:
        del _held_locks[path]
        os.ftruncate(held[0], 0)
        os.close(held[0])  # releases the flock


def lock_holder(repo: Repo) -> int | None:
    """The pid of the process holding the lock (0 when it did not say), or None when the lock is free."""
    path = repo.kgit_dir / "lock"
    if path in _held_locks:
        return os.getpid()
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a probe: released by the close below
    except BlockingIOError:
        return _lock_pid(path) or 0
    finally:
        os.close(fd)
    return None


def _lock_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


# Every test kgit starts is registered here until it ends: a kgit killed meanwhile leaves the test
# running in its own process group, and the next kgit command stops it.


def register_test(repo: Repo, pid: int, test_path: str) -> None:
    folder = repo.kgit_dir / "running"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / str(pid)).write_text(test_path)


def unregister_test(repo: Repo, pid: int) -> None:
    (repo.kgit_dir / "running" / str(pid)).unlink(missing_ok=True)


def registered_tests(repo: Repo) -> dict[int, str]:
    """pid -> test path of the tests kgit started and has not seen end."""
    folder = repo.kgit_dir / "running"
    if not folder.is_dir():
        return {}
    return {int(p.name): p.read_text() for p in folder.iterdir() if p.name.isdigit()}


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
