"""Random sequences of what users and machines do to a loop, with kgit's promises checked after each.

Operations: edit the kernel, step, a step killed (kill -9) at each point of its transaction, the
recovery (`doctor --fix`), `git reset --hard` of the branch's last commit, `git gc --prune=now`,
`kgit push` and `kgit pull`. After every operation:
  - no edit lost: an edit in the working tree when a kgit command starts is, when it ends, still
    there or in a commit some ref reaches (saved edits); an edit handed to `kgit step` stays
    reachable for good (as a kept iteration or an attempt), whatever gc and resets follow;
  - one valid note per iteration, numbered without gaps or repeats;
  - every reverted attempt reachable from its ref;
and, once no step is left pending, a clean tree with HEAD holding the best kernel, which some ref
reaches, and the best tag on a kept iteration.

In CI the run is derandomized (the same sequences each time); a longer random run:

    KGIT_HOSTILE_EXAMPLES=200 python -m pytest tests/test_hostile_sequences.py -p no:cacheprovider

A failure prints the sequence of operations that broke an invariant (hypothesis shrinks it), and a
`@reproduce_failure` line that replays it exactly; `--hypothesis-seed=N` replays a whole run.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from workspace import FAKE, KERNEL, Workspace

CRASH_POINTS = ["candidate-committed", "decided", "final-committed", "noted", "moved"]
KEPT = {"BASELINE", "IMPROVED", "TARGET_MET", "KEPT_ANYWAY"}


class Loop(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kgit-hostile-"))
        subprocess.run(["git", "init", "-q", "--bare", str(self.tmp / "remote.git")], check=True)
        root = self.tmp / "repo"
        (root / "skills/kernels/fake").mkdir(parents=True)
        for name in ("fake.py", "test_fake.py"):
            shutil.copy(FAKE / name, root / "skills/kernels/fake" / name)
        self.ws = Workspace(root)
        for args in (("init", "-q", "-b", "main"), ("config", "user.email", "t@example.com"),
                     ("config", "user.name", "kgit test"), ("remote", "add", "origin", str(self.tmp / "remote.git")),
                     ("add", "-A"), ("commit", "-qm", "fake kernel")):
            self.ws.git(*args)
        self.ws.ok("start", "fake", "--max-iterations", "1000")
        self.baseline = self.ws.git("rev-parse", "HEAD")
        self.edits = 0
        self.stepped: list[str] = []  # markers of the edits handed to kgit step

    def teardown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def kgit(self, *args, env=None):
        edit = self.kernel_edit()
        if edit and args[0] == "step":
            self.stepped.append(edit)
        run = self.ws.kgit(*args, env=env)
        assert "Traceback" not in run.stderr, run.stderr
        if edit:
            assert self.kept(edit), f"edit {edit} is lost by kgit {' '.join(args)}"
        return run

    def kept(self, marker: str) -> bool:
        return marker in self.reachable_edits([marker])

    def reachable_edits(self, markers: list[str]) -> set[str]:
        """Those of the markers whose edit is in the working tree or in a commit some ref reaches."""
        working = (self.ws.root / KERNEL).read_text()
        found = {m for m in markers if f"# edit {m}\n" in working}
        missing = [m for m in markers if m not in found]
        if missing:
            revs = self.ws.git("rev-list", "--all").split()
            patterns = [arg for m in missing for arg in ("-e", f"# edit {m}")]
            grep = subprocess.run(["git", "grep", "-h", "-o", "-F", *patterns, *revs, "--", KERNEL],
                                  cwd=self.ws.root, capture_output=True, text=True)
            found |= {line.split(":", 1)[-1].removeprefix("# edit ").strip() for line in grep.stdout.splitlines()}
        return found

    def kernel_edit(self) -> str | None:
        """The marker of the edit in the working tree, if the kernel is edited."""
        text = (self.ws.root / KERNEL).read_text()
        return text.rsplit("# edit ", 1)[1].strip() if "# edit " in text else None

    def pending(self) -> bool:
        kgit_dir = self.ws.root / ".git/kgit"
        return (kgit_dir / "journal.json").exists() or bool(self.ws.git("for-each-ref", "refs/kgit/saved-edits"))

    # --- what users and machines do ----------------------------------------------------------------

    @rule(metric=st.sampled_from([50.0, 99.5, 100.0, 101.0, 120.0, 150.0, 400.0]))
    def edit(self, metric):
        self.edits += 1
        text = (self.ws.root / KERNEL).read_text().split("# edit ")[0]
        lines = [f"METRIC = {metric!r}" if line.startswith("METRIC = ") else line for line in text.splitlines()
                 if not line.startswith("EDIT = ")]
        # each edit is new code (EDIT), not a comment alone: kgit step refuses a change it has measured
        (self.ws.root / KERNEL).write_text("\n".join(lines) + f"\nEDIT = {self.edits}  # edit {self.edits}-{metric}\n")

    @precondition(lambda self: self.ws.on_branch())
    @rule()
    def step(self):
        edited = self.kernel_edit() is not None and self.ws.git("status", "--porcelain") != ""
        run = self.kgit("step", "-m", "an edit")
        if edited and not self.pending():
            assert run.returncode == 0, run.stderr
        else:
            assert run.returncode in (0, 1), run.stderr

    @precondition(lambda self: self.ws.on_branch())
    @rule(point=st.sampled_from(CRASH_POINTS))
    def step_killed(self, point):
        self.kgit("step", "-m", "killed", env={"KGIT_TEST_CRASH_AT": point})

    @rule()
    def recover(self):
        assert self.kgit("doctor", "--fix").returncode in (0, 1)

    @precondition(lambda self: self.ws.on_branch())
    @rule()
    def reset_last_commit(self):
        if self.pending() or self.ws.git("status", "--porcelain"):
            return  # a user resets a clean loop; a reset over their own edit is theirs to lose
        head = self.ws.git("rev-parse", "HEAD")
        if head == self.baseline:
            return
        self.ws.git("reset", "-q", "--hard", "HEAD~1")

    @rule()
    def gc(self):
        self.ws.git("gc", "-q", "--prune=now")

    @rule()
    def push(self):
        assert self.kgit("push").returncode in (0, 1)

    @rule()
    def pull(self):
        assert self.kgit("pull").returncode in (0, 1)

    # --- what must hold after each ----------------------------------------------------------------

    @invariant()
    def no_stepped_edit_lost(self):
        lost = set(self.stepped) - self.reachable_edits(list(set(self.stepped)))
        assert not lost, f"edits handed to kgit step are lost: {sorted(lost)}"

    @invariant()
    def records_attempts_and_the_best(self):
        log = self.ws.ok("log", "--json").json()
        iterations = [r["iteration"] for r in log["iterations"]]
        assert sorted(iterations) == list(range(len(iterations))), f"one note per iteration: {iterations}"
        assert not log["invalid_notes"]
        attempts = dict(line.split() for line in self.ws.git(
            "for-each-ref", "--format=%(refname) %(objectname)", "refs/kgit/attempts/fake/").splitlines())
        for r in log["iterations"]:
            if r["status"] not in KEPT:
                assert attempts.get(f"refs/kgit/attempts/fake/{r['iteration']}") == r["commit"], \
                    f"attempt {r['iteration']}"
        if self.pending() or not self.ws.on_branch():
            return
        status = self.ws.git("status", "--porcelain")
        if self.kernel_edit() and status:
            return  # an edit waiting for its step
        assert status == ""
        best = self.ws.ok("best", "--json").json()
        assert best["status"] in KEPT
        assert self.ws.kernel_text("HEAD") == self.ws.kernel_text(best["commit"]), "HEAD holds the best kernel"
        assert self.ws.git("branch", "--contains", best["commit"], "opt/fake"), "the best is on the branch"
        tag = self.ws.git("rev-parse", "best/fake")
        tagged = [r for r in log["iterations"] if r["commit"] == tag]
        assert tagged and tagged[-1]["status"] in KEPT, "the best tag is on a kept iteration"

examples = int(os.environ.get("KGIT_HOSTILE_EXAMPLES", "8"))
Loop.TestCase.settings = settings(
    max_examples=examples, stateful_step_count=30, deadline=None, database=None, print_blob=True,
    derandomize=os.environ.get("KGIT_HOSTILE_EXAMPLES") is None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_hostile_sequences = Loop.TestCase
