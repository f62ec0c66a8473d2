"""Issue 51's bar: an agent that follows only the README, the skills and kgit's JSON reaches a kept
improvement on the bundled softmax and on a small repository of someone else's, and every refusal it
meets says why (tests/scripted_agent.py is the agent; it never reads kgit's code).

Both start slow but correct, as a user's code may: tiles left small from debugging. In Triton's
interpreter a program costs the same whatever its tile, so fewer, larger tiles are a gain a CPU's noisy
timing can see; kgit's context and the tier 1 skill are what lead the agent to them.
"""

import os
import re
import shutil
import sys
from pathlib import Path

from scripted_agent import KEPT, Agent
from user_kernels import ELEMENTWISE_REPO
from workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]


def agent_in(root: Path, readme: Path) -> Agent:
    # kgit.yaml's test_command says `python`, as a user writes it: this interpreter's
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    return Agent(root, readme, env)


def slow_start(folder: Path) -> str:
    """The softmax template with a CONFIG of small tiles, and CONFIG_SPACE widened to hold them: one row
    a program where the shipped CONFIG takes the test's rows in one. Its file, found as the one kernel
    file of the folder (kgit's default name for it may change)."""
    [kernel] = [p for p in folder.glob("*.py") if not p.name.startswith("test_")]
    text, n = re.subn(r'^(CONFIG = \{"BLOCK_SIZE": )\d+', r"\g<1>256", kernel.read_text(), count=1, flags=re.M)
    text, m = re.subn(r'^(CONFIG_SPACE = \{\n\s+"BLOCK_SIZE": \[)', r"\g<1>256, 512, 1024, ", text, count=1, flags=re.M)
    assert n == m == 1, "the softmax template no longer starts with CONFIG and CONFIG_SPACE's BLOCK_SIZE"
    kernel.write_text(text)
    return str(kernel.relative_to(folder.parents[2]))


def assert_explained(agent: Agent) -> None:
    assert agent.problems == []
    assert all(r["error"] and "\n" not in r["error"] for r in agent.refusals), agent.refusals


def test_the_bundled_softmax_from_a_slow_start(tmp_path):
    root = tmp_path / "clone"
    root.mkdir()
    shutil.copytree(ROOT / "skills", root / "skills")  # what a clone holds besides kgit itself
    shutil.copy(ROOT / "README.md", root)
    kernel = slow_start(root / "skills/kernels/softmax")
    (root / "kgit.yaml").write_text("softmax:\n  test_args: [--quick]\n")  # the tier 1 skill's short objective
    ws = Workspace(root).init("a clone whose softmax starts from small tiles")
    agent = agent_in(root, root / "README.md")

    start = agent.kgit("start", "softmax")
    assert start is not None and start["status"] == "BASELINE", agent.refusals
    kept = agent.improve("softmax", max_steps=3)
    assert_explained(agent)
    assert kept is not None and kept["status"] in KEPT, [(s["action"], s["status"], s["reason"]) for s in agent.steps]
    # the context's next tier (1: no profiler), its CONFIG key of that tier, the skill's elements per thread
    assert (agent.steps[0]["action"], agent.steps[0]["tier"]) == ("BLOCK_SIZE 256->512", 1)
    ctx = agent.kgit("context", "softmax")
    assert ctx["files"]["kernel"] == kernel and ctx["tunables"]["config"]["BLOCK_SIZE"] == 512
    assert agent.kgit("best", "softmax")["iteration"] == kept["iteration"]
    ws.check_invariants("softmax", kernel)


def test_a_repository_of_someone_elses(tmp_path):
    root = tmp_path / "fastops"
    for path, text in ELEMENTWISE_REPO.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    ws = Workspace(root).init("fastops: elementwise kernels and their pytest tests")
    agent = agent_in(root, ROOT / "README.md")

    start = agent.enter("elementwise", "fastops/elementwise.py", "tests/test_elementwise.py")
    assert start is not None and start["status"] == "BASELINE", (agent.refusals, agent.problems)
    # no entry in kgit.yaml, then a pytest module run as a script: each refusal said what to do
    assert [r["command"] for r in agent.refusals] == ["start elementwise"] * 2
    assert all(r["hint"] for r in agent.refusals)
    assert start["metric"] == "device_us" and start["launched"] == ["_add_kernel", "_relu_kernel", "_scale_kernel"]
    kept = agent.improve("elementwise", max_steps=3)
    assert_explained(agent)
    assert kept is not None and kept["status"] in KEPT, [(s["action"], s["status"], s["reason"]) for s in agent.steps]
    # no CONFIG: the module constant named for tier 1's block size, raised to 4 elements a thread at 4 warps
    assert (agent.steps[0]["action"], agent.steps[0]["tier"]) == ("BLOCK_SIZE 256->512", 1)
    assert re.search(r"^BLOCK_SIZE = 512$", ws.git("show", "HEAD:fastops/elementwise.py"), re.M)
    assert agent.kgit("best", "elementwise")["iteration"] == kept["iteration"]
    ws.check_invariants("elementwise", "fastops/elementwise.py")
