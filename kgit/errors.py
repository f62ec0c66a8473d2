"""The one exception type that reaches the user as a one-line message."""


class KgitError(Exception):
    """A refusal or a user error: printed as one line, exit status 1, nothing changed."""
