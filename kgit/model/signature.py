"""A launcher as a kernel file defines it, read from its syntax tree for kgit init: how a test calls it,
what each of its parameters takes, whether it runs through a torch.autograd.Function (whose backward
the test must then run too), what it returns, and which of the file's kernels it leads to.

A launcher is a function of the file (softmax), an autograd.Function (_Softmax: the test calls
_Softmax.apply with its forward's parameters), or a name the file binds to one's apply
(softmax = _Softmax.apply).

Each parameter is read from its annotation, then its default, then its name:
- a tensor where the annotation names one (Optional[torch.Tensor] too: a tensor runs more of the code
  than None), or where nothing else says what it is;
- over the last dimension only (a weight, a bias) where its name says so;
- a plain value (a float, an int, a bool, a mode string) where the annotation or the default says so:
  its default, else a placeholder the user checks; None where the default is None and no annotation
  names a tensor.
Pure functions on text.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kgit.model import coverage

# parameters whose name says they hold one value per feature: a tensor over the last dimension
VECTOR = re.compile(r"(weight|bias|gamma|beta|scale|shift)s?|.*_(weight|bias)", re.IGNORECASE)
# a parameter with neither annotation nor default, whose name says it is a number
NUMBERS = {"eps": "1e-06", "epsilon": "1e-06", "dim": "-1", "axis": "-1"}
PLACEHOLDERS = {"float": "1.0", "int": "1", "bool": "False", "str": "''"}


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "tensor", "vector" (a tensor over the last dimension), "value" (passed as written)
    value: str | None  # for a value: the Python expression passed
    said: str  # what says so: "torch.Tensor", "float, its default", ...
    check: bool  # a guess the user must check: nothing in the file said what to pass
    keyword: bool = False  # keyword-only: passed by name


@dataclass(frozen=True)
class Launcher:
    call: str  # what the test calls: softmax, or _Softmax.apply
    imported: str  # the name the test imports from the kernel's module
    shown: str  # its signature as the file writes it, for the test's comments
    params: tuple
    autograd: str | None  # the autograd.Function it runs through: its backward is checked too
    returns: tuple | None  # the names of the tuple it returns, where the file says; None: one value or unknown
    backward_of: tuple | None  # the outputs whose gradient the backward uses (None: all, or no backward)
    kernels: tuple  # the file's kernels it leads to, backward included
    left_out: tuple  # the file's kernels it does not lead to


def autograd_functions(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """The file's subclasses of torch.autograd.Function, by name."""
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)
            and any(_dotted(base).split(".")[-1] == "Function" for base in node.bases)}


def apply_aliases(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to an autograd.Function's apply (softmax = _Softmax.apply): the class."""
    classes = autograd_functions(tree)
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and _dotted(node.value).endswith(".apply"):
            owner = _dotted(node.value).rsplit(".", 1)[0]
            if owner in classes:
                found.update((t.id, owner) for t in node.targets if isinstance(t, ast.Name))
    return found


def read(source: str, tree: ast.Module, name: str) -> Launcher | None:
    """The launcher the file defines by this name (a function, an autograd.Function, or an alias of its
    apply); None when the file defines none by it."""
    classes, aliases = autograd_functions(tree), apply_aliases(tree)
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    owner = aliases.get(name, name.removesuffix(".apply"))
    if owner in classes:  # the test calls the class's apply (or the file's alias of it)
        node, start, autograd = _method(classes[owner], "forward"), f"{owner}.forward", owner
        call, imported = (name, name) if name in aliases else (f"{owner}.apply", owner)
    elif name in functions:
        node, start, autograd, call, imported = functions[name], name, None, name, name
    else:
        return None
    found = coverage.parts(source) or {}
    reached = coverage.kernels_reached(found, start) if start in found else []
    if autograd is None:  # a function that calls an autograd.Function's apply runs its backward too
        autograd = next((c for c in classes if start in found and f"{c}.forward" in coverage.reached(found, start)),
                        None)
    if autograd is not None and f"{autograd}.backward" in found:
        reached = list(dict.fromkeys(reached + coverage.kernels_reached(found, f"{autograd}.backward")))
    kernels = [n for n, part in found.items() if part.kind == "kernel"]
    params = _params(node, skip_first=start.endswith(".forward")) if node is not None else ()
    returns = _returns(tree, node, functions, classes)
    backward_of = _backward_of(classes[autograd], returns) if autograd else None
    shown = f"{start}({ast.unparse(node.args)})" if node else name
    return Launcher(call, imported, shown, tuple(params), autograd, returns, backward_of,
                    tuple(k for k in kernels if k in reached), tuple(k for k in kernels if k not in reached))


def _method(cls: ast.ClassDef, name: str):
    return next((n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
                None)


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _params(node, skip_first: bool) -> list[Param]:
    """Its parameters, ctx (a forward's first) left out; *args and **kwargs are none the test can fill."""
    args = node.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    found = [_param(a, d) for a, d in zip(positional, defaults)][1 if skip_first else 0:]
    return found + [_param(a, d, keyword=True) for a, d in zip(args.kwonlyargs, args.kw_defaults)]


def _param(arg: ast.arg, default, keyword: bool = False) -> Param:
    annotation = ast.unparse(arg.annotation) if arg.annotation is not None else None
    name = arg.arg
    tensor_kind = "vector" if VECTOR.fullmatch(name) else "tensor"
    if annotation and "Tensor" in annotation:
        said = f"{annotation}, over the last dimension by its name" if tensor_kind == "vector" else annotation
        return Param(name, tensor_kind, None, said, False, keyword)
    literal = _literal(default)
    if annotation:
        base = re.sub(r"^Optional\[(.*)\]$|^(.*?)\s*\|\s*None$", lambda m: m.group(1) or m.group(2), annotation)
        if literal is not None or isinstance(default, ast.Constant):  # None too: a call as its users make it
            return Param(name, "value", literal or "None", f"{annotation}, its default", False, keyword)
        choices = re.fullmatch(r"(?:typing\.)?Literal\[(.*?)(?:,.*)?\]", base)
        if choices:
            return Param(name, "value", choices.group(1).strip(), f"{annotation}, the first choice", False, keyword)
        if base in PLACEHOLDERS:
            return Param(name, "value", PLACEHOLDERS[base], f"{annotation}, no default: CHECK", True, keyword)
        return Param(name, "value", "None", f"{annotation}, no default: CHECK", True, keyword)
    if default is not None:
        if literal is not None:
            return Param(name, "value", literal, "its default", False, keyword)
        if isinstance(default, ast.Constant) and default.value is None:
            return Param(name, "value", "None", "its default (a tensor here would run more of the code: CHECK)",
                         True, keyword)
        return Param(name, "value", ast.unparse(default), "its default", False, keyword)
    if name.lower() in NUMBERS:
        return Param(name, "value", NUMBERS[name.lower()], "no annotation or default: CHECK", True, keyword)
    over = ", over the last dimension by its name" if tensor_kind == "vector" else ""
    return Param(name, tensor_kind, None, f"no annotation or default{over}: CHECK", True, keyword)


def _literal(node) -> str | None:
    """A default that is a plain value (a number, a string, a bool, a tuple of them), as Python writes it."""
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return None if value is None else repr(value)


def _returns(tree: ast.Module, node, functions: dict, classes: dict, depth: int = 0) -> tuple | None:
    """The names of the tuple a function returns, where all its returns are tuples of one length; through
    a call of another of the file's functions or of an autograd.Function's apply, its."""
    if node is None or depth > 5:
        return None
    values = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None
              and not _inside_nested(node, n)]
    if not values:
        return None
    if all(isinstance(v, ast.Tuple) for v in values) and len({len(v.elts) for v in values}) == 1:
        return tuple(_name(e, i) for i, e in enumerate(values[0].elts))
    if len(values) == 1 and isinstance(values[0], ast.Call):
        called = _dotted(values[0].func)
        if called.endswith(".apply") and called.rsplit(".", 1)[0] in classes:
            return _returns(tree, _method(classes[called.rsplit(".", 1)[0]], "forward"), functions, classes, depth + 1)
        if called in functions:
            return _returns(tree, functions[called], functions, classes, depth + 1)
    return None


def _inside_nested(outer, target) -> bool:
    """Whether a return statement belongs to a function defined inside outer, not to outer."""
    for inner in ast.walk(outer):
        if inner is not outer and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if any(n is target for n in ast.walk(inner)):
                return True
    return False


def _name(node, index: int) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
        return node.func.value.id  # y.view(shape): y
    return f"output {index}"


def _backward_of(cls: ast.ClassDef, returns: tuple | None) -> tuple | None:
    """The outputs whose gradient the backward uses (its parameters after ctx, one per output of the
    forward, that its body reads): where they match the outputs the launcher returns; None otherwise."""
    backward = _method(cls, "backward")
    if backward is None:
        return None
    grads = [a.arg for a in backward.args.posonlyargs + backward.args.args][1:]
    if backward.args.vararg is not None or len(grads) != len(returns or (None,)):
        return None
    read = {n.id for n in ast.walk(backward) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    used = tuple(i for i, grad in enumerate(grads) if grad in read)
    return used or None
