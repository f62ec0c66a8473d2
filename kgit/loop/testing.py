"""Running a kernel's test on a commit, in a temporary worktree of that commit.

What the test measures is exactly what is committed, whatever the user edits meanwhile; every test
is registered while it runs, so that the next kgit stops it if this one is killed.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

from kgit import device, runner
from kgit.config import KernelConfig
from kgit.git import read, write
from kgit.git.run import Repo
from kgit.model.result import TestResult
from kgit.state import journal


def run_on_commit(repo: Repo, cfg: KernelConfig, commit: str, progress=None) -> TestResult:
    """Run the kernel's test on commit; progress, if given, hears of the start and of each tick."""
    env, device_note = device.test_env(cfg.gpu)
    if progress:
        progress.begin(cfg.test_path, device_note)
    with worktree(repo, "test", commit) as path, _registered(repo, cfg.test_path) as on_spawn:
        return runner.run_test(
            cfg.test_path, path, cfg.test_timeout_s, env, cfg.target_metric,
            on_tick=progress.tick if progress else None, on_spawn=on_spawn, test_args=cfg.test_args,
        )


def run_sources_on_gpus(repo: Repo, cfg: KernelConfig, sources: list[str], gpus: list[str],
                        progress=None) -> list[TestResult]:
    """Test several versions of the kernel at once, each in its own worktree of HEAD and on its own GPU."""
    env, device_note = device.test_env(cfg.gpu)
    if progress:
        progress.begin(f"{cfg.test_path} on GPUs {','.join(gpus)}", device_note)
    head = read.rev(repo, "HEAD")

    def test_one(source, gpu) -> TestResult:
        with worktree(repo, f"gpu{gpu}", head) as path, _registered(repo, cfg.test_path) as on_spawn:
            (path / cfg.kernel_path).write_text(source)
            visible = {"CUDA_VISIBLE_DEVICES": gpu, "HIP_VISIBLE_DEVICES": gpu}
            return runner.run_test(cfg.test_path, path, cfg.test_timeout_s, {**env, **visible}, cfg.target_metric,
                                   on_spawn=on_spawn, test_args=cfg.test_args)

    with ThreadPoolExecutor(len(sources)) as pool:
        return list(pool.map(test_one, sources, gpus))


@contextlib.contextmanager
def worktree(repo: Repo, name: str, commit: str):
    """A temporary detached checkout of commit under .git/kgit/worktrees/, removed afterwards."""
    path = repo.kgit_dir / "worktrees" / name
    write.add_worktree(repo, path, commit)
    try:
        yield path
    finally:
        write.remove_worktree(repo, path)


@contextlib.contextmanager
def _registered(repo: Repo, test_path: str):
    """An on_spawn callback that registers the test's pid until it ends (see journal.register_test)."""
    pids = []

    def on_spawn(pid: int) -> None:
        pids.append(pid)
        journal.register_test(repo, pid, test_path)

    try:
        yield on_spawn
    finally:
        for pid in pids:
            journal.unregister_test(repo, pid)
