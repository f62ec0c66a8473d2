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

from kgit import config, diagnose, loop, profile_runner, runner, skillfiles, store
from kgit.errors import KgitError

NOTE_KERNELS = 4  # kernels kept per profile in a note (the primary first)


def jit_kernel_names(source: str) -> list[str]:
    """Names of the functions decorated with triton.jit (or autotune/heuristics over it): what ncu sees."""
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
                if (last in ("jit", "autotune", "heuristics") and "triton" in text) or text == "jit":
                    names.append(node.name)
                    break
    return names


def profile_dir(repo: store.Repo, kernel: str) -> Path:
    return repo.kgit_dir / "profiles" / kernel


def head_record(repo: store.Repo, records: dict[str, dict]) -> tuple[str | None, dict | None]:
    """The kept iteration whose kernel HEAD holds: HEAD's own record, or the nearest first-parent one
    (after a revert HEAD is a log-only commit on top of the last kept kernel)."""
    head = store.rev(repo, "HEAD")
    if head is None:
        return None, None
    for sha in store.first_parents(repo, head):
        record = records.get(sha)
        if record is not None and record["status"] in loop.KEPT:
            return sha, record
    return None, None


def benchmark_fallback(why: str, record: dict | None, root: Path, kernel: str) -> dict:
    """The profile when no profiler ran: the benchmark's numbers and the declared bottleneck."""
    declared, declared_why = skillfiles.declared_bottleneck(root, kernel)
    test = (record or {}).get("test") or {}
    return {
        "tool": None,
        "source": "benchmark",
        "why": why,
        "declared_bottleneck": declared,
        "declared_why": declared_why,
        "metric": (record or {}).get("metric"),
        "value": (record or {}).get("value"),
        "pct_of_peak": test.get("pct_of_peak"),
        "pct_of_copy": test.get("pct_of_copy"),
        "latency_us": test.get("latency_us"),
        "cpu_timing": bool(test.get("cpu_timing")),
        "iteration": (record or {}).get("iteration"),
        "metrics": {},
        "stalls": [],
    }


def run(repo: store.Repo, kernel: str | None, iteration: int | None, timeout_s: float | None = None,
        progress=None) -> dict:
    """Profile, store metrics.json and the note, diagnose; returns what the command prints."""
    with loop.session(repo, writes=True) as recovered:
        kernel = kernel or loop.current_kernel(repo)
        records = loop.kernel_records(repo, kernel)
        listed = [r for _, r in records]
        cfg = loop.load_config(repo, listed, {}) if listed else config.load(repo.root, kernel)
        commit, record, label, note_why = _target(repo, cfg, records, iteration)
        timeout = timeout_s or 2 * cfg.test_timeout_s
        workdir = None
        try:
            if commit is not None and iteration is not None:
                workdir = Path(tempfile.mkdtemp(prefix="kgit-profile-"))
                store.add_worktree(repo, workdir / "tree", commit)
                root = workdir / "tree"
            else:
                root = repo.root
            out_dir = profile_dir(repo, kernel) / label
            shutil.rmtree(out_dir, ignore_errors=True)
            out_dir.mkdir(parents=True)
            result = _profile(cfg, root, out_dir, timeout, record, kernel, progress)
        finally:
            if workdir is not None:
                store.remove_worktree(repo, workdir / "tree")
                shutil.rmtree(workdir, ignore_errors=True)
        result.update(kernel=kernel, iteration=record["iteration"] if record else None, label=label,
                      commit=commit, saved_to=str(out_dir.relative_to(repo.root)))
        diag = diagnose.diagnose(result, listed, kernel, (record or {}).get("gpu"),
                                 _kernel_skill(repo.root, kernel))
        (out_dir / "metrics.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
        (profile_dir(repo, kernel) / "latest.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
        if commit is not None and record is not None:
            store.write_note(repo, commit, {**record, "profile": _for_note(result), "diagnosis": _diag_for_note(diag)})
            result["noted"] = True
        else:
            result["noted"] = False
            result["note_why"] = note_why
        return {"profile": result, "diagnosis": diag, "recovered": recovered}


def _target(repo, cfg, records, iteration):
    """(commit to profile or None for the working tree, its record, a label, why no note if none)."""
    if iteration is not None:
        matches = [(sha, r) for sha, r in records if r["iteration"] == iteration]
        if not matches:
            raise KgitError(f"{cfg.name} has no iteration {iteration}")
        sha, record = matches[-1]
        return sha, record, f"iter{iteration}", None
    if cfg.kernel_path in store.modified_tracked_files(repo):
        return None, None, "worktree", f"{cfg.kernel_path} has uncommitted edits: this profile is of no iteration"
    sha, record = head_record(repo, dict(records))
    if record is None:
        return None, None, "worktree", f"no kgit iteration of {cfg.name} at HEAD (run 'kgit start {cfg.name}')"
    return sha, record, f"iter{record['iteration']}", None


def _profile(cfg, root: Path, out_dir: Path, timeout: float, record, kernel, progress) -> dict:
    tool, path, why = profile_runner.find_profiler(cfg.gpu)
    if tool is None:
        return benchmark_fallback(why, record, root, kernel)
    env, _ = runner.device_env(cfg.gpu)
    names = jit_kernel_names((root / cfg.kernel_path).read_text()) if (root / cfg.kernel_path).is_file() else []
    if progress:
        progress.begin(f"{tool} {cfg.test_path} --profile", None)
    try:
        if tool == "ncu":
            ran = profile_runner.run_ncu(path, cfg.test_path, root, out_dir, names, timeout, env)
        else:
            ran = profile_runner.run_rocprof(path, cfg.test_path, root, out_dir, names, timeout, env)
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
    return summary


def _kernel_skill(root: Path, kernel: str) -> str | None:
    path = skillfiles.kernel_skill_path(kernel)
    return path if (root / path).is_file() else None


def _for_note(result: dict) -> dict:
    keep = {k: v for k, v in result.items() if k not in ("command", "kernels", "recovered")}
    keep["kernels"] = [{k: v for k, v in kern.items() if k != "stalls"} for kern in result.get("kernels", [])[:NOTE_KERNELS]]
    return keep


def _diag_for_note(diag: dict) -> dict:
    return {k: diag[k] for k in ("bound", "why", "how", "tier_order", "next_tier", "hints", "skills")}


def latest(repo: store.Repo, kernel: str) -> dict | None:
    """The last profile of this kernel: .git/kgit/profiles/<kernel>/latest.json, else the newest note's."""
    path = profile_dir(repo, kernel) / "latest.json"
    if path.is_file():
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            pass
    noted = [r for _, r in loop.kernel_records(repo, kernel) if r.get("profile")]
    return noted[-1]["profile"] if noted else None


def load_metrics_file(path: Path) -> dict:
    """A metrics.json written by kgit, or a raw ncu CSV (what a user captured by hand)."""
    from kgit import ncu

    if not path.is_file():
        raise KgitError(f"--metrics: file {path} does not exist")
    text = path.read_text(errors="replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        launches = ncu.parse_csv(text)
        if not launches:
            raise KgitError(f"--metrics: {path} is neither kgit's metrics.json nor an ncu CSV") from None
        return ncu.summarize(launches, None)
    if not isinstance(data, dict) or ("metrics" not in data and "source" not in data):
        raise KgitError(f"--metrics: {path} is not a kgit metrics.json (no 'metrics' key)")
    data.setdefault("source", "profiler")
    return data
