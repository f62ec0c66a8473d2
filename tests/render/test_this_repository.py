"""This repository's own experiments/README.md renders the same in a fresh clone once the records
committed as bundles are pulled: lossless rendering, on the real file rather than a fixture."""

import subprocess
from pathlib import Path

import pytest

from workspace import Workspace

PROJECT = Path(__file__).resolve().parents[2]
BUNDLES = sorted(p.relative_to(PROJECT) for p in PROJECT.glob("experiments/tune/h200/*/records.bundle"))


def _has_main() -> bool:
    return subprocess.run(["git", "rev-parse", "--verify", "-q", "refs/heads/main"], cwd=PROJECT,
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not (PROJECT / ".git").exists() or not BUNDLES or not _has_main(),
                    reason="not a git checkout of kgit with its main branch")
def test_a_fresh_clone_renders_this_repositorys_log_as_committed(tmp_path):
    clone = Workspace(tmp_path / "clone")
    # main, the product as committed: the README's first command leaves a checkout on opt/softmax, whose
    # log has a section of records that only that checkout's notes hold
    subprocess.run(["git", "clone", "-q", "--branch", "main", str(PROJECT), str(clone.root)], check=True)
    clone.git("config", "user.name", "a reader")
    clone.git("config", "user.email", "reader@example.com")
    committed = clone.git("show", "HEAD:experiments/README.md")
    assert "no kgit records in this clone" in clone.refused("report")  # never an empty log over the results
    for bundle in BUNDLES:
        clone.ok("pull", str(bundle))
    clone.ok("report")
    assert clone.git("show", "HEAD:experiments/README.md") == committed
