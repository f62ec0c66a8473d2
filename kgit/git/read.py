"""Questions kgit asks git: where refs point, what the working tree holds, what history reaches."""

from __future__ import annotations

from pathlib import Path

from kgit.git import refs
from kgit.git.command import GitError, Repo, git


def rev(repo: Repo, ref: str) -> str | None:
    """The commit a ref (or an object id) points at, or None when it does not exist."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}").strip() or None
    except GitError:
        return None


def current_branch(repo: Repo) -> str | None:
    try:
        return git(repo, "symbolic-ref", "--quiet", "--short", "HEAD").strip()
    except GitError:
        return None  # detached HEAD


def current_kernel(repo: Repo) -> str | None:
    """The kernel whose opt/ branch is checked out, or None."""
    return refs.kernel_of_branch(current_branch(repo))


def checked_out_elsewhere(repo: Repo, ref: str) -> str | None:
    """The folder of another worktree of this repository that has the branch ref checked out, if any."""
    here = repo.root.resolve()
    for block in git(repo, "worktree", "list", "--porcelain", "-z").split("\0\0"):
        fields = dict(line.split(" ", 1) for line in block.split("\0") if " " in line)
        if fields.get("branch") == ref and Path(fields["worktree"]).resolve() != here:
            return fields["worktree"]
    return None


def refs_under(repo: Repo, prefix: str) -> dict[str, str]:
    """Every ref under prefix (a full ref name ending in '/'), by name, with the object it points at."""
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ", 1) for line in out.splitlines())


def kernels_with_branches(repo: Repo) -> list[str]:
    return [ref[len(refs.BRANCHES):] for ref in refs_under(repo, refs.BRANCHES)]


# --- the working tree ---------------------------------------------------------------------------


def modified_tracked_files(repo: Repo | Path) -> list[str]:
    """Tracked files whose working-tree or staged content differs from HEAD (of a repository or of a
    worktree's folder)."""
    entries = git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=no").split("\0")
    paths = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        if entry:
            paths.append(entry[3:])
            if entry[0] in "RC":  # a rename is followed by its source path
                i += 1
        i += 1
    return paths


def has_identity(repo: Repo) -> bool:
    """Whether git knows who commits here (user.name and user.email, or their environment variables)."""
    try:
        git(repo, "var", "GIT_COMMITTER_IDENT")
        git(repo, "var", "GIT_AUTHOR_IDENT")
    except GitError:
        return False
    return True


def is_tracked(repo: Repo, path: str) -> bool:
    return bool(git(repo, "ls-files", "--", path).strip())


def file_at(repo: Repo, path: str, commit: str = "HEAD") -> str | None:
    """A file's text at a commit, or None when it is not there."""
    try:
        return git(repo, "show", "--end-of-options", f"{commit}:{path}")
    except GitError:
        return None


def changed(repo: Repo, base: str, commit: str, path: str) -> bool:
    """Whether path differs between two commits (added or removed counts): one git call, no file read."""
    return bool(git(repo, "diff", "--name-only", "--end-of-options", base, commit, "--", path).strip())


def edited(repo: Repo, path: str) -> bool:
    """Whether the working tree's path differs from HEAD's (what a commit of it would change; a staged
    change that the file on disk no longer has does not count)."""
    return bool(git(repo, "diff", "--name-only", "HEAD", "--", path).strip())


def changed_paths(repo: Repo, base: str, commit: str) -> list[str]:
    """The paths that differ between two commits (added, removed or changed), as they are."""
    return [p for p in git(repo, "diff", "--name-only", "--no-renames", "-z", "--end-of-options", base, commit,
                           "--").split("\0") if p]


def objects_at(repo: Repo, commits: list[str], path: str) -> dict[str, str | None]:
    """commit -> the object id of path in it (None where it has no such file), from one git process."""
    if not commits:
        return {}
    out = git(repo, "cat-file", "--batch-check=%(objectname)",
              input="".join(f"{commit}:{path}\n" for commit in commits).encode())
    return {commit: None if line.endswith(" missing") else line.strip()
            for commit, line in zip(commits, out.splitlines())}


def local_branches(repo: Repo) -> dict[str, str]:
    """Every local branch by its short name, with the commit it points at."""
    return {ref.removeprefix("refs/heads/"): sha for ref, sha in refs_under(repo, "refs/heads/").items()}


def remote_branches(repo: Repo) -> dict[str, str]:
    """Every remote-tracking branch as '<remote>/<branch>', with the commit it points at (a remote's HEAD,
    a name for one of them, aside)."""
    return {ref.removeprefix("refs/remotes/"): sha for ref, sha in refs_under(repo, "refs/remotes/").items()
            if not ref.endswith("/HEAD")}


def diff(repo: Repo, base: str, commit: str, exclude: list[str], paths: list[str] = (".",)) -> str:
    """What changed from base to commit in these paths, but the excluded ones."""
    return git(repo, "diff", "--end-of-options", base, commit, "--", *paths, *(f":(exclude){p}" for p in exclude))


# --- history ---------------------------------------------------------------------------------------


def parents(repo: Repo, sha: str) -> list[str]:
    """A commit's parents, first first."""
    return git(repo, "rev-list", "--parents", "-n1", "--end-of-options", sha).split()[1:]


def first_parent(repo: Repo, sha: str) -> str | None:
    return rev(repo, f"{sha}^")


def first_parents(repo: Repo, sha: str, limit: int = 200) -> list[str]:
    """sha and its first-parent ancestors, newest first (at most limit commits)."""
    return git(repo, "rev-list", "--first-parent", f"--max-count={limit}", "--end-of-options", sha).split()


def first_parent_walk(repo: Repo, tip: str, page: int = 50):
    """(sha, subject, changed paths) of tip, its first parent, and so on, read a page at a time."""
    start = tip
    while start:
        commits = _log_with_paths(repo, [start], "--first-parent", f"-n{page}")
        yield from commits
        start = first_parent(repo, commits[-1][0]) if len(commits) == page else None


def only_in(repo: Repo, tip: str, other: str) -> list[tuple[str, str, list[str]]]:
    """(sha, subject, changed paths) of every commit tip reaches and other does not, merges' second
    parents' lines too, newest first (a merge lists no paths: what it brings is in its parents)."""
    return _log_with_paths(repo, [tip, f"^{other}"])


def _log_with_paths(repo: Repo, revs: list[str], *options: str) -> list[tuple[str, str, list[str]]]:
    # -z: paths as they are (without it git quotes a path with non-ASCII characters, and it would
    # match no kernel_path); each commit is a \x01-marked header, then its paths, all NUL-separated
    out = git(repo, "log", "-z", *options, "--format=%x01%H %s", "--name-only", "--end-of-options", *revs, "--")
    commits = []
    for token in out.split("\0"):
        if token.startswith("\x01"):
            sha, _, subject = token[1:].partition(" ")
            commits.append((sha, subject, []))
        elif token.strip("\n") and commits:
            commits[-1][2].append(token.removeprefix("\n"))  # the first path follows its header's newline
    return commits


def subjects(repo: Repo, shas: list[str]) -> dict[str, str]:
    """The subject line of each of these commits (which must exist), in one git process."""
    if not shas:
        return {}
    out = git(repo, "log", "--no-walk=unsorted", "--format=%H %s", "--end-of-options", *shas, "--")
    return dict(line.split(" ", 1) if " " in line else (line, "") for line in out.splitlines())


def merge_base(repo: Repo, a: str, b: str) -> str | None:
    """The best common ancestor of two commits, or None where they share no history (two repositories'
    runs of one kernel: a bundle made elsewhere, say)."""
    try:
        return git(repo, "merge-base", "--end-of-options", a, b).strip() or None
    except GitError:  # exit status 1: no common ancestor
        return None


def is_ancestor(repo: Repo, ancestor: str, descendant: str) -> bool:
    try:
        git(repo, "merge-base", "--is-ancestor", "--end-of-options", ancestor, descendant)
        return True
    except GitError:  # exit status 1: not an ancestor
        return False


def object_ids(repo: Repo, names: list[str]) -> list[str | None]:
    """The object id each name (a sha, "<commit>:<path>", ...) resolves to, None where it does not
    (one git process)."""
    if not names:
        return []
    out = git(repo, "cat-file", "--batch-check=%(objectname)", input="\n".join(names).encode() + b"\n")
    return [None if line.endswith(" missing") or " " in line else line for line in out.splitlines()]


def existing(repo: Repo, shas: list[str]) -> set[str]:
    """Those of these objects that are in the repository's object database (one git process)."""
    if not shas:
        return set()
    out = git(repo, "cat-file", "--batch-check=%(objectname) %(objecttype)", input="\n".join(shas).encode() + b"\n")
    return {line.split()[0] for line in out.splitlines() if not line.endswith(" missing")}


def fetched_runs(repo: Repo, kernel: str = "*") -> list[tuple[str, str]]:
    """(remote, opt/<kernel>) for each opt/ branch of a remote this clone has fetched (a plain git clone
    fetches them all); kernel "*": every kernel's."""
    found = git(repo, "for-each-ref", "--format=%(refname)", "refs/remotes/").split()
    runs = []
    for ref in found:
        remote, _, branch = ref[len("refs/remotes/"):].partition("/" + refs.BRANCH_PREFIX)
        if branch and (kernel == "*" or branch == kernel):
            runs.append((remote, refs.BRANCH_PREFIX + branch))
    return sorted(runs)


def reachable_from(repo: Repo, shas: set[str], revs: list[str]) -> set[str]:
    """Those of these commits that one of revs (commits, or --glob=... patterns) reaches."""
    if not shas or not revs:
        return set()
    return shas & set(git(repo, "rev-list", *revs, "--").split())


def reachable(repo: Repo, shas: set[str], branches_only: bool = False, local_only: bool = False) -> set[str]:
    """Those of these commits that a branch (local or remote-tracking; with local_only, local) reaches,
    or with branches_only False, any ref but a best/ tag: kgit moves those itself, and one left on a
    rewritten commit does not make that commit current.

    A commit that only the reflog or a note reaches is on its way out: gc will delete it.
    """
    if not shas:
        return set()
    args = ["--branches"] if local_only else ["--branches", "--remotes"]
    if not branches_only and not local_only:
        # --exclude takes a pattern as --tags/--glob see it: relative to refs/tags/ for --tags.
        args += ["--glob=refs/kgit", f"--exclude={refs.TAG_PREFIX}*", "--tags"]
    return shas & set(git(repo, "rev-list", *args).split())


def message(repo: Repo, sha: str) -> str:
    """A commit's whole message."""
    return git(repo, "log", "-1", "--format=%B", "--end-of-options", sha, "--")
