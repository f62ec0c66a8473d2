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
    for name in ("fake.py", "test_fake.py"):
        shutil.copy(FAKE / name, root / "skills/kernels/fake" / name)
    return Workspace(root).init("fake kernel")


@pytest.fixture
def started(ws: Workspace) -> Workspace:
    """A workspace whose fake kernel has its baseline (100 GBps) recorded."""
    ws.ok("start", "fake")
    return ws


# --- a stand-in ncu (tests/fake_ncu), for the profiling tests and kgit profile's ---------------------

DATA = Path(__file__).parent / "data"
FAKE_NCU = Path(__file__).parent / "fake_ncu"


def _ncu_env(tmp_path, mode="ok", csv="ncu_softmax_synthetic.csv"):
    return {"PATH": f"{FAKE_NCU}{os.pathsep}{os.environ['PATH']}", "KGIT_FAKE_NCU_MODE": mode,
            "KGIT_FAKE_NCU_CSV": str(DATA / csv), "KGIT_FAKE_NCU_LOG": str(tmp_path / "ncu_args.log")}


@pytest.fixture
def ncu_env():
    """ncu_env(tmp_path, mode="ok", csv=...): the environment that puts the stand-in ncu first on PATH."""
    return _ncu_env


@pytest.fixture
def on_nvidia(ws):
    """A started fake kernel whose loop runs with gpu: nvidia (so kgit looks for ncu)."""
    ws.ok("start", "fake", "--gpu", "nvidia")
    return ws
