"""Classification, tier order, the next tier, and kgit diagnose / kgit context on the command line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kgit.profiling import diagnose

DATA = Path(__file__).parents[1] / "data"
BUSY = diagnose.THRESHOLDS["busy_pct"]


@pytest.mark.parametrize("metrics, bound", [
    ({"dram_pct": 86.0, "sm_pct": 23.0}, "memory"),  # softmax-like
    ({"dram_pct": 21.0, "sm_pct": 71.0, "tensor_pipe_pct": 78.0}, "compute"),  # GEMM-like
    ({"dram_pct": 0.4, "sm_pct": 0.4}, "latency"),  # one tiny launch
    ({"dram_pct": 20.0, "l2_pct": 75.0, "sm_pct": 30.0}, "memory"),  # L2-bound is memory-bound too
    ({"dram_pct": 10.0, "sm_pct": 40.0, "tensor_pipe_pct": 65.0}, "compute"),  # the tensor pipe counts
    ({"dram_pct": BUSY, "sm_pct": 10.0}, "memory"),  # at the threshold counts
    ({"dram_pct": BUSY - 0.1, "sm_pct": BUSY - 0.1}, "latency"),  # both just under it
    ({"dram_pct": 80.0, "sm_pct": 80.0}, "compute"),  # a tie goes to compute, as the seed loop reads
    ({"dram_pct": 70.0, "sm_pct": 85.0}, "compute"),
    ({"memory_pct": 75.0, "compute_pct": 20.0}, "memory"),  # AMD: MemUnitBusy / VALUBusy
])
def test_classify(metrics, bound):
    assert diagnose.classify(metrics)["bound"] == bound


def test_classify_without_throughput_figures():
    assert diagnose.classify({"duration_us": 3.0})["bound"] is None


def test_tier_orders():
    assert diagnose.TIER_ORDER == {"memory": [2, 1, 3], "compute": [3, 1, 5], "latency": [4, 3]}


def records(*tiers):
    from kgit.model.record import Record, Status

    out = [Record("k", 0, "baseline", Status.BASELINE, value=1.0)]
    return out + [Record("k", i + 1, "a change", Status.REGRESSED, tier=t) for i, t in enumerate(tiers)]


@pytest.mark.parametrize("bound, tried, expected", [
    ("memory", [], 2), ("memory", [2], 1), ("memory", [2, 1], 3), ("memory", [1, 2, 3], None),
    ("memory", [4, 5], 2),  # tiers outside the order do not count against it
    ("compute", [3], 1), ("compute", [3, 1], 5), ("latency", [4], 3), ("latency", [3, 4], None),
    ("compute", [None, 3], 1),  # an iteration without a tier tried nothing in particular
])
def test_next_tier_skips_tried_tiers(bound, tried, expected):
    assert diagnose.next_tier(diagnose.TIER_ORDER[bound], records(*tried)) == expected


def test_hints_point_at_tiers():
    found = diagnose.hints({"local_spill_bytes": 4096.0, "registers_per_thread": 255, "global_ld_efficiency_pct": 25.0,
                            "achieved_occupancy_pct": 12.0, "waves_per_sm": 0.03, "duration_us": 3.0},
                           [{"reason": "long_scoreboard", "cycles_per_issue": 9.0, "meaning": "memory"}])
    tiers = [h["tier"] for h in found]
    assert tiers == [1, 2, 1, 4, 4, None]
    assert diagnose.hints({"local_spill_bytes": 0.0, "global_ld_efficiency_pct": 100.0,
                           "achieved_occupancy_pct": 80.0, "waves_per_sm": 12.0, "duration_us": 250.0}, []) == []


def test_diagnosis_names_skills_for_the_vendor():
    prof = {"source": "profiler", "tool": "ncu", "metrics": {"dram_pct": 10.0, "sm_pct": 90.0}, "stalls": []}
    diag = diagnose.diagnose(prof, records(3, 1), "gemm", "NVIDIA H200")
    assert diag["bound"] == "compute" and diag["next_tier"] == 5
    assert diag["skills"] == ["skills/bottleneck-diagnosis/SKILL.md", "skills/tier5-arch-nvidia/SKILL.md"]
    amd = diagnose.diagnose({**prof, "tool": "rocprofv3", "metrics": {"memory_pct": 10.0, "compute_pct": 90.0}},
                            records(3, 1), "gemm", "AMD Instinct MI300X")
    assert "skills/tier5-arch-amd-rocm/SKILL.md" in amd["skills"]
    done = diagnose.diagnose(prof, records(3, 1, 5), "gemm")
    assert done["next_tier"] is None and done["tiers_exhausted"]


def test_diagnose_a_metrics_file_outside_any_repository(tmp_path):
    env = {**os.environ}
    for name, bound in (("ncu_softmax_synthetic.csv", "memory"), ("ncu_tiny_synthetic.csv", "latency")):
        proc = subprocess.run([sys.executable, "-m", "kgit", "diagnose", "--metrics", str(DATA / name), "--json"],
                              cwd=tmp_path, capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        diag = json.loads(proc.stdout)
        assert diag["bound"] == bound and diag["next_tier"] == diagnose.TIER_ORDER[bound][0]
    proc = subprocess.run([sys.executable, "-m", "kgit", "diagnose", "--metrics", str(tmp_path / "none.json")],
                          cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and proc.stderr.startswith("kgit: --metrics: file") and "Traceback" not in proc.stderr


def test_diagnose_reads_a_saved_metrics_json(started, tmp_path):
    saved = tmp_path / "metrics.json"
    saved.write_text(json.dumps({"source": "profiler", "tool": "ncu", "metrics": {"dram_pct": 5.0, "sm_pct": 88.0},
                                 "stalls": []}))
    started.set_kernel(METRIC=90.0)
    started.ok("step", "-m", "fast math", "--tier", "3")
    diag = started.ok("diagnose", "--metrics", str(saved), "--json").json()
    assert diag["bound"] == "compute" and diag["tried_tiers"] == [3] and diag["next_tier"] == 1
    human = started.ok("diagnose", "--metrics", str(saved)).stdout
    assert human.splitlines()[0].startswith("fake: compute-bound: SM at 88% of peak")
    assert "next tier: T1 block tiling" in human


# --- kgit context ----------------------------------------------------------------------------------------


def test_context_lists_what_was_tried_and_what_comes_next(started):
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "BLOCK 1024->2048", "--tier", "1")
    started.set_kernel(METRIC=60.0)
    started.ok("step", "-m", "vector loads", "--tier", "2")
    ctx = started.ok("context", "--json").json()
    assert ctx["kernel"] == "fake" and ctx["files"]["kernel"] == "skills/kernels/fake/triton_template.py"
    assert ctx["best"]["iteration"] == 1 and ctx["best"]["value"] == 120.0
    assert [(t["iteration"], t["tier"], t["status"], t["kept"]) for t in ctx["tried"]] == [
        (1, 1, "IMPROVED", True), (2, 2, "REGRESSED", False)]
    assert ctx["diagnosis"]["bound"] == "memory"  # no profile, no declared bottleneck: the gbps metric
    assert ctx["diagnosis"]["tried_tiers"] == [1, 2] and ctx["diagnosis"]["next_tier"] == 3
    assert ctx["skills"][0] == "skills/optimize-loop/SKILL.md" and "skills/tier3-compute-fusion/SKILL.md" in ctx["skills"]
    assert "--tier 3" in ctx["next_step"]
    human = started.ok("context").stdout
    assert "already tried (do not repeat):" in human and "vector loads" in human and "REGRESSED" in human
    assert "next: edit skills/kernels/fake/triton_template.py: ONE change from tier 3" in human
    assert len(human.splitlines()) <= 25  # one screen
    started.check_invariants()


def test_context_says_when_the_profile_is_of_an_older_iteration(started, tmp_path):
    profiles = started.root / ".git/kgit/profiles/fake"
    profiles.mkdir(parents=True)
    (profiles / "latest.json").write_text(json.dumps({
        "source": "profiler", "tool": "ncu", "iteration": 0, "primary": "k",
        "metrics": {"dram_pct": 1.0, "sm_pct": 2.0}, "stalls": []}))
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "bigger blocks", "--tier", "4")
    ctx = started.ok("context", "--json").json()
    assert ctx["diagnosis"]["bound"] == "latency" and ctx["diagnosis"]["next_tier"] == 3
    assert "iteration 0" in ctx["profile_stale"]


def test_no_coalescing_hint_when_no_load_went_through_the_load_units():
    # The H200 GEMM loads through TMA: ncu reports 0% sector efficiency for plain global loads.
    assert not [h for h in diagnose.hints({"global_ld_efficiency_pct": 0.0}, []) if h["tier"] == 2]
    assert [h for h in diagnose.hints({"global_ld_efficiency_pct": 25.0}, []) if h["tier"] == 2]
