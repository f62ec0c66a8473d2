"""A temporary git repository holding a small fake kernel, and what tests check in it.

The fake kernel's test prints whatever its kernel file says (metric, correctness, spread, mode), so a
test chooses each decision by editing one line of the kernel, as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

FAKE = Path(__file__).parent / "fake"
KERNEL = "skills/kernels/fake/fake.py"
TEST = "skills/kernels/fake/test_fake.py"
# The fake kernel as a tunable template whose "bandwidth" is a smooth bowl over its tunables, best at
# BLOCK=2048, WARPS=8; a step to a neighbour changes it by 2% or more, clear of the 1% floor and of the
# reported 0.5% spread.
LANDSCAPE = '''import math

CONFIG = {"BLOCK": 256, "WARPS": 2}
CONFIG_SPACE = {"BLOCK": [128, 256, 512, 1024, 2048, 4096], "WARPS": [1, 2, 4, 8, 16]}
METRIC = 1000.0 - 20.0 * (math.log2(CONFIG["BLOCK"]) - 11) ** 2 - 40.0 * (math.log2(CONFIG["WARPS"]) - 3) ** 2
CORRECT = True
SPREAD = 0.5
MODE = "ok"
'''


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


class Workspace:
    """A temporary git repository with the fake kernel committed on main."""

    def __init__(self, root: Path):
        self.root = root

    def init(self, message: str) -> Workspace:
        """A new repository of what is in the root, committed on main by a test identity."""
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "test@example.com")
        self.git("config", "user.name", "kgit test")
        self.git("add", "-A")
        self.git("commit", "-qm", message)
        return self

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.root, check=True, capture_output=True, text=True
        ).stdout.strip()

    def kgit(self, *args: str, env: dict | None = None, input_text: str | None = None) -> Run:
        proc = subprocess.run(
            [sys.executable, "-m", "kgit", *args], cwd=self.root, capture_output=True, text=True,
            env={**os.environ, **(env or {})}, input=input_text,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *args: str, env: dict | None = None) -> Run:
        run = self.kgit(*args, env=env)
        assert run.returncode == 0, run.stderr
        return run

    def doctor(self, *args: str) -> Run:
        """kgit doctor: exit 0 when it leaves no problem, 1 when it does (its output lists them)."""
        run = self.kgit("doctor", *args, "--json")
        assert "Traceback" not in run.stderr, run.stderr
        assert run.returncode == (1 if run.json()["problems"] else 0), (run.stdout, run.stderr)
        return run

    def refused(self, *args: str) -> str:
        """Run a command that must refuse: exit 1, one line on stderr, no traceback, nothing changed."""
        before = self.snapshot()
        run = self.kgit(*args)
        assert run.returncode == 1, (run.stdout, run.stderr)
        # Progress lines may come first; the refusal itself is the last line, and nothing else is printed.
        lines = run.stderr.strip().splitlines()
        assert lines and all(line.startswith("kgit: ") for line in lines), run.stderr
        assert "Traceback" not in run.stderr
        assert self.snapshot() == before
        return lines[-1]

    def refused_json(self, *args: str) -> dict:
        """refused(), under --json: the refusal as the object an agent reads, {"error", "hint"}."""
        before = self.snapshot()
        run = self.kgit(*args, "--json")
        assert run.returncode == 1 and "Traceback" not in run.stderr, (run.stdout, run.stderr)
        assert self.snapshot() == before
        return run.json()

    def set_kernel(self, **values) -> None:
        """Rewrite the fake kernel's settings, e.g. set_kernel(METRIC=120.0, MODE="crash")."""
        path = self.root / KERNEL
        lines = []
        for line in path.read_text().splitlines():
            name = line.split(" = ")[0]
            lines.append(f"{name} = {values.pop(name)!r}" if name in values else line)
        assert not values, f"unknown settings {values}"
        path.write_text("\n".join(lines) + "\n")

    def kernel_text(self, rev: str | None = None) -> str:
        return self.git("show", f"{rev}:{KERNEL}") if rev else (self.root / KERNEL).read_text()

    def notes(self) -> list[dict]:
        out = self.git("notes", "--ref=refs/notes/kgit", "list")
        return [json.loads(self.git("notes", "--ref=refs/notes/kgit", "show", line.split()[1]))
                for line in out.splitlines()]

    def snapshot(self) -> dict:
        """Everything kgit could change: refs, the working tree's files and the kgit state files."""
        is_repo = (self.root / ".git").exists()
        refs = self.git("for-each-ref", "--format=%(refname) %(objectname)") if is_repo else None
        files = {
            str(p.relative_to(self.root)): p.read_bytes()
            for p in self.root.rglob("*") if p.is_file() and ".git" not in p.relative_to(self.root).parts
        }
        head = self.git("symbolic-ref", "-q", "HEAD") if is_repo and self.on_branch() else None
        return {"refs": refs, "head": head, "files": files}

    def on_branch(self) -> bool:
        return subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=self.root, capture_output=True).returncode == 0

    def check_invariants(self, kernel: str = "fake", kernel_path: str = KERNEL) -> None:
        """What must hold after every kgit command that changes state (the core issue's list)."""
        assert self.git("status", "--porcelain") == ""
        records = [n for n in self.notes() if n["kernel"] == kernel]
        iterations = sorted(r["iteration"] for r in records)
        assert iterations == list(range(len(records))), "one note per iteration"
        # the latest kept, as kgit's rule says (a best replaced under a stronger test may be no faster)
        best = max((r for r in records if r["status"] in ("BASELINE", "IMPROVED", "TARGET_MET")),
                   key=lambda r: r["iteration"])
        assert self.git("show", f"HEAD:{kernel_path}") == self.git("show", f"best/{kernel}:{kernel_path}"), \
            "HEAD holds the best kernel"
        tag_note = json.loads(self.git("notes", "--ref=refs/notes/kgit", "show", f"best/{kernel}"))
        assert tag_note["iteration"] == best["iteration"]
        readme = self.git("show", "HEAD:experiments/README.md")
        assert readme_iterations(readme, kernel) == iterations, "README in HEAD lists every iteration"


def readme_iterations(readme: str, kernel: str) -> list[int]:
    """The iteration numbers in the kernel's table of a rendered experiments/README.md."""
    section = readme.split(f"## Optimization: {kernel} on", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("|")]
    return [int(cell) for cell in rows if cell.isdigit()]


def git_run(ws, *args, env=None):
    """A git command whose failure the test wants to see (returncode and stderr)."""
    return subprocess.run(["git", *args], cwd=ws.root, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def clone(bare: Path, root: Path) -> Workspace:
    subprocess.run(["git", "clone", "-q", str(bare), str(root)], check=True, capture_output=True)
    w = Workspace(root)
    w.git("config", "user.email", "b@example.com")
    w.git("config", "user.name", "kgit test B")
    return w


def remote_refs(bare: Path) -> dict:
    out = subprocess.run(["git", "for-each-ref", "--format=%(refname) %(objectname)"], cwd=bare,
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split() for line in out.splitlines())


def a_session(ws):
    """baseline 100, iteration 1 kept at 120, iteration 2 reverted: the tip is a log commit."""
    ws.ok("start", "fake")
    ws.set_kernel(METRIC=120.0)
    ws.ok("step", "-m", "better")
    ws.set_kernel(METRIC=90.0)
    ws.ok("step", "-m", "worse")


def alive(pid: int) -> bool:
    """Whether a process still runs (a zombie, dead and not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"
