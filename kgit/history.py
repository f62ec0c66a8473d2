"""Reading the records back: which kernel, its log, its best iteration, its status, one iteration."""

from __future__ import annotations

from kgit import config, loop, notes, report, store
from kgit.errors import KgitError


def resolve_kernel(repo: store.Repo, kernel: str | None) -> str:
    """The kernel named, else the one of the current opt/ branch, else the only one with records."""
    if kernel:
        return config.check_kernel_name(kernel)
    branch = store.current_branch(repo) or ""
    if branch.startswith(store.BRANCH_PREFIX):
        return branch[len(store.BRANCH_PREFIX):]
    kernels = sorted({r["kernel"] for _, r in notes.all_records(repo)})
    if len(kernels) == 1:
        return kernels[0]
    if not kernels:
        raise KgitError("no kgit records in this repository: run 'kgit start <kernel>' first")
    raise KgitError(f"several kernels have records ({', '.join(kernels)}): name one")


def log(repo: store.Repo, kernel: str) -> list[dict]:
    """Every iteration of the kernel, reverted ones included, each with the commit its note is on."""
    return _with_commits(loop.kernel_records(repo, kernel), kernel)


def _deciding(repo: store.Repo, kernel: str) -> list[dict]:
    """The records that decide the loop here (loop.deciding_records), each with its commit."""
    return _with_commits(loop.deciding_records(repo, kernel), kernel)


def _with_commits(pairs: list[tuple[str, dict]], kernel: str) -> list[dict]:
    if not pairs:
        raise KgitError(f"no records for {kernel}: run 'kgit start {kernel}' first")
    return [{**record, "commit": sha} for sha, record in pairs]


def best(repo: store.Repo, kernel: str) -> dict:
    record = loop.best_record(_deciding(repo, kernel))
    if record is None:
        raise KgitError(f"{kernel} has no successful iteration")
    return {**record, "tag": store.tag_name(kernel), "tag_commit": store.rev(repo, f"refs/tags/{store.tag_name(kernel)}")}


def status(repo: store.Repo, kernel: str, overrides: dict) -> dict:
    records = _deciding(repo, kernel)
    cfg = loop.load_config(repo, records, overrides)
    top = loop.best_record(records)
    target = loop.target_value(cfg, top) if top else None
    branch = store.branch_name(kernel)
    on_branch = store.current_branch(repo) == branch
    return {
        "kernel": kernel,
        "branch": branch,
        "on_branch": on_branch,
        "kernel_path": cfg.kernel_path,
        "test_path": cfg.test_path,
        "iteration": loop.last_iteration(records),
        "max_iterations": cfg.max_iterations,
        "metric": top["metric"] if top else None,
        "target": target,
        "best": top,
        "gap": target - top["value"] if target is not None and top else None,
        "gap_pct": (target - top["value"]) / target * 100 if target and top else None,
        "stopped": loop.stop_reason(records, cfg),
        "kernel_modified": on_branch and cfg.kernel_path in store.modified_tracked_files(repo),
        "reverted": sum(r["status"] not in loop.KEPT for r in records),
    }


def show(repo: store.Repo, kernel: str, iteration: int) -> dict:
    """One iteration: its record and the change it tried (for a revert, the attempt's diff)."""
    matches = [r for r in log(repo, kernel) if r["iteration"] == iteration]
    if not matches:
        raise KgitError(f"{kernel} has no iteration {iteration}")
    record = matches[-1]
    parent = store.first_parent(repo, record["commit"])
    change = store.diff(repo, parent, record["commit"], exclude=[report.README]) if parent else ""
    return {**record, "diff": change}
