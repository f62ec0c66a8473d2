"""kgit tune: a search over the tunables a kernel template declares, one iteration per proposal.

A template declares them as two literal dicts at module level (kgit.model.tunables reads them):

    CONFIG = {"BLOCK_SIZE": 4096, "num_warps": 4, "num_stages": 1}
    CONFIG_SPACE = {"BLOCK_SIZE": [2048, 4096, 8192], "num_warps": [4, 8, 16], "num_stages": [1, 2, 3]}

A template may also declare CONFIG_CONSTRAINTS, a literal list of comparisons over CONFIG's keys and
numbers, that every configuration must satisfy (what does not fit the GPU, predicted before compiling):

    CONFIG_CONSTRAINTS = ["BLOCK_SIZE * num_stages * 4 <= 232448"]

(kgit.model.constraints checks and evaluates them, never with eval). No search proposes a configuration
that breaks one, and a CONFIG that breaks one is refused.

The search is model-based (kgit.model.search.propose_model): a Gaussian process fitted to every figure
measured for this kernel, read back from git, proposes the unmeasured configuration of the highest
expected improvement, weighed by its chance to run (failures teach where configurations fail). A step
changes one key, unless the search gives a reason to change more (two keys the model reads as
coupled, another run's best): the reason is written into the iteration's action, beside every key it
changes. It never proposes a configuration already measured (kept or reverted, as recorded in git),
and stops when the whole space has been measured. Coordinate descent (`propose`, the search before it) remains: the
environment variable KGIT_TUNE_SEARCH=descent selects it, and it is used when numpy or scipy are not
installed. benchmarks/tune/replay.py compares the two on measured spaces.

Each proposal is decided as a step is, pair by pair against the best, with one difference: it is kept
when the whole interval of its gain lies above zero, not above min_gain_pct (decide.TUNE_KEEP_ABOVE_PCT:
a configuration is no more code than the best's, so a gain its pairs resolve is worth keeping however
small). min_gain_pct still ends a comparison early as noise, and still tells the search when to stop.
And where its estimate lies above min_gain_pct, still undecided at max_pairs, it takes more pairs, up to
twice max_pairs (decide.TUNE_EXTENDS, kgit.model.noise.Bound): the search never measures it again.

Each proposal is recorded with the tier of the keys it changes: the tier skill that owns the technique the
kernel's SKILL.md maps each key to (its `tunables:`), the lowest where keys of several tiers change, and
tier 1 for a key without one (kgit.profiling.skillfiles.tunable_tiers).
"""

from __future__ import annotations

import os

from kgit import config, machine
from kgit.errors import KgitError
from kgit.git import notes, read, refs
from kgit.git.command import Repo, cat_blobs
from kgit.loop import cluster, steps, testing
from kgit.model import decide, search
from kgit.model.record import Record, Status, StopReason
from kgit.model.tunables import Tunables, read_tunables, write_config
from kgit.profiling import skillfiles


# Triton's launch options, which its interpreter ignores: on a CPU a change of one cannot change a timing.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def held_in_interpreter(tunables: Tunables, vendor: str) -> dict:
    """The launch options kgit tune holds at CONFIG's values, where the tests run in Triton's interpreter
    (vendor 'cpu'): there a proposal that changes one measures nothing but the CPU's noise."""
    if vendor != "cpu":
        return {}
    return {k: tunables.config[k] for k in LAUNCH_OPTIONS
            if k in tunables.config and len(tunables.space.get(k, ())) > 1}


def _allows(tunables: Tunables, held: dict):
    """What the search may propose: the template's constraints hold and the held launch options are kept."""
    return lambda config: tunables.allows(config) and all(config.get(k) == v for k, v in held.items())


def describe_change(old: dict, new: dict, reason: str = "") -> str:
    """The iteration's action: every key that changes, and why several change at once where they do."""
    changes = [f"{key} {old.get(key)}->{value}" for key, value in new.items() if old.get(key) != value]
    text = ", ".join(changes) or "no change"
    return f"{text} ({len(changes)} keys at once: {reason})" if len(changes) > 1 and reason else text


def propose(best: dict, space: dict, measured: list[tuple[dict, dict, bool]], allowed=None) -> dict | None:
    """The next configuration to measure, or None when every neighbour of the best was measured.

    measured: (configuration tried, configuration it was tried from, whether it was kept[, score]), oldest
    first. allowed: config -> bool (the template's constraints); a neighbour it refuses is skipped.
    """
    seen = [_key(tried) for tried, *_ in measured] + [_key(best)]
    preferred = []
    for tried, origin, kept, *_ in reversed(measured):
        if kept:  # keep going the way the last gain went
            preferred = [(key, _direction(space[key], origin[key], tried[key]))
                         for key in tried if key in space and tried[key] != origin.get(key)]
            break
    keys = [key for key in best if key in space]
    # Finish the key last changed (its other direction) before moving on to the next key in turn.
    last_changed = next((k for tried, origin, *_ in reversed(measured) for k in keys if tried[k] != origin.get(k)), None)
    if last_changed is not None:
        i = keys.index(last_changed)
        keys = keys[i:] + keys[:i]
    order = preferred + [(key, d) for key in keys for d in (+1, -1)]
    for key, direction in order:
        values = space[key]
        position = values.index(best[key]) + direction
        if 0 <= position < len(values):
            candidate = {**best, key: values[position]}
            if _key(candidate) not in seen and (allowed is None or allowed(candidate)):
                return candidate
    return None


def _descent_asked() -> bool:
    return os.environ.get("KGIT_TUNE_SEARCH", "model") == "descent"


def model_search_missing() -> str | None:
    """Why the model search cannot run here (it falls back to coordinate descent), or None."""
    import importlib.util

    if _descent_asked():
        return None
    missing = [name for name in ("numpy", "scipy") if importlib.util.find_spec(name) is None]
    return (f"{', '.join(missing)} not installed: kgit tune searches by coordinate descent, which stops on coupled "
            "tunables (pip install numpy scipy, or kgit's 'harness' extra)") if missing else None


def propose_next(best: dict, space: dict, measured: list[search.Point], pending: list[dict] = (),
                 min_gain_pct: float = 1.0, allowed=None, elsewhere: list[search.Point] = ()) -> search.Proposal | None:
    """The search's next configuration and why it changes several keys, if it does: the model's, or
    coordinate descent's (one key a step) where the model cannot run. Never one that allowed (the
    template's constraints) refuses. elsewhere: what other runs of the kernel measured on this GPU, which
    only the model learns from."""
    if not _descent_asked():
        try:
            return search.propose_model(best, space, measured, pending, min_gain=min_gain_pct / 100,
                                        allowed=allowed, elsewhere=elsewhere)
        except ImportError:  # numpy / scipy missing: the search that needs neither
            pass
    found = propose(best, space, list(measured) + [(c, best, False) for c in pending], allowed)
    return search.Proposal(found) if found else None


def _direction(values: list, old, new) -> int:
    if old in values and new in values:
        return 1 if values.index(new) > values.index(old) else -1
    return 1


def _key(config: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in config.items()))


def run(repo: Repo, kernel: str, overrides: dict, progress, on_outcome,
        gpus: list[str] | None = None, ray_cluster=None) -> StopReason:
    """Tune the kernel until a stop reason; every proposal is an ordinary step. Returns the stop reason.

    With several GPUs, each round tests one proposal per GPU at once, each in its own worktree, then
    records them one after the other in a fixed order, deciding each against the best so far: the
    history reads as a sequential run's would. With ray_cluster (kgit.loop.cluster), the same with
    the cluster's workers in place of this machine's GPUs.
    """
    if read.rev(repo, refs.branch_ref(kernel)) is None:  # a CONFIG tune refuses is refused before the baseline
        cfg = config.load(repo.root, kernel, overrides)
        if (repo.root / cfg.kernel_path).is_file():
            read_tunables((repo.root / cfg.kernel_path).read_text(), cfg.kernel_path)
    baseline = steps.ensure_started(repo, kernel, overrides, progress)
    if baseline:
        on_outcome(baseline)
    tiers = skillfiles.tunable_tiers(repo.root, kernel)  # read once: the skills do not change mid-run
    elsewhere = None  # other runs' records, read once: none arrive while this run holds the lock
    first_round = True
    while True:
        state = steps.next_round(repo, kernel, overrides)
        cfg = state.cfg
        source = (repo.root / cfg.kernel_path).read_text()
        tunables = read_tunables(source, cfg.kernel_path)  # a kernel with nothing to tune says so first
        if state.stopped:
            if first_round and not baseline:  # nothing done: as a step would, say why
                raise steps.stopped_refusal(kernel, state)
            return state.stopped
        first_round = False
        held = {} if ray_cluster else held_in_interpreter(tunables, machine.vendor(cfg.gpu))  # workers have GPUs
        if held and progress:
            progress.note(f"Triton's interpreter ignores {', '.join(held)}: kgit tune holds "
                          f"{', '.join(f'{k}={v}' for k, v in held.items())} on this machine")
        measured = _measured(repo, cfg.kernel_path, state.history.pairs, cfg.lower_is_better)
        if elsewhere is None:
            elsewhere = _measured(repo, cfg.kernel_path, _other_runs(repo, kernel, state.history.pairs),
                                  cfg.lower_is_better)
        candidates, reasons = [], []
        for _ in range(ray_cluster.workers if ray_cluster else len(gpus or [None])):
            proposal = propose_next(tunables.config, tunables.space, measured, candidates, cfg.min_gain_pct,
                                    _allows(tunables, held), elsewhere)
            if proposal is None:
                break
            candidates.append(proposal.config)  # pending: not proposed twice in a round
            reasons.append(proposal.reason)
        if not candidates:
            left = search.candidates(tunables.config, tunables.space, {search.key(p.config) for p in measured}, 0,
                                     _allows(tunables, held))
            return StopReason.NO_EXPECTED_GAIN if left else StopReason.SPACE_EXHAUSTED
        sources = [write_config(source, cfg.kernel_path, c) for c in candidates]
        if ray_cluster:
            measured = cluster.measure(ray_cluster, repo, state, sources, progress)
        elif gpus and len(gpus) > 1:
            measured = _measure_on_gpus(repo, state, sources, gpus, progress)
        else:
            measured = []
        for i, (candidate, reason, text) in enumerate(zip(candidates, reasons, sources)):
            current = read_tunables((repo.root / cfg.kernel_path).read_text(), cfg.kernel_path).config
            before = (repo.root / cfg.kernel_path).read_text()
            (repo.root / cfg.kernel_path).write_text(text)
            changed = [k for k, v in candidate.items() if current.get(k) != v]
            if len(changed) > 1 and not reason:  # one key from the best this round began with, since kept
                reason = "proposed from the best this round began with"
            tier = skillfiles.tier_of_change(tiers, changed)
            try:
                # again: the search never proposes a configuration measured before; should one's code
                # still equal an earlier iteration's, measuring it is what was asked for
                outcome = steps.step(repo, describe_change(current, candidate, reason), tier, overrides,
                                     progress, measured[i] if i < len(measured) else None, again=True,
                                     keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT, extend=decide.TUNE_EXTENDS)
            except steps.NotMeasured:  # refused (code as HEAD's, untested, a CONFIG forbidden): put back
                (repo.root / cfg.kernel_path).write_text(before)
                raise
            on_outcome(outcome)
            steps.raise_if_interrupted(outcome)
            if outcome.record.stop_reason:
                break  # a sequential run stops here: the rest of the round is not recorded
            if outcome.record.kept:
                if ray_cluster:
                    break  # the rest were compared with a best that no longer is: proposed again, there
                measured = []  # the rest were compared with a best that no longer is: measure again


def _measure_on_gpus(repo: Repo, state, sources: list[str], gpus: list[str], progress) -> list:
    """Each source compared with the best at once, one GPU each, in worktrees of HEAD."""
    head = read.rev(repo, "HEAD")
    best_source = read.file_at(repo, state.cfg.kernel_path, state.best[0])
    if progress:
        progress.begin(f"{state.cfg.test_path} on GPUs {','.join(gpus[:len(sources)])}", None)

    def task(text):
        def on(gpu):
            environment = machine.environment(state.cfg.gpu, gpu)
            return steps.compare_with_best(repo, state, head, text, best_source, environment, gpu=gpu,
                                           keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT,
                                           extend=decide.TUNE_EXTENDS), environment
        return on

    return testing.on_gpus([task(text) for text in sources], gpus[:len(sources)])


def _other_runs(repo: Repo, kernel: str, here: list[tuple[str, Record]]) -> list[tuple[str, Record]]:
    """The kernel's records that this run's history does not hold (another clone's iterations, which
    kgit pull brought), measured on the GPU this run measures on: on another GPU the figures differ."""
    gpus = {record.gpu for _, record in here if record.gpu}
    held = {commit for commit, _ in here}
    return [(commit, record) for commit, record in notes.kernel_history(repo, kernel).pairs
            if commit not in held and record.gpu in gpus]


def _measured(repo: Repo, kernel_path: str, records: list[tuple[str, Record]],
              lower_is_better: bool = False) -> list[search.Point]:
    """(configuration tried, configuration it was tried from, kept, score) for every step so far, from git.

    The score is the log of the recorded figure (higher is better), None for a step that failed."""
    names = []  # the kernel as each step tried it, and as it was before: all read by one git process
    for commit, record in records:
        # The baseline was measured too: it counts as tried from itself, a change of nothing.
        origin = commit if record.iteration == 0 or record.base is None else record.base
        names += [f"{commit}:{kernel_path}", f"{origin}:{kernel_path}"]
    texts = cat_blobs(repo, names)  # a file or commit that is not here reads as empty text
    measured = []
    for (_, record), tried, origin in zip(records, texts[::2], texts[1::2]):
        try:
            failed = record.status is Status.FAILED or record.correctness is False
            score = None if failed else search.score_of(record.value, lower_is_better)
            if score is None and not failed:
                score = float("nan")  # measured without a figure (interrupted): never again, learnt from never
            measured.append(search.Point(read_tunables(tried, kernel_path, check_config=False).config,
                                         read_tunables(origin, kernel_path, check_config=False).config,
                                         record.kept, score))
        except (KgitError, TypeError):
            continue  # a hand edit that broke or removed the literals (or the file): nothing to learn from it
    return measured
