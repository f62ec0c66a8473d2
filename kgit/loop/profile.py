"""kgit profile: the kernel's test under the vendor's profiler, for the working tree or an old iteration.

What comes out (metrics.json) is kept where it cannot dirty the working tree:
  .git/kgit/profiles/<kernel>/<iterN|worktree>/  metrics.json, raw.csv, report.ncu-rep (open it in the
                                                 Nsight Compute GUI)
  .git/kgit/profiles/<kernel>/latest.json        the last profile, what 'kgit diagnose' reads by default
and, when the profiled kernel is an iteration's (the working tree's kernel unmodified, or --iteration N),
in that iteration's note under "profile" and "diagnosis", so it travels with the notes.

Where no profiler runs (none installed, no permission to read counters, a virtualized GPU, no GPU),
the profile is the benchmark's own numbers and the bottleneck the kernel's SKILL.md declares, and
it says why in one line ("source": "benchmark", "why": ...).
"""

from __future__ import annotations

import ast
import json
import shutil
import tempfile
from pathlib import Path

from kgit import config, machine
from kgit.git import notes, read, write
from kgit.git.command import Repo
from kgit.loop import testing
from kgit.loop.history import current_kernel, loop_state, missing_iteration
from kgit.profiling import diagnose, profilers, skillfiles
from kgit.profiling.saved import benchmark_fallback, head_record, profile_dir

NOTE_KERNELS = 4  # kernels kept per profile in a note (the primary first)


def jit_kernel_names(source: str) -> list[str]:
    """Names of the functions decorated with triton.jit or gluon.jit (or autotune/heuristics over it): what
    ncu sees."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                text = ast.unparse(target)
                last = text.split(".")[-1]
                if (last in ("jit", "autotune", "heuristics") and ("triton" in text or "gluon" in text)) \
                        or text == "jit":
                    names.append(node.name)
                    break
    return names


def run(repo: Repo, kernel: str | None, iteration: int | None, timeout_s: float | None = None,
        progress=None) -> dict:
    """Profile, store metrics.json and the note, diagnose; returns what the command prints. Under the lock
    (kgit.loop.recovery.locked): the note is written as a step writes one."""
    kernel = kernel or current_kernel(repo)
    records = notes.kernel_history(repo, kernel).pairs
    listed = [r for _, r in records]
    cfg = loop_state(repo, kernel, {}).cfg if listed else config.load(repo.root, kernel)
    commit, record, label, note_why = _target(repo, cfg, records, iteration)
    timeout = timeout_s or 2 * cfg.test_timeout_s
    workdir = None
    try:
        if commit is not None and iteration is not None:
            workdir = Path(tempfile.mkdtemp(prefix="kgit-profile-"))
            write.add_worktree(repo, workdir / "tree", commit)
            root = workdir / "tree"
        else:
            root = repo.root
        out_dir = profile_dir(repo, kernel) / label
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)
        result = _profile(cfg, root, out_dir, timeout, record, kernel, progress)
    finally:
        if workdir is not None:
            write.remove_worktree(repo, workdir / "tree")
            shutil.rmtree(workdir, ignore_errors=True)
    result.update(kernel=kernel, iteration=record.iteration if record else None, label=label,
                  commit=commit, saved_to=str(out_dir.relative_to(repo.root)))
    diag = diagnose.diagnose(result, listed, kernel, record.gpu if record else None,
                             _kernel_skill(repo.root, kernel))
    (out_dir / "metrics.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (profile_dir(repo, kernel) / "latest.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    if commit is not None and record is not None:  # the note names skills in kgit's layout: it travels
        write.write_note(repo, commit, record.replace(profile=_for_note(result), diagnosis=_diag_for_note(diag)))
        result["noted"] = True
    else:
        result["noted"] = False
        result["note_why"] = note_why
    diag["skills"] = [skillfiles.readable(repo.root, p) for p in diag["skills"]]  # as diagnose names them
    return {"profile": result, "diagnosis": diag}


def _target(repo, cfg, records, iteration):
    """(commit to profile or None for the working tree, its record, a label, why no note if none)."""
    if iteration is not None:
        matches = [(sha, r) for sha, r in records if r.iteration == iteration]
        if not matches:
            raise missing_iteration(cfg.name, iteration, records)
        sha, record = matches[-1]
        return sha, record, f"iter{iteration}", None
    if cfg.kernel_path in read.modified_tracked_files(repo):
        return None, None, "worktree", f"{cfg.kernel_path} has uncommitted edits: this profile is of no iteration"
    sha, record = head_record(repo, dict(records))
    if record is None:
        return None, None, "worktree", f"no kgit iteration of {cfg.name} at HEAD (run 'kgit start {cfg.name}')"
    return sha, record, f"iter{record.iteration}", None


def _profile(cfg, root: Path, out_dir: Path, timeout: float, record, kernel, progress) -> dict:
    tool, path, why = profilers.find_profiler(cfg.gpu)
    if tool is None:
        return benchmark_fallback(why, record, root, kernel)
    env, _ = testing.test_env(machine.vendor(cfg.gpu), cfg.gpu)
    names = jit_kernel_names((root / cfg.kernel_path).read_text()) if (root / cfg.kernel_path).is_file() else []
    if progress:
        progress.begin(f"{tool} {cfg.test_path} --profile", None)
    try:
        if tool == "ncu":
            ran = profilers.run_ncu(path, cfg.test_path, root, out_dir, names, timeout, env)
        else:
            ran = profilers.run_rocprof(path, cfg.test_path, root, out_dir, names, timeout, env)
    finally:
        if progress:
            progress.end()
    if ran.raw_csv:
        (out_dir / "raw.csv").write_text(ran.raw_csv)
    if not ran.ok:
        (out_dir / "profiler_output.txt").write_text(" ".join(ran.command) + "\n\n" + ran.output_tail)
        fallback = benchmark_fallback(f"{tool} gave no profile: {ran.reason}", record, root, kernel)
        return fallback
    summary = dict(ran.summary)
    summary.update(kernel_names=names, dropped_metrics=ran.dropped_metrics, command=ran.command)
    if ran.launch and "config" in ran.launch:
        summary.update({"config": ran.launch["config"],
                        "config_mismatch": configuration_mismatch(ran.launch, record)})
    return summary


def configuration_mismatch(launch: dict, record) -> str | None:
    """One line where the profiled launches ran another configuration than the benchmark of the record
    measured at their shape and dtype (an autotune timed under a profiler may pick otherwise), else None."""
    shapes = ((record.test if record else None) or {}).get("shapes") or []
    measured = next((e.get("config") for e in shapes if isinstance(e, dict) and e.get("shape") == launch.get("shape")
                     and e.get("dtype") == launch.get("dtype")), None)
    profiled = launch["config"]
    if not isinstance(measured, dict) or not isinstance(profiled, dict) or measured == profiled:
        return None
    keys = [k for k in {**measured, **profiled} if measured.get(k) != profiled.get(k)]
    what = lambda config: " ".join(f"{k}={config.get(k)}" for k in keys)  # noqa: E731
    return (f"the profiled launches ran {what(profiled)} where the benchmark ran {what(measured)}: "
            "this profile is of another configuration than the one measured")


def _kernel_skill(root: Path, kernel: str) -> str | None:
    path = skillfiles.kernel_skill_path(kernel)
    return path if (root / path).is_file() else None


def _for_note(result: dict) -> dict:
    keep = {k: v for k, v in result.items() if k not in ("command", "kernels")}
    keep["kernels"] = [{k: v for k, v in kern.items() if k != "stalls"} for kern in result.get("kernels", [])[:NOTE_KERNELS]]
    return keep


def _diag_for_note(diag: dict) -> dict:
    return {k: diag[k] for k in ("bound", "why", "how", "tier_order", "next_tier", "hints", "skills")}


