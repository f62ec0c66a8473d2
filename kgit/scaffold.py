"""kgit init: a kernel of the user's enters the loop: its kgit.yaml entry and a test on kgit's harness.

The loop's phase 0 is the test: without one there is nothing to judge a change by. The skeleton
written here runs the kernel against a reference on fresh random inputs, poisoned outputs, several
shapes and dtypes, and times it (kgit/harness/); what only the user knows (the reference, the call,
the shapes) is marked TODO, and the test refuses to run until the reference is written. kgit never
overwrites a file: an existing test or kgit.yaml entry is refused, and kgit.yaml is appended to.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kgit import config
from kgit.errors import KgitError

SKELETON = '''"""Correctness and speed of {module}.{function} (kgit test contract), written by kgit init.

    python {test_path} [--json] [--quick] [--check-only]

Fill in the TODOs: the reference (what the kernel must compute, in float64 or float32), how the kernel
is called, and the shapes. Then commit this file and run: kgit start {name}
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

from {module} import {function}  # noqa: E402

DTYPES = ("fp32", "fp16", "bf16")  # TODO: the types the kernel supports; each is checked and timed


def reference({params}):
    # TODO: what the kernel computes, in higher precision, for example torch.softmax(x.double(), dim=-1);
    # one argument per input (see make_inputs)
    raise SystemExit("{test_path}: write reference() (TODO) before kgit can judge {function}")


SPEC = harness.Spec(
    name="{name}",
    metric="{metric}",  # "gbps" (memory-bound) or "tflops" (then also give flops=lambda inputs, outputs: ...)
    # TODO: the kernel's inputs, one per argument of {function}({params}), FRESH random values on each
    # call (harness.rand), for a shape and dtype: a tensor of the shape each, as written here; a weight
    # over the last dimension, say, is harness.rand(shape[-1:], dtype, device, case); a scalar, a number
    make_inputs=lambda shape, dtype, device, case: ({inputs}
    ),
    make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
    # TODO: how the kernel is called; it must write every element of the outputs
    kernel=lambda inputs, outputs: outputs[0].copy_({function}(*inputs)),
    reference=lambda inputs: (reference(*inputs),),
    # TODO: value regimes beyond "normal" that the kernel must handle, e.g. cases=("normal", "large", "tiny",
    # "equal"), are checked on each Plan's extreme_shapes (say [(3, 1023)])
    gpu=harness.Plan(
        check_shapes=[(1, 1), (3, 1023), (64, 4096), (1000, 8192)],  # TODO: odd sizes, edges, each code path
        time_shapes=[(8192, 8192), (4096, 32768)],  # TODO: the sizes you optimize for, >= 256 MB of traffic
        dtypes=DTYPES,
    ),
    # tiny, for the CPU; still a row wider than a block, where a kernel that covers one block goes wrong.
    # Triton's interpreter does not compute on bf16 values: a kernel that does not cast them to float32
    # fails bf16 here (the failure says so) and may pass on a GPU
    interpreter=harness.Plan(check_shapes=[(3, 33), (1, 1), (2, 1100)], time_shapes=[(8, 256)], dtypes=DTYPES),
)

if __name__ == "__main__":
    harness.main(SPEC)
'''


def init(root: Path, name: str, kernel_path: str, function: str | None, metric: str) -> tuple[str, str, str]:
    """Write the test skeleton beside the kernel and the kgit.yaml entry; (test path, yaml text added, the
    function the test calls)."""
    config.check_kernel_name(name)
    if metric not in config.METRICS:
        raise KgitError(f"--metric must be one of {', '.join(config.METRICS)}, not {metric!r}")
    kernel = config.check_path(root, kernel_path, "--kernel")
    if not kernel.endswith(".py"):
        raise KgitError(f"--kernel {kernel_path!r} is not a Python file: kgit init writes a Python test for it")
    if name in config.read_file(root):
        raise KgitError(f"{config.CONFIG_FILE} has an entry for {name} already: kgit init writes new kernels only",
                        f"'kgit start {name}' runs the test the entry names; for a new test on kgit's harness, "
                        f"remove the '{name}:' entry from {config.CONFIG_FILE} first")
    module, import_root = _module_name(root, Path(kernel))
    python_name = name.replace("-", "_")
    tree = _parse(root / kernel, kernel)
    names = _top_level_names(tree)
    if function is None:
        stem = Path(kernel).stem
        named = [n for n in dict.fromkeys([python_name, stem]) if n in names]
        function = named[0] if named else _only_launcher(tree, kernel, python_name, stem)
    if not function.isidentifier() or not all(part.isidentifier() for part in module.split(".")):
        raise KgitError(f"the kernel's function and module must be Python names, not {function!r} in {module!r}: "
                        "name the function with --function")
    if function not in names:
        raise KgitError(f"{kernel} defines no {function}", "name the function the test calls with --function")
    test = (Path(kernel).parent / f"test_{python_name}.py").as_posix()
    if (root / test).exists():
        raise KgitError(f"{test} exists: kgit init never overwrites a file; write the kgit.yaml entry by hand")
    params = _required_parameters(tree, function)
    inputs = "".join("\n        harness.rand(shape, dtype, device, case)," for _ in params)
    (root / test).write_text(SKELETON.format(module=module, function=function, test_path=test, name=name,
                                             metric=metric, import_root=import_root, params=", ".join(params),
                                             inputs=inputs))
    import yaml  # quoted where YAML would read a name or a path as something else (1e3, yes, 'a: b')

    entry = yaml.safe_dump({name: {"kernel_path": kernel, "test_path": test}}, sort_keys=False)
    yaml_path = root / config.CONFIG_FILE
    before = yaml_path.read_text() if yaml_path.exists() else ""
    yaml_path.write_text(before + ("\n" if before and not before.endswith("\n") else "") + entry)
    return test, entry, function


def _module_name(root: Path, kernel: Path) -> tuple[str, str]:
    """The name the test imports the kernel file by, and the folder (relative to the file's) that goes on
    sys.path for it: a file inside a package (folders with __init__.py, up to the repository's root) is
    imported as package.module, so that its own package imports work; any other by its file name."""
    parts, folder = [kernel.stem], kernel.parent
    while folder != Path(".") and (root / folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts), "/".join([".."] * (len(parts) - 1)) or "."


def _required_parameters(tree: ast.Module, function: str) -> list[str]:
    """The names of the function's positional parameters without a default, which the test must pass;
    ["x"] when the file does not define it with such parameters (an alias, or *args only)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            positional = [a.arg for a in node.args.posonlyargs + node.args.args]
            required = positional[:len(positional) - len(node.args.defaults)]
            return required or ["x"]
    return ["x"]


def _parse(path: Path, shown: str) -> ast.Module:
    try:
        return ast.parse(path.read_text(), filename=shown)
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
    """The file's one public undecorated function (a launcher: its Triton kernels are decorated with
    @triton.jit), for a file that defines no function named as the kernel or as itself."""
    launchers = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)
                 and not node.decorator_list and not node.name.startswith("_")]
    if len(launchers) == 1:
        return launchers[0]
    found = f"its functions: {', '.join(launchers)}" if launchers else "it has no public undecorated function"
    neither = kernel if kernel == module else f"{kernel} or {module}"
    raise KgitError(f"{shown} defines no {neither} ({found})", "name the function the test calls with --function")
