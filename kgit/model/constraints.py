"""CONFIG_CONSTRAINTS: comparisons over a kernel template's CONFIG keys that every configuration must
satisfy, such as what does not fit the GPU, predicted before compiling:

    CONFIG_CONSTRAINTS = ["(BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2 * num_stages <= 232448"]

A template is code from a repository kgit does not control, so an expression is never given to eval():
it is parsed, checked once for what it may contain (CONFIG keys, numbers, + - * / // % **, comparisons,
and/or/not; nothing else), and evaluated by walking the same tree.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass

from kgit.errors import KgitError

_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_COMPARISONS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_SAFE = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Name, ast.Constant, ast.Load,
         ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd) + _ARITHMETIC + _COMPARISONS


@dataclass(frozen=True)
class Constraint:
    """One CONFIG_CONSTRAINTS expression, checked once for what it may contain, then evaluated on configs."""
    text: str
    tree: ast.Expression
    path: str

    @classmethod
    def parse(cls, text, keys, path: str) -> "Constraint":
        def refuse(why):
            return KgitError(f"{path}: CONFIG_CONSTRAINTS {text!r}: {why} (allowed: CONFIG keys, numbers, "
                             "+ - * / // % **, comparisons, and/or/not)")
        if not isinstance(text, str):
            raise refuse("not a string")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError:
            raise refuse("not a Python expression") from None
        for node in ast.walk(tree):
            if not isinstance(node, _SAFE):
                raise refuse(f"{type(node).__name__.lower()} {ast.unparse(node)!r} is not allowed"
                             if isinstance(node, ast.expr) else f"{type(node).__name__} is not allowed")
            if isinstance(node, ast.Name) and node.id not in keys:
                raise refuse(f"{node.id!r} is not a CONFIG key")
            if isinstance(node, ast.Constant) and type(node.value) not in (int, float):
                raise refuse(f"{node.value!r} is not a number")
        if not (isinstance(tree.body, (ast.Compare, ast.BoolOp))
                or isinstance(tree.body, ast.UnaryOp) and isinstance(tree.body.op, ast.Not)):
            raise refuse("not a comparison")
        return cls(text, tree, path)

    def holds(self, config: dict) -> bool:
        try:
            return bool(_evaluate(self.tree.body, config))
        except (ArithmeticError, TypeError, ValueError, KeyError) as e:
            raise KgitError(f"{self.path}: CONFIG_CONSTRAINTS {self.text!r} cannot be evaluated on "
                            f"{self.values(config)}: {e}") from None

    def values(self, config: dict) -> str:
        found = sorted((n.col_offset, n.id) for n in ast.walk(self.tree) if isinstance(n, ast.Name))
        names = dict.fromkeys(name for _, name in found)  # in the order the expression names them
        return ", ".join(f"{name}={config.get(name)!r}" for name in names)


def _evaluate(node, config: dict):
    """The value of a checked constraint's node: only the node types Constraint.parse lets through."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return config[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, config)
        return not value if isinstance(node.op, ast.Not) else -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BoolOp):
        values = (_evaluate(v, config) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, config), _evaluate(node.right, config)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ValueError(f"an exponent of {right} is too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, config)
        for op, comparator in zip(node.ops, node.comparators):
            right = _evaluate(comparator, config)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    raise TypeError(f"{type(node).__name__} is not allowed")  # unreachable after Constraint.parse


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}
