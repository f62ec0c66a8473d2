"""kgit init: a kernel of the user's enters the loop: its kgit.yaml entry and a test on kgit's harness.

The loop's phase 0 is the test: without one there is nothing to judge a change by. The test written
here calls the launcher as its users do (harness.from_launcher), with the arguments its signature asks
for (kgit.model.signature): tensors for its tensors, its defaults for its floats, ints and mode strings;
it takes a tuple it returns whole, and where the launcher runs through a torch.autograd.Function it runs
the backward too, checked against autograd through the reference. What only the user knows (the
reference above all) is in one block marked FILL IN, and the test refuses to run until the reference
is written. The file's kernels the launcher does not lead to are named: the test never runs them, and
kgit step refuses a change to them (kgit.model.coverage).

The test goes beside the repository's own tests (pytest's testpaths, else a tests/ or test/ folder at
the root), or where --test-path says; never inside the kernel's package, which would ship it. A kernel
file outside any package, in a repository without a tests folder, gets its test beside it. kgit never
overwrites a file: the test is test_<name>.py, or test_<name>_kgit.py beside a test_<name>.py of the
repository's own; an existing kgit.yaml entry is refused, and kgit.yaml is appended to.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kgit import config
from kgit.errors import KgitError
from kgit.model import kernel_name, signature
from kgit.model.signature import Launcher

HEADER = '''"""Correctness and speed of {module}.{call} (kgit test contract), written by kgit init.

    python {test_path} [--json] [--quick] [--check-only]

All that kgit init could not read from {kernel_path} is in the block marked FILL IN below, and nowhere
else: fill it in, commit this file, then run: kgit start {name}
"""
import os
import sys

if "pytest" in sys.modules:
    # Collected by the project's own pytest run: this is a script that kgit runs, not a pytest module, and
    # importing the kernel here would import Triton before the project's tests set it up.
    import pytest

    pytest.skip("a kgit test: run it with python, as kgit does", allow_module_level=True)

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), {import_root!r})))
from kgit import harness  # noqa: E402

import torch  # noqa: E402

from {module} import {imported}  # noqa: E402

# ================================================ FILL IN ================================================
# kgit init read {shown} in {kernel_path}.
#  1. reference() (REQUIRED): what {call} computes, written with torch. It is given the arguments below,
#     each floating tensor as a float64 copy, and returns what {call} returns{returns}.
{backward_note}#  2. arguments(): what the test passes for each parameter{checks}.
#  3. The torch ops it may call, the types and the shapes checked and timed{flops_note}.
# The checks number the outputs: {numbered}.


def reference({params}):
    raise SystemExit("{test_path}: write reference() (FILL IN) before kgit can judge {call}")
'''

ARGUMENTS = '''

def arguments(shape, dtype, device, case):
    """{call}'s arguments for one shape and dtype: FRESH random tensors on every call."""
    return ({values}
    )
'''

FLOPS = '''

def flops(inputs, outputs):
    # REQUIRED for the metric tflops: the floating-point operations of one call on these inputs
    raise SystemExit("{test_path}: write flops() (FILL IN) before kgit can judge {call} in TFLOP/s")
'''

PLANS = '''

{backward_of}# the torch ops the launcher may call beyond allocation, views and copies (the cheat check refuses any
# other): those its own code calls, e.g. ("sum",) for a reduction done with torch
ALLOWED_TORCH_OPS = ()
DTYPES = ("fp32", "fp16", "bf16")  # the types the kernel supports; each is checked and timed
CASES = ("normal",)  # value regimes it must handle beyond normal (harness.CASES), checked at extreme_shapes
GPU = harness.Plan(
    check_shapes=[(1, 1), (3, 1023), (64, 4096), (1000, 8192)],  # odd sizes, edges, each code path
    time_shapes=[(8192, 8192), (4096, 32768)],  # the sizes you optimize for, >= 256 MB of traffic
    dtypes=DTYPES,
)
# Tiny, for Triton's interpreter on a CPU; still a row wider than a block, where a kernel that covers one
# block goes wrong. The interpreter does not compute on bf16 values: a kernel that does not cast them to
# float32 fails bf16 there (the failure says so) and may pass on a GPU.
INTERPRETER = harness.Plan(check_shapes=[(3, 33), (1, 1), (2, 1100)], time_shapes=[(8, 256)], dtypes=DTYPES)
# ============================================ end of FILL IN ============================================

SPEC = harness.from_launcher(
    name={name!r},
    metric={metric!r},
    launch={launch},
    arguments=arguments,
    reference=reference,
    backward_of={backward_of_name},
    cases=CASES,
    allowed_torch_ops=ALLOWED_TORCH_OPS,
    gpu=GPU,
    interpreter=INTERPRETER,{flops_field}
)

if __name__ == "__main__":
    harness.main(SPEC)
'''

TEST_FOLDERS = ("tests", "test")
# where pytest's configuration can name the folders its tests are in
PYTEST_CONFIGS = ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


@dataclass(frozen=True)
class Initialized:
    test: str  # the test written, relative to the root
    entry: str  # the YAML text added to kgit.yaml
    launcher: Launcher


def init(root: Path, name: str, kernel_path: str, function: str | None, metric: str,
         test_path: str | None = None) -> Initialized:
    """Write the test and the kgit.yaml entry (the module docstring)."""
    kernel_name.check(name)
    if metric not in config.METRICS:
        raise KgitError(f"--metric must be one of {', '.join(config.METRICS)}, not {metric!r}")
    kernel = config.check_path(root, kernel_path, "--kernel")
    if not kernel.endswith(".py"):
        raise KgitError(f"--kernel {kernel_path!r} is not a Python file: kgit init writes a Python test for it")
    if name in config.read_file(root):
        raise KgitError(f"{config.CONFIG_FILE} has an entry for {name} already: kgit init writes new kernels only",
                        f"'kgit start {name}' runs the test the entry names; for a new test on kgit's harness, "
                        f"remove the '{name}:' entry from {config.CONFIG_FILE} first")
    module, import_dir = _module_name(root, Path(kernel))
    python_name = name.replace("-", "_")
    source = _read(root / kernel, kernel)
    tree = _parse(source, kernel)
    names = _top_level_names(tree)
    if function is None:
        stem = Path(kernel).stem
        named = [n for n in dict.fromkeys([python_name, stem]) if n in names]
        function = named[0] if named else _only_launcher(tree, kernel, python_name, stem)
    if not all(part.isidentifier() for part in function.split(".") + module.split(".")):
        raise KgitError(f"the kernel's function and module must be Python names, not {function!r} in {module!r}: "
                        "name the function with --function")
    launcher = signature.read(source, tree, function)
    if launcher is None and function not in names:
        raise KgitError(f"{kernel} defines no {function}", "name the function the test calls with --function")
    launcher = launcher or _unread(function)
    test = _test_path(root, kernel, module, import_dir, python_name, test_path)
    import_root = os.path.relpath(import_dir, Path(test).parent.as_posix() or ".").replace(os.sep, "/")
    (root / test).parent.mkdir(parents=True, exist_ok=True)
    (root / test).write_text(render(launcher, module, kernel, test, name, metric, import_root))
    import yaml  # quoted where YAML would read a name or a path as something else (1e3, yes, 'a: b')

    entry = yaml.safe_dump({name: {"kernel_path": kernel, "test_path": test}}, sort_keys=False)
    yaml_path = root / config.CONFIG_FILE
    before = yaml_path.read_text() if yaml_path.exists() else ""
    yaml_path.write_text(before + ("\n" if before and not before.endswith("\n") else "") + entry)
    return Initialized(test, entry, launcher)


def render(launcher: Launcher, module: str, kernel_path: str, test_path: str, name: str, metric: str,
           import_root: str) -> str:
    """The test's text."""
    params = launcher.params
    outputs = list(launcher.returns or ("the output",))
    backward_of = None
    if launcher.autograd:
        backward_of = launcher.backward_of or tuple(range(len(outputs)))
    numbered = [f"{i} {out}" for i, out in enumerate(outputs)]
    if launcher.autograd:
        wrt = [p.name for p in params if p.kind in ("tensor", "vector")]
        numbered += [f"{len(outputs) + i} the gradient of {p}" for i, p in enumerate(wrt)]
    returns = f": a tuple ({', '.join(launcher.returns)})" if launcher.returns else ""
    backward_note = ""
    if launcher.autograd:
        backward_note = (f"#     Its backward runs too, through autograd ({launcher.autograd}.backward), and is checked against\n"
                         "#     autograd through reference(): write the forward only.\n")
    unsure = [p.name for p in params if p.check]
    checks = f" (CHECK {', '.join(unsure)}: {kernel_path} does not say what they take)" if unsure else ""
    text = HEADER.format(module=module, call=launcher.call, imported=launcher.imported, test_path=test_path,
                         kernel_path=kernel_path, name=name, import_root=import_root, shown=launcher.shown,
                         returns=returns, backward_note=backward_note, checks=checks,
                         flops_note=", and flops()" if metric == "tflops" else "",
                         numbered=", ".join(numbered), params=", ".join(p.name for p in params))
    values = "".join(f"\n        {_value(p)},  # {p.name}: {p.said}" for p in params)
    text += ARGUMENTS.format(call=launcher.call, values=values)
    if metric == "tflops":
        text += FLOPS.format(test_path=test_path, call=launcher.call)
    backward_line = ""
    if backward_of is not None:
        unused = [out for i, out in enumerate(outputs) if i not in backward_of]
        why = f"; {launcher.autograd}.backward does not use the gradient of {', '.join(unused)}" if unused else ""
        backward_line = (f"# the outputs given a random gradient, the others zero{why}\n"
                         f"BACKWARD_OF = {tuple(backward_of)!r}\n")
    return text + PLANS.format(backward_of=backward_line, name=name, metric=metric, launch=_launch(launcher),
                               backward_of_name="BACKWARD_OF" if backward_of is not None else "None",
                               flops_field="\n    flops=flops," if metric == "tflops" else "")


def _value(param: signature.Param) -> str:
    if param.kind == "tensor":
        return "harness.rand(shape, dtype, device, case)"
    if param.kind == "vector":
        return "harness.rand(shape[-1:], dtype, device, case)"
    return param.value


def _launch(launcher: Launcher) -> str:
    """What the Spec calls with the arguments: the launcher, or a lambda where some go by keyword."""
    if not any(p.keyword for p in launcher.params):
        return launcher.call
    names = [p.name for p in launcher.params]
    passed = [f"{p.name}={p.name}" if p.keyword else p.name for p in launcher.params]
    return f"lambda {', '.join(names)}: {launcher.call}({', '.join(passed)})"


def _unread(function: str) -> Launcher:
    """A launcher the file names without defining it (an import, an alias): one tensor, to check."""
    x = signature.Param("x", "tensor", None, f"{function}'s parameters are not in the file: CHECK", True)
    return Launcher(function, function.split(".")[0], function, (x,), None, None, None, (), ())


def _test_path(root: Path, kernel: str, module: str, import_dir: str, python_name: str,
               given: str | None) -> str:
    """Where the test goes (the module docstring), refused inside the kernel's package."""
    package = f"{import_dir}/{module.split('.')[0]}".removeprefix("./") if "." in module else None
    if given is not None:
        test = config.inside(root, given, "--test-path")
        if not test.endswith(".py"):
            raise KgitError(f"--test-path {given!r} is not a Python file: kgit init writes a Python test")
        if (root / test).exists():
            raise KgitError(f"{test} exists: kgit init never overwrites a file",
                            "name another with --test-path, or write the kgit.yaml entry by hand")
    else:
        folder = _tests_folder(root) or (package and "tests") or Path(kernel).parent.as_posix()
        test = next((f"{folder}/{file}".removeprefix("./") for file in
                     (f"test_{python_name}.py", f"test_{python_name}_kgit.py")
                     if not (root / folder / file).exists()), None)
        if test is None:
            raise KgitError(f"{folder}/test_{python_name}.py and {folder}/test_{python_name}_kgit.py exist: kgit "
                            "init never overwrites a file", "name where the test goes with --test-path")
    if package and (test + "/").startswith(package + "/"):
        raise KgitError(f"--test-path {test} lies inside the package {package}, which would ship the test with "
                        "the kernel", "put it beside the repository's tests, e.g. tests/")
    return test


def _tests_folder(root: Path) -> str | None:
    """The folder of the repository's own tests: the first folder pytest's testpaths names, else tests/
    or test/ at the root."""
    for name in PYTEST_CONFIGS:
        path = root / name
        text = path.read_text(errors="replace") if path.is_file() else ""
        found = re.search(r"^\s*testpaths\s*=\s*\[?\s*[\"']?([^\"',\]\s]+)", text, re.MULTILINE)
        if found and (root / found.group(1)).is_dir():
            return config.inside(root, found.group(1), "testpaths")
    return next((folder for folder in TEST_FOLDERS if (root / folder).is_dir()), None)


def _module_name(root: Path, kernel: Path) -> tuple[str, str]:
    """The name the test imports the kernel file by, and the folder (relative to the root) that goes on
    sys.path for it: a file inside a package (folders with __init__.py, up to the repository's root) is
    imported as package.module, so that its own package imports work; any other by its file name."""
    parts, folder = [kernel.stem], kernel.parent
    while folder != Path(".") and (root / folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts), folder.as_posix()


def _read(path: Path, shown: str) -> str:
    try:
        return path.read_text()
    except UnicodeDecodeError as e:
        raise KgitError(f"{shown} is not UTF-8 text: {e}") from None


def _parse(source: str, shown: str) -> ast.Module:
    try:
        return ast.parse(source, filename=shown)
    except (SyntaxError, ValueError) as e:
        raise KgitError(f"{shown} does not parse as Python: {e}") from None


def _top_level_names(tree: ast.Module) -> set[str]:
    """What `from module import NAME` finds in the file: its functions, classes, assignments, imports."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _only_launcher(tree: ast.Module, shown: str, kernel: str, module: str) -> str:
    """The file's one public launcher, for a file that defines no function named as the kernel or as
    itself: an undecorated function (its Triton kernels are decorated with @triton.jit) or a name bound
    to an autograd.Function's apply; else its one autograd.Function."""
    launchers = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)
                 and not node.decorator_list and not node.name.startswith("_")]
    launchers += [alias for alias in signature.apply_aliases(tree) if not alias.startswith("_")]
    classes = list(signature.autograd_functions(tree))
    if len(launchers) == 1:
        return launchers[0]
    if not launchers and len(classes) == 1:
        return classes[0]
    found = f"its functions: {', '.join(launchers)}" if launchers else "it has no public undecorated function"
    neither = kernel if kernel == module else f"{kernel} or {module}"
    raise KgitError(f"{shown} defines no {neither} ({found})", "name the function the test calls with --function")
