"""Which profiler runs here, and what kgit says when it cannot: ncu's failures in one plain line,
a metric this ncu lacks dropped and the run retried, the benchmark's numbers when no profiler runs."""

import json
import os
from pathlib import Path


def test_a_metric_this_ncu_lacks_is_dropped_and_the_run_retried(on_nvidia, tmp_path, ncu_env):
    out = on_nvidia.ok("profile", "--json", env=ncu_env(tmp_path, mode="unknown")).json()
    assert out["source"] == "profiler"
    assert out["dropped_metrics"] == ["lts__t_sector_hit_rate.pct"]
    assert len((tmp_path / "ncu_args.log").read_text().splitlines()) == 2


def test_no_permission_falls_back_in_one_plain_line(on_nvidia, tmp_path, ncu_env):
    run = on_nvidia.ok("profile", env=ncu_env(tmp_path, mode="perm"))
    first = run.stdout.splitlines()[0]
    assert first.startswith("kgit: no profiler: ncu gave no profile: no permission") and "ERR_NVGPUCTRPERM" in first
    assert "benchmark: 100 GBps" in run.stdout
    assert "Traceback" not in run.stderr
    note = json.loads(on_nvidia.git("notes", "--ref=refs/notes/kgit", "show", "HEAD"))
    assert note["profile"]["source"] == "benchmark"
    assert on_nvidia.git("status", "--porcelain") == ""


def test_without_ncu_on_path_the_benchmark_and_declared_bottleneck_are_used(on_nvidia):
    skill = on_nvidia.root / "skills/kernels/fake/SKILL.md"
    skill.write_text("---\nname: fake\ndescription: a stand-in kernel\nbottleneck: compute\n---\n# fake\n")
    on_nvidia.git("add", "-A")
    on_nvidia.git("commit", "-qm", "declare the bottleneck")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "ncu").exists())
    run = on_nvidia.ok("profile", "--json", env={"PATH": path})
    assert run.stderr.strip().splitlines()[-1] == \
        "kgit: no profiler: Nsight Compute (ncu) is not installed or not on PATH"
    out = run.json()
    assert out["source"] == "benchmark" and out["value"] == 100.0 and out["pct_of_peak"] == 10.0
    assert out["declared_bottleneck"] == "compute"
    # the declared bound, which no counter confirmed: tier 1 first
    assert out["diagnosis"]["bound"] == "compute" and out["diagnosis"]["tier_order"] == [1, 3, 5]
    assert "skills/kernels/fake/SKILL.md" in out["diagnosis"]["skills"]


def test_cpu_only_machine_says_so(ws):
    ws.ok("start", "fake", "--gpu", "cpu")
    run = ws.ok("profile")
    assert run.stdout.splitlines()[0] == "kgit: no profiler: no GPU on this machine (CPU only): no profiler can run"


HARNESS_PROFILE = '{"profile": true, "range": "kgit-profile", "status": "profiled"}'  # what its --profile prints


def _ncu_calls(tmp_path, mode, ncu_env, monkeypatch, prints=HARNESS_PROFILE):
    """run_ncu under the stand-in ncu in `mode`, for a kernel file naming `_kernel` and a test that prints
    `prints`: (its result, the (NVTX range, kernel-name filter) of each ncu call, None where absent)."""
    from kgit.profiling import profilers

    test = tmp_path / "test_k.py"
    test.write_text(f"print({prints!r})\n")
    env = ncu_env(tmp_path, mode=mode)
    monkeypatch.setenv("PATH", env["PATH"])
    run = profilers.run_ncu(profilers.find_profiler("nvidia")[1], str(test), tmp_path, tmp_path, ["_kernel"], 30,
                            env)
    calls = [json.loads(line) for line in (tmp_path / "ncu_args.log").read_text().splitlines()]
    after = lambda args, option: args[args.index(option) + 1] if option in args else None  # noqa: E731
    return run, [(after(c, "--nvtx-include"), after(c, "--kernel-name")) for c in calls]


def test_ncu_reads_the_named_kernels_in_the_harness_range_only(tmp_path, ncu_env, monkeypatch):
    run, calls = _ncu_calls(tmp_path, "ok", ncu_env, monkeypatch)
    assert run.ok and calls == [("kgit-profile/", "regex:^(_kernel)$")]


def test_when_nothing_was_profiled_the_range_then_the_name_filter_is_dropped(tmp_path, ncu_env, monkeypatch):
    run, calls = _ncu_calls(tmp_path, "nokernels", ncu_env, monkeypatch)
    assert calls == [("kgit-profile/", "regex:^(_kernel)$"), (None, "regex:^(_kernel)$"), (None, None)]
    assert not run.ok and run.reason == ("ncu profiled no kernel launch: does the test's --profile mode "
                                         "launch the kernel?")


def test_a_test_without_the_range_is_profiled_again_without_it_and_keeps_the_name_filter(
        tmp_path, ncu_env, monkeypatch):
    run, calls = _ncu_calls(tmp_path, "norange", ncu_env, monkeypatch, prints="a benchmark of its own")
    assert run.ok and calls == [("kgit-profile/", "regex:^(_kernel)$"), (None, "regex:^(_kernel)$")]


def test_a_harness_test_whose_launches_the_names_miss_keeps_the_range(tmp_path, ncu_env, monkeypatch):
    # the harness says it ran its launches in the range: the names are what missed them
    run, calls = _ncu_calls(tmp_path, "namemiss", ncu_env, monkeypatch)
    assert run.ok and calls == [("kgit-profile/", "regex:^(_kernel)$"), ("kgit-profile/", None)]


def test_the_profiler_for_each_choice(monkeypatch, tmp_path):
    from kgit.profiling import profilers

    monkeypatch.setenv("PATH", str(tmp_path))  # nothing installed
    monkeypatch.setattr(profilers, "NCU_PLACES", [])
    assert profilers.find_profiler("cpu") == (None, None, "no GPU on this machine (CPU only): no profiler can run")
    assert profilers.find_profiler("nvidia") == (None, None, "Nsight Compute (ncu) is not installed or not on PATH")
    assert profilers.find_profiler("amd") == (None, None, "rocprofv3 is not installed or not on PATH")
    tool = tmp_path / "rocprofv3"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert profilers.find_profiler("amd") == ("rocprofv3", str(tool), "")
