"""One real loop on the bundled softmax, in Triton's interpreter: start, a kept or reverted tuning
step, and a wrong kernel caught by the harness and reverted."""

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = "skills/kernels/softmax/softmax.py"


@pytest.fixture
def softmax_repo(ws):
    shutil.copytree(ROOT / "skills/kernels/softmax", ws.root / "skills/kernels/softmax")
    ws.git("add", "-A")
    ws.git("commit", "-qm", "bundled softmax")
    return ws


def test_real_softmax_loop_in_the_interpreter(softmax_repo):
    ws = softmax_repo
    start = ws.kgit("start", "softmax", "--gpu", "cpu", "--max-pairs", "2", "--json")  # runs take seconds here
    assert start.returncode == 0, start.stderr
    assert "interpreter mode on the CPU; timings are CPU timings" in start.stderr
    baseline = start.json()
    assert baseline["status"] == "BASELINE" and baseline["correctness"] is True and baseline["cpu_timing"] is True
    assert baseline["test"]["backend"] == "interpreter" and baseline["pct_of_peak"] is None

    kernel = ws.root / SOFTMAX
    # another tile than CONFIG's: the shipped 4096, or whatever a tuning of this clone kept
    now = int(re.search(r'"BLOCK_SIZE": (\d+)', kernel.read_text()).group(1))
    other = 2048 if now != 2048 else 4096
    kernel.write_text(kernel.read_text().replace(f'"BLOCK_SIZE": {now}', f'"BLOCK_SIZE": {other}', 1))
    tuned = ws.ok("step", "-m", f"BLOCK_SIZE {now}->{other}", "--tier", "1", "--json").json()
    assert tuned["correctness"] is True and tuned["status"] in ("IMPROVED", "WITHIN_NOISE", "REGRESSED")

    source = kernel.read_text()
    assert "inv = 1.0 / tl.sum(e, axis=1)" in source
    kernel.write_text(source.replace("inv = 1.0 / tl.sum(e, axis=1)", "inv = 1.01 / tl.sum(e, axis=1)"))
    wrong = ws.ok("step", "-m", "a wrong normalization", "--tier", "3", "--json").json()
    assert wrong["status"] == "FAILED" and wrong["correctness"] is False
    assert "1.0 / tl.sum" in kernel.read_text()
    ws.check_invariants("softmax")
    readme = ws.git("show", "HEAD:experiments/README.md")
    assert "Triton interpreter on the CPU" in readme and "(CPU)" in readme
