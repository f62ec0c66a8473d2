"""KgitError: the one exception that reaches the user, as one line and exit status 1, nothing changed."""

from kgit.errors import KgitError
from kgit.git.command import GitError


def test_git_failures_are_kgit_errors():
    assert issubclass(GitError, KgitError) and issubclass(KgitError, Exception)


def test_a_kgit_error_reaches_the_user_as_its_one_line(ws):
    # the refusal of an unknown kernel is a KgitError raised deep inside 'kgit start'
    line = ws.refused("start", "nosuchkernel")
    assert line.startswith("kgit: ") and "nosuchkernel" in line


def test_a_text_too_long_for_its_line_is_cut_between_words():
    from kgit.errors import clipped

    reason = "correctness: (3, 33) fp32 normal: output 0: 3 of 99 elements not finite"
    assert clipped(reason, len(reason)) == reason
    assert clipped(reason, 30) == "correctness: (3, 33) fp32…"  # never "fp32 nor…"
    assert clipped(reason, 26) == "correctness: (3, 33) fp32…"  # a cut at a space keeps the word before it
    assert clipped(reason, 22) == "correctness: (3, 33)…"  # no separator left dangling before the ellipsis
    assert clipped("x" * 50, 10) == "x" * 9 + "…"  # one long word: cut where the limit falls
