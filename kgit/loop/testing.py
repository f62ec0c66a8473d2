"""Running a kernel's test on a commit, in a temporary worktree of that commit.

What the test measures is exactly what is committed, whatever the user edits meanwhile; every test
is registered while it runs, so that the next kgit stops it if this one is killed. A test is the
judge: one that edits a tracked file, or moves the kernel's branch, best tag or records while it
runs, fails, whatever it prints.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from kgit import runner
from kgit.config import KernelConfig
from kgit.git import read, refs, write
from kgit.git.command import Repo
from kgit.model.result import TestResult, not_run
from kgit.state import journal


def test_env(device: str, choice: str) -> tuple[dict, str | None]:
    """Environment for a kernel's test on a device of this kind (kgit.machine.vendor of choice, the gpu
    setting of kgit.yaml), and a plain-words note when it runs in Triton's interpreter."""
    if device != "cpu":
        return {}, None
    why = "gpu: cpu" if choice == "cpu" else "no GPU found"
    return {"TRITON_INTERPRET": "1"}, (
        f"{why}: running in Triton's interpreter mode on the CPU; timings are CPU timings, "
        "not comparable to any GPU"
    )


@contextlib.contextmanager
def checkouts(repo: Repo, cfg: KernelConfig, trees: dict[str, tuple[str, str | None]], device: str,
              gpu: str | None = None, progress=None):
    """Worktrees by name, each of a commit with, optionally, the kernel file replaced by a source;
    yields run(name, timing_only=False, timeout_s=None), which runs the kernel's test in that worktree
    (on a device of this kind, the measurement's environment's; on that GPU, if one is named; within
    test_timeout_s unless timeout_s says otherwise)."""
    env, device_note = test_env(device, cfg.gpu)
    if gpu is not None:
        env = {**env, "CUDA_VISIBLE_DEVICES": gpu, "HIP_VISIBLE_DEVICES": gpu}
    if progress:
        progress.begin(cfg.test_path + (f" on GPU {gpu}" if gpu is not None else ""), device_note)
    with contextlib.ExitStack() as stack:
        paths, as_written = {}, {}
        for name, (commit, source) in trees.items():
            paths[name] = stack.enter_context(worktree(repo, f"{name}-{gpu}" if gpu else name, commit))
            if source is not None:
                (paths[name] / cfg.kernel_path).write_text(source)
            as_written[name] = set(read.modified_tracked_files(paths[name]))
        guarded = [refs.branch_ref(cfg.name), refs.tag_ref(cfg.name), refs.NOTES_REF]

        def run(name: str, timing_only: bool = False, timeout_s: float | None = None) -> TestResult:
            before = read.object_ids(repo, guarded)  # one git process, not one a ref: this runs each pair
            # registered as its command line shows it
            with journal.tests_registered(repo, cfg.test_command or cfg.test_path) as on_spawn:
                run_env = {**env, runner.TIMING_ONLY: "1"} if timing_only else env
                result = runner.run_test(cfg, paths[name], timeout_s or cfg.test_timeout_s, run_env,
                                         on_tick=progress.tick if progress else None, on_spawn=on_spawn)
            edited = sorted(set(read.modified_tracked_files(paths[name])) - as_written[name])
            moved = [ref for ref, old, new in zip(guarded, before, read.object_ids(repo, guarded)) if new != old]
            if edited or moved:
                return not_run(f"the test changed {', '.join(edited + moved)} while it ran: a judge that edits "
                               "the case cannot be trusted", result.output_tail)
            return result

        yield run


def on_gpus(tasks: list[Callable[[str], object]], gpus: list[str]) -> list:
    """Run task i with GPU i, all at once; their results in order."""
    with ThreadPoolExecutor(len(tasks)) as pool:
        return list(pool.map(lambda task, gpu: task(gpu), tasks, gpus))


@contextlib.contextmanager
def worktree(repo: Repo, name: str, commit: str):
    """A temporary detached checkout of commit under .git/kgit/worktrees/, removed afterwards."""
    path = repo.kgit_dir / "worktrees" / name
    write.add_worktree(repo, path, commit)
    try:
        yield path
    finally:
        write.remove_worktree(repo, path)
