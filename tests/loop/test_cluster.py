"""kgit tune --ray: proposals measured at once on the workers of a local Ray instance, each in a clone
of the repository made from a bundle, and recorded here in the order they were proposed."""

import pytest

from workspace import KERNEL, LANDSCAPE


def test_tune_on_ray_measures_each_round_on_workers_and_records_in_order(ws):
    pytest.importorskip("ray")
    (ws.root / KERNEL).write_text(LANDSCAPE + "SLEEP = 0.3\n")
    ws.git("add", "-A")
    ws.git("commit", "-qm", "a landscape, slow enough to see two workers overlap")
    result = ws.ok("tune", "fake", "--ray", "local", "--ray-workers", "2", "--max-iterations", "8", "--json").json()
    records = result["iterations"]
    assert [r["iteration"] for r in records] == list(range(len(records)))
    # no configuration measured twice: each is the best of its time with the action's keys changed (the
    # same action, such as BLOCK 4096->2048, may come twice from two different bests)
    best, tried = {"BLOCK": 256, "WARPS": 2}, []  # workspace.LANDSCAPE's CONFIG
    for r in records[1:]:
        moves = (move.split(" ") for move in r["action"].split(" (")[0].split(", "))
        config = {**best, **{name: int(change.split("->")[1]) for name, change in moves}}
        tried.append(tuple(sorted(config.items())))
        best = config if r["status"] in ("IMPROVED", "TARGET_MET") else best
    assert len(tried) == len(set(tried)) and result["stop_reason"] == "MAX_ITERATIONS"
    # measured on the workers, in scratch clones, never in this repository or its worktrees
    on_workers = [r["test"] for r in records[1:] if r["test"]]
    assert on_workers and all("kgit-worker-" in t["cwd"] for t in on_workers)
    # a round: two proposals measured at once on two workers
    overlaps = [(a, b) for a, b in zip(on_workers, on_workers[1:]) if a["cwd"] != b["cwd"]
                and a["t_start"] < b["t_end"] and b["t_start"] < a["t_end"]]
    assert overlaps, [(t["cwd"], t["t_start"], t["t_end"]) for t in on_workers]
    assert records[-1]["value"] is not None and result["best"]["value"] > records[0]["value"]
    assert ws.git("worktree", "list").count("\n") == 0
    ws.check_invariants()


def test_ray_options_that_contradict_each_other_are_refused(ws):
    assert "--ray and --gpus both given" in ws.refused("tune", "fake", "--ray", "local", "--gpus", "0,1")
    assert "--ray-workers without --ray" in ws.refused("tune", "fake", "--ray-workers", "2")


def test_without_ray_installed_the_refusal_says_how_to_get_it(ws, tmp_path):
    (tmp_path / "ray").mkdir()  # a Python path on which 'import ray' fails, as where it is not installed
    (tmp_path / "ray" / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    before = ws.snapshot()
    run = ws.kgit("tune", "fake", "--ray", "local", env={"PYTHONPATH": str(tmp_path)})
    assert run.returncode == 1 and run.stderr.strip() == "kgit: --ray needs Ray: pip install 'kgit[ray]' (or pip install ray)"
    assert ws.snapshot() == before  # refused before any baseline or commit


def test_a_worker_that_never_answers_ends_the_round_with_a_refusal(ws, monkeypatch):
    # On the H200 a worker's result never came and ray.get waited for ever: the wait is bounded by every
    # run of a decision at the test timeout plus a minute to clone: a tune's decision may take twice
    # max_pairs pairs (kgit.model.noise.Bound), so 2 x 2 x max_pairs + 2 runs.
    import sys
    from types import SimpleNamespace

    from kgit.errors import KgitError
    from kgit.git.command import Repo
    from kgit.loop import cluster

    class GetTimeoutError(Exception):
        pass

    waited = []

    def get(refs, timeout=None):
        waited.append(timeout)
        raise GetTimeoutError()

    monkeypatch.setitem(sys.modules, "ray", SimpleNamespace(
        put=lambda data: data, get=get, exceptions=SimpleNamespace(GetTimeoutError=GetTimeoutError)))
    workers = cluster.Cluster(workers=1, gpus_per_task=0, task=SimpleNamespace(remote=lambda *args: "a result"))
    state = SimpleNamespace(cfg=SimpleNamespace(test_path="test_fake.py", test_timeout_s=5.0, max_pairs=3))
    with pytest.raises(KgitError, match=r"a Ray worker returned no result in 130 s; this round was not recorded"):
        cluster.measure(workers, Repo(ws.root, ws.root / ".git"), state, ["the candidate's source"])
    assert waited == [5.0 * (2 * 2 * 3 + 2) + 60]
