"""A bare remote for the sharing tests, with kgit on PATH for the hook that git runs."""

import os
import subprocess
import sys

import pytest


@pytest.fixture
def remote(ws, tmp_path, monkeypatch):
    """ws with a bare remote 'origin' holding main, and a `kgit` on PATH for the hook to call."""
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    ws.git("remote", "add", "origin", str(bare))
    ws.git("push", "-q", "origin", "main")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "kgit"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kgit "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bare
