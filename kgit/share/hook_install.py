"""kgit hooks install: put kgit's pre-push hook where git looks for hooks, never over another silently."""

from __future__ import annotations

from kgit.errors import KgitError
from kgit.git import remote, write
from kgit.git.run import Repo
from kgit.share.hooks import PRE_PUSH


def install(repo: Repo, force: bool) -> str:
    """Install the pre-push hook where git looks for hooks; never replace another hook silently."""
    path = remote.hooks_dir(repo) / "pre-push"
    write.configure_notes(repo)  # installing the hook is a moment to make rebases keep the records
    if path.exists() and path.read_text(errors="replace") == PRE_PUSH:
        return f"the kgit pre-push hook is already installed at {path}"
    saved = None
    if path.exists():
        if not force:
            raise KgitError(
                f"{path} exists and is not kgit's hook: add the line 'kgit hooks pre-push \"$@\"' to it "
                "(it reads the same standard input), or replace it with 'kgit hooks install --force'"
            )
        saved = path.with_name("pre-push.before-kgit")
        path.replace(saved)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PRE_PUSH)
    path.chmod(0o755)
    return f"installed the kgit pre-push hook at {path}" + (f"; the old hook is saved as {saved}" if saved else "")
