"""What a kernel's test covers of its kernel file: which of the file's functions the test ran, and which
of them a change touches that it never ran.

kgit's device timing records the Triton kernels a test launched (kgit.model.device_time); the rest is
read from the file's syntax tree, each function (a method as Class.method) and each module-level value
with the names of the file's other functions and values it uses. A function that names a class (calls
it, or its apply) uses the class's methods that no other method of it calls (forward and backward of an
autograd.Function); a method that another one calls is that one's helper, used through it alone.

- a kernel ran when it was launched, or when a kernel that ran calls it (a @triton.jit helper);
- a function that leads to kernels (a launcher, an autograd.Function's forward or backward, a wrapper
  around them) ran when one of the kernels it leads to ran: a backward whose kernels were never
  launched did not run, whatever the forward beside it did;
- a function or value that leads to no kernel (a grid helper, a block size) ran when one that ran uses
  it; a value no function uses is not judged (the test may read it; so may kgit tune).

A change may then touch only what ran: a function changed or removed must have run before it, and a
function added must be used by one that ran (or by another added one that is). A test that calls
the forward only is no judge of an edit to the backward.

Where a launcher runs one of several kernels by its arguments, "ran" is read from the kernels: two
launchers of one kernel both count as run when it was launched. Pure functions on text.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kgit.model.device_time import is_kernel_decorator
from kgit.model.kernel_code import drop_docstrings


@dataclass(frozen=True)
class Part:
    """A function (or a module-level value) of a kernel file."""

    kind: str  # "kernel" (a Triton kernel), "function" or "value"
    code: str  # its syntax tree without docstrings: comments and layout are no change
    uses: frozenset  # the names of the file's parts it uses


def parts(source: str) -> dict[str, Part] | None:
    """The file's functions, methods and module-level values by name, in the file's order; None for a
    file that does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # ValueError: a NUL byte in the source
        return None
    drop_docstrings(tree)
    nodes, classes = {}, {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nodes[node.name] = node
        elif isinstance(node, ast.ClassDef):
            methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            classes[node.name] = [f"{node.name}.{m.name}" for m in methods]
            nodes.update((f"{node.name}.{m.name}", m) for m in methods)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in (t.id for t in targets if isinstance(t, ast.Name)):
                nodes.setdefault(name, node)  # the first assignment names it
    # A method another method of its class calls is that one's helper: naming the class reaches it only
    # through its callers (a helper of the backward does not run with the forward)
    helpers = set().union(*(_own_methods(nodes[m], m.split(".")[0], nodes) - {m}
                            for methods in classes.values() for m in methods))
    entries = {cls: [m for m in methods if m not in helpers] for cls, methods in classes.items()}
    found = {}
    for name, node in nodes.items():
        kind = ("value" if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                else "kernel" if any(is_kernel_decorator(d) for d in node.decorator_list) else "function")
        owner = name.split(".")[0] if "." in name else None
        used = _named(node, nodes, entries) | (_own_methods(node, owner, nodes) if owner else set())
        found[name] = Part(kind, ast.dump(node), frozenset(used - {name}))
    return found


def _named(node: ast.AST, nodes: dict, entries: dict) -> set[str]:
    """The parts a node names: a function or value by its name, a class's methods that are no other
    method's helper by the class's name."""
    used = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name):
            used.update(entries.get(inner.id, [inner.id] if inner.id in nodes else []))
    return used


def _own_methods(node: ast.AST, owner: str, nodes: dict) -> set[str]:
    """The methods of its own class a method calls, through self, cls or the class's name."""
    return {f"{owner}.{inner.attr}" for inner in ast.walk(node)
            if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
            and inner.value.id in ("self", "cls", owner) and f"{owner}.{inner.attr}" in nodes}


def reached(found: dict[str, Part], start: str) -> set[str]:
    """A part and every part it uses, through the parts they use."""
    return _closure(found, {start}, lambda name: True)


def kernels_reached(found: dict[str, Part], start: str) -> list[str]:
    """The kernels a part leads to, through the parts it uses (itself, if it is one), in the file's order."""
    seen = reached(found, start)
    return [name for name in found if name in seen and found[name].kind == "kernel"]


def ran(found: dict[str, Part], launched: set[str]) -> set[str]:
    """The parts a test ran, given the kernels it launched (the module docstring's rules)."""
    done = _closure(found, {n for n, p in found.items() if p.kind == "kernel" and n.split(".")[-1] in launched},
                    lambda n: found[n].kind == "kernel")
    leads = {name: set(kernels_reached(found, name)) for name, part in found.items() if part.kind != "kernel"}
    done |= {name for name, kernels in leads.items() if kernels & done}
    return _closure(found, done, lambda n: found[n].kind != "kernel" and not leads[n])


def _closure(found: dict[str, Part], start: set[str], allowed) -> set[str]:
    """start and every part an allowed chain of uses from it reaches."""
    done, todo = set(start), list(start)
    while todo:
        for used in found[todo.pop()].uses:
            if used not in done and allowed(used):
                done.add(used)
                todo.append(used)
    return done


def untested(before: str, after: str, launched: set[str]) -> list[str]:
    """The parts a change from before to after touches that the test, which launched these kernels of
    before, never ran: changed or removed without having run, or added and used by nothing that runs.
    Empty where either version does not parse (the test then fails on it, or reads it whole)."""
    old, new = parts(before), parts(after)
    if old is None or new is None:
        return []
    done = ran(old, launched)
    judged_old, judged_new = _judged(old), _judged(new)
    touched = [n for n in old if n in judged_old and n not in done and (n not in new or new[n].code != old[n].code)]
    added = {n for n in new if n not in old}
    reached = _closure(new, {n for n in new if n in done}, lambda n: n in added)
    return touched + [n for n in new if n in added and n in judged_new and n not in reached]


def _judged(found: dict[str, Part]) -> set[str]:
    """Every function, and the values a function uses."""
    used = set().union(*(p.uses for p in found.values() if p.kind != "value"))
    return {n for n, p in found.items() if p.kind != "value" or n in used}
