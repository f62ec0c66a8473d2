"""A template's tunables: the literal dicts CONFIG and CONFIG_SPACE, and the list CONFIG_CONSTRAINTS, read
from its source and checked against each other; CONFIG written back (kgit tune's proposals).

    CONFIG = {"BLOCK_SIZE": 4096, "num_warps": 4, "num_stages": 1}
    CONFIG_SPACE = {"BLOCK_SIZE": [2048, 4096, 8192], "num_warps": [4, 8, 16], "num_stages": [1, 2, 3]}
    CONFIG_CONSTRAINTS = ["BLOCK_SIZE * num_stages * 4 <= 232448"]

The space is the template's own word on what CONFIG may hold: kgit tune searches it, and a step refuses a
CONFIG outside it (kgit.loop.steps.check_config).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kgit.errors import KgitError
from kgit.model.constraints import Constraint


@dataclass(frozen=True)
class Tunables:
    config: dict
    space: dict
    constraints: tuple = ()  # Constraint, one per CONFIG_CONSTRAINTS string

    def allows(self, config: dict) -> bool:
        """Whether config satisfies every constraint of the template."""
        return all(c.holds(config) for c in self.constraints)


def read_tunables(source: str, path: str, check_config: bool = True) -> Tunables:
    """CONFIG, CONFIG_SPACE and CONFIG_CONSTRAINTS from a kernel's source, checked against each other.

    check_config=False reads a configuration recorded earlier without asking it to satisfy the constraints
    (they may have been added since)."""
    values = {name: ast.literal_eval(node.value) for name, node in _literal_assignments(source, path).items()}
    config, space = values.get("CONFIG"), values.get("CONFIG_SPACE")
    if not isinstance(config, dict) or not isinstance(space, dict):
        raise KgitError(f"{path} declares no literal CONFIG and CONFIG_SPACE dicts: nothing to tune",
                        "declare them at the top of the kernel file and have its launcher read CONFIG, e.g. "
                        "CONFIG = {'BLOCK_SIZE': 1024, 'num_warps': 4} and CONFIG_SPACE = {'BLOCK_SIZE': [512, "
                        "1024, 2048], 'num_warps': [4, 8]}, as skills/kernels/softmax/softmax.py does")
    for key, value in config.items():
        if key in space and value not in space[key]:
            raise KgitError(f"{path}: CONFIG[{key!r}] = {value!r} is not in CONFIG_SPACE[{key!r}] "
                            f"({', '.join(map(repr, space[key]))})")
    declared = values.get("CONFIG_CONSTRAINTS", [])
    if not isinstance(declared, (list, tuple)):
        raise KgitError(f"{path}: CONFIG_CONSTRAINTS must be a literal list of strings")
    constraints = tuple(Constraint.parse(text, config, path) for text in declared)
    if check_config:
        for c in constraints:
            if not c.holds(config):
                raise KgitError(f"{path}: CONFIG breaks its constraint {c.text!r} ({c.values(config)}); "
                                "start from a CONFIG that satisfies CONFIG_CONSTRAINTS")
    return Tunables(config, space, constraints)


def write_config(source: str, path: str, config: dict) -> str:
    """The source with its CONFIG literal replaced by config; every other byte is left as it was."""
    node = _literal_assignments(source, path)["CONFIG"].value
    lines = source.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: node.lineno - 1]) + _byte_to_char(lines[node.lineno - 1], node.col_offset)
    end = sum(len(line) for line in lines[: node.end_lineno - 1]) + _byte_to_char(
        lines[node.end_lineno - 1], node.end_col_offset
    )
    literal = "{" + ", ".join(f"{key!r}: {value!r}" for key, value in config.items()) + "}"
    return source[:start] + literal.replace("'", '"') + source[end:]


def _byte_to_char(line: str, byte_offset: int) -> int:
    return len(line.encode()[:byte_offset].decode())


def _literal_assignments(source: str, path: str) -> dict[str, ast.Assign]:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise KgitError(f"{path} line {e.lineno}: syntax error: {e.msg}") from None
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("CONFIG", "CONFIG_SPACE", "CONFIG_CONSTRAINTS"):
                try:
                    ast.literal_eval(node.value)
                except ValueError:
                    what = "list of strings" if name == "CONFIG_CONSTRAINTS" else "dict"
                    raise KgitError(f"{path}: {name} must be a literal {what}") from None
                found[node.targets[0].id] = node
    return found


def declared(source: str, path: str) -> Tunables | None:
    """The tunables of a source that declares CONFIG and CONFIG_SPACE as literal dicts, checked as
    read_tunables checks them (a KgitError where they contradict each other); None for any other source
    (one that does not parse is its test's to judge)."""
    try:
        found = _literal_assignments(source, path)
    except KgitError:
        return None
    if not all(name in found and isinstance(ast.literal_eval(found[name].value), dict)
               for name in ("CONFIG", "CONFIG_SPACE")):
        return None
    return read_tunables(source, path)
