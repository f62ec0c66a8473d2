"""A kernel file's code, apart from how it is written: what tells a real change from a no-op.

Two versions of a kernel whose code() is equal run the same way: they differ only in comments, blank
lines, spacing or docstrings. kgit step refuses such a change (nothing to measure)
and a change whose code equals an earlier iteration's (that one has its verdict already).

Pure functions on text: no git, no file.
"""

from __future__ import annotations

import ast


def code(path: str, text: str) -> str:
    """The kernel's code as a string to compare: for a Python file, its syntax tree without docstrings
    (comments and layout are not in the tree); for a file that is not Python or does not parse, its
    text with every run of whitespace made one space."""
    if path.endswith(".py"):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):  # ValueError: a NUL byte in the source
            pass
        else:
            drop_docstrings(tree)
            # positions (lineno, col_offset) are left out by default: a moved line is the same code
            return "ast:" + ast.dump(tree)
    return "text:" + " ".join(text.split())


def same_code(path: str, a: str, b: str) -> bool:
    return code(path, a) == code(path, b)


_WITH_DOCSTRINGS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def drop_docstrings(tree: ast.AST) -> None:
    """Remove every docstring: the first statement of a module, class or function when it is a plain
    string literal (Python keeps it only as __doc__; a string anywhere else is code and stays)."""
    for node in ast.walk(tree):
        if isinstance(node, _WITH_DOCSTRINGS) and node.body and _is_docstring(node.body[0]):
            # an empty body would not compile, but the tree is only compared, never run
            node.body = node.body[1:]


def _is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))
