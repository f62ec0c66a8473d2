"""The optimization loop: baseline, step, decide, stop. All of kgit's decisions live here.

A step, and what makes it safe to kill at any moment:
  1. journal 'commit'   the candidate (the edited kernel file, nothing else) becomes a commit on
                        opt/<kernel>, and refs/kgit/attempts/<kernel>/<N> points at it at once
  2. journal 'testing'  the test runs against that commit
  3. journal 'decided'  the record is written down, then applied:
       kept      a commit with the kernel and the re-rendered experiments/README.md replaces the
                 candidate on the branch, its note is written, best/<kernel> moves
       reverted  the note goes on the candidate (still reachable through its attempt ref) and the
                 branch gets a commit that only updates experiments/README.md on the last kept kernel
The journal sits in .git/kgit/. Whichever kgit command runs next after a crash finishes a decided step
or rolls an undecided one back (recorded as FAILED, interrupted); git never loses the candidate.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import signal
from dataclasses import dataclass, field

from kgit import config, notes, report, runner, store
from kgit.errors import KgitError

# Statuses of a record. Kept iterations are commits on the branch; the others are reverted attempts.
BASELINE = "BASELINE"
IMPROVED = "IMPROVED"
TARGET_MET = "TARGET_MET"
REGRESSED = "REGRESSED"
WITHIN_NOISE = "WITHIN_NOISE"
FAILED = "FAILED"
KEPT = (BASELINE, IMPROVED, TARGET_MET)

# Reasons the loop stops.
MAX_ITERATIONS = "MAX_ITERATIONS"

RECORD_VERSION = 1

INTERRUPTED_BY_USER = "interrupted by the user"

# Tests kill kgit at a named point of a step to prove that the next command recovers (as git's own
# test suite does with GIT_TEST_* variables). Unset in normal use.
CRASH_ENV = "KGIT_TEST_CRASH_AT"


def _crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class Outcome:
    """What a command did, for the command line to print."""

    record: dict
    commit: str
    recovered: list[str] = field(default_factory=list)  # what was done to finish an interrupted step


# --- decisions ------------------------------------------------------------------------------------


def decide(result: runner.TestResult, best: dict, target: float | None, min_gain_pct: float) -> str:
    """The status of a step, from its test result and the best record so far.

    A gain counts only when it is larger than the floor and than the measured spread of both runs:
    a difference inside the noise is not evidence of an improvement.
    """
    if not result.passed:
        return FAILED
    if target is not None and result.value >= target:
        return TARGET_MET
    gain = delta_pct(result.value, best["value"])
    if gain > max(min_gain_pct, result.spread_pct, best.get("spread_pct") or 0.0):
        return IMPROVED
    return WITHIN_NOISE if gain > 0 else REGRESSED


def delta_pct(value: float, reference: float) -> float:
    return (value - reference) / reference * 100.0


def best_record(records: list[dict]) -> dict | None:
    kept = [r for r in records if r["status"] in KEPT and r.get("value") is not None]
    return max(kept, key=lambda r: r["value"], default=None)


def stop_reason(records: list[dict], cfg: config.KernelConfig) -> str | None:
    """Why the loop for this kernel is over, judged against the current settings, or None."""
    best = best_record(records)
    if best is not None:
        target = target_value(cfg, best)
        if target is not None and best["value"] >= target:
            return TARGET_MET
    if records and last_iteration(records) >= cfg.max_iterations:
        return MAX_ITERATIONS
    return None


def target_value(cfg: config.KernelConfig, record: dict) -> float | None:
    """The target in the metric's unit: target_value, or target_pct_of_peak of the record's peak."""
    if cfg.target_value is not None:
        return float(cfg.target_value)
    if cfg.target_pct_of_peak is not None and record.get("peak"):
        return cfg.target_pct_of_peak * record["peak"]
    return None


def peak_of(result: runner.TestResult) -> float | None:
    """The GPU's peak for the result's metric: from the test's own pct_of_peak, else kgit's table of
    datasheet peaks by the GPU's name (tests written for other collections report no pct_of_peak).

    CPU (interpreter) timings have no peak: comparing them with a GPU's would be meaningless.
    """
    from kgit import gpu

    payload = result.payload or {}
    if payload.get("cpu_timing") or not result.passed:
        return None
    pct = payload.get("pct_of_peak")
    if isinstance(pct, (int, float)) and not isinstance(pct, bool) and pct > 0:
        return result.value * 100.0 / pct
    return gpu.peak_for(payload.get("gpu"), result.metric)


def load_config(repo: store.Repo, records: list[dict], overrides: dict) -> config.KernelConfig:
    """The kernel's settings: kgit.yaml, then the options given to 'kgit start', then this command's."""
    options = next((r.get("options") or {} for r in records if r["iteration"] == 0), {})
    return config.load(repo.root, records[0]["kernel"], {**options, **overrides})


def last_iteration(records: list[dict]) -> int:
    return max((r["iteration"] for r in records), default=-1)


# --- records ----------------------------------------------------------------------------------------


def kernel_records(repo: store.Repo, kernel: str) -> list[tuple[str, dict]]:
    """This kernel's records, each with the commit its note is on, in iteration order."""
    mine = [(sha, r) for sha, r in notes.all_records(repo) if r["kernel"] == kernel]
    return sorted(mine, key=lambda item: (item[1]["iteration"], item[1].get("started", "")))


def deciding_records(repo: store.Repo, kernel: str) -> list[tuple[str, dict]]:
    """The records (with their commits) that decide this kernel's loop here: every attempt, and the
    kept iterations of opt/<kernel> as it is in this clone. A clone that continued the branch
    elsewhere (its records arrive with kgit pull) has its own best: this branch is not judged by it."""
    pairs = kernel_records(repo, kernel)
    numbers = [r["iteration"] for _, r in pairs]
    ref = f"refs/heads/{store.branch_name(kernel)}"
    # One clone numbers its iterations one after the other: only histories that forked repeat a number.
    if len(set(numbers)) == len(numbers) or store.rev(repo, ref) is None:
        return pairs
    on_branch = set(store.first_parents(repo, ref, limit=1_000_000))
    return [(sha, r) for sha, r in pairs if r["status"] not in KEPT or sha in on_branch]


def make_record(cfg, iteration, action, tier, result, status, best, started, base) -> dict:
    peak = peak_of(result)
    payload = result.payload or {}
    record = {
        "kgit": RECORD_VERSION,
        "kernel": cfg.name,
        "iteration": iteration,
        "action": action,
        "tier": tier,
        "gpu": payload.get("gpu"),
        "cpu_timing": bool(payload.get("cpu_timing")),
        "correctness": result.correctness if result.ok else None,
        "metric": result.metric,
        "value": result.value,
        "spread_pct": result.spread_pct if result.passed else None,
        "peak": peak,
        "pct_of_peak": result.value * 100.0 / peak if peak else None,
        "best_before": best["value"] if best else None,
        "delta_pct": delta_pct(result.value, best["value"]) if best and result.passed else None,
        "status": status,
        "reason": result.reason,
        "stop_reason": None,
        "test": result.payload,
        "output_tail": None if result.passed else result.output_tail,
        "base": base,
        "started": started,
        "duration_s": round(result.duration_s, 3),
    }
    record["target"] = target_value(cfg, record)
    return record


def _now() -> str:
    # Microseconds: with kernel, iteration and GPU the start time names a run (two clones, one second).
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def _render(repo: store.Repo, extra: dict | None = None) -> str:
    everything = [r for _, r in notes.all_records(repo)]
    if extra is not None:  # the record being written: its note may already be there after a crash
        everything = [r for r in everything if store.record_key(r) != store.record_key(extra)] + [extra]
    return report.render_readme(everything)


def _subject(kernel: str, iteration: int, action: str) -> str:
    return f"{kernel}: iter {iteration}: {action}"


# The subjects of the commits that only log: a reverted iteration's README update, a report.
REPORT_SUBJECT = "kgit: render experiments/README.md"
_REVERTED_SUBJECT = re.compile(r"(?P<kernel>[^:]+): iter (?P<iteration>\d+): .* \(reverted: [A-Z_]+\)")


def logged_revert(subject: str) -> tuple[str, int] | None:
    """(kernel, iteration) when subject is the log commit of a reverted iteration, else None."""
    match = _REVERTED_SUBJECT.fullmatch(subject)
    return (match["kernel"], int(match["iteration"])) if match else None


# --- sessions: the lock, and recovery of an interrupted step ---------------------------------------


@contextlib.contextmanager
def session(repo: store.Repo, writes: bool):
    """Hold the lock while a command changes state; finish an interrupted step first.

    Read-only commands take the lock only when there is an interrupted step to finish.
    """
    recovered: list[str] = []
    if writes:
        store.acquire_lock(repo)
    try:
        interrupted = (store.read_journal(repo) is not None or store.registered_tests(repo)
                       or store.rev(repo, store.SAVED_EDITS_REF))
        if interrupted:
            if not writes and store.lock_holder(repo) is not None:
                yield recovered  # a step is in flight in another process: just read
                return
            if not writes:
                store.acquire_lock(repo)
                writes = True
            recovered.extend(_recover(repo))
        yield recovered
    finally:
        if writes:
            store.release_lock(repo)


def _recover(repo: store.Repo) -> list[str]:
    for pid, test_path in store.registered_tests(repo).items():  # left running by a killed kgit
        runner.stop_orphaned_test(pid, test_path)
        store.unregister_test(repo, pid)
    restored = store.restore_saved_edits(repo)
    journal = store.read_journal(repo)
    if journal is None:
        return [f"restored your uncommitted edits to {', '.join(restored)} after an interrupted kgit"] if restored else []
    if journal["op"] == "start":
        _apply_start(repo, journal)
        return [f"finished the interrupted start of {journal['record']['kernel']}"]
    if journal["phase"] == "commit":
        head = store.rev(repo, "HEAD")
        subject = _subject(journal["kernel"], journal["iteration"], journal["action"])
        pinned = store.rev(repo, store.attempt_ref(journal["kernel"], journal["iteration"]))
        if head == journal["base"] or (head != pinned and store.subjects(repo, [head])[head] != subject):
            store.clear_journal(repo)  # killed before the candidate was committed: nothing to undo
            return []
        store.set_ref(repo, store.attempt_ref(journal["kernel"], journal["iteration"]), head)
        journal.update(phase="testing", candidate=head)
    if journal["phase"] == "testing":
        cfg = config.KernelConfig(**journal["config"])
        interrupted = runner.not_run("interrupted: kgit stopped before the test finished")
        records = [r for _, r in kernel_records(repo, cfg.name)]
        journal["record"] = make_record(
            cfg, journal["iteration"], journal["action"], journal["tier"], interrupted, FAILED,
            best_record(records), journal["started"], journal["base"],
        )
        journal["phase"] = "decided"
        store.write_journal(repo, journal)
    _apply_step(repo, journal)
    record = journal["record"]
    done = f"finished an interrupted step: iteration {record['iteration']} of {record['kernel']} is {record['status']}"
    if record["status"] not in KEPT:
        done += f", rolled back; the candidate stays at {store.attempt_ref(record['kernel'], record['iteration'])}"
    return [done]


# --- start ------------------------------------------------------------------------------------------


def start(repo: store.Repo, kernel: str, overrides: dict, progress=None) -> Outcome:
    with session(repo, writes=True) as recovered:
        cfg = config.load(repo.root, kernel, overrides)
        branch = store.branch_name(kernel)
        if store.rev(repo, f"refs/heads/{branch}"):
            raise KgitError(f"{branch} already exists: continue with 'kgit step', or delete the branch to start over")
        head = store.rev(repo, "HEAD")
        if head is None:
            raise KgitError("the repository has no commit yet: commit the kernel and its test first")
        _check_clean(repo, allowed=[])
        _check_readme_is_ours(repo)
        for path in (cfg.kernel_path, cfg.test_path):
            if not store.is_tracked(repo, path):
                raise KgitError(f"{path} is not tracked by git: commit it before starting")

        store.configure_notes(repo)  # from now on a rebase or an amend of opt/<kernel> keeps the records
        started = _now()
        result = _run(repo, cfg, head, progress)
        if not result.passed:
            last = (result.output_tail.strip().splitlines() or [""])[-1][:200]
            ends = f" Test output ends: {last}" if last not in (result.reason or "") else ""
            raise KgitError(f"baseline failed ({result.reason}); nothing was changed.{ends}")
        record = make_record(cfg, 0, "baseline", None, result, BASELINE, None, started, head)
        record["options"] = overrides  # the loop's own settings: later commands start from them
        if record["target"] is not None and record["value"] >= record["target"]:
            record["stop_reason"] = TARGET_MET
        commit = store.commit_with_files(
            repo, head, head, {report.README: _render(repo, record)}, _subject(kernel, 0, "baseline")
        )
        journal = {"op": "start", "phase": "decided", "commit": commit, "record": record}
        store.write_journal(repo, journal)
        _crash_point("start-decided")
        _apply_start(repo, journal)
        return Outcome(record, commit, recovered)


def _apply_start(repo: store.Repo, journal: dict) -> None:
    """Make the baseline commit real: note, branch, tag, checkout. Safe to repeat."""
    record, commit = journal["record"], journal["commit"]
    kernel = record["kernel"]
    store.write_note(repo, commit, record)
    branch = store.branch_name(kernel)
    if store.rev(repo, f"refs/heads/{branch}") is None:
        store.create_branch(repo, branch, commit)
    _crash_point("start-branched")
    store.set_tag(repo, kernel, commit)
    if store.current_branch(repo) != branch:
        store.switch(repo, branch)
    store.clear_journal(repo)


def ensure_started(repo: store.Repo, kernel: str, overrides: dict, progress=None) -> Outcome | None:
    """Start the kernel's loop unless its branch exists; then it must be checked out. The baseline or None."""
    branch = store.branch_name(kernel)
    if store.rev(repo, f"refs/heads/{branch}") is None:
        return start(repo, kernel, overrides, progress)
    if store.current_branch(repo) != branch:
        raise KgitError(f"{branch} exists but is not checked out: 'git checkout {branch}' first")
    return None


def next_round(repo: store.Repo, kernel: str, overrides: dict):
    """Before each round of an unattended loop (tune, run): the deciding records with their commits,
    the settings, and the stop reason if the loop is over. The records are read once for all three.

    Refuses uncommitted changes: the round's own change would carry them into its commit.
    """
    pairs = deciding_records(repo, kernel)
    records = [r for _, r in pairs]
    cfg = load_config(repo, records, overrides)
    stopped = stop_reason(records, cfg)
    if not stopped and store.modified_tracked_files(repo):
        raise KgitError("the working tree has uncommitted changes: commit or stash them; this loop edits the kernel itself")
    return pairs, cfg, stopped


def raise_if_interrupted(outcome: Outcome) -> None:
    """Ctrl-C during a step of an unattended loop ends the loop, once the step is recorded."""
    if outcome.record["reason"] == INTERRUPTED_BY_USER:
        raise KgitError("interrupted: the last iteration was recorded as FAILED and rolled back")


# --- step -------------------------------------------------------------------------------------------


def current_kernel(repo: store.Repo) -> str:
    branch = store.current_branch(repo)
    if branch is None or not branch.startswith(store.BRANCH_PREFIX):
        where = f"on {branch}" if branch else "on a detached HEAD"
        raise KgitError(f"not on an opt/<kernel> branch ({where}): run 'kgit start <kernel>' or check out opt/<kernel>")
    return branch[len(store.BRANCH_PREFIX):]


def step(repo: store.Repo, action: str, tier: int | None, overrides: dict, progress=None,
         measured: runner.TestResult | None = None) -> Outcome:
    """Commit the edited kernel, test it, decide, and keep or revert it.

    measured: the result of this exact kernel already tested elsewhere (a worktree on another GPU).
    """
    with session(repo, writes=True) as recovered:
        records, cfg = _loop_state(repo, overrides)
        changed = _check_clean(repo, allowed=[cfg.kernel_path])
        if cfg.kernel_path not in changed:
            raise KgitError(f"no change to {cfg.kernel_path}: edit the kernel, then step")
        journal = _commit_candidate(repo, cfg, records, action, tier, paths=[cfg.kernel_path])

        try:
            result = measured or _run(repo, cfg, journal["candidate"], progress)
        except KeyboardInterrupt:
            result = runner.not_run(INTERRUPTED_BY_USER)
        return _decide_and_apply(repo, cfg, records, journal, result, recovered)


def reject(repo: store.Repo, action: str, tier: int | None, reason: str, overrides: dict,
           output_tail: str = "") -> Outcome:
    """Record a change that must not be tested as FAILED and roll it back.

    For an agent that changed nothing, changed the test or other files, or failed: whatever it changed
    in tracked files is committed first as the attempt, so that nothing is lost and the record shows it.
    """
    with session(repo, writes=True) as recovered:
        records, cfg = _loop_state(repo, overrides)
        journal = _commit_candidate(repo, cfg, records, action, tier, paths=None)
        return _decide_and_apply(repo, cfg, records, journal, runner.not_run(reason, output_tail), recovered)


def _loop_state(repo: store.Repo, overrides: dict) -> tuple[list[dict], config.KernelConfig]:
    """The current kernel's records and settings; refuse when its loop has stopped."""
    kernel = current_kernel(repo)
    records = [r for _, r in deciding_records(repo, kernel)]
    if not records:
        raise KgitError(f"no baseline recorded for {kernel}: was the branch made by 'kgit start {kernel}'?")
    cfg = load_config(repo, records, overrides)
    stopped = stop_reason(records, cfg)
    if stopped:
        raise KgitError(
            f"the loop for {kernel} has stopped ({stopped}); raise max_iterations or the target "
            "(kgit.yaml or the step's options) to go on"
        )
    return records, cfg


def one_line(action: str) -> str:
    """The action as the one line it becomes in a commit subject, a table cell and the README."""
    line = " ".join(action.split())
    if not line:
        raise KgitError("the change's message (-m) is empty: say in a few words what this iteration changes")
    return line


def _commit_candidate(repo, cfg, records, action, tier, paths: list[str] | None) -> dict:
    """Commit the candidate (these paths, or every modified tracked file) under a journal."""
    action = one_line(action)
    iteration = last_iteration(records) + 1
    journal = {
        "op": "step", "phase": "commit", "kernel": cfg.name, "iteration": iteration, "action": action,
        "tier": tier, "base": store.rev(repo, "HEAD"), "started": _now(), "config": cfg.__dict__,
    }
    store.write_journal(repo, journal)
    subject = _subject(cfg.name, iteration, action)
    candidate = store.commit_paths(repo, paths, subject) if paths else store.commit_all(repo, subject)
    store.set_ref(repo, store.attempt_ref(cfg.name, iteration), candidate)
    _crash_point("candidate-committed")
    journal.update(phase="testing", candidate=candidate)
    store.write_journal(repo, journal)
    return journal


def _decide_and_apply(repo, cfg, records, journal, result: runner.TestResult, recovered) -> Outcome:
    best = best_record(records)
    status = decide(result, best, target_value(cfg, best), cfg.min_gain_pct)
    iteration = journal["iteration"]
    record = make_record(cfg, iteration, journal["action"], journal["tier"], result, status, best,
                         journal["started"], journal["base"])
    if status == TARGET_MET:
        record["stop_reason"] = TARGET_MET
    elif iteration >= cfg.max_iterations:
        record["stop_reason"] = MAX_ITERATIONS
    journal.update(phase="decided", record=record)
    store.write_journal(repo, journal)
    _crash_point("decided")
    commit = _apply_step(repo, journal)
    return Outcome(record, commit, recovered)


def _apply_step(repo: store.Repo, journal: dict) -> str:
    """Apply a decided step: safe to repeat after a crash at any point. Returns the record's commit."""
    record, kernel, iteration = journal["record"], journal["kernel"], journal["iteration"]
    base, candidate = journal["base"], journal["candidate"]
    attempt = store.attempt_ref(kernel, iteration)
    kept = record["status"] in KEPT
    _check_branch_tip(repo, kernel, (base, candidate, journal.get("final")))
    if "final" not in journal:
        readme = {report.README: _render(repo, record)}
        subject = _subject(kernel, iteration, journal["action"])
        if kept:
            final = store.commit_with_files(repo, candidate, base, readme, subject)
        else:
            final = store.commit_with_files(repo, base, base, readme, f"{subject} (reverted: {record['status']})")
        journal["final"] = final
        store.write_journal(repo, journal)
        _crash_point("final-committed")
    noted = journal["final"] if kept else candidate
    store.write_note(repo, noted, record)
    _crash_point("noted")
    _move_branch(repo, kernel, journal["final"])
    _crash_point("moved")
    if kept:
        store.set_tag(repo, kernel, journal["final"])
        store.delete_ref(repo, attempt)  # the commit on the branch keeps it
    store.clear_journal(repo)
    return noted


def _check_branch_tip(repo: store.Repo, kernel: str, expected: tuple[str | None, ...]) -> None:
    """Refuse to go on when opt/<kernel> was moved by someone else (a commit made while the test ran)."""
    branch = store.branch_name(kernel)
    tip = store.rev(repo, f"refs/heads/{branch}")
    if tip not in expected:
        candidate = expected[1]
        raise KgitError(
            f"{branch} moved while kgit worked on it (now at {tip[:10] if tip else 'nothing'}, expected "
            f"{candidate[:10]}): kgit leaves it alone; put those commits on another branch, "
            f"'git reset --keep {candidate[:10]}' on {branch}, then run kgit again to finish the step"
        )


def _move_branch(repo: store.Repo, kernel: str, target: str) -> None:
    """Point opt/<kernel> at target; the working tree follows only when that branch is checked out.

    The user may have switched to another branch while the test ran: kgit never resets a checkout of
    another branch, it only moves its own (checked by _check_branch_tip).
    """
    branch = store.branch_name(kernel)
    if store.current_branch(repo) == branch:
        store.move_head(repo, target)
    else:
        store.set_ref(repo, f"refs/heads/{branch}", target)


# --- helpers ----------------------------------------------------------------------------------------


def _check_readme_is_ours(repo: store.Repo) -> None:
    """Refuse to write experiments/README.md over a file of the user's that git does not track."""
    if (repo.root / report.README).exists() and not store.is_tracked(repo, report.README):
        raise KgitError(f"{report.README} exists and is not tracked: kgit renders that file from the notes; "
                        "move it away or commit it first")


def _check_clean(repo: store.Repo, allowed: list[str]) -> list[str]:
    """The modified tracked files; refuse when any is not in allowed."""
    changed = store.modified_tracked_files(repo)
    others = [p for p in changed if p not in allowed]
    if others:
        if not allowed:
            raise KgitError(f"uncommitted changes to {', '.join(others)}: commit or stash them first")
        raise KgitError(
            f"modified besides {allowed[0]}: {', '.join(others)}. One change per iteration, to the kernel "
            "only (the test is the judge and never changes with the kernel): commit or stash the rest"
        )
    return changed


def _run(repo: store.Repo, cfg: config.KernelConfig, commit: str, progress) -> runner.TestResult:
    """Run the kernel's test on commit; progress, if given, hears of the start and of each tick.

    The test runs in a temporary worktree of that commit, not in the user's working tree: what it
    measures is exactly what is committed, whatever the user edits while it runs.
    """
    env, device_note = runner.device_env(cfg.gpu)
    if progress:
        progress.begin(cfg.test_path, device_note)
    with _worktree(repo, "test", commit) as path, _registered(repo, cfg.test_path) as on_spawn:
        return runner.run_test(
            cfg.test_path, path, cfg.test_timeout_s, env, cfg.target_metric,
            on_tick=progress.tick if progress else None, on_spawn=on_spawn, test_args=cfg.test_args,
        )


def run_in_worktrees(repo: store.Repo, cfg: config.KernelConfig, sources: list[str], gpus: list[str],
                     progress=None) -> list[runner.TestResult]:
    """Test several versions of the kernel at once, each in its own worktree of HEAD and on its own GPU."""
    from concurrent.futures import ThreadPoolExecutor

    env, device_note = runner.device_env(cfg.gpu)
    if progress:
        progress.begin(f"{cfg.test_path} on GPUs {','.join(gpus)}", device_note)
    head = store.rev(repo, "HEAD")

    def test_one(source, gpu) -> runner.TestResult:
        with _worktree(repo, f"gpu{gpu}", head) as path, _registered(repo, cfg.test_path) as on_spawn:
            (path / cfg.kernel_path).write_text(source)
            visible = {"CUDA_VISIBLE_DEVICES": gpu, "HIP_VISIBLE_DEVICES": gpu}
            return runner.run_test(cfg.test_path, path, cfg.test_timeout_s, {**env, **visible}, cfg.target_metric,
                                   on_spawn=on_spawn, test_args=cfg.test_args)

    with ThreadPoolExecutor(len(sources)) as pool:
        return list(pool.map(test_one, sources, gpus))


@contextlib.contextmanager
def _registered(repo: store.Repo, test_path: str):
    """An on_spawn callback that registers the test's pid until it ends (see store.register_test)."""
    pids = []

    def on_spawn(pid: int) -> None:
        pids.append(pid)
        store.register_test(repo, pid, test_path)

    try:
        yield on_spawn
    finally:
        for pid in pids:
            store.unregister_test(repo, pid)


@contextlib.contextmanager
def _worktree(repo: store.Repo, name: str, commit: str):
    """A temporary detached checkout of commit under .git/kgit/worktrees/, removed afterwards."""
    path = repo.kgit_dir / "worktrees" / name
    store.add_worktree(repo, path, commit)
    try:
        yield path
    finally:
        store.remove_worktree(repo, path)


# --- report -----------------------------------------------------------------------------------------


def commit_report(repo: store.Repo) -> str | None:
    """Commit a fresh rendering of experiments/README.md on the current branch; None if unchanged."""
    head = store.rev(repo, "HEAD")
    if head is None:
        raise KgitError("the repository has no commit yet")
    if report.README in store.modified_tracked_files(repo):
        raise KgitError(f"{report.README} has uncommitted edits; kgit renders it from the notes: commit or discard them first")
    _check_readme_is_ours(repo)
    text = _render(repo)
    if store.head_file(repo, report.README) == text:
        return None
    commit = store.commit_with_files(repo, head, head, {report.README: text}, REPORT_SUBJECT)
    store.move_head(repo, commit)
    return commit
