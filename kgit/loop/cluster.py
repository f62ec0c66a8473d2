"""kgit tune --ray: each round's candidates measured at once on the workers of a Ray cluster.

Every candidate goes to a worker (with one GPU, when the cluster has GPUs) as a git bundle of HEAD and
its kernel source. The worker clones the bundle into a scratch folder and compares the candidate
with the best there, pair by pair on its own device (kgit.loop.steps.compare_with_best, as on this
machine), and returns the comparison and the environment it was measured in. kgit records the
results here, in the order it proposed them, so that the history reads as a sequential run's would.

Ray is an optional extra (`pip install kgit[ray]`) and is imported only here, only when --ray is given.
Each worker needs git and kgit with its harness extra (not the model search: it runs here). The address
is Ray's: "local" starts a Ray instance on this machine; "auto" or "ray://host:10001" joins a
running cluster.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from kgit import machine
from kgit.errors import KgitError
from kgit.git import read
from kgit.git import remote as remotes
from kgit.git.command import Repo
from kgit.loop import steps
from kgit.loop.history import LoopState
from kgit.model import decide
from kgit.model.noise import Bound


@dataclass
class Cluster:
    workers: int  # candidates measured at once: the cluster's GPUs, or as asked
    gpus_per_task: int  # 1 on a cluster with GPUs: each candidate has its own; 0 on CPUs only
    task: object  # the Ray remote function


def connect(address: str, workers: int | None) -> Cluster:
    try:
        import ray
    except ImportError:
        raise KgitError("--ray needs Ray", "pip install 'kgit[ray]' (or pip install ray)") from None
    ray.init(address=None if address == "local" else address, include_dashboard=False, log_to_driver=False,
             ignore_reinit_error=True)
    gpus = int(ray.cluster_resources().get("GPU", 0))
    per_task = 1 if gpus else 0
    count = workers or max(gpus, 1)
    if workers and gpus and workers > gpus:
        raise KgitError(f"--ray-workers {workers}: the cluster has {gpus} GPUs", "ask for as many workers as GPUs")
    return Cluster(count, per_task, ray.remote(num_gpus=per_task, max_retries=0)(_measure_in_clone))


def disconnect() -> None:
    import ray

    ray.shutdown()


def measure(cluster: Cluster, repo: Repo, state: LoopState, sources: list[str], progress=None) -> list:
    """(comparison, environment) of each source against the best, one worker each, in order."""
    import ray

    if progress:
        progress.begin(f"{state.cfg.test_path} on {len(sources)} Ray workers", None)
    head = read.rev(repo, "HEAD")
    shipped = ray.put(remotes.bundle(repo, "HEAD"))
    # the longest a worker may take: every run of a decision at its test timeout, warm-ups included, and
    # a minute to clone. Past it the worker is lost (seen on the H200: a wait with no end in ray.get).
    pairs = Bound.of(state.cfg.max_pairs, decide.TUNE_EXTENDS).cap  # a tune's decision may go past max_pairs
    bound = state.cfg.test_timeout_s * (2 * pairs + 2) + 60
    try:
        return ray.get([cluster.task.remote(shipped, head, state, source) for source in sources], timeout=bound)
    except ray.exceptions.GetTimeoutError:
        raise KgitError(f"a Ray worker returned no result in {bound:.0f} s; this round was not recorded",
                        "see the workers' logs (ray logs), then run kgit tune again: it goes on from the best") from None


def _measure_in_clone(bundle: bytes, head: str, state: LoopState, source: str):
    """On a worker: the candidate (HEAD with the kernel replaced by source) against the best."""
    with tempfile.TemporaryDirectory(prefix="kgit-worker-") as scratch:
        repo = remotes.clone_bundle(bundle, Path(scratch) / "repo")
        environment = machine.environment(state.cfg.gpu)
        best_source = read.file_at(repo, state.cfg.kernel_path, state.best[0])
        return steps.compare_with_best(repo, state, head, source, best_source, environment,
                                       keep_above_pct=decide.TUNE_KEEP_ABOVE_PCT,
                                       extend=decide.TUNE_EXTENDS), environment
