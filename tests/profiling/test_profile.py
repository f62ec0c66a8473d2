"""kgit profile: metric extraction from stored ncu reports, the profiler run (with a stand-in ncu),
the note and the files it leaves, old iterations, and the fallback where no profiler runs.

Every tests/data/ncu_*.csv with a <name>.expect.json beside it is read by the same test: a report
captured on a real GPU is checked by dropping it there with its expectation (bound, primary kernel,
metrics that must be present).
"""

import json
import math
import os
from pathlib import Path

import pytest

from kgit.profiling import diagnose, ncu

DATA = Path(__file__).parents[1] / "data"
FAKE_NCU = Path(__file__).parents[1] / "fake_ncu"
REPORTS = sorted(p for p in DATA.glob("ncu_*.csv") if p.with_suffix(".expect.json").exists())


@pytest.mark.parametrize("path", REPORTS, ids=[p.stem for p in REPORTS])
def test_stored_report_gives_the_expected_metrics_and_class(path):
    expect = json.loads(path.with_suffix(".expect.json").read_text())
    summary = ncu.summarize(ncu.parse_csv(path.read_text()), expect.get("kernel_names"))
    if "primary" in expect:
        assert summary["primary"] == expect["primary"]
    for key in expect["present"]:
        value = summary["metrics"].get(key)
        assert value is not None and math.isfinite(value) and value >= 0, key
    for key in ("dram_pct", "sm_pct", "l1_pct", "l2_pct", "achieved_occupancy_pct", "l2_hit_pct"):
        value = summary["metrics"].get(key)
        assert value is None or 0 <= value <= 100.5, (key, value)
    if expect.get("stalls") is not None:
        assert bool(summary["stalls"]) == expect["stalls"]
    assert diagnose.classify(summary["metrics"])["bound"] == expect["bound"]


def test_synthetic_softmax_values_are_read_exactly():
    launches = ncu.parse_csv((DATA / "ncu_softmax_synthetic.csv").read_text())
    assert [launch["name"] for launch in launches][:2] == [
        "distribution_elementwise_grid_stride_kernel", "vectorized_elementwise_kernel"]
    summary = ncu.summarize(launches)
    assert summary["launches_profiled"] == 5 and summary["launches_selected"] == 3  # torch's kernels left out
    m = summary["metrics"]
    assert m["duration_us"] == pytest.approx(277.216)  # median of three launches, ns -> us
    assert m["dram_pct"] == pytest.approx(86.2)
    assert m["achieved_occupancy_pct"] == pytest.approx(78.1)
    assert m["registers_per_thread"] == 32 and m["local_spill_bytes"] == 0
    assert m["global_ld_bytes_per_sector"] == pytest.approx(32.0)
    assert m["achieved_gbps"] == pytest.approx(1_074_135_040 / 277.216e-6 / 1e9, rel=1e-3)  # "1,074,135,040"
    # 2 * ffma + fadd + fmul over the duration
    assert m["cuda_core_gflops"] == pytest.approx((2 * 134_217_728 + 268_435_456 + 134_217_728) / 277.216e-6 / 1e9)
    assert [s["reason"] for s in summary["stalls"]] == ["long_scoreboard", "barrier", "wait"]
    assert summary["kernels"][0]["grid"] == "(131072, 1, 1)"


def test_named_kernels_select_launches_and_auto_units_convert():
    launches = ncu.parse_csv((DATA / "ncu_gemm_details_synthetic.csv").read_text())
    assert ncu.summarize(launches, ["other_kernel"])["primary"] is None
    m = ncu.summarize(launches, ["matmul_kernel"])["metrics"]
    assert m["duration_us"] == pytest.approx(1530.0)  # msecond
    assert m["dram_bytes"] == pytest.approx(551.29e6)  # Mbyte
    assert m["achieved_gbps"] == pytest.approx(360.32)  # Gbyte/second
    assert m["local_spill_bytes"] == pytest.approx(1_310_720.0)  # "1,310.72" Kbyte
    assert m["tensor_pipe_pct"] == pytest.approx(78.64)


@pytest.mark.parametrize("value, unit, expected", [
    (12.5, "usecond", 12.5e-6), (3.0, "Tbyte/second", 3e12), (2.0, "Kbyte", 2000.0), (7.0, "nsecond", 7e-9),
    (5.0, "msecond", 5e-3), (42.0, "%", 42.0), (168.0, "register/thread", 168.0), (1.5, "Gbyte/s", 1.5e9),
])
def test_units_convert_to_base(value, unit, expected):
    assert ncu.to_base(value, unit) == pytest.approx(expected)


@pytest.mark.parametrize("text, expected", [("1,234.5", 1234.5), ("0", 0.0), ("n/a", None), ("", None),
                                            ("1.5e+03", 1500.0), ("(256, 1, 1)", None)])
def test_numbers(text, expected):
    assert ncu.parse_number(text) == expected


def test_unknown_metric_is_named_from_ncus_error():
    out = "==PROF== Connected\n==ERROR== Failed to find metric regex:^sm__foo_bar\\.(sum|avg)$\n"
    assert ncu.unknown_metric(out) == "sm__foo_bar"
    assert ncu.unknown_metric("==ERROR== Failed to find metric launch__waves_per_multiprocessor") == \
        "launch__waves_per_multiprocessor"
    assert ncu.unknown_metric("all fine") is None


def test_jit_names_are_read_from_the_kernel_file():
    from kgit.profiling.profile import jit_kernel_names

    source = (
        "import triton\nfrom triton import jit\n"
        "@triton.jit\ndef _a(x): pass\n"
        "@triton.jit(do_not_specialize=['n'])\ndef _b(x): pass\n"
        "@triton.autotune(configs=[], key=[])\n@triton.jit\ndef _c(x): pass\n"
        "@jit\ndef _d(x): pass\n"
        "def launcher(x): pass\n"
    )
    assert jit_kernel_names(source) == ["_a", "_b", "_c", "_d"]
    assert jit_kernel_names("def broken(:") == []


# --- kgit profile end to end, with a stand-in ncu ------------------------------------------------------


def ncu_env(tmp_path, mode="ok", csv="ncu_softmax_synthetic.csv"):
    return {"PATH": f"{FAKE_NCU}{os.pathsep}{os.environ['PATH']}", "KGIT_FAKE_NCU_MODE": mode,
            "KGIT_FAKE_NCU_CSV": str(DATA / csv), "KGIT_FAKE_NCU_LOG": str(tmp_path / "ncu_args.log")}


@pytest.fixture
def on_nvidia(ws):
    """A started fake kernel whose loop runs with gpu: nvidia (so kgit looks for ncu)."""
    ws.ok("start", "fake", "--gpu", "nvidia")
    return ws


def test_profile_runs_ncu_keeps_metrics_in_the_note_and_leaves_the_tree_clean(on_nvidia, tmp_path):
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


def test_a_metric_this_ncu_lacks_is_dropped_and_the_run_retried(on_nvidia, tmp_path):
    out = on_nvidia.ok("profile", "--json", env=ncu_env(tmp_path, mode="unknown")).json()
    assert out["source"] == "profiler"
    assert out["dropped_metrics"] == ["lts__t_sector_hit_rate.pct"]
    assert len((tmp_path / "ncu_args.log").read_text().splitlines()) == 2


def test_no_permission_falls_back_in_one_plain_line(on_nvidia, tmp_path):
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
    assert out["diagnosis"]["bound"] == "compute" and out["diagnosis"]["tier_order"] == [3, 1, 5]
    assert "skills/kernels/fake/SKILL.md" in out["diagnosis"]["skills"]


def test_cpu_only_machine_says_so(ws):
    ws.ok("start", "fake", "--gpu", "cpu")
    run = ws.ok("profile")
    assert run.stdout.splitlines()[0] == "kgit: no profiler: no GPU on this machine (CPU only): no profiler can run"


def test_an_old_iteration_is_profiled_in_a_temporary_worktree(on_nvidia, tmp_path):
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


def test_an_uncommitted_edit_is_profiled_without_a_note(on_nvidia, tmp_path):
    on_nvidia.set_kernel(METRIC=130.0)
    out = on_nvidia.ok("profile", "--json", env=ncu_env(tmp_path)).json()
    assert out["label"] == "worktree" and not out["noted"] and "uncommitted" in out["note_why"]
    assert "profile" not in json.loads(on_nvidia.git("notes", "--ref=refs/notes/kgit", "show", "HEAD"))
    assert "METRIC = 130.0" in on_nvidia.kernel_text()  # the edit is untouched


def test_unknown_iteration_is_refused(on_nvidia):
    assert on_nvidia.refused("profile", "--iteration", "7") == "kgit: fake has no iteration 7"


def test_real_h200_report_durations_are_in_microseconds():
    # ncu 2025.3 on the H200 wrote its durations in 'ns' despite --print-units base.
    summary = ncu.summarize(ncu.parse_csv((DATA / "ncu_gemm_h200.csv").read_text()))
    assert summary["primary"] == "_matmul_kernel"
    assert 1000 < summary["metrics"]["duration_us"] < 3000  # an 8192^3 bf16 GEMM at 400-1000 TFLOP/s
