"""Every test gets a fresh temporary git repository holding a small fake kernel (tests/workspace.py).

Kernel tests run on the CPU in Triton's interpreter, against this checkout's kgit.
"""

from __future__ import annotations

import os
import sys

# must be set before triton decorates any kernel
os.environ["TRITON_INTERPRET"] = "1"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
for path in (ROOT, os.path.dirname(__file__)):  # this checkout's kgit, and tests/workspace.py
    if path not in sys.path:
        sys.path.insert(0, path)

import shutil
from pathlib import Path

import pytest

from workspace import FAKE, Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "repo"
    (root / "skills/kernels/fake").mkdir(parents=True)
    for name in ("triton_template.py", "test_fake.py"):
        shutil.copy(FAKE / name, root / "skills/kernels/fake" / name)
    return Workspace(root).init("fake kernel")


@pytest.fixture
def started(ws: Workspace) -> Workspace:
    """A workspace whose fake kernel has its baseline (100 GBps) recorded."""
    ws.ok("start", "fake")
    return ws
