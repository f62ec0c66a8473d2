"""kgit hooks install: put kgit's pre-push hook where git looks for hooks, never over another silently."""

from __future__ import annotations

import sys

from kgit.errors import KgitError
from kgit.git import remote, write
from kgit.git.command import Repo
from kgit.share.hooks import HOOK_MARK, pre_push_script


def install(repo: Repo, force: bool) -> str:
    """Install the pre-push hook where git looks for hooks; never replace another hook silently."""
    path = remote.hooks_dir(repo) / "pre-push"
    write.configure_notes(repo)  # installing the hook is a moment to make rebases keep the records
    script = pre_push_script(sys.executable)
    current = path.read_text(errors="replace") if path.exists() else None
    if current == script:
        return f"the kgit pre-push hook is already installed at {path}"
    saved = None
    if current is not None and HOOK_MARK not in current:  # another kgit's hook is simply brought up to date
        if not force:
            raise KgitError(
                f"{path} exists and is not kgit's hook: add the line 'kgit hooks pre-push \"$@\"' to it "
                "(it reads the same standard input), or replace it with 'kgit hooks install --force'"
            )
        saved = path.with_name("pre-push.before-kgit")
        path.replace(saved)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script)
    path.chmod(0o755)
    return f"installed the kgit pre-push hook at {path}" + (f"; the old hook is saved as {saved}" if saved else "")
