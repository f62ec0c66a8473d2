"""KgitError: the one exception that reaches the user, as one line and exit status 1, nothing changed."""

from kgit.errors import KgitError
from kgit.git.command import GitError


def test_git_failures_are_kgit_errors():
    assert issubclass(GitError, KgitError) and issubclass(KgitError, Exception)


def test_a_kgit_error_reaches_the_user_as_its_one_line(ws):
    # the refusal of an unknown kernel is a KgitError raised deep inside 'kgit start'
    line = ws.refused("start", "nosuchkernel")
    assert line.startswith("kgit: ") and "nosuchkernel" in line
