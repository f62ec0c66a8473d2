"""This repository's own experiments/README.md renders the same in a fresh clone once the records
committed as bundles are pulled: lossless rendering, on the real file rather than a fixture."""

import subprocess
from pathlib import Path

import pytest

from workspace import Workspace

PROJECT = Path(__file__).resolve().parents[2]
BUNDLES = sorted(p.relative_to(PROJECT) for p in PROJECT.glob("experiments/tune/h200/*/records.bundle"))


def _product() -> str | None:
    """The commit of kgit as committed, whichever branch the checkout is on: HEAD, or, where HEAD is a
    loop's branch (the README's first command leaves a checkout on opt/softmax, whose log has a section of
    records that only that checkout's notes hold), the commit that loop started from. None outside a git
    checkout."""
    if not (PROJECT / ".git").exists():
        return None
    git = lambda *args: subprocess.run(["git", *args], cwd=PROJECT, capture_output=True, text=True).stdout  # noqa: E731
    from kgit.git import refs

    if refs.kernel_of_branch(git("symbolic-ref", "-q", "--short", "HEAD").strip()) is None:
        return git("rev-parse", "HEAD").strip()
    for line in git("log", "--first-parent", "--format=%H %s", "HEAD").splitlines():
        sha, _, subject = line.partition(" ")
        if refs.parse_subject(subject) is None and not refs.is_report_subject(subject):
            return sha
    return None


PRODUCT = _product()


@pytest.mark.skipif(PRODUCT is None or not BUNDLES, reason="not a git checkout of kgit with its bundled records")
def test_a_fresh_clone_renders_this_repositorys_log_as_committed(tmp_path):
    clone = Workspace(tmp_path / "clone")
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(PROJECT), str(clone.root)], check=True)
    clone.git("checkout", "-q", "-b", "product", PRODUCT)
    for branch in clone.git("for-each-ref", "--format=%(refname:short)", "refs/heads/").split():
        if branch != "product":  # the branch the checkout was on (opt/softmax, say) is no product's
            clone.git("branch", "-q", "-D", branch)
    clone.git("config", "user.name", "a reader")
    clone.git("config", "user.email", "reader@example.com")
    committed = clone.git("show", "HEAD:experiments/README.md")
    assert "no kgit records in this clone" in clone.refused("report")  # never an empty log over the results
    for bundle in BUNDLES:
        clone.ok("pull", str(bundle))
    clone.ok("report")
    assert clone.git("show", "HEAD:experiments/README.md") == committed
