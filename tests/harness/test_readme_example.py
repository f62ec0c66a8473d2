"""The README's "Writing a kernel's test": its example runs as printed, in Triton's interpreter, and kgit
reads what it prints; its table names every field of Spec and Plan."""

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

from kgit.harness import Plan, Spec
from kgit.model.result import from_output

ROOT = Path(__file__).resolve().parents[2]
HEADING = "### Writing a kernel's test"


def section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(HEADING)
    return text[start:text.index("\n### ", start + len(HEADING))]


def example_files() -> dict[str, str]:
    """The section's code blocks, each by the path its first line names ("# ops/scale.py")."""
    blocks = re.findall(r"```python\n# (\S+)\n(.*?)```", section(), re.DOTALL)
    return {path: code for path, code in blocks}


def test_the_readme_example_runs_as_printed_and_kgit_reads_it(tmp_path):
    files = example_files()
    assert sorted(files) == ["ops/scale.py", "tests/test_scale.py"]
    for path, code in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(code)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}  # this checkout's kgit
    run = subprocess.run([sys.executable, "tests/test_scale.py", "--json"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    result = from_output(run.stdout, None, None, 1.0, "")
    assert result.passed and result.metric == "gbps" and result.value > 0, result.reason
    payload = result.payload
    assert payload["cpu_timing"] and payload["checks"] == 2 * 3 + 1 * 3 * 2  # normal, then large and tiny


def test_the_readme_names_every_field_of_spec_and_plan():
    prose = re.sub(r"```.*?```", "", section(), flags=re.DOTALL)
    in_code = {word for span in re.findall(r"`([^`]+)`", prose) for word in re.findall(r"\w+", span)}
    for cls in (Spec, Plan):
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in in_code]
        assert not missing, f"README's {HEADING!r} does not say what {cls.__name__}'s {missing} are"


def test_spec_py_documents_every_field_of_its_classes():
    for cls in (Spec, Plan):  # each field starts a line of its class's docstring, which says what it is
        missing = [f.name for f in dataclasses.fields(cls) if not re.search(rf"^ *{f.name}\b", cls.__doc__, re.M)]
        assert not missing, f"{cls.__name__}'s docstring does not say what {missing} are"
