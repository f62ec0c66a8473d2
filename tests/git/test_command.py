"""Running git: every failure becomes a GitError with git's own reason; many blobs read in one process.

(Named test_git_run.py, not test_run.py: kgit/harness/run.py's tests have that name, and pytest needs
each test file's name to be unique.)
"""

import pytest

from kgit.errors import KgitError
from kgit.git.command import GitError, cat_blobs, config_values, find_repo, git


@pytest.fixture
def repo(ws):
    return find_repo(ws.root)


def blob(ws, text: str) -> str:
    path = ws.root / "blob.txt"
    path.write_bytes(text.encode())
    return ws.git("hash-object", "-w", str(path))


def test_cat_blobs_keeps_the_order_and_reads_a_missing_object_as_empty(ws, repo):
    texts = ["first\n", "", "third, with\nlines\n\n", "ünïcode ✓", "x" * 100_000]
    shas = [blob(ws, t) for t in texts]
    missing = "0123456789" * 4
    asked = [shas[0], missing, shas[1], shas[2], missing, shas[3], shas[4]]
    assert cat_blobs(repo, asked) == [texts[0], "", texts[1], texts[2], "", texts[3], texts[4]]
    assert cat_blobs(repo, list(reversed(shas))) == list(reversed(texts))
    assert cat_blobs(repo, []) == []


def test_a_git_failure_is_a_gitError_with_gits_reason(repo):
    with pytest.raises(GitError) as caught:
        git(repo, "checkout", "no-such-branch")
    assert str(caught.value) == \
        "git checkout failed: error: pathspec 'no-such-branch' did not match any file(s) known to git"
    assert isinstance(caught.value, KgitError)  # reaches the user as one line, exit status 1
    with pytest.raises(GitError) as caught:
        git(repo, "rev-parse", "--verify", "no-such-branch")
    assert str(caught.value) == "git rev-parse failed: fatal: Needed a single revision"
    with pytest.raises(GitError) as caught:  # a reason on several lines becomes one
        git(repo, "commit", "-m", "nothing staged")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("git commit failed: ")
    with pytest.raises(GitError) as caught:  # named past the settings kgit gives some commands
        git(repo, "-c", "user.name=x", "-c", "user.email=y", "commit", "-m", "nothing staged")
    assert str(caught.value).startswith("git commit failed: ")


def test_git_output_and_input(ws, repo):
    assert git(repo, "rev-parse", "HEAD").strip() == ws.git("rev-parse", "HEAD")
    sha = git(repo, "hash-object", "-w", "--stdin", input=b"piped\n").strip()
    assert ws.git("cat-file", "blob", sha) == "piped"
    assert git(repo, "var", "GIT_AUTHOR_IDENT", env={"GIT_AUTHOR_NAME": "Someone Else"}).startswith("Someone Else")


def test_find_repo_from_a_subfolder_and_refusals(ws, tmp_path):
    sub = ws.root / "skills/kernels"
    found = find_repo(sub)
    assert found.root == ws.root and found.git_dir == ws.root / ".git"
    assert found.kgit_dir == ws.root / ".git/kgit"
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(KgitError, match="not a git repository"):
        find_repo(outside)
    with pytest.raises(KgitError, match="no such directory"):
        find_repo(tmp_path / "nowhere")


def test_config_values_of_an_unset_key_is_empty(ws, repo):
    assert config_values(repo, "kgit.nothing") == []
    ws.git("config", "--add", "kgit.many", "a")
    ws.git("config", "--add", "kgit.many", "b")
    assert config_values(repo, "kgit.many") == ["a", "b"]
