"""The one exception type that reaches the user as a one-line message, and how a value or a text is cut
to fit one."""


def shown(value, limit: int = 80) -> str:
    """A value as an error message quotes it: whatever a test or a note held, one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def clipped(text: str, limit: int) -> str:
    """text in at most `limit` characters: cut at the last word boundary that fits, with an ellipsis, so
    that no word is shown cut in two (a word longer than half the limit is cut where the limit falls)."""
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    space = head.rfind(" ")
    if not text[limit - 1].isspace() and space >= limit // 2:  # the cut falls inside a word: drop it whole
        head = head[:space]
    return head.rstrip(" ,;:(") + "…"


class KgitError(Exception):
    """A refusal or a user error: printed as one line, exit status 1, nothing changed.

    hint, when there is one, is what to do about it, said apart so that --json gives it its own field
    (an agent acts on the hint; a person reads the line "<problem>: <hint>")."""

    def __init__(self, problem: str, hint: str | None = None):
        super().__init__(f"{problem}: {hint}" if hint else problem)
        self.hint = hint
