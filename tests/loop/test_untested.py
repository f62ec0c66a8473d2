"""A step that changes what the kernel's test never ran is refused, or with --allow-untested recorded as untested.

The issue's case: a test that calls only the forward of a softmax whose backward sits in the same file
judged an edit that broke the backward "correctness PASS". kgit knows from its device timing which
kernels the test launched (the record's launched), and from the file's syntax which functions the
change touched (kgit.model.coverage).
"""

import sys

from user_kernels import SOFTMAX

# the user's own test, of the forward alone, printing kgit's contract
FORWARD_ONLY = '''import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402

from mykernels.softmax import softmax  # noqa: E402

x = torch.randn(4, 64)
started = time.perf_counter()
y, lse = softmax(x, 2.0)
took = time.perf_counter() - started
correct = torch.allclose(y, torch.softmax(x / 2.0, -1), atol=1e-5)
print(json.dumps({"correctness": bool(correct), "gbps": 2 * x.numel() * 4 / took / 1e9}))
'''
BACKWARD = ("dz = y * (dy - tl.sum(dy * y, axis=0))", "dz = y * (dy + tl.sum(dy * y, axis=0))")
FORWARD = ("z_max = tl.max(z, axis=0)", "z_max = tl.max(z, axis=0) + 0.0")
KERNEL = "mykernels/softmax.py"


def start(ws):
    for path, text in {"mykernels/__init__.py": "", KERNEL: SOFTMAX, "tests/forward_only.py": FORWARD_ONLY,
                       "kgit.yaml": f"softmax:\n  kernel_path: {KERNEL}\n  test_path: tests/forward_only.py\n"}.items():
        (ws.root / path).parent.mkdir(parents=True, exist_ok=True)
        (ws.root / path).write_text(text)
    ws.git("add", "-A")
    ws.git("commit", "-qm", "a softmax and its test of the forward")
    return ws.ok("start", "softmax", "--max-pairs", "2")


def edit(ws, old, new):
    text = (ws.root / KERNEL).read_text()
    assert old in text
    (ws.root / KERNEL).write_text(text.replace(old, new))


def test_a_change_to_what_the_test_never_ran_is_refused_unless_recorded_as_untested(ws):
    started = start(ws)
    assert ("the test never ran _softmax_bwd_kernel (it launched _softmax_fwd_kernel): a step that changes them is "
            "refused") in started.stdout
    assert ws.notes()[0]["launched"] == ["_softmax_fwd_kernel"]
    edit(ws, *BACKWARD)
    assert ws.refused("step", "-m", "break the backward") == (
        f"kgit: the change touches _softmax_bwd_kernel in {KERNEL}, which its test never ran (it launched "
        "_softmax_fwd_kernel): its verdict would say nothing of them; nothing was run, no iteration used: change "
        "what tests/forward_only.py runs instead; the test's owner may make it run them too (kgit init writes a test "
        "that runs a backward through autograd), or step with --allow-untested to record the change as untested")
    assert ws.refused_json("step", "-m", "break the backward")["hint"].startswith("change what tests/forward_only")
    stepped = ws.kgit("step", "-m", "break the backward", "--allow-untested")
    assert stepped.returncode == 0, stepped.stderr
    assert ("UNTESTED: the test never ran _softmax_bwd_kernel, which this change touches (--allow-untested): its "
            "verdict says nothing of them") in stepped.stdout
    record = ws.ok("show", "1", "--json").json()
    assert record["untested"] == ["_softmax_bwd_kernel"] and record["launched"] == ["_softmax_fwd_kernel"]
    assert "; UNTESTED: _softmax_bwd_kernel" in ws.ok("log").stdout


def test_a_change_to_what_the_test_ran_steps_as_before(ws):
    start(ws)
    edit(ws, *FORWARD)
    stepped = ws.kgit("step", "-m", "the forward, the same")
    assert stepped.returncode == 0, stepped.stderr
    record = ws.ok("show", "1", "--json").json()
    assert record["status"] != "FAILED" and "untested" not in record


def test_an_agents_turn_that_changes_what_the_test_never_ran_is_recorded_failed(ws, tmp_path):
    start(ws)
    agent = tmp_path / "agent.py"
    agent.write_text(f'''import os, pathlib
kernel = pathlib.Path(os.environ["KGIT_KERNEL_PATH"])
kernel.write_text(kernel.read_text().replace({BACKWARD[0]!r}, {BACKWARD[1]!r}))
pathlib.Path(os.environ["KGIT_ACTION_FILE"]).write_text("tune the backward\\n")
''')
    run = ws.kgit("run", "softmax", "--agent", f"{sys.executable} {agent}", "--max-iterations", "1", "--json")
    assert run.returncode == 0, run.stderr
    record = run.json()["iterations"][-1]
    assert record["status"] == "FAILED"
    assert record["reason"] == "agent changed _softmax_bwd_kernel, which the test never runs"


def test_after_a_change_to_the_test_its_own_run_tells_what_it_ran(ws):
    # the record of HEAD's run knew an older test: the step runs, and the candidate's run decides
    start(ws)
    test = ws.root / "tests/forward_only.py"
    test.write_text(test.read_text().replace("x = torch.randn(4, 64)", "x = torch.randn(4, 64)  # a new test"))
    ws.git("commit", "-qam", "the test, changed")
    edit(ws, *BACKWARD)
    stepped = ws.kgit("step", "-m", "break the backward")
    assert stepped.returncode == 0, stepped.stderr
    record = ws.ok("show", "1", "--json").json()
    assert record["status"] == "FAILED" and record["reason"] == (
        "the test never ran _softmax_bwd_kernel, which this change touches: its verdict would say nothing of them "
        "(kgit step --allow-untested records such a change as untested)")
    # the test's owner makes it run the backward too: now a change to it is judged
    test.write_text(test.read_text().replace(
        "y, lse = softmax(x, 2.0)",
        "x.requires_grad_()\ny, lse = softmax(x, 2.0)\ndx, = torch.autograd.grad(y, x, torch.ones_like(y))"))
    ws.git("commit", "-qam", "the test runs the backward")
    edit(ws, *BACKWARD)
    assert ws.kgit("step", "-m", "break the backward, tested").returncode == 0
    record = ws.ok("show", "2", "--json").json()
    assert record["launched"] == ["_softmax_bwd_kernel", "_softmax_fwd_kernel"] and "untested" not in record
