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


@pytest.fixture
def record_launches(monkeypatch):
    """record_launches(module, kernel, what, launch=True): stands in for the module's kernel of that name;
    each launch appends what(grid, args, kw) to the list it returns, then launches the real kernel, or,
    with launch=False, only records (Gluon kernels run on a GPU only; a team of programs would wait for
    its siblings forever in the interpreter, which runs programs one after another)."""
    def record(module, kernel, what, launch=True):
        real, launched = getattr(module, kernel, None), []

        class Recorder:
            def __getitem__(self, grid):
                def run(*args, **kw):
                    launched.append(what(grid, args, kw))
                    if launch:
                        return real[grid](*args, **kw)
                return run

        monkeypatch.setattr(module, kernel, Recorder(), raising=False)
        return launched
    return record
