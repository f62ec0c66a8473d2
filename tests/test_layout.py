"""Tests mirror the modules, so that an untested module shows.

kgit/<pkg>/<mod>.py is tested in tests/<pkg>/test_<mod>.py, and kgit/<mod>.py in tests/test_<mod>.py.
pytest imports test files by their base name (no __init__.py in tests/), so two test files may not share
one; and no two modules share a name (a name says what a module is, one concern each), so
tests/<pkg>/test_<mod>.py never clashes. (A test file of several modules' behaviour together may take
another name: tests/<pkg>/test_<pkg>_<mod>.py is accepted as a module's mirror too.)
"""

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KGIT = ROOT / "kgit"
TESTS = ROOT / "tests"


def modules() -> list[Path]:
    return sorted(p.relative_to(KGIT) for p in KGIT.rglob("*.py")
                  if p.name not in ("__init__.py", "__main__.py") and "__pycache__" not in p.parts)


def mirrored(module: Path) -> list[Path]:
    """Where kgit/<pkg>/<mod>.py is tested: tests/<pkg>/test_<mod>.py, or for a module whose name another
    module shares, tests/<pkg>/test_<pkg>_<mod>.py."""
    folder = Path("tests", *module.parts[:-1])
    paths = [folder / f"test_{module.stem}.py"]
    if len(module.parts) > 1:
        paths.append(folder / f"test_{module.parts[-2]}_{module.stem}.py")
    return paths


def test_every_module_has_a_test_file_at_its_mirrored_path():
    missing = [f"kgit/{m} -> {mirrored(m)[0]}" + (f" (or {mirrored(m)[1]})" if len(mirrored(m)) > 1 else "")
               for m in modules() if not any((ROOT / p).is_file() for p in mirrored(m))]
    assert not missing, "modules without a test file at the mirrored path:\n  " + "\n  ".join(missing)


def test_test_file_names_are_unique():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    shared = sorted(name for name, count in names.items() if count > 1)
    assert not shared, f"test files that share a name (pytest cannot import both): {shared}"


def test_the_mirror_rule():
    assert mirrored(Path("state/journal.py")) == [Path("tests/state/test_journal.py"),
                                                  Path("tests/state/test_state_journal.py")]
    assert mirrored(Path("runner.py")) == [Path("tests/test_runner.py")]



def test_no_two_modules_share_a_name():
    names = Counter(m.name for m in modules())
    shared = sorted(name for name, count in names.items() if count > 1)
    assert not shared, f"modules that share a name (say what each one is): {shared}"


def test_profiling_never_imports_the_loop():
    """kgit/loop uses the profilers; the profilers know nothing of a loop (no import cycle between them)."""
    importing = sorted(str(p.relative_to(ROOT)) for p in (KGIT / "profiling").glob("*.py")
                       if "kgit.loop" in p.read_text() or "from kgit import loop" in p.read_text())
    assert not importing, f"kgit/profiling modules that import kgit/loop: {importing}"
