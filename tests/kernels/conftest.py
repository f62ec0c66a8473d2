import pytest


class Uncompilable:
    """Stands in for a Gluon kernel that does not compile with this Triton (Gluon's API moves between
    releases): each launch records its grid in `attempts` and raises as Triton's compiler does."""

    def __init__(self):
        self.attempts = []

    def __getitem__(self, grid):
        def launch(*args, **kw):
            self.attempts.append(grid)
            raise RuntimeError("PassManager::run failed\nerror: no such op in this Triton")
        return launch


@pytest.fixture
def uncompilable():
    return Uncompilable()
