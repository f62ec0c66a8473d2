"""kgit hooks install: the shipped script, where git looks for hooks, and never over another hook."""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_hook_is_the_shipped_script(ws):
    from kgit.share import hooks

    assert (REPO / "hooks/pre-push").read_text() == hooks.pre_push_script("")
    assert os.access(REPO / "hooks/pre-push", os.X_OK)
    assert "stages: [pre-push]" in (REPO / ".pre-commit-hooks.yaml").read_text()
    assert "installed" in ws.ok("hooks", "install").stdout
    # it records the Python of the kgit that installed it, as pre-commit records its interpreter
    assert (ws.root / ".git/hooks/pre-push").read_text() == hooks.pre_push_script(sys.executable)
    assert "already installed" in ws.ok("hooks", "install").stdout
    other = (ws.root / ".git/hooks/pre-push")
    other.write_text(hooks.pre_push_script("/an/older/venv/bin/python"))  # another kgit's: updated
    assert "installed" in ws.ok("hooks", "install").stdout and not (ws.root / ".git/hooks/pre-push.before-kgit").exists()
    assert ws.git("config", "--get-all", "notes.rewriteRef") == "refs/notes/kgit"


def test_install_respects_core_hookspath_and_never_clobbers(ws):
    ws.git("config", "core.hooksPath", "myhooks")
    (ws.root / "myhooks").mkdir()
    theirs = ws.root / "myhooks/pre-push"
    theirs.write_text("#!/bin/sh\nexit 0\n")
    assert "not kgit's hook" in ws.refused("hooks", "install")
    assert theirs.read_text() == "#!/bin/sh\nexit 0\n"
    assert "saved as" in ws.ok("hooks", "install", "--force").stdout
    assert "kgit hooks pre-push" in theirs.read_text()
    assert (ws.root / "myhooks/pre-push.before-kgit").read_text() == "#!/bin/sh\nexit 0\n"
