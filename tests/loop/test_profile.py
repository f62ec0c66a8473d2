"""kgit profile: the profiler run (with a stand-in ncu, tests/profiling/conftest.py), the note and the
files it leaves, old iterations, uncommitted edits; the @triton.jit names it filters ncu by."""

import json
from pathlib import Path

import pytest


def test_jit_names_are_read_from_the_kernel_file():
    from kgit.loop.profile import jit_kernel_names

    source = (
        "import triton\nfrom triton import jit\n"
        "@triton.jit\ndef _a(x): pass\n"
        "@triton.jit(do_not_specialize=['n'])\ndef _b(x): pass\n"
        "@triton.autotune(configs=[], key=[])\n@triton.jit\ndef _c(x): pass\n"
        "@jit\ndef _d(x): pass\n"
        "@gluon.jit\ndef _e(x): pass\n"
        "@functools.cache\ndef _cached(x): pass\n"
        "def launcher(x): pass\n"
    )
    assert jit_kernel_names(source) == ["_a", "_b", "_c", "_d", "_e"]
    assert jit_kernel_names("def broken(:") == []


def test_profile_runs_ncu_keeps_metrics_in_the_note_and_leaves_the_tree_clean(on_nvidia, tmp_path, ncu_env):
    out = on_nvidia.ok("profile", "--json", env=ncu_env(tmp_path)).json()
    assert out["source"] == "profiler" and out["tool"] == "ncu" and out["primary"] == "softmax_kernel"
    assert out["metrics"]["dram_pct"] == pytest.approx(86.2)
    assert out["iteration"] == 0 and out["noted"]
    assert out["diagnosis"]["bound"] == "memory" and out["diagnosis"]["next_tier"] == 2
    args = json.loads((tmp_path / "ncu_args.log").read_text().splitlines()[0])
    assert args[:4] == ["--clock-control", "none", "--target-processes", "all"]
    assert args[-2:] == ["skills/kernels/fake/test_fake.py", "--profile"]
    assert "gpu__time_duration.sum" in args[args.index("--metrics") + 1]
    assert on_nvidia.git("status", "--porcelain") == ""
    note = json.loads(on_nvidia.git("notes", "--ref=refs/notes/kgit", "show", "HEAD"))
    assert note["profile"]["metrics"]["duration_us"] == pytest.approx(277.216)
    assert note["diagnosis"]["bound"] == "memory" and note["status"] == "BASELINE"  # the record is intact
    # the skills to read, where this machine has them (this repository has no skills/ of its own), as
    # diagnose names them; the note keeps kgit's layout, which travels
    assert out["diagnosis"]["skills"] == on_nvidia.ok("diagnose", "--json").json()["skills"]
    assert all(Path(p).is_absolute() and Path(p).is_file() for p in out["diagnosis"]["skills"])
    assert all(p.startswith("skills/") for p in note["diagnosis"]["skills"])
    saved = on_nvidia.root / ".git/kgit/profiles/fake/iter0"
    assert json.loads((saved / "metrics.json").read_text())["primary"] == "softmax_kernel"
    assert (saved / "raw.csv").exists() and (saved / "report.ncu-rep").exists()
    human = on_nvidia.ok("profile", env=ncu_env(tmp_path)).stdout
    assert "fake (iteration 0): ncu, kernel softmax_kernel (3 of 5 launches)" in human
    assert "DRAM throughput" in human and "86.2% of peak" in human and "stall: long_scoreboard" in human
    assert "fake: memory-bound: DRAM at 86% of peak" in human
    # diagnose reads the last profile by default
    diag = on_nvidia.ok("diagnose", "--json").json()
    assert diag["bound"] == "memory" and diag["tier_order"] == [2, 1, 3]
    on_nvidia.check_invariants()


@pytest.mark.parametrize("profiled, said", [
    ({"GLUON": 0, "BLOCK_M": 128}, "kgit: the profiled launches ran GLUON=0 where the benchmark ran GLUON=2: this "
                                   "profile is of another configuration than the one measured"),
    ({"GLUON": 2, "BLOCK_M": 128}, None),
])
def test_a_profile_of_another_configuration_than_the_benchmark_ran_says_so(ws, tmp_path, ncu_env, profiled, said):
    # an autotune timed under the profiler picked otherwise than in the benchmark of the iteration
    kernel = ws.root / "skills/kernels/fake/fake.py"
    kernel.write_text(kernel.read_text() + f"RAN = {{'GLUON': 2, 'BLOCK_M': 128}}\nPROFILED = {profiled!r}\n")
    ws.git("commit", "-qam", "an autotuned kernel")
    ws.ok("start", "fake", "--gpu", "nvidia")
    out = ws.ok("profile", "--json", env=ncu_env(tmp_path)).json()
    assert out["config"] == profiled and out["config_mismatch"] == (said[len("kgit: "):] if said else None)
    human = ws.ok("profile", env=ncu_env(tmp_path)).stdout.splitlines()
    assert (human[1] == said) if said else not any(line.startswith("kgit: the profiled") for line in human)


def test_an_old_iteration_is_profiled_in_a_temporary_worktree(on_nvidia, tmp_path, ncu_env):
    on_nvidia.set_kernel(METRIC=120.0)
    on_nvidia.ok("step", "-m", "faster", "--tier", "1")
    out = on_nvidia.ok("profile", "--iteration", "0", "--json", env=ncu_env(tmp_path)).json()
    assert out["iteration"] == 0 and out["label"] == "iter0" and out["noted"]
    base = on_nvidia.git("rev-list", "--max-parents=1", "--first-parent", "-n1", "HEAD~1")
    note = json.loads(on_nvidia.git("notes", "--ref=refs/notes/kgit", "show", base))
    assert note["iteration"] == 0 and note["profile"]["source"] == "profiler"
    assert "profile" not in json.loads(on_nvidia.git("notes", "--ref=refs/notes/kgit", "show", "HEAD"))
    assert len(on_nvidia.git("worktree", "list").splitlines()) == 1  # the temporary one is gone
    on_nvidia.check_invariants()


def test_an_uncommitted_edit_is_profiled_without_a_note(on_nvidia, tmp_path, ncu_env):
    on_nvidia.set_kernel(METRIC=130.0)
    out = on_nvidia.ok("profile", "--json", env=ncu_env(tmp_path)).json()
    assert out["label"] == "worktree" and not out["noted"] and "uncommitted" in out["note_why"]
    assert "profile" not in json.loads(on_nvidia.git("notes", "--ref=refs/notes/kgit", "show", "HEAD"))
    assert "METRIC = 130.0" in on_nvidia.kernel_text()  # the edit is untouched


def test_unknown_iteration_is_refused(on_nvidia):
    assert on_nvidia.refused("profile", "--iteration", "7") == (
        "kgit: fake has no iteration 7: its iterations are 0 to 0: 'kgit log' lists them")
