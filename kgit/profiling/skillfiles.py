"""SKILL.md files: their YAML front matter, and the bottleneck a kernel's SKILL.md declares.

A SKILL.md starts with a front matter block, as coding agents expect:

    ---
    name: softmax
    description: Row-wise softmax in Triton ... Use when ...
    bottleneck: memory        # kernel skills only: memory | compute | latency
    ---

`bottleneck` is what kgit falls back on when no profiler can run (skills/bottleneck-diagnosis/SKILL.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from kgit.errors import KgitError

BOTTLENECKS = ("memory", "compute", "latency")
KERNEL_SKILL = "skills/kernels/{kernel}/SKILL.md"
# The checkout kgit runs from (an install from a clone, as the README's): its skills/ sits beside kgit/.
KGIT_CHECKOUT = Path(__file__).resolve().parents[2]

_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*(\n|\Z)", re.S)


def readable(root: Path, skill: str) -> str:
    """Where an agent can read a skill named by its path in kgit's layout: the repository's own copy,
    else kgit's (an absolute path, in a repository of yours that has no skills/)."""
    if (root / skill).is_file():
        return skill
    own = KGIT_CHECKOUT / skill
    return str(own) if own.is_file() else skill


def front_matter(text: str, where: str = "SKILL.md") -> tuple[dict, str]:
    """The front matter as a dict, and the body after it; a missing or broken block is an error."""
    import yaml  # only the commands that read skills pay for the import

    match = _FRONT.match(text)
    if not match:
        raise KgitError(f"{where}: no YAML front matter (a '---' block at the top)")
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        raise KgitError(f"{where}: front matter is not valid YAML") from None
    if not isinstance(data, dict):
        raise KgitError(f"{where}: front matter must be a mapping")
    return data, text[match.end():]


def kernel_skill_path(kernel: str) -> str:
    return KERNEL_SKILL.format(kernel=kernel)


def declared_bottleneck(root: Path, kernel: str) -> tuple[str | None, str]:
    """The bottleneck the kernel's SKILL.md declares, and where that answer came from (or why none)."""
    path = root / kernel_skill_path(kernel)
    if not path.is_file():
        return None, f"{kernel_skill_path(kernel)} does not exist"
    try:
        data, _ = front_matter(path.read_text(), kernel_skill_path(kernel))
    except KgitError as e:
        return None, str(e)
    value = str(data.get("bottleneck", "")).strip().lower()
    if value not in BOTTLENECKS:
        return None, f"{kernel_skill_path(kernel)} declares no bottleneck (front matter key 'bottleneck')"
    return value, f"declared in {kernel_skill_path(kernel)}"
