"""Reading a kernel's loop back: which kernel, its log, its best iteration, its status, one iteration.

Read-only: nothing here changes the repository (a step interrupted by a crash is reported, and left
for the next writing command to finish).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kgit import config
from kgit.errors import KgitError
from kgit.git import notes, read, refs
from kgit.git.command import Repo
from kgit.model import decide, kernel_name, remeasured
from kgit.model.record import InvalidNote, Record, StopReason, same_environment
from kgit.model.record import Status as RecordStatus
from kgit.model.remeasured import Remeasured
from kgit.model.runs import sections
from kgit.state import journal, lock


@dataclass
class LoopState:
    """A kernel's loop as the next step sees it."""

    history: notes.History
    cfg: config.KernelConfig
    stopped: StopReason | None
    steps: int = 0  # the steps the loop has taken (steps_taken)
    best: tuple[str, Record] | None = None  # the best iteration's (commit, record): decide.best_pair

    @property
    def records(self) -> list[Record]:
        return self.history.records


def deciding(repo: Repo, kernel: str) -> notes.History:
    """The records that decide the kernel's loop here (notes.deciding_history); refused where there are none."""
    return notes.nonempty(notes.deciding_history(repo, kernel), kernel, repo)


def current_kernel(repo: Repo) -> str:
    """The kernel of the checked-out opt/ branch; refused on another branch."""
    branch = read.current_branch(repo)
    kernel = refs.kernel_of_branch(branch)
    if kernel is None:
        where = f"on {branch}" if branch else "on a detached HEAD"
        loops = sorted(read.kernels_with_branches(repo))
        if loops:
            raise KgitError(f"not on an opt/<kernel> branch ({where})",
                            f"'git checkout {refs.branch(loops[0])}' to step its loop (the loops here: "
                            f"{', '.join(loops)}), or 'kgit start <kernel>' for a new one")
        raise KgitError(f"not on an opt/<kernel> branch ({where})", "run 'kgit start <kernel>' first")
    return kernel


def loop_state(repo: Repo, kernel: str | None, overrides: dict) -> LoopState:
    """The records that decide the kernel's loop here with its branch (notes.branch_history: read once,
    what every check of a step reads), its settings, and why it stopped, if it did. kernel None: the
    checked-out opt/ branch's (refused on another branch)."""
    kernel = kernel or current_kernel(repo)
    history = notes.nonempty(notes.branch_history(repo, kernel), kernel, repo)
    records = history.records
    remembered = {}  # the options given to start and to later steps, the latest of each winning
    for record in records:
        remembered.update(record.options or {})
    try:
        cfg = config.for_loop(repo.root, kernel, remembered, overrides)
    except KgitError:
        branch = read.current_branch(repo)
        if refs.kernel_of_branch(branch) != kernel and history.line.tip is not None:
            # a clone on its default branch, say, where kgit.yaml has no entry yet: the loop's branch has one
            raise KgitError(f"this checkout does not define {kernel} ({branch or 'a detached HEAD'} is not "
                            f"{refs.branch(kernel)})", f"'git checkout {refs.branch(kernel)}', where its loop runs") from None
        raise
    steps = steps_taken(history)
    return LoopState(history, cfg, decide.stop_reason(records, cfg, steps), steps, decide.best_pair(history.pairs))


def steps_taken(history: notes.History) -> int:
    """How many steps the loop on opt/<kernel> has taken, what max_iterations bounds: its records that
    started from a commit the branch holds (every clone's of this loop; a joined line's too), baselines
    aside, from a branch_history. Not the highest iteration number: a run of the kernel pulled from
    another repository numbers on from its own, and this clone numbers past it so that no two attempts
    share a name."""
    line = history.line
    return len({r.key for _, r in history.pairs if r.status != RecordStatus.BASELINE
                and (r.base is None or line.tip is None or r.base in line.held_bases)})


def unrecorded_commits(history: notes.History, kernel_path: str) -> list[tuple[str, str]]:
    """(sha, subject) of the commits on opt/<kernel> above its latest recorded one that change the kernel
    file, newest first, from a branch_history: a change no step measured (a hand commit), which a step
    now would credit to its own iteration. A commit whose note is no valid record counts as recorded:
    its note is reported (kgit doctor) and decided without, not taken for a hand commit."""
    return [(sha, subject) for sha, subject, paths in history.line.above_recorded if kernel_path in paths]


def measured_twin(repo: Repo, kernel_path: str, sha: str, by_commit: dict[str, list[Record]],
                  kernel: str) -> tuple[str, Record] | None:
    """(commit, record) of a kept iteration of kernel whose kernel file is the one sha holds, among
    sha's ancestors: a hand `git merge` of two lines resolved to one side's kernel, or a commit that
    put a measured kernel back, holds a kernel that was measured, though no note is on it."""
    kept = [(c, r) for c, records in by_commit.items() for r in records if r.kernel == kernel and r.kept]
    if not kept:
        return None
    blobs = read.object_ids(repo, [f"{sha}:{kernel_path}"] + [f"{c}:{kernel_path}" for c, _ in kept])
    mine, theirs = blobs[0], blobs[1:]
    twins = [pair for pair, blob in zip(kept, theirs) if mine and blob == mine]
    twins = [(c, r) for c, r in twins if read.is_ancestor(repo, c, sha)]
    return max(twins, key=lambda pair: pair[1].iteration) if twins else None


def damaged_notes(history: notes.History) -> list[InvalidNote]:
    """The notes on opt/<kernel>'s commits (its first parents) or on its best/ tag's that are not valid
    records, from a deciding_history: one of them may be the best's, and a step deciding without it
    would compare with an older record, keep a worse kernel and move the branch off the best."""
    line = history.line
    return [note for note in history.invalid if note.commit in line.first_parents or note.commit == line.tagged]


def hand_commit_advice(oldest: str) -> str:
    """What to do about the unrecorded commits from oldest up (unrecorded_commits): the step, doctor and
    context all give it."""
    # never advice that drops a commit (gc would delete it): the change comes back to the working tree,
    # where the person measures it or discards it knowingly
    return (f"'git reset --soft {oldest[:10]}~1' puts the change back in the working tree, staged, for 'kgit step' "
            f"to measure (or for you to discard)")


def in_flight(repo: Repo) -> tuple[object | None, bool]:
    """What a reading command says first: the kgit working here now (kgit.state.lock.holder), else whether
    a killed one left a step for the next writing command to finish."""
    working = lock.holder(repo)
    return working, working is None and journal.pending(repo)


def resolve_kernel(repo: Repo, kernel: str | None, all_if_several: bool = False) -> str | list[str]:
    """The kernel named, else the one of the current opt/ branch, else the only one with records; where
    several have records, all of them if all_if_several (kgit status shows every loop), else a refusal."""
    if kernel:
        return kernel_name.check(kernel)
    current = read.current_kernel(repo)
    if current:
        return current
    kernels = notes.kernels_with_records(repo)
    if len(kernels) == 1 and not (all_if_several and not _defined_here(repo, kernels[0])):
        return kernels[0]
    if kernels and all_if_several:  # the overview reads the records alone: a checkout need not define them
        return kernels
    if not kernels:
        fetched = read.fetched_runs(repo)
        if fetched:  # a plain git clone of a repository kgit pushed to: the records are a pull away
            remote, branch = fetched[0]
            raise KgitError(f"no kgit records in this clone yet, but {remote} has {branch}",
                            f"'kgit pull {remote}' brings its records (then git checkout {branch})")
        raise KgitError("no kgit records in this repository", "run 'kgit start <kernel>' first")
    raise KgitError(f"several kernels have records ({', '.join(kernels)})",
                    f"name one after the command (e.g. 'kgit log {kernels[0]}') or check out its branch "
                    f"(git checkout opt/{kernels[0]})")


def _defined_here(repo: Repo, kernel: str) -> bool:
    """Whether this checkout says where the kernel's files are (kgit.yaml, or skills/kernels/<kernel>/)."""
    try:
        config.load(repo.root, kernel)
    except KgitError:
        return False
    return True


@dataclass
class Loop:
    """One kernel's loop in the overview of every loop (kgit status with no kernel)."""

    kernel: str
    branch: str | None  # None: its records are here, its branch is not
    iterations: int
    reverted: int
    best: Record | None


def overview(repo: Repo, kernels: list[str]) -> list[Loop]:
    """These kernels' loops, read from the records alone (a checkout need not define them)."""
    loops = []
    for kernel in kernels:
        found = notes.branch_history(repo, kernel)
        best = decide.best_pair(found.pairs)
        own = _loop_run(found.pairs, best[1] if best else None)
        loops.append(Loop(kernel, refs.branch(kernel) if found.line.tip else None, steps_taken(found),
                          sum(not r.status.on_branch for r in own), best[1] if best else None))
    return loops


def missing_iteration(kernel: str, iteration: int, pairs: list[tuple[str, Record]]) -> KgitError:
    """The refusal of a command given an iteration the kernel's records do not have."""
    last = max((r.iteration for _, r in pairs), default=0)
    return KgitError(f"{kernel} has no iteration {iteration}", f"its iterations are 0 to {last}: 'kgit log' lists them")


def log(repo: Repo, kernel: str) -> notes.History:
    """Every iteration of the kernel, reverted ones included, each with the commit its note is on."""
    return notes.nonempty(notes.kernel_history(repo, kernel), kernel, repo)


@dataclass
class Run:
    """One loop of the kernel on one device, from its baseline on (kgit.model.runs): the log shows each
    apart, with its own count, since figures of two devices are not comparable."""

    gpu: str | None
    started: str
    pairs: list[tuple[str, Record]]

    @property
    def records(self) -> list[Record]:
        return [r for _, r in self.pairs]


def runs(pairs: list[tuple[str, Record]]) -> list[Run]:
    """The kernel's (commit, record) pairs as runs, each in iteration order."""
    commit_of = {id(r): sha for sha, r in pairs}
    return [Run(gpu, started, [(commit_of[id(r)], r) for r in records])
            for (_, gpu, started), records in sections([r for _, r in pairs]).items()]


def left_behind(repo: Repo, kernel: str, pairs: list[tuple[str, Record]]) -> set[str]:
    """The commits of kept iterations that opt/<kernel>'s first-parent line does not hold: another clone's
    line that a join left in the history (kgit.share.join), or one a reset dropped. Shown in the log,
    never the best here."""
    tip = read.rev(repo, refs.branch_ref(kernel))
    if tip is None:
        return set()
    line = set(read.first_parents(repo, tip, limit=1_000_000))
    return {sha for sha, r in pairs if r.status.on_branch and sha not in line}


@dataclass
class Best:
    record: Record
    commit: str
    tag: str
    tag_commit: str | None
    invalid: list[InvalidNote]
    better: str | None  # "higher" or "lower": which way the figure goes as the kernel gets faster (better_of)
    remeasured: Remeasured | None  # the latest later step's runs of the best (kgit.model.remeasured)


def best(repo: Repo, kernel: str) -> Best:
    history = notes.nonempty(notes.deciding_history(repo, kernel), kernel, repo)
    found = decide.best_pair(history.pairs)
    if found is None:
        raise KgitError(f"{kernel} has no successful iteration")
    commit, record = found
    return Best(record, commit, refs.tag(kernel), read.rev(repo, refs.tag_ref(kernel)), history.invalid,
                better_of(repo, kernel), remeasured.latest(history.records, record))


def better_of(repo: Repo, kernel: str) -> str | None:
    """Which way the kernel's figure goes as it gets faster, "higher" (a bandwidth) or "lower" (a time), as
    kgit.yaml says; None where this checkout does not define the kernel (a clone of the records only). A
    best whose figure is below its baseline's reads right only with it."""
    try:
        return config.load(repo.root, kernel).better
    except KgitError:
        return None


@dataclass
class Status:
    kernel: str
    branch: str
    on_branch: bool
    kernel_path: str
    test_path: str
    iteration: int
    max_iterations: int
    metric: str | None
    better: str  # "higher" or "lower": which way the figure goes as the kernel gets faster
    target: float | None
    best: Record | None
    best_commit: str | None
    gap: float | None
    gap_pct: float | None
    stopped: StopReason | None
    kernel_modified: bool
    reverted: int
    invalid: list[InvalidNote]
    working: int | None = None  # the pid of a kgit working in the repository now (0: unknown), if any
    pending: bool = False  # a killed kgit left a step to finish
    test_changed: bool = False  # the test on the branch differs from the best's (committed since)
    unrecorded: list[tuple[str, str]] = field(default_factory=list)  # hand commits of the kernel (unrecorded_commits)
    elsewhere: int = 0  # records of runs on other devices (a pulled GPU run beside a CPU one): not counted here
    remeasured: Remeasured | None = None  # the latest later step's runs of the best (kgit.model.remeasured)


def _loop_run(pairs: list[tuple[str, Record]], best: Record | None) -> list[Record]:
    """The records of the run (one device's loop) that holds the best: what a loop's counts count. Every
    record where there is no best yet."""
    found = next((run.records for run in runs(pairs) if any(r is best for r in run.records)), None)
    return found if found is not None else [r for _, r in pairs]


def status(repo: Repo, kernel: str, overrides: dict | None = None) -> Status:
    state = loop_state(repo, kernel, overrides or {})
    history, records, cfg = state.history, state.records, state.cfg
    best_commit, top = state.best or (None, None)
    target = decide.target_value(cfg, top) if top else None
    on_branch = read.current_kernel(repo) == kernel
    gap = None  # how far the best is from the target: positive while not reached, whichever way the figure runs
    if target is not None and top:
        gap = top.value - target if cfg.lower_is_better else target - top.value
    own = _loop_run(history.pairs, top)
    pending = journal.pending(repo)
    return Status(
        kernel=kernel,
        branch=refs.branch(kernel),
        on_branch=on_branch,
        kernel_path=cfg.kernel_path,
        test_path=cfg.test_path,
        iteration=state.steps,
        max_iterations=cfg.max_iterations,
        metric=top.metric if top else None,
        better=cfg.better,
        target=target,
        best=top,
        best_commit=best_commit,
        gap=gap,
        gap_pct=gap / target * 100 if gap is not None and target else None,
        stopped=state.stopped,
        kernel_modified=on_branch and cfg.kernel_path in read.modified_tracked_files(repo),
        reverted=sum(not r.status.on_branch for r in own),
        elsewhere=len(records) - len(own),
        remeasured=remeasured.latest(records, top) if top else None,
        invalid=history.invalid,
        working=lock.holder(repo),
        pending=pending,
        test_changed=best_commit is not None and history.line.tip is not None
        and read.changed(repo, best_commit, history.line.tip, cfg.test_path),
        # while a killed step is pending its candidate is on the branch unrecorded: not a hand commit
        unrecorded=[] if pending else unrecorded_commits(history, cfg.kernel_path),
    )


@dataclass
class Shown:
    record: Record
    commit: str
    diff: str
    others: list[tuple[str, Record]]  # the iteration's other records: other GPUs' runs, or another clone's


def show(repo: Repo, kernel: str, iteration: int | str) -> Shown:
    """One iteration, by its number or by its commit (two clones may both have numbered one 3): its
    record and the change it tried (for a revert, the attempt's diff)."""
    pairs = log(repo, kernel).pairs
    sha, record, matches = _find(repo, kernel, pairs, iteration)
    parent = read.first_parent(repo, sha)
    change = read.diff(repo, parent, sha, exclude=[config.report_path(repo.root)]) if parent else ""
    return Shown(record, sha, change, [m for m in matches if m[1] is not record])


def _find(repo: Repo, kernel: str, pairs: list[tuple[str, Record]],
          iteration: int | str) -> tuple[str, Record, list[tuple[str, Record]]]:
    """The record of an iteration, by its number or its commit, with the commit its note is on, and every
    record of that iteration. Text of digits alone is a number, unless no iteration has it and it names a
    commit a record is on: a commit's short name can be all digits (7758677105)."""
    matches = []
    if isinstance(iteration, str):
        numbered = iteration.isdigit() and any(r.iteration == int(iteration) for _, r in pairs)
        commit = read.rev(repo, iteration) if not numbered and len(iteration) >= 4 else None
        matches = [(sha, r) for sha, r in pairs if sha == commit]
        if not matches and not iteration.isdigit():
            raise KgitError(f"no record of {kernel} is on a commit named {iteration!r}",
                            "'kgit log' lists each iteration's commit; give an iteration's number or its commit")
        iteration = iteration if matches else int(iteration)
    if not matches:
        matches = [(sha, r) for sha, r in pairs if r.iteration == iteration]
    if not matches:
        raise missing_iteration(kernel, iteration, pairs)
    # Several records of one iteration: runs on several GPUs of one commit, or two clones that both
    # continued the loop. The latest on this clone's branch is taken; the others are named.
    on_branch = [m for m in matches if read.is_ancestor(repo, m[0], refs.branch_ref(kernel))]
    sha, record = (on_branch or matches)[-1]
    return sha, record, matches


@dataclass
class Compared:
    """Two iterations side by side (kgit diff): their records, and the change from the first to the second."""

    kernel: str
    a: tuple[str, Record]  # (the commit its note is on: a kept iteration's, or a revert's attempt; the record)
    b: tuple[str, Record]
    path: str | None  # the kernel file the diff is of; None where this checkout does not define the kernel
    diff: str
    better: str | None  # better_of: which way the figure goes as the kernel gets faster
    same_environment: bool  # measured where their figures compare (kgit.model.record.same_environment)


def compare(repo: Repo, kernel: str, a: int | str, b: int | str) -> Compared:
    """Iterations a and b (each a number or a commit): their records and the diff of the kernel file from
    a's kernel to b's (every file but the log where this checkout does not say which is the kernel's)."""
    pairs = log(repo, kernel).pairs
    sha_a, record_a, _ = _find(repo, kernel, pairs, a)
    sha_b, record_b, _ = _find(repo, kernel, pairs, b)
    try:
        path = config.load(repo.root, kernel).kernel_path
    except KgitError:
        path = None
    change = (read.diff(repo, sha_a, sha_b, exclude=[], paths=[f":(literal){path}"]) if path else
              read.diff(repo, sha_a, sha_b, exclude=[config.report_path(repo.root)]))
    return Compared(kernel, (sha_a, record_a), (sha_b, record_b), path, change, better_of(repo, kernel),
                    same_environment(record_a.environment, record_b.environment))
