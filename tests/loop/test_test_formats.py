"""A user's own test, however it reports: run by test_command, judged by its exit status or a key of
its JSON, its figure kgit's own device time of the kernel file's kernels (Triton's interpreter here)."""

import os
import sys

import pytest

from workspace import Workspace

KERNEL = '''import triton
import triton.language as tl

BLOCK = 64
SCALE = 2.0


@triton.jit
def _scale(x_ptr, y_ptr, n, factor, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, factor * tl.load(x_ptr + offsets, mask=mask), mask=mask)


def scale(x, y):
    _scale[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), SCALE, BLOCK=BLOCK)
    return y
'''

# written the way pytest suites are: no JSON, no figure; the exit status is the verdict
TEST = '''import sys

import torch

sys.path.insert(0, "ops")
from scale import scale


def test_scale_doubles():
    x = torch.randn(256)
    for _ in range(3):
        y = scale(x, torch.empty_like(x))
    assert torch.allclose(y, 2 * x)
'''


@pytest.fixture
def foreign(tmp_path):
    w = Workspace(tmp_path / "theirs")
    (w.root / "ops").mkdir(parents=True)
    (w.root / "tests").mkdir()
    (w.root / "ops/scale.py").write_text(KERNEL)
    (w.root / "tests/test_scale.py").write_text(TEST)
    (w.root / "kgit.yaml").write_text(
        "scale:\n  kernel_path: ops/scale.py\n  test_path: tests/test_scale.py\n"
        f"  test_command: {sys.executable} -m pytest -q -p no:cacheprovider tests/test_scale.py\n"
        "  verdict: exit_status\n  metric: device_us\n  max_pairs: 2\n")
    w.init("their kernel and their pytest test")
    return w


def test_a_pytest_test_judged_by_its_exit_status_on_kgits_device_time(foreign):
    record = foreign.ok("start", "scale", "--json").json()
    assert record["metric"] == "device_us" and record["value"] > 0
    spread = record["measurement"]["spread"]
    assert spread["runs"] == 4 and spread["decides_on"] == "device" and list(spread["sd_pct"]) == ["device"]
    assert record["measurement"]["decided_on"] == "device"
    assert record["measurement"]["device_us"]["candidate"] == spread["device_us"]
    assert f"{record['value']:.0f} us on the device (CPU)" in foreign.ok("log", "scale").stdout
    assert record["gpu"] == "triton-interpreter (CPU)"  # as kgit's harness names it

    kernel = foreign.root / "ops/scale.py"
    kernel.write_text(kernel.read_text().replace("SCALE = 2.0", "SCALE = 3.0"))  # wrong values: the test fails
    failed = foreign.ok("step", "-m", "triple", "--json").json()
    assert failed["status"] == "FAILED" and failed["correctness"] is False
    assert failed["reason"].startswith("correctness: the test failed (exit status 1")


def test_a_verdict_key_of_the_users_json(tmp_path):
    w = Workspace(tmp_path / "theirs")
    (w.root / "ops").mkdir(parents=True)
    (w.root / "ops/k.py").write_text("SPEED = 100.0\nPASSES = True\n")
    (w.root / "bench.py").write_text(
        "import json, sys\nsys.path.insert(0, 'ops')\nimport k\n"
        "print(json.dumps({'passed': k.PASSES, 'GB/s': k.SPEED}))\n")
    (w.root / "kgit.yaml").write_text(
        "k:\n  kernel_path: ops/k.py\n  test_path: bench.py\n  test_command: python bench.py\n"
        "  verdict: {key: passed, pass: true}\n")
    w.init("a script without --json, its verdict under 'passed'")
    env = {"PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    record = w.ok("start", "k", "--json", env=env).json()
    assert record["value"] == 100.0 and record["test"]["passed"] is True
    (w.root / "ops/k.py").write_text("SPEED = 100.0\nPASSES = False\n")
    failed = w.ok("step", "-m", "breaks it", "--json", env=env).json()
    assert failed["status"] == "FAILED" and failed["reason"] == "correctness: the test reports incorrect results"


def test_a_test_with_no_verdict_kgit_can_read_is_refused_at_start_with_the_settings_that_apply(tmp_path):
    w = Workspace(tmp_path / "theirs")
    w.root.mkdir()
    (w.root / "k.py").write_text("X = 1\n")
    (w.root / "bench.py").write_text("print('fast enough')\n")
    (w.root / "kgit.yaml").write_text("k:\n  kernel_path: k.py\n  test_path: bench.py\n")
    w.init("a test that prints no JSON")
    refusal = w.refused_json("start", "k", "--json")
    assert refusal["error"].startswith("baseline failed (no JSON object on stdout)")
    (w.root / "kgit.yaml").write_text("k:\n  kernel_path: k.py\n  test_path: bench.py\n  verdict: exit_status\n")
    w.git("commit", "-qam", "its exit status is its verdict")
    refusal = w.refused_json("start", "k", "--json")
    assert "metric_pattern" in refusal["error"] and "device_us" in refusal["error"]


def test_a_pytest_module_that_crashes_as_a_script_is_told_the_settings_that_run_it_as_it_is(tmp_path):
    from user_kernels import ELEMENTWISE_REPO

    w = Workspace(tmp_path / "theirs")
    for path, text in ELEMENTWISE_REPO.items():
        (w.root / path).parent.mkdir(parents=True, exist_ok=True)
        (w.root / path).write_text(text)
    (w.root / "kgit.yaml").write_text(
        "elementwise:\n  kernel_path: fastops/elementwise.py\n  test_path: tests/test_elementwise.py\n")
    w.init("their kernels, their pytest module, a kgit.yaml entry")
    refusal = w.refused_json("start", "elementwise")
    assert refusal["error"].startswith("baseline failed (crashed: exit status 1: ModuleNotFoundError")
    assert all(setting in refusal["hint"] for setting in ("test_command", "verdict: exit_status", "metric: device_us"))
