"""kgit context: everything an agent needs for its next change, in one object.

The loop's short-term memory (skills/ is its long-term memory): the kernel and its files, the target
and the gap, the best so far, every change already tried with its tier and result (so that a failed
idea is not tried twice), the template's CONFIG with its space and each key's tier, the diagnosis, the
next tier and the skill files to read.
"""

from __future__ import annotations

from pathlib import Path

from kgit import machine
from kgit.errors import KgitError
from kgit.git.command import Repo
from kgit.loop import history
from kgit.model import decide, tunables
from kgit.model.doubts import doubts
from kgit.profiling import diagnose, saved, skillfiles

LOOP_SKILL = "skills/optimize-loop/SKILL.md"


# What a change can and cannot show when the test runs in Triton's interpreter on a CPU.
INTERPRETER_NOTE = ("no GPU: the test runs in Triton's interpreter on tiny shapes, one program at a time; "
                    "num_warps, num_stages, eviction and cache hints do nothing there, and timings are CPU "
                    "timings: only changes of the algorithm (work and memory traffic per element) can show")


def build(repo: Repo, kernel: str, overrides: dict | None = None) -> dict:
    """overrides: the options of the command the context is for (kgit run's --max-iterations, say)."""
    log = history.log(repo, kernel)
    pairs = log.pairs
    records = [r for _, r in pairs]
    state = history.status(repo, kernel, overrides)
    top = state.best
    _, head = saved.head_record(repo, dict(pairs))
    prof = saved.latest(repo, kernel)
    stale = None
    vendor = machine.vendor()
    on_gpu = vendor != "cpu"
    if prof is None:
        prof = saved.benchmark_fallback(_no_profile(on_gpu), head, repo.root, kernel)
    elif head is not None and prof.get("iteration") not in (None, head.iteration):
        stale = (f"the profile is of iteration {prof.get('iteration')}, HEAD holds iteration {head.iteration}: "
                 + ("run 'kgit profile' again" if on_gpu else "no profiler can run here to refresh it"))
    kernel_skill = skillfiles.kernel_skill_path(kernel)
    has_skill = (repo.root / kernel_skill).is_file()
    diag = diagnose.diagnose(prof, records, kernel, top.gpu if top else None, kernel_skill if has_skill else None)
    tried = [
        {
            "iteration": r.iteration, "action": r.action, "tier": r.tier, "status": r.status.value,
            "kept": r.kept, "on_branch": r.status.on_branch, "metric": r.metric, "value": r.value,
            "delta_pct": r.delta_pct, "reason": r.reason, "commit": sha,
            "checks": doubts(r),  # what to look at before trusting it (kgit.model.doubts): a gain over 2x...
        }
        for sha, r in pairs if r.iteration > 0
    ]
    nxt = diag["next_tier"]
    if state.unrecorded:  # a step would refuse (kgit.loop.steps.check_recorded): settle the hand commits first
        sha, subject = state.unrecorded[-1]
        next_step = (f"{state.kernel_path} was committed past kgit from {sha[:10]} ({subject[:50]}), and a step "
                     f"refuses until it is measured: {history.hand_commit_advice(sha)}")
    elif state.stopped:
        next_step = f"the loop has stopped ({state.stopped}): report with 'kgit report'"
    elif nxt is None:
        next_step = ("every tier of the order was tried: stop; the branch holds the best (kgit report renders "
                     "the log)")
    else:
        next_step = (f"edit {state.kernel_path}: ONE change from tier {nxt} ({diagnose.TIER_NAMES[nxt]}), "
                     f"then: kgit step -m \"<the change>\" --tier {nxt}")
    return {
        "kernel": kernel,
        "branch": state.branch,
        "files": {"kernel": state.kernel_path, "test": state.test_path,
                  "kernel_skill": kernel_skill if has_skill else None},
        "gpu": top.gpu if top else None,
        "metric": state.metric,
        "better": state.better,  # "lower": a time, whose best lies below the baseline
        "target": state.target,
        "best": {"iteration": top.iteration, "action": top.action, "value": top.value,
                 "pct_of_peak": top.pct_of_peak, "commit": state.best_commit} if top else None,
        "gap": state.gap,
        "gap_pct": state.gap_pct,
        # what kgit start measured of the noise: a change smaller than smallest_keepable_pct is not kept
        "detectable": _detectable(records),
        "iteration": state.iteration,
        "max_iterations": state.max_iterations,
        "stopped": state.stopped.value if state.stopped else None,
        "tried": tried,
        "tunables": _tunables(repo.root, kernel, state.kernel_path),
        "profile": {k: prof.get(k) for k in ("source", "tool", "why", "iteration", "primary", "metrics", "stalls")},
        "profile_stale": stale,
        "diagnosis": {k: diag[k] for k in ("bound", "why", "how", "tier_order", "tried_tiers", "next_tier",
                                            "next_tier_name", "tiers_exhausted", "hints")},
        "skills": [skillfiles.readable(repo.root, p) for p in dict.fromkeys([LOOP_SKILL, *diag["skills"]])],
        "next_step": next_step,
        "invalid_notes": [note.to_json() for note in log.invalid],
        "platform": {"device": vendor, "profiler": on_gpu, "note": None if on_gpu else INTERPRETER_NOTE},
    }


def _tunables(root: Path, kernel: str, kernel_path: str) -> dict | None:
    """What a tier-1 change may set without reading the kernel file's code: its CONFIG, the values
    CONFIG_SPACE allows (a step refuses others), the constraints, and each key's tier (the kernel skill's
    `tunables:`, as kgit tune records it: tier 1 for a key it does not map). None for a kernel file
    without the two literal dicts (a module constant is changed by hand, one a step)."""
    path = root / kernel_path
    try:
        found = tunables.declared(path.read_text(), kernel_path)
    except OSError:
        return None
    except KgitError as e:  # a CONFIG outside its own space: what a step would refuse, said here first
        return {"error": str(e)}
    if found is None:
        return None
    tiers = skillfiles.tunable_tiers(root, kernel)
    return {"config": found.config, "space": found.space, "constraints": [c.text for c in found.constraints],
            "tiers": {key: skillfiles.tier_of_change(tiers, [key]) for key in found.config}}


def _detectable(records: list) -> dict | None:
    spread = decide.measured_at_start(records)
    if not spread:
        return None
    return {"decides_on": spread.decides_on, "smallest_keepable_pct": spread.smallest_keepable_pct,
            "max_pairs": spread.max_pairs, "sd_pct": spread.sd_pct, "why": spread.why}


def _no_profile(on_gpu: bool) -> str:
    return ("no profile yet: run 'kgit profile'" if on_gpu else
            "no GPU here, so no profiler can run: the diagnosis comes from the benchmark alone")


def diagnosis(repo: Repo | None, kernel: str | None, metrics_file=None) -> dict:
    """The diagnosis of --metrics FILE, else of the kernel's last profile, else of its benchmark."""
    pairs = history.log(repo, kernel).pairs if repo is not None and kernel else []
    records = [r for _, r in pairs]
    head = saved.head_record(repo, dict(pairs))[1] if repo is not None and records else None
    if metrics_file is not None:
        prof = saved.load_metrics_file(metrics_file)
    else:
        if repo is None or kernel is None:
            raise KgitError("no kernel: run inside a kgit repository on an opt/<kernel> branch, or give --metrics FILE")
        prof = saved.latest(repo, kernel) or saved.benchmark_fallback(
            _no_profile(machine.vendor() != "cpu"), head, repo.root, kernel)
    top = decide.best_record(records)
    kernel_skill = skillfiles.kernel_skill_path(kernel) if kernel else None
    if kernel_skill and (repo is None or not (repo.root / kernel_skill).is_file()):
        kernel_skill = None
    diag = diagnose.diagnose(prof, records, kernel or prof.get("kernel") or "(unknown)", top.gpu if top else None,
                             kernel_skill)
    diag["skills"] = [skillfiles.readable(repo.root if repo else Path.cwd(), p) for p in diag["skills"]]
    diag["profile_source"] = prof.get("source")
    diag["profile_why"] = prof.get("why")
    return diag
