"""kgit's device timing inside a test's own process (kgit/harness/device_timing/sitecustomize.py),
through kgit.runner as a step runs a test: in Triton's interpreter, the launch calls are timed."""

import json
import os
from pathlib import Path

from kgit import runner
from kgit.config import KernelConfig

KERNEL = '''import triton
import triton.language as tl


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


@triton.jit
def _unused(x_ptr):
    pass


def double(x, y):
    _double[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y
'''

TEST = '''import json, sys, torch
sys.path.insert(0, "ops")
from double import double
x = torch.randn(100)
for _ in range(LAUNCHES):
    y = double(x, torch.empty_like(x))
print(json.dumps({"correctness": bool(torch.equal(y, 2 * x)), "gbps": 1.5}))
'''


def write_repo(root: Path, launches: int = 3, test: str = TEST) -> KernelConfig:
    (root / "ops").mkdir(parents=True, exist_ok=True)
    (root / "ops/double.py").write_text(KERNEL)
    (root / "test_double.py").write_text(test.replace("LAUNCHES", str(launches)))
    return KernelConfig(name="double", kernel_path="ops/double.py", test_path="test_double.py")


def run(cfg: KernelConfig, root: Path, env: dict | None = None):
    return runner.run_test(cfg, root, 120.0, {"TRITON_INTERPRET": "1", **(env or {})})


def test_every_launch_of_the_kernel_files_kernels_is_timed_and_summed(tmp_path):
    result = run(write_repo(tmp_path, launches=3), tmp_path)
    assert result.passed and result.value == 1.5  # the test's own figure, unchanged
    device = result.device
    assert device.source == "interpreter" and device.kernels == ("_double",) and device.launches == 3
    assert device.total_us > 0 and device.median_launch_us > 0


def test_the_test_runs_as_it_would_without_kgit(tmp_path):
    # a test that imports no triton: nothing recorded, nothing changed in what it prints
    cfg = write_repo(tmp_path, test='import json\nprint(json.dumps({"correctness": True, "gbps": 2.0}))\n')
    result = run(cfg, tmp_path)
    assert result.passed and result.value == 2.0 and result.device is None


def test_a_sitecustomize_of_the_users_is_still_imported(tmp_path):
    users = tmp_path / "site"
    users.mkdir()
    (users / "sitecustomize.py").write_text("import os\nos.environ['USERS_SITE'] = 'loaded'\n")
    test = 'import json, os\nprint(json.dumps({"correctness": os.environ.get("USERS_SITE") == "loaded", "gbps": 1.0}))\n'
    cfg = write_repo(tmp_path, test=test)
    assert run(cfg, tmp_path, {"PYTHONPATH": str(users)}).passed


def test_child_processes_of_the_test_are_timed_too(tmp_path):
    # pytest-xdist, make, a shell: every Python process of the test appends its own launches
    child = TEST.replace('print(json.dumps({"correctness": bool(torch.equal(y, 2 * x)), "gbps": 1.5}))', "")
    (tmp_path / "child.py").write_text(child.replace("LAUNCHES", "2"))
    cfg = write_repo(tmp_path, launches=1)
    cfg = KernelConfig(**{**cfg.__dict__, "test_command": f"python child.py && python test_double.py"})
    result = run(cfg, tmp_path, {"PATH": f"{Path(os.sys.executable).parent}:{os.environ['PATH']}"})
    assert result.passed and result.device.launches == 3


def test_the_recording_names_each_group_by_kernel_and_grid(tmp_path, monkeypatch):
    cfg = write_repo(tmp_path, launches=2)
    recording = tmp_path / "launches.jsonl"
    env = {**os.environ, "TRITON_INTERPRET": "1", "KGIT_DEVICE_TIMES": str(recording),
           "PYTHONPATH": str(runner.DEVICE_TIMING)}
    import subprocess
    import sys

    subprocess.run([sys.executable, cfg.test_path], cwd=tmp_path, env=env, check=True, capture_output=True)
    (process,) = [json.loads(line) for line in recording.read_text().splitlines()]
    assert process["source"] == "interpreter" and process["pid"] > 0
    (group,) = process["groups"]
    assert group["name"] == "_double" and group["grid"] == [2] and group["launches"] == 2
    assert group["min_us"] <= group["median_us"] <= group["max_us"]
