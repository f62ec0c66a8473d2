"""Start and step: the loop's two moves, each a short transaction (kgit.state.transaction).

    step: read the loop and the change once -> refuse, or commit the candidate -> run the test against
          the best -> decide -> render the log -> hand the decision to the transaction

Both run under the lock, with whatever a killed kgit left settled first (kgit.loop.recovery.locked,
which the command takes).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from kgit import config, machine
from kgit.errors import KgitError
from kgit.git import code_digests, notes, read, refs, write
from kgit.git.command import Repo, cat_blobs
from kgit.loop import paired, report, testing
from kgit.loop.history import LoopState, damaged_notes, hand_commit_advice, loop_state, unrecorded_commits
from kgit.model import coverage, decide, tunables
from kgit.model.noise import Comparison, never_measured
from kgit.model.record import Environment, InvalidNote, Record, Status, StopReason, same_environment
from kgit.model.result import not_run
from kgit.render.text import verdict
from kgit.state import journal as journals
from kgit.state import transaction

INTERRUPTED_BY_USER = "interrupted by the user"


@dataclass
class Outcome:
    """What a command did, for the command line to print."""

    record: Record
    commit: str
    invalid: list[InvalidNote] = field(default_factory=list)  # notes that were not used to decide
    interrupted: str | None = None  # a step stopped by Ctrl-C or a signal: how to bring its change back
    never_ran: list[str] = field(default_factory=list)  # the kernel file's kernels the baseline's test never ran


# --- start ------------------------------------------------------------------------------------------


def start(repo: Repo, kernel: str, overrides: dict, progress=None) -> Outcome:
    cfg = config.load(repo.root, kernel, overrides)
    if read.rev(repo, refs.branch_ref(kernel)):
        raise KgitError(f"{refs.branch(kernel)} already exists",
                        f"continue with 'kgit step'; a new run takes a name of its own ({_new_run_hint(kernel, cfg)})")
    earlier = notes.kernel_history(repo, kernel)
    if earlier.pairs:  # the branch was deleted: a run under the same name would count and stop with these
        raise KgitError(f"{kernel} has records of an earlier run here (iterations 0 to {earlier.last_iteration}; "
                        f"{refs.branch(kernel)} was deleted since), which a new run under that name would be "
                        "counted, stopped and judged with", _new_run_hint(kernel, cfg))
    elsewhere = read.fetched_runs(repo, kernel)
    if elsewhere:  # a second baseline here could never be pushed beside that run: it would diverge
        remote, branch = elsewhere[0]
        raise KgitError(f"{remote} already has {branch} (a run of another clone)",
                        f"'kgit pull {remote}' brings it and its records, then 'git checkout {branch}' and "
                        f"'kgit step' continue it; to start over instead, delete it there first "
                        f"(git push {remote} --delete {branch})")
    head = read.rev(repo, "HEAD")
    if head is None:
        raise KgitError("the repository has no commit yet", "commit the kernel and its test first")
    check_clean(read.modified_tracked_files(repo), allowed=[])
    if not read.has_identity(repo):  # found now, not after the baseline has run
        raise KgitError("git does not know who commits here, and every iteration is a commit",
                        "set it with git config user.name \"Your Name\" && git config user.email you@example.com")
    report.check_readme_is_ours(repo)
    for path in (cfg.kernel_path, cfg.test_path):
        if not read.is_tracked(repo, path):
            raise KgitError(f"{path} is not tracked by git", "commit it before starting")
    if (repo.root / config.CONFIG_FILE).exists() and not read.is_tracked(repo, config.CONFIG_FILE):
        raise KgitError(f"{config.CONFIG_FILE} is not tracked by git: a clone of {refs.branch(kernel)} would "
                        f"not know the kernel", f"commit {config.CONFIG_FILE} before starting")

    write.configure_notes(repo)  # from now on a rebase or an amend of opt/<kernel> keeps the records
    started = decide.now()
    environment = machine.environment(cfg.gpu)
    runs = []  # after a warm-up (its first run fills compile caches: it never counts), START_RUNS runs
    with testing.checkouts(repo, cfg, {"baseline": (head, None)}, environment.device, progress=progress) as run:
        result = run("baseline")
        while result.passed and len(runs) < decide.START_RUNS:
            result = run("baseline", timing_only=bool(runs))  # the first counted run checks as well
            runs.append(result)
    if not result.passed:
        last = (result.output_tail.strip().splitlines() or [""])[-1][:200]
        ends = f"; the test's output ends: {last}" if last not in (result.reason or "") else ""
        raise KgitError(f"baseline failed ({result.reason}); nothing was changed{ends}",
                        _baseline_hint(result.reason, kernel, cfg))
    spread = decide.start_spread(cfg, runs)
    measured = Comparison(first=runs[0], best=[], candidate=[r.value for r in runs], log_ratios=[],
                          runs=len(runs) + 1, warmups=1, decided_on=spread.decides_on,
                          device_candidate=[r.device.total_us if r.device else None for r in runs])
    record = decide.new_record(cfg, 0, "baseline", None, runs[0], Status.BASELINE, None, started, head,
                               measured, environment)
    record = record.replace(measurement=dataclasses.replace(record.measurement, spread=spread),
                            launched=runs[0].launched)
    # the loop's own settings: later commands start from them
    record = record.replace(options=overrides)
    proposal = decide.proposed_target(record) if record.target is None else None
    if proposal:  # remembered as if given: --target-value on a later step replaces it
        record = record.replace(options={**overrides, "target_value": round(proposal[0], 6)},
                                target=round(proposal[0], 6), reason=f"target proposed: {proposal[1]}")
    if record.target is not None and decide.reaches(record.value, record.target, cfg.lower_is_better):
        record = record.replace(stop_reason=StopReason.TARGET_MET)
    journal = transaction.start(repo, cfg, head, record, *report.with_record(repo, head, record))
    return Outcome(record, journal.final, never_ran=never_ran(repo, cfg.kernel_path, record.launched))


def _new_run_hint(kernel: str, cfg: config.KernelConfig) -> str:
    return (f"an entry of kgit.yaml naming the same files, e.g. '{kernel}-2:' with kernel_path: {cfg.kernel_path} "
            f"and test_path: {cfg.test_path}, committed; then 'kgit start {kernel}-2'")


def ensure_started(repo: Repo, kernel: str, overrides: dict, progress=None) -> Outcome | None:
    """Start the kernel's loop unless its branch exists; then it must be checked out. The baseline or None."""
    if read.rev(repo, refs.branch_ref(kernel)) is None:
        return start(repo, kernel, overrides, progress)
    if read.current_kernel(repo) != kernel:
        raise KgitError(f"{refs.branch(kernel)} exists but is not checked out",
                        f"'git checkout {refs.branch(kernel)}' first")
    return None


def next_round(repo: Repo, kernel: str, overrides: dict) -> LoopState:
    """Before each round of an unattended loop (tune, run): the loop's state, read once per round.

    Refuses uncommitted changes: the round's own change would carry them into its commit.
    """
    state = loop_state(repo, kernel, overrides)
    if not journals.pending(repo):  # a killed step's candidate is no hand commit: the step's recovery settles it
        check_recorded(kernel, state)
    if not state.stopped and read.modified_tracked_files(repo):
        raise KgitError("the working tree has uncommitted changes: commit or stash them; "
                        "this loop edits the kernel itself")
    return state


def raise_if_interrupted(outcome: Outcome) -> None:
    """Ctrl-C during a step of an unattended loop ends the loop, once the step is recorded."""
    if outcome.record.reason == INTERRUPTED_BY_USER:
        raise KgitError("interrupted: the last iteration was recorded as FAILED and rolled back")


# --- step -------------------------------------------------------------------------------------------


def step(repo: Repo, action: str, tier: int | None, overrides: dict, progress=None,
         measured: tuple[Comparison, dict] | None = None, keep_anyway: str | None = None,
         agent_turn: dict | None = None, again: bool = False, allow_untested: bool = False,
         keep_above_pct: float | None = None, extend: bool = False) -> Outcome:
    """Commit the edited kernel, measure it against the best pair by pair, decide, keep or revert it.

    measured: this exact kernel already compared with the current best elsewhere (on another GPU),
    with the environment it was measured in.
    keep_anyway: a reason to keep a change that is not faster on the branch (it paves the way for a
    bigger next step); the best stays where it is.
    agent_turn: the turn of kgit run --agent that made the change, kept in the record.
    again: measure a kernel whose code an earlier iteration measured already (SameCode otherwise).
    allow_untested: step a change to what the test never ran (Untested otherwise); the record says so.
    keep_above_pct: what the gain's interval must lie above to keep the change, where not min_gain_pct
    (kgit tune's configurations: decide.TUNE_KEEP_ABOVE_PCT).
    extend: an estimate above the floor still undecided at max_pairs takes more pairs (kgit tune's
    configurations: decide.TUNE_EXTENDS; kgit.model.noise.Bound).
    """
    before = read_before_step(repo, overrides)
    state = before.state
    # every refusal comes before the commit, from what was read: a refusal uses no iteration
    check_clean(before.modified, allowed=[state.cfg.kernel_path])
    if not before.edited:  # a staged change undone on disk is none either
        raise KgitError(f"no change to {state.cfg.kernel_path}", "edit the kernel, then step")
    if keep_anyway is not None:
        keep_anyway = one_line(keep_anyway, what="--keep-anyway")
    repeats = check_new_code(before, again)
    untested = check_tested(before, allow_untested)
    check_config(before)
    journal = transaction.commit_candidate(repo, state.cfg, state.history.last_iteration + 1,
                                           one_line(action), tier, paths=[state.cfg.kernel_path], base=before.head)
    comparison, environment = measured or (None, machine.environment(state.cfg.gpu))
    try:
        comparison = comparison or compare_with_best(repo, state, journal.candidate, None, before.best_text,
                                                     environment, progress, keep_above_pct=keep_above_pct,
                                                     extend=extend)
    except KeyboardInterrupt:
        comparison = never_measured(not_run(INTERRUPTED_BY_USER))
    untested, comparison = decide.check_run(before.change, comparison, untested, allow_untested)
    record = decided_record(state, journal, comparison, environment, overrides, keep_anyway=keep_anyway,
                            agent_turn=agent_turn, repeats=repeats, untested=untested,
                            test_changed=before.test_changed_since_best)
    outcome = Outcome(record, _decided(repo, journal, record), state.history.invalid)
    if outcome.record.reason == INTERRUPTED_BY_USER:
        # recorded and rolled back like any failure; the change waits at its attempt ref
        ref = refs.attempt_ref(outcome.record.kernel, outcome.record.iteration)
        outcome.interrupted = (f"interrupted: iteration {outcome.record.iteration} was recorded as FAILED and "
                               f"rolled back; 'git checkout {ref} -- {state.cfg.kernel_path}' brings the change "
                               "back to step it again")
    return outcome


@dataclass
class Before:
    """What a step reads before anything runs, in one place: its loop, and the change in the working
    tree that it would commit. Every refusal of a step is decided from this alone."""

    state: LoopState
    head: str  # HEAD's commit: the candidate's parent
    modified: list[str]  # tracked files that differ from HEAD
    edited: bool  # the kernel file on disk differs from HEAD's
    text: str | None  # the kernel file on disk; None where it is gone
    head_text: str | None  # HEAD's kernel file
    code: str | None  # the digest of text's code (kgit.git.code_digests)
    head_code: str | None  # HEAD's
    tried: list[tuple[Record, str | None]]  # each earlier iteration whose test ran, with its code's digest
    head_launched: tuple[str, ...] | None  # the kernels the run of HEAD's kernel launched, where it tells
    best_text: str | None  # the best's kernel file (its commit's), what the candidate is measured against
    test_changed_since_best: bool  # the test differs between the best's commit and HEAD

    @property
    def change(self) -> tuple[str, str] | None:
        """The kernel file as HEAD has it and as the working tree does; None where either is missing (a
        file added or deleted: its test judges it whole)."""
        return (self.head_text, self.text) if self.head_text is not None and self.text is not None else None


def read_before_step(repo: Repo, overrides: dict) -> Before:
    """The current kernel's loop (refused where it has no baseline, or stopped) and its kernel's change."""
    state = _running_state(repo, overrides)
    path, test_path = state.cfg.kernel_path, state.cfg.test_path
    try:
        text = (repo.root / path).read_bytes().decode(errors="replace")
    except OSError:
        text = None
    # An attempt that never ran (interrupted, or an agent's turn refused untested) has no verdict: the
    # advice after an interruption is to step the same change again.
    tried = [(sha, record) for sha, record in state.history.pairs if _ran(record)]
    # HEAD's kernel is the latest one the branch kept: what its run launched says what the test runs,
    # unless the test changed since (decide.check_run then tells from the candidate's own run)
    kept = [pair for pair in state.history.pairs if pair[1].status.on_branch]
    kept_commit, kept_record = max(kept, key=lambda pair: pair[1].iteration) if kept else (None, None)
    best_commit = (state.best or (None, None))[0]
    # One git process names the blobs: HEAD's test, the kept and the best iteration's (a test changed
    # since differs in its blob), the best's kernel, HEAD's and every earlier iteration's; each kernel's
    # code is parsed once per repository (a blob's digest is remembered)
    tests_then = [f"{commit}:{test_path}" for commit in (kept_commit, best_commit) if commit]
    best_kernel = [f"{best_commit}:{path}"] if best_commit else []
    blobs = read.object_ids(repo, ["HEAD", f"HEAD:{test_path}", *tests_then, *best_kernel, f"HEAD:{path}"]
                            + [f"{sha}:{path}" for sha, _ in tried])
    head, test_now, *blobs = blobs
    kept_test = blobs.pop(0) if kept_commit else test_now
    best_test = blobs.pop(0) if best_commit else test_now
    best_blob = blobs.pop(0) if best_commit else None
    head_blob = blobs[0]
    # HEAD's and the best's kernel files in one git process (one blob where HEAD is the best), which the
    # digests take rather than read HEAD's again
    wanted = [blob for blob in dict.fromkeys((head_blob, best_blob)) if blob]
    texts = dict(zip(wanted, cat_blobs(repo, wanted)))
    head_code, *codes = code_digests.of_blobs(repo, path, blobs, texts)
    launched = kept_record.launched if kept_record and kept_test == test_now else None
    return Before(state=state, head=head, modified=read.modified_tracked_files(repo), edited=read.edited(repo, path),
                  text=text, head_text=texts.get(head_blob),
                  code=code_digests.digest(path, text) if text is not None else None, head_code=head_code,
                  tried=[(record, code) for (_, record), code in zip(tried, codes)], head_launched=launched,
                  test_changed_since_best=best_test != test_now, best_text=texts.get(best_blob))


class NotMeasured(KgitError):
    """A step refused before anything ran, for what its change is or its kernel file holds. reason: the
    same in a few words, for the record of an agent's turn (kgit.loop.agent)."""

    def __init__(self, problem: str, hint: str, reason: str):
        super().__init__(problem, hint)
        self.reason = reason


class SameCode(NotMeasured):
    """A step refused because its kernel's code was run already: HEAD's (a change of comments,
    whitespace or docstrings only), or an earlier iteration's; repeats: that earlier iteration, if it is one."""

    def __init__(self, problem: str, hint: str, reason: str, repeats: int | None = None):
        super().__init__(problem, hint, reason)
        self.repeats = repeats


def check_config(before: Before) -> None:
    """Refuse a CONFIG that its own template does not allow: a value outside CONFIG_SPACE, or one that
    breaks CONFIG_CONSTRAINTS (kgit.model.tunables). Refused rather than kept with a warning: the space
    is the template's word on what CONFIG may hold, kgit tune refuses to start from a CONFIG outside it
    (a kept one would stop the loop's tuning), and the remedy lies in the file the step may change."""
    if before.text is None:  # the kernel file deleted: a change its test judges
        return
    try:
        tunables.declared(before.text, before.state.cfg.kernel_path)
    except KgitError as e:
        raise NotMeasured(f"{e}; nothing was run, no iteration used",
                          "set CONFIG to a configuration its template allows (a value of CONFIG_SPACE, within "
                          "CONFIG_CONSTRAINTS), or, if the value is worth searching, add it to CONFIG_SPACE in the "
                          "same change: kgit tune searches that space and refuses a CONFIG outside it",
                          f"set a CONFIG its template does not allow ({e})") from None


class Untested(NotMeasured):
    """A step refused because its change touches what the kernel's test never ran."""


def check_new_code(before: Before, again: bool) -> int | None:
    """Refuse (SameCode) a kernel in the working tree whose code (kgit.model.kernel_code) is HEAD's, or
    that of an earlier iteration whose test ran: that one's verdict stands, and a step would spend an
    iteration to repeat it. With again the latter is measured anyway: the iteration it repeats, else None."""
    path, mine, head = before.state.cfg.kernel_path, before.code, before.head_code
    if mine is None:  # the kernel file deleted: a change its test judges
        return None
    if head == mine:
        raise SameCode(f"the change touches only comments, whitespace or docstrings of {path}, whose code stays "
                       f"as HEAD has it; nothing was run, no iteration used",
                       f"step it with your next change to the code, or drop it with git restore --staged --worktree -- {path} (a "
                       f"commit of it by hand would stop the loop: steps refuse kernel commits no step recorded)",
                       f"changed only comments, whitespace or docstrings of {path}")
    for record, theirs in reversed(before.tried):  # the latest verdict first
        if theirs == mine:  # None: a commit gone from this clone, or one without the file
            if again:
                return record.iteration
            raise SameCode(f"{path} holds the same kernel code as iteration {record.iteration} ({verdict(record)}); "
                           "nothing was run, no iteration used",
                           f"make another change, or measure this one again with 'kgit step --again' (the test "
                           f"or the machine may have changed since; 'kgit show {record.iteration}' shows that one)",
                           f"repeated the kernel code of iteration {record.iteration} ({verdict(record)})",
                           record.iteration)
    return None


def check_tested(before: Before, allow: bool) -> tuple[str, ...] | None:
    """What the change touches of the kernel file that its test never ran (kgit.model.coverage), by the
    kernels the test launched in the run of HEAD's kernel; refuse it (Untested) unless allow. None where
    nothing is untested, or where that run cannot tell: it recorded no launch (an older kgit's record; a
    test whose kernels kgit's device timing does not see), or the test changed since (decide.check_run then
    tells from the candidate's own run)."""
    state, change, launched = before.state, before.change, before.head_launched
    if change is None or not launched:
        return None
    names = coverage.untested(*change, set(launched))
    if not names or allow:
        return tuple(names) or None
    shown_names = ", ".join(names)
    raise Untested(f"the change touches {shown_names} in {state.cfg.kernel_path}, which its test never ran (it "
                   f"launched {', '.join(launched)}): its verdict would say nothing of them; nothing was run, no "
                   "iteration used",
                   f"change what {state.cfg.test_path} runs instead; the test's owner may make it run them too (kgit "
                   "init writes a test that runs a backward through autograd), or step with --allow-untested to "
                   "record the change as untested",
                   f"changed {shown_names}, which the test never runs")


def never_ran(repo: Repo, path: str, launched: tuple[str, ...] | None) -> list[str]:
    """The kernels of HEAD's kernel file that a test which launched these never ran: what a step may not
    change. Empty where no launch was recorded."""
    found = coverage.parts(read.file_at(repo, path) or "") if launched else None
    if not found:
        return []
    ran = coverage.ran(found, set(launched))
    return [name for name, part in found.items() if part.kind == "kernel" and name not in ran]


def _ran(record: Record) -> bool:
    """Whether the record's kernel was run by its test (its verdict says something of its code)."""
    if record.measurement is not None:
        return record.measurement.runs > 0
    return record.correctness is not None  # a record without its measurement (an older kgit's)


def compare_with_best(repo: Repo, state: LoopState, candidate: str, source: str | None, best_source: str | None,
                      environment: Environment, progress=None, gpu: str | None = None,
                      keep_above_pct: float | None = None, extend: bool = False) -> Comparison:
    """Measure a candidate (a commit, or HEAD with the kernel replaced by source) against the best,
    pair by pair, each in its own worktree; best_source: the best's kernel file (None where its commit
    has none: the best's commit runs whole); keep_above_pct and extend as step's."""
    best_commit, best = state.best
    # The best's first run here fills its compile caches, unless this environment has run it already.
    warm_best = not any(same_environment(r.environment, environment)
                        for r in state.records if r.iteration >= best.iteration)
    timeout_s, why = decide.candidate_timeout(state.cfg, best, environment)
    figure = decide.decides_on(state.cfg, state.records)
    prior = decide.noise_prior(state.records, environment, figure)
    # The best's kernel runs in the candidate's tree, so that the two differ in the kernel file alone: a
    # test (or any other file) committed since the best judges both alike.
    trees = {"best": (candidate, best_source) if best_source is not None else (best_commit, None),
             "candidate": (candidate, source)}
    with testing.checkouts(repo, state.cfg, trees, environment.device, gpu=gpu, progress=progress) as run:
        def run_candidate(timing_only: bool):
            result = run("candidate", timing_only, timeout_s)
            if why and (result.reason or "").startswith("timeout:"):
                return not_run(why, result.output_tail)
            return result

        return paired.compare(lambda timing_only: run("best", timing_only), run_candidate, prior,
                              state.cfg.min_gain_pct, state.cfg.max_pairs, warm_best, state.cfg.lower_is_better,
                              on_pair=progress.pair if progress else None, decides_on=figure,
                              keep_above_pct=keep_above_pct, extend=extend)


def reject(repo: Repo, action: str, tier: int | None, reason: str, overrides: dict,
           output_tail: str = "", agent_turn: dict | None = None) -> Outcome:
    """Record a change that must not be tested as FAILED and roll it back.

    For an agent that changed nothing, changed the test or other files, or failed: whatever it changed
    in tracked files is committed first as the attempt, so that nothing is lost and the record shows it.
    """
    state = _running_state(repo, overrides)
    journal = transaction.commit_candidate(repo, state.cfg, state.history.last_iteration + 1, one_line(action),
                                           tier, paths=None, base=read.rev(repo, "HEAD"))
    record = decided_record(state, journal, never_measured(not_run(reason, output_tail)), None, overrides,
                            agent_turn=agent_turn)
    return Outcome(record, _decided(repo, journal, record), state.history.invalid)


def _decided(repo: Repo, journal, record: Record) -> str:
    """Hand the decided record, and the log rendered with it, to the transaction; the note's commit."""
    return transaction.decided(repo, journal, record, *report.with_record(repo, journal.base, record))


def _running_state(repo: Repo, overrides: dict) -> LoopState:
    """The current kernel's loop; refuse when it has no baseline or has stopped."""
    state = loop_state(repo, None, overrides)
    kernel = state.cfg.name
    check_intact(kernel, state)
    check_recorded(kernel, state)
    if state.stopped:
        raise stopped_refusal(kernel, state)
    return state


def check_intact(kernel: str, state: LoopState) -> None:
    """Refuse to step while a note of the branch is damaged: the best may be the one it held."""
    damaged = damaged_notes(state.history)
    if damaged:
        commits = ", ".join(dict.fromkeys(note.commit[:10] for note in damaged))
        raise KgitError(f"{refs.branch(kernel)} holds a damaged kgit record (on {commits}: {damaged[0].reason}); a "
                        "step would decide without it and could keep a kernel worse than the best",
                        "'kgit doctor' says what is wrong, and 'kgit doctor --fix' puts back the note's last valid "
                        "version where the notes' history has one")


def check_recorded(kernel: str, state: LoopState) -> None:
    """Refuse to add an iteration on top of a kernel change that no step measured: the decision would
    credit that change to this iteration, and the record would show only its own diff."""
    unrecorded = unrecorded_commits(state.history, state.cfg.kernel_path)
    if unrecorded:
        oldest = unrecorded[-1][0]
        commits = ", ".join(f"{sha[:10]} ({subject[:50]})" for sha, subject in unrecorded)
        raise KgitError(f"{refs.branch(kernel)} has {len(unrecorded)} commit{'s' if len(unrecorded) > 1 else ''} of "
                        f"{state.cfg.kernel_path} that no step recorded: {commits}", hand_commit_advice(oldest))


def stopped_refusal(kernel: str, state: LoopState) -> KgitError:
    """A command that would add an iteration to a loop that has stopped."""
    if state.stopped == StopReason.MAX_ITERATIONS:
        last = state.history.last_iteration
        return KgitError(f"the loop for {kernel} has stopped ({state.stopped}: {last} iterations of "
                         f"{state.cfg.max_iterations})",
                         f"give --max-iterations above {last} (the loop's total, not a number of more) or set "
                         "max_iterations in kgit.yaml and commit it, to go on")
    return KgitError(f"the loop for {kernel} has stopped ({state.stopped})",
                     "raise the target (kgit.yaml or the command's options) to go on")


def decided_record(state: LoopState, journal, comparison: Comparison, environment: Environment | None, overrides: dict,
                   keep_anyway: str | None = None, agent_turn: dict | None = None, repeats: int | None = None,
                   untested: tuple[str, ...] | None = None, test_changed: bool = False) -> Record:
    """The record of the journal's step, decided (kgit.model.decide.step_record) from its comparison."""
    best = state.best[1] if state.best else None
    record = decide.step_record(state.cfg, journal.iteration, journal.action, journal.tier, journal.started,
                                journal.base, comparison, best, environment, test_changed=test_changed,
                                keep_anyway=keep_anyway, step=state.steps + 1)
    if overrides:  # remembered: the loop's later commands start from them (kgit.loop.history.loop_state)
        record = record.replace(options=overrides)
    if agent_turn:
        record = record.replace(agent=agent_turn)
    if repeats is not None:  # kgit step --again: the same kernel code as that iteration, measured again
        record = record.replace(repeats=repeats)
    return record.replace(launched=comparison.first.launched if comparison.first else None, untested=untested)


MAX_MESSAGE = 500  # characters of a change's one line: a commit subject and a cell of the log's table


def one_line(text: str, what: str = "the change's message (-m)") -> str:
    """The text as the one line it becomes in a commit subject, a table cell and the README."""
    line = " ".join(text.split())
    if not line:
        raise KgitError(f"{what} is empty", "say in a few words what this iteration changes, or why")
    if len(line) > MAX_MESSAGE:
        raise KgitError(f"{what} is {len(line)} characters long, over {MAX_MESSAGE}",
                        "say in a line what this iteration changes; the diff is in the record (kgit show N)")
    return line


def check_clean(modified: list[str], allowed: list[str]) -> None:
    """Refuse when a tracked file not in allowed is modified."""
    others = [p for p in modified if p not in allowed]
    if others:
        if not allowed:
            raise KgitError(f"uncommitted changes to {', '.join(others)}", "commit or stash them first")
        # Never advise committing them: an agent told so could loosen its judge. A test committed on its
        # own (a person's call) judges the best too (compare_with_best).
        raise KgitError(
            f"modified besides {allowed[0]}: {', '.join(others)}. One change per iteration, to the kernel "
            f"only (the test is the judge and never changes with the kernel)",
            f"put the rest back with git restore -- {' '.join(others)} (or git stash push -- "
            f"{' '.join(others)} to keep it aside)")


def _baseline_hint(reason: str | None, kernel: str, cfg: config.KernelConfig) -> str | None:
    """What to do about a baseline that failed: for the way its test reports, or for its kernel."""
    test_path = cfg.test_path
    command = cfg.test_command or f"python {test_path} --json"
    if reason == "no JSON object on stdout":
        return (f"kgit runs '{command}' and reads the last JSON object it prints, such as "
                "{\"correctness\": true, \"gbps\": 812.5} (kgit's README.md, 'The test contract'); a test that "
                "prints none is read with 'verdict: exit_status' and 'metric: device_us' (or 'metric_pattern') in "
                f"kgit.yaml; or let 'kgit init {kernel} --kernel PATH' write a test for the kernel on kgit's harness")
    time_named = re.search(r"; (\S+) looks like a time", reason or "")
    if time_named:
        return (f"add 'metric: {time_named.group(1)}' and 'better: lower' under '{kernel}:' in kgit.yaml, "
                f"then 'kgit start {kernel}' again")
    if reason and reason.startswith("invalid metric") and reason.endswith((" = 0", " = 0.0")):
        # a test that rounds its figure (round(gbps, 2)) prints 0 for a slow run, a CPU one above all
        return ("the figure is 0, as a test prints one it rounded away: name another figure with 'metric' "
                "in kgit.yaml (a latency with 'better: lower'), or print more digits")
    if reason and reason.startswith("invalid JSON"):
        return (f"print the JSON of kgit's README.md, 'The test contract', or let 'kgit init {kernel} --kernel "
                f"PATH' write a test for the kernel on kgit's harness")
    if reason and reason.startswith("crashed") and "No module named" in reason and not cfg.test_command:
        return (f"kgit runs 'python {test_path} --json' from the repository's root, as a script, where it cannot "
                f"import what it tests; to run the test as it is (a pytest module, say), give it under "
                f"'{kernel}:' in kgit.yaml as 'test_command: python -m pytest -q {test_path}' with 'verdict: "
                "exit_status' and 'metric: device_us' (kgit's device time of the kernel file's launches); or let "
                f"'kgit init {kernel} --kernel PATH' write a test on kgit's harness")
    if (reason and reason.startswith("crashed") and re.search(r"unrecognized arguments:.*--json", reason)
            and not cfg.test_command):
        # argparse's refusal of the one argument kgit always passes: the test is fine, its parser is not
        return (f"kgit runs 'python {test_path} --json' (then test_args): let the test accept --json, e.g. "
                "parser.add_argument('--json', action='store_true') in argparse (it may print its JSON line "
                f"either way), commit it, and run 'kgit start {kernel}' again")
    if reason and reason.startswith(("correctness", "crashed", "timeout")):
        return (f"the loop starts from a kernel that passes its test: see '{command}', "
                f"fix the kernel, commit, and run 'kgit start {kernel}' again")
    return None
