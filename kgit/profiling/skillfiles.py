"""SKILL.md files: their YAML front matter, and the bottleneck a kernel's SKILL.md declares.

A SKILL.md starts with a front matter block, as coding agents expect:

    ---
    name: softmax
    description: Row-wise softmax in Triton ... Use when ...
    bottleneck: memory        # kernel skills only: memory | compute | latency
    ---

`bottleneck` is what kgit falls back on when no profiler can run (skills/bottleneck-diagnosis/SKILL.md).
A kernel skill's `tunables:` maps each CONFIG key to a technique, and a tier skill's `techniques:`
(skills/tierN-*/SKILL.md) names the techniques that tier owns: together they give each key its tier
(`tunable_tiers`, what kgit tune records for a change of that key).
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


TIER_SKILLS = "skills/tier*-*/SKILL.md"
_TIER_DIR = re.compile(r"tier(\d+)-")


def technique_tiers(root: Path) -> dict[str, int]:
    """Each technique a tier skill owns, and each phrase that names it (lower case) -> its tier number.

    The repository's own tier skills, else kgit's; a skill whose front matter cannot be read owns none."""
    paths = sorted(root.glob(TIER_SKILLS)) or sorted(KGIT_CHECKOUT.glob(TIER_SKILLS))
    owners = {}
    for path in paths:
        try:
            data, _ = front_matter(path.read_text(), str(path))
        except (KgitError, OSError):
            continue
        declared = data.get("techniques")
        if not isinstance(declared, dict):
            continue
        tier = int(_TIER_DIR.match(path.parent.name).group(1))
        for name, aliases in declared.items():
            for phrase in [name, *(aliases if isinstance(aliases, list) else [])]:
                owners.setdefault(str(phrase).strip().lower(), tier)
    return owners


def tunable_tiers(root: Path, kernel: str) -> dict[str, int]:
    """Each CONFIG key that the kernel's SKILL.md maps to a technique a tier skill owns -> that tier.
    Empty when the kernel has no skill, or its skill no readable `tunables:` mapping."""
    path = root / kernel_skill_path(kernel)
    try:
        data, _ = front_matter(path.read_text(), kernel_skill_path(kernel))
    except (KgitError, OSError):
        return {}
    tunables = data.get("tunables")
    if not isinstance(tunables, dict):
        return {}
    owners = technique_tiers(root)
    return {str(key): owners[str(technique).strip().lower()] for key, technique in tunables.items()
            if str(technique).strip().lower() in owners}


def tier_of_change(tiers: dict[str, int], changed: list[str]) -> int:
    """The tier of a change of these CONFIG keys: the lowest that owns one of them; 1 when none is known."""
    return min((tiers[key] for key in changed if key in tiers), default=1)
