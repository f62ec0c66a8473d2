"""kgit init: a kernel of the user's gets a test skeleton on kgit's harness and a kgit.yaml entry."""

import subprocess
import sys

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
    assert unfilled.returncode != 0 and "write reference() (TODO)" in unfilled.stderr
    # the user writes the reference, as the TODO says
    test.write_text(test.read_text().replace(
        '    raise SystemExit("ops/test_double.py: write reference() (TODO) before kgit can judge double")',
        "    return 2 * x.double()"))
    ws.git("add", "-A")
    ws.git("commit", "-qm", "the double kernel and its test")
    assert ws.ok("start", "double", "--json").json()["correctness"] is True


def test_init_imports_a_kernel_inside_a_package_by_its_package(ws):
    # mylib/ops/double.py imports a sibling module of its package: imported as a top-level "double" it
    # would fail; the skeleton imports it as mylib.ops.double
    for folder in ("mylib", "mylib/ops"):
        (ws.root / folder).mkdir()
        (ws.root / folder / "__init__.py").write_text("")
    (ws.root / "mylib/ops/scale.py").write_text("FACTOR = 2.0\n")
    relative = KERNEL.replace("import torch\n", "import torch\n\nfrom .scale import FACTOR\n")
    (ws.root / "mylib/ops/double.py").write_text(relative.replace("(2.0 * x)", "(FACTOR * x)"))
    ws.ok("init", "double", "--kernel", "mylib/ops/double.py")
    test = ws.root / "mylib/ops/test_double.py"
    text = test.read_text()
    assert "from mylib.ops.double import double" in text and "os.path.dirname(__file__), '../..'" in text
    test.write_text(text.replace(
        '    raise SystemExit("mylib/ops/test_double.py: write reference() (TODO) before kgit can judge double")',
        "    return 2 * x.double()"))
    checked = subprocess.run([sys.executable, str(test), "--check-only", "--json"], cwd=ws.root / "mylib",
                             capture_output=True, text=True)
    assert checked.returncode == 0 and '"correctness": true' in checked.stdout, checked.stderr[-2000:]


def test_init_refuses_what_it_would_overwrite_or_cannot_use(ws):
    (ws.root / "ops").mkdir()
    (ws.root / "ops/double.py").write_text(KERNEL)
    (ws.root / "ops/test_double.py").write_text("# mine\n")
    assert "ops/test_double.py exists: kgit init never overwrites a file" in ws.refused(
        "init", "double", "--kernel", "ops/double.py")
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


def test_the_skeleton_passes_one_input_for_each_argument_the_launcher_requires(ws):
    (ws.root / "ops").mkdir()
    (ws.root / "ops/scale_add.py").write_text(KERNEL.replace("def double(x):", "def double(x, a, b, block=1024):"))
    ws.ok("init", "double", "--kernel", "ops/scale_add.py")
    text = (ws.root / "ops/test_double.py").read_text()
    assert "def reference(x, a, b):" in text
    assert text.count("        harness.rand(shape, dtype, device, case),\n") == 3  # not for block: it has a default
    compile(text, "test_double.py", "exec")
