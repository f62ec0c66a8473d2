"""What installing kgit pulls in."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_plain_install_pulls_no_torch_or_triton():
    """The command line never imports them (tests/cli/test_reading.py): they are the harness's extra."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {dep.split(">")[0].split("=")[0].split("[")[0].strip() for dep in project["dependencies"]}
    assert names == {"click", "pyyaml", "tabulate"}
    assert {"torch", "triton", "numpy"} <= {d.split(">")[0].strip() for d in project["optional-dependencies"]["harness"]}
