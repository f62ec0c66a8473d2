"""kgit init: a kernel of the user's gets a test skeleton on kgit's harness and a kgit.yaml entry."""

import subprocess
import sys

import pytest

from user_kernels import SOFTMAX

KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def _double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n).to(tl.float32)
    tl.store(y_ptr + offsets, (2.0 * x).to(y_ptr.dtype.element_ty), mask=offsets < n)


def double(x):
    y = torch.empty_like(x)
    _double_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
'''


def test_init_writes_a_skeleton_that_asks_for_its_reference_then_enters_the_loop(ws):
    (ws.root / "ops").mkdir()
    (ws.root / "ops/double.py").write_text(KERNEL)
    (ws.root / "kgit.yaml").write_text("# our settings\nfake:\n  max_iterations: 9\n")
    run = ws.ok("init", "double", "--kernel", "ops/double.py")
    assert "wrote ops/test_double.py" in run.stdout
    assert (ws.root / "kgit.yaml").read_text() == ("# our settings\nfake:\n  max_iterations: 9\n"
                                                    "double:\n  kernel_path: ops/double.py\n  test_path: ops/test_double.py\n")
    test = ws.root / "ops/test_double.py"
    unfilled = subprocess.run([sys.executable, str(test), "--json"], cwd=ws.root, capture_output=True, text=True)
    assert unfilled.returncode != 0 and "write reference() (FILL IN)" in unfilled.stderr
    # the user writes the reference, as the block marked FILL IN says
    test.write_text(test.read_text().replace(
        '    raise SystemExit("ops/test_double.py: write reference() (FILL IN) before kgit can judge double")',
        "    return 2 * x"))
    ws.git("add", "-A")
    ws.git("commit", "-qm", "the double kernel and its test")
    assert ws.ok("start", "double", "--json").json()["correctness"] is True


def test_init_imports_a_kernel_inside_a_package_by_its_package_from_a_test_outside_it(ws):
    # mylib/ops/double.py imports a sibling module of its package: imported as a top-level "double" it
    # would fail; the test imports it as mylib.ops.double, from tests/: inside the package it would ship
    for folder in ("mylib", "mylib/ops"):
        (ws.root / folder).mkdir()
        (ws.root / folder / "__init__.py").write_text("")
    (ws.root / "mylib/ops/scale.py").write_text("FACTOR = 2.0\n")
    relative = KERNEL.replace("import torch\n", "import torch\n\nfrom .scale import FACTOR\n")
    (ws.root / "mylib/ops/double.py").write_text(relative.replace("(2.0 * x)", "(FACTOR * x)"))
    assert "wrote tests/test_double.py" in ws.ok("init", "double", "--kernel", "mylib/ops/double.py").stdout
    test = ws.root / "tests/test_double.py"
    text = test.read_text()
    assert "from mylib.ops.double import double" in text and "os.path.dirname(__file__), '..'" in text
    test.write_text(text.replace(
        '    raise SystemExit("tests/test_double.py: write reference() (FILL IN) before kgit can judge double")',
        "    return 2 * x"))
    checked = subprocess.run([sys.executable, str(test), "--check-only", "--json"], cwd=ws.root / "mylib",
                             capture_output=True, text=True)
    assert checked.returncode == 0 and '"correctness": true' in checked.stdout, checked.stderr[-2000:]


def test_init_refuses_what_it_would_overwrite_or_cannot_use(ws):
    (ws.root / "ops").mkdir()
    (ws.root / "ops/double.py").write_text(KERNEL)
    (ws.root / "ops/test_double.py").write_text("# mine\n")
    (ws.root / "ops/test_double_kgit.py").write_text("# mine too\n")
    assert ws.refused("init", "double", "--kernel", "ops/double.py") == (
        "kgit: ops/test_double.py and ops/test_double_kgit.py exist: kgit init never overwrites a file: name where "
        "the test goes with --test-path")
    (ws.root / "kgit.yaml").write_text("other:\n  max_iterations: 3\n")
    refusal = ws.refused("init", "other", "--kernel", "ops/double.py")
    assert "kgit.yaml has an entry for other already" in refusal
    assert "'kgit start other' runs the test the entry names; for a new test on kgit's harness, remove the " \
           "'other:' entry from kgit.yaml first" in refusal
    assert "--kernel: file 'ops/none.py' does not exist" in ws.refused("init", "x", "--kernel", "ops/none.py")
    assert "--metric must be one of gbps, tflops" in ws.refused("init", "x", "--kernel", "ops/double.py", "--metric", "fps")
    assert "invalid kernel name" in ws.refused("init", "a/b", "--kernel", "ops/double.py")
    assert "kgit.yaml's top-level report_path is a setting, not a kernel" in ws.refused(
        "init", "report_path", "--kernel", "ops/double.py")


def test_init_writes_yaml_that_reads_back_as_written(ws):
    # a name YAML would read as a number, in a folder YAML would read as a mapping, without quotes
    (ws.root / "ops: v2").mkdir()
    (ws.root / "ops: v2/double.py").write_text(KERNEL)
    ws.ok("init", "1e3", "--kernel", "ops: v2/double.py", "--function", "double")
    import yaml

    entry = yaml.safe_load((ws.root / "kgit.yaml").read_text())
    assert entry == {"1e3": {"kernel_path": "ops: v2/double.py", "test_path": "ops: v2/test_1e3.py"}}


def test_init_finds_the_launcher_when_the_file_is_named_otherwise(ws):
    (ws.root / "ops").mkdir()
    (ws.root / "ops/kernels.py").write_text(KERNEL + "\n\ndef double_ref(x):\n    return 2 * x\n")
    run = ws.ok("init", "double", "--kernel", "ops/kernels.py")  # named as the kernel
    assert "it calls double" in run.stdout
    assert "from kernels import double" in (ws.root / "ops/test_double.py").read_text()
    (ws.root / "ops/more.py").write_text(KERNEL)  # neither dbl nor more: its one public function
    assert "it calls double" in ws.ok("init", "dbl", "--kernel", "ops/more.py").stdout


def test_init_refuses_a_function_the_file_does_not_define(ws):
    (ws.root / "ops").mkdir()
    two = KERNEL + "\n\ndef triple(x):\n    return 3 * x\n"
    (ws.root / "ops/kernels.py").write_text(two)
    assert ws.refused("init", "k", "--kernel", "ops/kernels.py") == (
        "kgit: ops/kernels.py defines no k or kernels (its functions: double, triple): "
        "name the function the test calls with --function")
    assert ws.refused("init", "k", "--kernel", "ops/kernels.py", "--function", "quadruple") == (
        "kgit: ops/kernels.py defines no quadruple: name the function the test calls with --function")
    (ws.root / "ops/broken.py").write_text("def f(:\n")
    assert "ops/broken.py does not parse as Python" in ws.refused("init", "b", "--kernel", "ops/broken.py")
    assert "it calls triple" in ws.ok("init", "k", "--kernel", "ops/kernels.py", "--function", "triple").stdout


def test_the_skeleton_is_skipped_by_the_projects_own_pytest_run_without_importing_the_kernel(ws):
    # kgit init writes test_<name>.py beside the kernel, a name pytest collects. Imported there, it would
    # import the kernel (and Triton) before the project's own tests set up their environment.
    (ws.root / "ops").mkdir()
    (ws.root / "ops/double.py").write_text('open("kernel-imported", "w").close()\n' + KERNEL)
    (ws.root / "tests").mkdir()
    (ws.root / "tests/test_theirs.py").write_text("def test_theirs():\n    assert True\n")
    ws.ok("init", "double", "--kernel", "ops/double.py")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "ops", "tests"],
                         cwd=ws.root, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 1 skipped" in run.stdout
    assert not (ws.root / "kernel-imported").exists()


def test_the_test_passes_what_the_launchers_signature_asks_for(ws):
    (ws.root / "ops").mkdir()
    (ws.root / "ops/scale_add.py").write_text(KERNEL.replace("def double(x):", "def double(x, a, b, block=1024):"))
    ws.ok("init", "double", "--kernel", "ops/scale_add.py")
    text = (ws.root / "ops/test_double.py").read_text()
    assert "def reference(x, a, b, block):" in text
    assert text.count("        harness.rand(shape, dtype, device, case),  # ") == 3
    assert "        1024,  # block: its default\n" in text
    compile(text, "test_double.py", "exec")


def write(ws, files: dict) -> None:
    for path, text in files.items():
        (ws.root / path).parent.mkdir(parents=True, exist_ok=True)
        (ws.root / path).write_text(text)


@pytest.mark.parametrize("files, test, module, import_root", [
    ({"ops/double.py": KERNEL, "tests/test_other.py": ""}, "tests/test_double.py", "double", "../ops"),
    ({"ops/double.py": KERNEL, "test/conftest.py": ""}, "test/test_double.py", "double", "../ops"),
    # pytest's testpaths names the folder, before any tests/
    ({"ops/double.py": KERNEL, "tests/conftest.py": "", "checks/conftest.py": "",
      "pyproject.toml": '[project]\nname = "x"\n\n[tool.pytest.ini_options]\ntestpaths = ["checks", "more"]\n'},
     "checks/test_double.py", "double", "../ops"),
    ({"ops/double.py": KERNEL, "unit/conftest.py": "", "pytest.ini": "[pytest]\ntestpaths = unit\n"},
     "unit/test_double.py", "double", "../ops"),
    # a package without a tests folder: one at the root, never inside the package
    ({"mylib/__init__.py": "", "mylib/double.py": KERNEL}, "tests/test_double.py", "mylib.double", ".."),
    ({"src/mylib/__init__.py": "", "src/mylib/double.py": KERNEL}, "tests/test_double.py", "mylib.double", "../src"),
    # a loose file in a repository without tests: beside it
    ({"ops/double.py": KERNEL}, "ops/test_double.py", "double", "."),
    # the repository's own test_double.py stays as it is
    ({"ops/double.py": KERNEL, "tests/test_double.py": "# theirs\n"}, "tests/test_double_kgit.py", "double", "../ops"),
])
def test_the_test_goes_beside_the_repositorys_own_tests(ws, files, test, module, import_root):
    write(ws, files)
    kernel = next(path for path in files if path.endswith("double.py"))
    run = ws.ok("init", "double", "--kernel", kernel)
    assert f"wrote {test}: it calls double" in run.stdout
    text = (ws.root / test).read_text()
    assert f"from {module} import double  # noqa: E402" in text
    assert f"sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), {import_root!r})))" in text
    assert f"test_path: {test}" in (ws.root / "kgit.yaml").read_text()
    if import_root == "../src":  # the most roundabout import: run it
        (ws.root / test).write_text(text.replace(
            f'    raise SystemExit("{test}: write reference() (FILL IN) before kgit can judge double")', "    return 2 * x"))
        checked = subprocess.run([sys.executable, test, "--check-only", "--json"], cwd=ws.root, capture_output=True,
                                 text=True)
        assert '"correctness": true' in checked.stdout, checked.stderr[-2000:]


def test_the_test_goes_where_test_path_says_but_never_inside_the_package(ws):
    write(ws, {"mylib/__init__.py": "", "mylib/double.py": KERNEL, "bench/old.py": ""})
    assert ws.refused("init", "double", "--kernel", "mylib/double.py", "--test-path", "mylib/test_double.py") == (
        "kgit: --test-path mylib/test_double.py lies inside the package mylib, which would ship the test with the "
        "kernel: put it beside the repository's tests, e.g. tests/")
    assert ws.refused("init", "double", "--kernel", "mylib/double.py", "--test-path", "bench/old.py") == (
        "kgit: bench/old.py exists: kgit init never overwrites a file: name another with --test-path, or write the "
        "kgit.yaml entry by hand")
    assert ws.refused("init", "double", "--kernel", "mylib/double.py", "--test-path", "bench/test.txt") == (
        "kgit: --test-path 'bench/test.txt' is not a Python file: kgit init writes a Python test")
    assert ws.refused("init", "double", "--kernel", "mylib/double.py", "--test-path", "../test_double.py") == (
        "kgit: --test-path '../test_double.py' lies outside the repository")
    run = ws.ok("init", "double", "--kernel", "mylib/double.py", "--test-path", "bench/kernels/check_double.py")
    assert "wrote bench/kernels/check_double.py" in run.stdout
    assert "os.path.dirname(__file__), '../..'" in (ws.root / "bench/kernels/check_double.py").read_text()


def test_the_test_of_an_autograd_launcher_runs_its_backward_and_says_in_one_block_what_to_fill_in(ws):
    write(ws, {"mykernels/__init__.py": "", "mykernels/softmax.py": SOFTMAX})
    run = ws.ok("init", "softmax", "--kernel", "mykernels/softmax.py")
    assert run.stdout.splitlines()[:2] == [
        "wrote tests/test_softmax.py: it calls softmax, and _Softmax.backward through autograd; it leads to "
        "_softmax_fwd_kernel, _softmax_bwd_kernel",
        "fill in the block marked FILL IN in it: reference() (required)"]
    text = (ws.root / "tests/test_softmax.py").read_text()
    block = text[text.index("# ====="):text.index("end of FILL IN")]
    assert text.count("FILL IN") - block.count("FILL IN") == 2  # the docstring's pointer, and the block's end
    for line in ["# kgit init read softmax(x: torch.Tensor, temperature: float=1.0, mode: str='softmax') in "
                 "mykernels/softmax.py.",
                 "returns what softmax returns: a tuple (y, lse).",
                 "# The checks number the outputs: 0 y, 1 lse, 2 the gradient of x.",
                 "def reference(x, temperature, mode):",
                 "        harness.rand(shape, dtype, device, case),  # x: torch.Tensor",
                 "        1.0,  # temperature: float, its default",
                 "        'softmax',  # mode: str, its default",
                 "# the outputs given a random gradient, the others zero; _Softmax.backward does not use the gradient "
                 "of lse\nBACKWARD_OF = (0,)",
                 "ALLOWED_TORCH_OPS = ()", "DTYPES = (", "GPU = harness.Plan(", "INTERPRETER = harness.Plan("]:
        assert line in block, line
    assert "    launch=softmax,\n" in text and "    backward_of=BACKWARD_OF,\n" in text
    compile(text, "test_softmax.py", "exec")


def test_init_names_the_kernels_its_test_leaves_out_and_what_it_could_not_read(ws):
    unused = SOFTMAX + "\n\n@triton.jit\ndef _unused_kernel(x_ptr):\n    pass\n"
    write(ws, {"ops/softmax.py": unused})
    run = ws.ok("init", "softmax", "--kernel", "ops/softmax.py", "--function", "_Softmax")
    lines = run.stdout.splitlines()
    assert lines[0].startswith("wrote ops/test_softmax.py: it calls _Softmax.apply, and _Softmax.backward")
    assert lines[1] == ("it leaves out _unused_kernel: _Softmax.apply does not lead to them, so the test never runs "
                        "them and kgit step refuses a change to them")
    assert lines[2] == ("fill in the block marked FILL IN in it: reference() (required), and CHECK what it passes "
                        "for x, temperature, mode")
    text = (ws.root / "ops/test_softmax.py").read_text()
    assert "from softmax import _Softmax" in text and "    launch=_Softmax.apply,\n" in text
    assert "(CHECK x, temperature, mode: ops/softmax.py does not say what they take)" in text


def test_a_file_whose_one_launcher_is_an_autograd_function_or_an_alias_of_its_apply(ws):
    alone = SOFTMAX[:SOFTMAX.index("def softmax(")]
    write(ws, {"ops/fused.py": alone, "ops/aliased.py": alone + "softmax = _Softmax.apply\n"})
    assert "it calls _Softmax.apply, and _Softmax.backward" in ws.ok("init", "fused", "--kernel", "ops/fused.py").stdout
    assert "it calls softmax, and _Softmax.backward" in ws.ok("init", "softmax", "--kernel", "ops/aliased.py").stdout


def test_keywords_and_tflops_are_written_as_the_launcher_and_the_metric_need(ws):
    write(ws, {"ops/double.py": KERNEL.replace("def double(x):", "def double(x, *, scale: float = 2.0):")})
    ws.ok("init", "double", "--kernel", "ops/double.py", "--metric", "tflops")
    text = (ws.root / "ops/test_double.py").read_text()
    assert "    launch=lambda x, scale: double(x, scale=scale),\n" in text
    assert "def flops(inputs, outputs):" in text and "    flops=flops,\n" in text
    assert text.index("def flops(") < text.index("end of FILL IN")
    compile(text, "test_double.py", "exec")
