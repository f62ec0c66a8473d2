"""Random sequences of steps, kills, kgit push/pull between two clones, and pulls of FORGED records.

A bare remote (origin) and two clones: A runs the loop (better, worse and crashing kernels; steps killed
at each crash point of their transaction, which the next command recovers); B pulls and pushes through
origin. A third clone, the forger, publishes on a second remote (or in a bundle) notes with forged
records: a figure of 1e9, an iteration of 1000000, a best/ tag off its branch, a 50 MB field, branches
whose names are no kernel's. A and B pull them (kgit.share.screen must refuse or quarantine them).
After every rule:
  - no forged record is in any clone's refs/notes/kgit, and no invalid branch name was created;
  - every kept iteration A ever recorded is still recorded in A and its commit on A's opt/fake;
  - with no step pending in A: best/fake is the latest kept iteration of A's (genuine) records and
    ws.check_invariants() holds;
  - B's best/fake, if any, is on a genuine kept record.

Short by default (derandomized, a few sequences); a longer random run:

    KGIT_FORGED_EXAMPLES=50 python -m pytest tests/test_forged_pulls_with_steps_and_kills.py -p no:cacheprovider

A failure prints the sequence and a @reproduce_failure blob that replays it.
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from workspace import FAKE, KERNEL, Workspace, clone

CRASH_POINTS = ["candidate-journaled", "candidate-unpinned", "candidate-committed", "decided",
                "final-committed", "noted", "moved"]
KEPT = {"BASELINE", "IMPROVED", "TARGET_MET"}
FORGED = "FORGED"  # every forged record's action starts so
FORGERIES = ["figure", "iteration", "tag_off_branch", "huge", "bad_branch"]
BAD_BRANCHES = ["opt/-rf", "opt/a;b"]


def sh(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


class ForgedPulls(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kgit-forged-"))
        self.origin = self.tmp / "origin.git"
        self.evil = self.tmp / "evil.git"
        for bare in (self.origin, self.evil):
            subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
        root = self.tmp / "a"
        (root / "skills/kernels/fake").mkdir(parents=True)
        for name in ("fake.py", "test_fake.py"):
            shutil.copy(FAKE / name, root / "skills/kernels/fake" / name)
        self.a = Workspace(root).init("fake kernel")
        self.a.git("remote", "add", "origin", str(self.origin))
        self.a.git("remote", "add", "evil", str(self.evil))
        self.a.ok("start", "fake", "--max-iterations", "1000")
        self.a.ok("push")
        self.b = clone(self.origin, self.tmp / "b")
        self.b.git("remote", "add", "evil", str(self.evil))
        self.b.ok("pull")  # its notes: a clone of origin has the tag, not the records
        self.forger = clone(self.origin, self.tmp / "forger")
        self.kept: dict[int, str] = {}  # every kept iteration A recorded: iteration -> commit
        self.edits = 0
        self.record_kept()

    def teardown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def kgit(self, ws, *args, env=None):
        run = ws.kgit(*args, env=env)
        assert "Traceback" not in run.stderr, run.stderr
        return run

    def pending(self) -> bool:
        return (self.a.root / ".git/kgit/journal.json").exists() or bool(
            self.a.git("for-each-ref", "refs/kgit/saved-edits"))

    def record_kept(self):
        for r in self.a.ok("log", "--json").json()["iterations"]:
            if r["status"] in KEPT | {"KEPT_ANYWAY"}:
                assert self.kept.setdefault(r["iteration"], r["commit"]) == r["commit"], r
                # forged records never get here: the invariant checks every note

    def edit(self, metric, mode="ok"):
        self.edits += 1
        self.a.set_kernel(METRIC=metric, MODE=mode)
        with open(self.a.root / KERNEL, "a") as f:
            f.write(f"EDIT_{self.edits} = {self.edits}\n")  # new code each time: never a repeat of measured code

    # --- what the loop does -----------------------------------------------------------------------------

    @precondition(lambda self: self.a.on_branch())
    @rule(metric=st.sampled_from([50.0, 100.0, 130.0, 180.0, 300.0]), mode=st.sampled_from(["ok", "ok", "crash"]))
    def step(self, metric, mode):
        self.edit(metric, mode)
        assert self.kgit(self.a, "step", "-m", f"metric {metric} {mode}").returncode in (0, 1)
        if not self.pending():
            self.record_kept()

    @precondition(lambda self: self.a.on_branch())
    @rule(metric=st.sampled_from([50.0, 200.0, 400.0]), point=st.sampled_from(CRASH_POINTS))
    def step_killed(self, metric, point):
        self.edit(metric)
        self.kgit(self.a, "step", "-m", f"killed at {point}", env={"KGIT_TEST_CRASH_AT": point})

    @rule()
    def recover(self):
        assert self.kgit(self.a, "doctor", "--fix").returncode in (0, 1)
        if not self.pending():
            self.record_kept()

    @rule(who=st.sampled_from(["a", "b"]))
    def push(self, who):
        assert self.kgit(getattr(self, who), "push").returncode in (0, 1)

    @rule(who=st.sampled_from(["a", "b"]))
    def pull(self, who):
        assert self.kgit(getattr(self, who), "pull").returncode in (0, 1)

    # --- what a forger publishes --------------------------------------------------------------------------

    @rule(kind=st.sampled_from(FORGERIES), who=st.sampled_from(["a", "b"]), bundle=st.booleans())
    def pull_forged(self, kind, who, bundle):
        source = self.forge(kind, bundle)
        ws = getattr(self, who)
        run = self.kgit(ws, "pull", source)
        assert run.returncode in (0, 1), run.stderr
        if who == "a" and not self.pending():
            self.record_kept()

    def forge(self, kind: str, bundle: bool) -> str:
        f = self.forger
        f.git("fetch", "-q", "--force", "origin", "+refs/heads/*:refs/remotes/origin/*",
              "+refs/notes/kgit:refs/notes/kgit", "+refs/tags/*:refs/tags/*")
        if not f.git("for-each-ref", "refs/remotes/origin/opt/fake"):
            return str(self.evil)  # nothing pushed yet to forge on
        f.git("checkout", "-q", "-B", "opt/fake", "origin/opt/fake")
        records = [json.loads(f.git("notes", "--ref=refs/notes/kgit", "show", c)) for c in
                   f.git("notes", "--ref=refs/notes/kgit", "list").split()[1::2]]
        last = max(r["iteration"] for r in records if r["kernel"] == "fake")
        template = max((r for r in records if r["status"] in KEPT), key=lambda r: r["iteration"])
        if kind in ("tag_off_branch", "bad_branch"):  # a commit on no opt/fake: only the bad names reach it
            f.git("checkout", "-q", "-B", "side", "origin/opt/fake")
        f.set_kernel(METRIC=999.0)
        with open(f.root / KERNEL, "a") as fh:
            fh.write(f"FORGED_{kind} = {last}\n")
        f.git("commit", "-qam", f"fake: iter {last + 1}: {FORGED} {kind}")
        commit = f.git("rev-parse", "HEAD")
        record = {**template, "iteration": last + 1, "action": f"{FORGED} {kind}", "status": "IMPROVED",
                  "started": f"2030-01-01T00:00:00.{self.edits:06d}+00:00", "value": 150.0, "base": None}
        if kind == "figure":
            record.update(value=1e9, test={**(template.get("test") or {}), "gbps": 1e9})
        elif kind == "iteration":
            record.update(iteration=1_000_000)
        elif kind == "huge":
            record.update(output_tail="x" * (50 * 2**20))
        text = json.dumps(record) if kind != "bad_branch" else json.dumps({**record, "iteration": 1_000_000})
        subprocess.run(["git", "notes", "--ref=refs/notes/kgit", "add", "-f", "-F", "-", commit], cwd=f.root,
                       input=text, text=True, check=True, capture_output=True)
        f.git("tag", "-f", "best/fake", commit)
        if kind == "bad_branch":
            for name in BAD_BRANCHES:
                f.git("update-ref", f"refs/heads/{name}", commit)
        refspecs = ["+refs/heads/opt/*:refs/heads/opt/*", "+refs/tags/best/*:refs/tags/best/*",
                    "+refs/notes/kgit:refs/notes/kgit"]
        if bundle:
            path = self.tmp / f"forged-{self.edits}-{kind}.bundle"
            heads = [f"refs/heads/{b}" for b in ["opt/fake", *(BAD_BRANCHES if kind == "bad_branch" else [])]]
            f.git("bundle", "create", "-q", str(path), *heads, "refs/tags/best/fake", "refs/notes/kgit")
            source = str(path)
        else:
            f.git("push", "-q", "--force", str(self.evil), *refspecs)
            source = "evil"
        for name in BAD_BRANCHES:
            subprocess.run(["git", "update-ref", "-d", f"refs/heads/{name}"], cwd=f.root, capture_output=True)
        f.git("checkout", "-q", "--detach")
        return source

    # --- what must hold after each ------------------------------------------------------------------------

    @invariant()
    def no_forged_record_is_merged_and_no_bad_branch_made(self):
        for ws in (self.a, self.b):
            if not ws.git("for-each-ref", "refs/notes/kgit"):
                continue
            forged = [n for n in ws.notes() if str(n.get("action", "")).startswith(FORGED)]
            assert not forged, f"{ws.root.name} merged forged records: {[n['iteration'] for n in forged]}"
            heads = ws.git("for-each-ref", "--format=%(refname)", "refs/heads/")
            assert not any(f"refs/heads/{name}" in heads.split() for name in BAD_BRANCHES), heads

    @invariant()
    def no_kept_iteration_is_lost(self):
        log = {r["iteration"]: r for r in self.a.ok("log", "--json").json()["iterations"]}
        for iteration, commit in self.kept.items():
            assert iteration in log and log[iteration]["commit"] == commit, f"kept iteration {iteration} lost"
            assert subprocess.run(["git", "merge-base", "--is-ancestor", commit, "opt/fake"],
                                  cwd=self.a.root).returncode == 0, f"kept iteration {iteration} off opt/fake"

    @invariant()
    def the_best_is_the_latest_genuine_kept_iteration(self):
        if self.pending() or not self.a.on_branch() or self.a.git("status", "--porcelain"):
            return  # recovery, or an edit killed before its commit, is for the next command
        genuine = [r for r in self.a.notes() if r["kernel"] == "fake" and r["status"] in KEPT]
        on_branch = set(self.a.git("rev-list", "--first-parent", "opt/fake").split())
        tag = self.a.git("rev-parse", "best/fake^{commit}")
        best = max((r for r in genuine if self.commit_of(self.a, r) in on_branch), key=lambda r: r["iteration"])
        assert self.commit_of(self.a, best) == tag, f"best/fake is not iteration {best['iteration']}"
        self.a.check_invariants()

    @invariant()
    def bs_best_is_a_genuine_kept_iteration(self):
        if not self.b.git("for-each-ref", "refs/tags/best/fake"):
            return
        tag = self.b.git("rev-parse", "best/fake^{commit}")
        note = subprocess.run(["git", "notes", "--ref=refs/notes/kgit", "show", tag], cwd=self.b.root,
                              capture_output=True, text=True)
        assert note.returncode == 0, "B's best/fake has no record"
        record = json.loads(note.stdout)
        assert record["status"] in KEPT and not record["action"].startswith(FORGED)

    def commit_of(self, ws, record):
        for line in ws.git("notes", "--ref=refs/notes/kgit", "list").splitlines():
            blob, commit = line.split()
            if json.loads(ws.git("cat-file", "-p", blob)).get("started") == record["started"]:
                return commit
        raise AssertionError(f"no note for iteration {record['iteration']}")


examples = int(os.environ.get("KGIT_FORGED_EXAMPLES", "3"))
ForgedPulls.TestCase.settings = settings(
    max_examples=examples, stateful_step_count=int(os.environ.get("KGIT_FORGED_STEPS", "8")), deadline=None,
    database=None, print_blob=True, phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: minutes
    derandomize=os.environ.get("KGIT_FORGED_EXAMPLES") is None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_forged_pulls_with_steps_and_kills = ForgedPulls.TestCase
