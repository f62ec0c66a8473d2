"""A stand-in ncu (tests/fake_ncu) for the profiling tests, and a fake kernel whose loop runs on 'nvidia'."""

import os
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data"
FAKE_NCU = Path(__file__).parents[1] / "fake_ncu"


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
