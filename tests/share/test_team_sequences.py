"""Random interleavings of what a small team does to one kernel's loop: a bare remote, two or three clones.

Rules: a clone steps a better, worse or failing kernel (kept, reverted, failed), or a better one and
`kgit push` at once; `kgit pull` (settling a fork, exit 1 and a line saying "forked", with `--take
theirs` or `--take ours`); `kgit push`; a plain `git push origin opt/fake` through kgit's pre-push hook;
a plain `git pull --no-rebase origin opt/fake` (aborted when it conflicts, as a person would); a forced
`git push -f` (the hook must refuse it whenever it would drop a kept kernel); `git gc --prune=now` on a
clone or on the remote. Checked after every rule:
  - no kgit command, and no hook git runs, shows a traceback;
  - best/fake never points to a worse record than the best kept record on its branch's first-parent
    line, by the records: on the remote always, in a clone after a kgit command there;
  - a forced push that gets through drops no kept kernel of the remote's branch;
  - a repository's records only grow, and after gc every one names a commit it still has;
and at teardown, after one round of `kgit pull` (taking theirs on a fork) and `kgit push` on every
clone (two rounds when a member pushed with plain git: the records come with that member's kgit push),
then a `kgit pull` on every clone, then gc everywhere:
  - every clone and the remote agree on opt/fake, best/fake and refs/notes/kgit;
  - every commit a step made (kept, attempt) is in every clone and in the remote, and every record's
    commit in each clone's `kgit log --json` exists;
  - `kgit best --json` agrees with best/fake in every clone.

In CI the run is derandomized and short; a longer random run (its seed is printed on a failure, and
KGIT_TEAM_SEED=N replays it):

    KGIT_TEAM_EXAMPLES=30 KGIT_TEAM_STEPS=25 python -m pytest tests/share/test_team_sequences.py -p no:cacheprovider -s

(KGIT_TEAM_NO_SHRINK=1 reports a failing sequence as found, without the slow shrinking.)
"""

import atexit
import json
import collections
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from kgit.model.record import parse_note
from workspace import FAKE, KERNEL, Workspace, clone, git_run, remote_refs

BRANCH, TAG, NOTES = "refs/heads/opt/fake", "refs/tags/best/fake", "refs/notes/kgit"
KEPT = {"BASELINE", "IMPROVED", "TARGET_MET"}
EXPECTED = {"better": "IMPROVED", "worse": "REGRESSED", "failing": "FAILED"}
CLONES = 3


def kernel_source(metric: float, correct: bool, edit: int) -> str:
    """The fake kernel, new code each time (EDIT): kgit step refuses a kernel it has measured."""
    return (f"METRIC = {metric!r}\nCORRECT = {correct!r}\nSPREAD = 0.5\nMODE = \"ok\"\nEDIT = {edit}\n")


def git_in(where: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=where, check=True, capture_output=True, text=True).stdout


def records(where: Path) -> dict[str, list]:
    """commit -> the fake kernel's records in refs/notes/kgit of a repository (a clone or the bare remote)."""
    try:
        listing = git_in(where, "ls-tree", "-r", "--full-tree", NOTES)
    except subprocess.CalledProcessError:
        return {}
    blobs = {}
    for line in listing.splitlines():
        meta, _, path = line.partition("\t")
        blobs[path.replace("/", "")] = meta.split()[2]
    out = subprocess.run(["git", "cat-file", "--batch"], cwd=where, input="\n".join(blobs.values()) + "\n",
                         capture_output=True, text=True, check=True).stdout
    texts, pos = [], 0
    while pos < len(out):
        header, _, rest = out[pos:].partition("\n")
        size = int(header.split()[2])
        texts.append(rest[:size])
        pos += len(header) + 1 + size + 1
    by_commit = {}
    for commit, text in zip(blobs, texts):
        mine = [r for r in parse_note(commit, text)[0] if r.kernel == "fake"]
        if mine:
            by_commit[commit] = mine
    return by_commit


def rev(where: Path, ref: str) -> str | None:
    run = subprocess.run(["git", "rev-parse", "-q", "--verify", ref + "^{commit}"], cwd=where,
                         capture_output=True, text=True)
    return run.stdout.strip() if run.returncode == 0 else None


def missing_commits(where: Path, shas) -> list[str]:
    shas = sorted(set(shas))
    if not shas:
        return []
    out = subprocess.run(["git", "cat-file", "--batch-check"], cwd=where, input="\n".join(shas) + "\n",
                         capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.endswith(" missing")]


def best_not_worse(where: Path, name: str) -> None:
    """best/fake of a repository is a kept record no worse than any kept record on opt/fake's
    first-parent line, by that repository's records."""
    branch, tag = rev(where, BRANCH), rev(where, TAG)
    if branch is None or tag is None:
        return
    by_commit = records(where)
    line = git_in(where, "rev-list", "--first-parent", branch).split()
    kept = [(sha, r) for sha in line for r in by_commit.get(sha, []) if r.status.value in KEPT]
    tagged = [r for r in by_commit.get(tag, []) if r.status.value in KEPT]
    assert tagged, f"{name}: best/fake ({tag[:10]}) is on no kept record"
    if not kept:  # the line's records have not arrived (a plain git push sends none)
        return
    best_sha, best = max(kept, key=lambda p: p[1].value)
    assert max(r.value for r in tagged) >= best.value, (
        f"{name}: best/fake is iteration {tagged[-1].iteration} ({tagged[-1].value}), a worse record than "
        f"iteration {best.iteration} ({best.value}, {best_sha[:10]}) on opt/fake's first-parent line")


_TEMPLATE: Path | None = None
SEEN: collections.Counter = collections.Counter()  # what the sequences did, printed after a longer run


def event(what: str) -> None:
    SEEN[what] += 1


def template() -> Path:
    """A remote and three clones at fake's baseline, each with the hook installed, made once per process
    (copied for each example: setting them up is most of an example's time)."""
    global _TEMPLATE
    if _TEMPLATE is not None:
        return _TEMPLATE
    top = Path(tempfile.mkdtemp(prefix="kgit-team-template-"))
    bare = top / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    root = top / "c0"
    (root / "skills/kernels/fake").mkdir(parents=True)
    for name in ("fake.py", "test_fake.py"):
        shutil.copy(FAKE / name, root / "skills/kernels/fake" / name)
    (root / "kgit.yaml").write_text("fake:\n  max_iterations: 1000\n")
    a = Workspace(root).init("fake kernel")
    a.git("remote", "add", "origin", str(bare))
    a.git("push", "-q", "origin", "main")
    a.ok("start", "fake")
    a.ok("push")
    a.git("branch", "-q", "--set-upstream-to=origin/opt/fake", "opt/fake")
    a.ok("hooks", "install")
    for i in range(1, CLONES):
        w = clone(bare, top / f"c{i}")
        w.git("config", "user.name", f"member {i}")
        w.ok("pull")
        w.git("checkout", "-q", "opt/fake")
        w.ok("hooks", "install")
    _TEMPLATE = top
    atexit.register(shutil.rmtree, top, True)
    return top


class Team(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kgit-team-"))
        shutil.copytree(template(), self.tmp, dirs_exist_ok=True, symlinks=True)
        self.remote = self.tmp / "remote.git"
        self.clones = [Workspace(self.tmp / f"c{i}") for i in range(CLONES)]
        for w in self.clones:
            w.git("config", "remote.origin.url", str(self.remote))
        self.n = 2
        self.turn = 0
        self.edits = 0
        self.top = 100.0  # above every kernel stepped so far: better kernels go over it
        self.stepped: list[str] = []  # the commit of every record a step made, kept or not
        self.keys: dict[Path, set] = {}  # the records each repository held when last looked at

    def teardown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- helpers -----------------------------------------------------------------------------------

    def kgit(self, w: Workspace, *args: str):
        run = w.kgit(*args)
        shown = f"kgit {' '.join(args)} in {w.root.name}: rc {run.returncode}\n{run.stdout}\n{run.stderr}"
        assert "Traceback" not in run.stderr + run.stdout, shown
        assert run.returncode in (0, 1), shown
        return run

    def git(self, w: Workspace, *args: str):
        run = git_run(w, *args)
        assert "Traceback" not in run.stderr + run.stdout, f"git {' '.join(args)} in {w.root.name}:\n{run.stderr}"
        return run

    def member(self, i: int) -> Workspace:
        """Clone i after the one whose turn it is: hypothesis draws small numbers most, and the team takes
        turns whatever it draws."""
        self.turn += 1
        return self.clones[(self.turn + i) % self.n]

    def check_remote(self):
        best_not_worse(self.remote, "the remote")
        self.records_kept(self.remote)

    def records_kept(self, where: Path) -> None:
        """A repository's records only grow: none it held is gone."""
        keys = {r.key for rs in records(where).values() for r in rs}
        lost = self.keys.get(where, set()) - keys
        assert not lost, f"records gone from {where.name}: {sorted(lost)}"
        self.keys[where] = keys

    # --- what a team does ------------------------------------------------------------------------------

    @initialize(n=st.sampled_from([2, 3]))
    def members(self, n):
        self.n = n

    @rule(i=st.integers(0, CLONES - 1), kind=st.sampled_from(["better", "worse", "failing"]))
    def step(self, i, kind):
        w = self.member(i)
        self.edits += 1
        if kind == "better":
            self.top += 10.0
            metric, correct = self.top, True
        else:
            metric, correct = (90.0 - self.edits / 10, True) if kind == "worse" else (self.top + 50.0, False)
        (w.root / KERNEL).write_text(kernel_source(metric, correct, self.edits))
        run = self.kgit(w, "step", "-m", f"{w.root.name}: {kind} {self.edits}", "--json")
        if run.returncode == 0:
            record = run.json()
            assert record["status"] == EXPECTED[kind], (kind, record)
            event(f"step {kind}: {record['status']}")
            self.stepped.append(record["commit"])
            best_not_worse(w.root, w.root.name)
        else:  # refused (commits whose records have not arrived, say): the member puts the edit away
            event("step refused")
            w.git("reset", "-q", "--hard")
        self.records_kept(w.root)
        self.check_remote()

    @rule(i=st.integers(0, CLONES - 1))
    def better_and_push(self, i):
        """The usual day of a member: a better kernel, sent at once."""
        self.step(i, "better")
        self.turn -= 1  # the same member pushes
        self.push(i)

    @rule(i=st.integers(0, CLONES - 1), take=st.sampled_from(["theirs", "ours"]))
    def pull(self, i, take):
        w = self.member(i)
        run = self.kgit(w, "pull")
        event(f"pull: rc {run.returncode}" + (", forked" if "forked" in run.stdout else ""))
        if run.returncode == 1 and "forked" in run.stdout:
            taken = self.kgit(w, "pull", "--take", take)
            assert taken.returncode == 0, f"kgit pull --take {take} in {w.root.name}:\n{taken.stdout}\n{taken.stderr}"
        best_not_worse(w.root, w.root.name)
        self.records_kept(w.root)
        self.check_remote()

    @rule(i=st.integers(0, CLONES - 1))
    def push(self, i):
        w = self.member(i)
        pushed = self.kgit(w, "push")
        event(f"push: rc {pushed.returncode}")
        if pushed.returncode == 0:
            best_not_worse(w.root, w.root.name)
        self.records_kept(w.root)
        self.check_remote()

    @rule(i=st.integers(0, CLONES - 1))
    def plain_push(self, i):
        pushed = self.git(self.member(i), "push", "origin", "opt/fake").returncode == 0

        event(f"plain push: {'through' if pushed else 'refused'}")
        self.check_remote()

    @rule(i=st.integers(0, CLONES - 1))
    def plain_pull(self, i):
        w = self.member(i)
        pulled = self.git(w, "pull", "-q", "--no-rebase", "origin", "opt/fake").returncode == 0
        event(f"plain pull: {'merged' if pulled else 'aborted'}")
        if not pulled:
            git_run(w, "merge", "--abort")  # a conflict (both rendered the README): given up, as a person would
            w.git("reset", "-q", "--hard")
        self.check_remote()

    @rule(i=st.integers(0, CLONES - 1), fetch_first=st.booleans())
    def forced_push(self, i, fetch_first):
        w = self.member(i)
        if fetch_first:
            w.git("fetch", "-q", "origin")
        before = remote_refs(self.remote).get(BRANCH)
        kept = {sha for where in [self.remote, *(c.root for c in self.clones)]
                for sha, rs in records(where).items() if any(r.status.value in KEPT for r in rs)}
        forced = self.git(w, "push", "-f", "origin", "opt/fake").returncode == 0

        event(f"forced push: {'through' if forced else 'refused'}")
        if forced and before:
            after = remote_refs(self.remote)[BRANCH]
            held = set(git_in(self.remote, "rev-list", before).split())
            now = set(git_in(self.remote, "rev-list", after).split())
            dropped = sorted((held - now) & kept)
            assert not dropped, f"a forced push from {w.root.name} dropped the remote's kept kernels {dropped}"
        self.check_remote()

    @rule(i=st.integers(0, CLONES - 1))
    def amend(self, i):
        """A member rewords the branch's last commit after it was pushed: git copies its note
        (notes.rewriteRef). (Rewording one that was never pushed drops the old commit at the next gc,
        as git would: its record lives on in the copy, which these invariants do not follow.)"""
        w = self.member(i)
        if (w.git("rev-parse", "--abbrev-ref", "HEAD") != BRANCH.removeprefix("refs/heads/")
                or not w.git("branch", "-r", "--contains", "HEAD")):
            return
        amended = self.git(w, "commit", "-q", "--amend", "--allow-empty", "-m",
                           w.git("log", "-1", "--format=%s") + " (reworded)").returncode == 0
        event(f"amend: {'done' if amended else 'refused'}")
        if amended:
            self.stepped.append(w.git("rev-parse", "HEAD"))
        self.records_kept(w.root)

    @rule(i=st.integers(-1, CLONES - 1))
    def gc(self, i):
        where = self.remote if i < 0 else self.member(i).root
        git_in(where, "gc", "-q", "--prune=now")
        lost = missing_commits(where, records(where))
        assert not lost, f"after gc in {where.name}, records name commits it no longer has: {lost}"
        self.records_kept(where)

    # --- the end of a day: one round everywhere -------------------------------------------------------

    def teardown_checks(self):
        team = self.clones[:self.n]
        # One round of kgit pull and push on each clone joins everything, a member's plain git pushes
        # included: the hook sent their records beside them.
        for w in team:
            run = self.kgit(w, "pull")
            if run.returncode == 1 and "forked" in run.stdout:
                run = self.kgit(w, "pull", "--take", "theirs")
            pushed = self.kgit(w, "push")
            assert run.returncode == 0, f"kgit pull in {w.root.name}:\n{run.stdout}\n{run.stderr}"
            assert pushed.returncode == 0, f"kgit push in {w.root.name}:\n{pushed.stdout}\n{pushed.stderr}"
        for w in team:
            run = self.kgit(w, "pull")
            assert run.returncode == 0, f"kgit pull in {w.root.name}:\n{run.stdout}\n{run.stderr}"
        there = remote_refs(self.remote)
        for w in team:
            for ref in (BRANCH, TAG, NOTES):
                assert w.git("rev-parse", ref) == there[ref], f"{w.root.name}'s {ref} is not the remote's"
        for where in [self.remote, *(w.root for w in team)]:
            git_in(where, "gc", "-q", "--prune=now")
            lost = missing_commits(where, [*records(where), *self.stepped])
            assert not lost, f"after gc in {where.name}, these commits are gone: {lost}"
            best_not_worse(where, where.name)
        for w in team:
            log = self.kgit(w, "log", "--json").json()
            assert not missing_commits(w.root, [r["commit"] for r in log["iterations"]])
            best = self.kgit(w, "best", "--json").json()
            assert best["commit"] == w.git("rev-parse", "best/fake"), f"{w.root.name}: kgit best is not best/fake"


def test_team_sequences():
    examples = os.environ.get("KGIT_TEAM_EXAMPLES")
    chosen = int(os.environ.get("KGIT_TEAM_SEED") or random.SystemRandom().randrange(2**32))

    class Day(Team):
        def teardown(self):
            try:
                self.teardown_checks()
            finally:
                super().teardown()

    if examples:
        seed(chosen)(Day)
    steps = int(os.environ.get("KGIT_TEAM_STEPS", "12"))
    try:
        run_state_machine_as_test(Day, settings=settings(
            max_examples=int(examples or 5), stateful_step_count=steps, deadline=None, database=None,
            print_blob=True, derandomize=not examples,
            phases=[p for p in Phase if p != Phase.shrink or not os.environ.get("KGIT_TEAM_NO_SHRINK")],
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]))
    except BaseException:
        print(f"replay this run: KGIT_TEAM_SEED={chosen} KGIT_TEAM_EXAMPLES={examples} KGIT_TEAM_STEPS={steps}"
              if examples else "a derandomized run: the same sequences each time", file=sys.stderr)
        raise
    finally:
        print("what the sequences did:", dict(sorted(SEEN.items())), file=sys.stderr)


# --- what the sequences found, one test each ---------------------------------------------------------

from test_join import agree, step, two_clones  # noqa: E402


def test_a_teammates_revert_pushed_with_plain_git_is_named_a_record_that_has_not_arrived(remote, ws, tmp_path):
    """Found by test_team_sequences: B pushed its reverted step's log commit with plain git and A pulled it;
    A's push said that iteration 'has no record', as if deleted, with no way on."""
    a, b = two_clones(remote, ws, tmp_path)
    assert step(b, 90.0, "B: worse") == "REGRESSED"
    b.git("push", "-q", "origin", "opt/fake")  # plain git: the log commit, not the record
    assert "fast-forwarded" in a.ok("pull").stdout
    why = a.refused("push")
    assert "logs iteration 2 as reverted, but that iteration has no record in this clone" in why
    assert "'kgit pull' brings its record, once the clone that stepped it has run 'kgit push'" in why
    b.ok("push")
    a.ok("pull")
    a.ok("push")
    agree(remote, a, b)


def test_the_hook_refuses_a_forced_push_that_drops_a_kept_kernel_behind_a_join(remote, ws, tmp_path):
    """A join keeps the line that did not go on as its second parent: a forced push of a tip that holds the
    first-parent line only drops that line's kept kernel, and gc on the remote deletes it."""
    a, b = two_clones(remote, ws, tmp_path)
    assert step(a, 130.0, "A: better") == "IMPROVED"
    assert step(b, 150.0, "B: much better") == "IMPROVED"
    a.ok("push")
    c = clone(remote, tmp_path / "c")
    c.ok("pull")
    c.git("checkout", "-q", "opt/fake")
    c.ok("hooks", "install")
    assert b.kgit("pull").returncode == 1  # a fork
    b.ok("pull", "--take", "theirs")  # A's line goes on; B's kept kernel is the join's second parent
    b.ok("push")
    kept_b = b.git("rev-parse", "opt/fake^2")
    assert step(c, 90.0, "C: worse") == "REGRESSED"  # C's line: A's, and a log commit
    c.git("fetch", "-q", "origin")
    before = remote_refs(remote)
    run = git_run(c, "push", "-f", "origin", "opt/fake")
    assert run.returncode != 0 and "it would drop kernels the remote's opt/fake holds" in run.stderr, run.stderr
    assert kept_b[:10] in run.stderr  # B's kernel, whose record C has not fetched
    assert remote_refs(remote) == before
    subprocess.run(["git", "gc", "-q", "--prune=now"], cwd=remote, check=True)
    assert not missing_commits(remote, [kept_b])


def test_a_record_a_clone_refuses_is_not_deleted_from_the_remote_by_its_push(remote, ws, tmp_path):
    """Found by test_team_sequences: A's attempt pushed on top of A's join (its branch not pushed) carried
    A's kept record to the remote; B's pull refused it (a kept iteration on no opt/fake), and B's push,
    a fast-forward of the remote's notes, deleted it there. Now the kept record waits for its branch."""
    a, b = two_clones(remote, ws, tmp_path)
    assert step(a, 130.0, "A: better") == "IMPROVED"
    assert step(b, 150.0, "B: much better") == "IMPROVED"
    b.ok("push")
    assert a.kgit("pull").returncode == 1  # a fork
    a.ok("pull", "--take", "ours")
    kept_a = a.git("rev-parse", "opt/fake^1")
    assert step(a, 90.0, "A: worse") == "REGRESSED"  # an attempt on top of the join
    assert step(b, 160.0, "B: better still") == "IMPROVED"
    b.ok("push")
    run = a.kgit("push")  # the branch waits for a pull; the attempt and its record go, A's kept record waits
    assert run.returncode == 1 and "records: 1 not pushed" in run.stdout
    assert kept_a not in records(remote)
    assert "refused" not in b.ok("pull").stdout
    b.ok("push")
    assert "forked" in a.kgit("pull").stdout  # A's 130 and B's 160 since they parted
    a.ok("pull", "--take", "theirs")
    a.ok("push")  # A's kernel goes with its branch now (the join's second parent), and its record
    b.ok("pull")
    agree(remote, a, b)
    assert kept_a in records(remote)


def test_a_push_never_deletes_a_record_of_the_remote_that_this_clone_refused(remote, ws, tmp_path):
    """A record this clone's pull refused stays in its quarantine; its push, a fast-forward of the remote's
    notes, must not delete it on the remote (another clone may judge it otherwise, 'kgit doctor' lists it)."""
    a, b = two_clones(remote, ws, tmp_path)
    tip = a.git("rev-parse", "opt/fake")
    record = a.ok("best", "--json").json()
    forged = {k: v for k, v in record.items() if k not in ("commit", "kept")}
    forged.update(iteration=99, started="2026-01-01T00:00:00+00:00")  # past what the history holds
    subprocess.run(["git", "notes", "--ref=refs/notes/kgit", "append", "-m", json.dumps(forged), tip],
                   cwd=remote, check=True, capture_output=True)
    run = b.kgit("pull")
    assert run.returncode == 1 and "refused: fake iteration 99" in run.stdout
    assert step(b, 90.0, "B: worse") == "REGRESSED"
    b.ok("push")
    assert 99 in [r.iteration for r in records(remote)[tip]], "B's push deleted a record on the remote"
