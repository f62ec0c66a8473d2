"""Classification, tier order, the next tier, hints, and the skills a diagnosis names."""

import pytest

from kgit.profiling import diagnose

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
    return out + [Record("k", i + 1, "a change", Status.IMPROVED, tier=t, value=1.0) for i, t in enumerate(tiers)]


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


def test_a_bound_nobody_can_tell_keeps_every_tier_open():
    """No profile, no declared bottleneck, a metric such as time_ms (a test written the way others write
    them): one tried tier must not read as "every tier tried: stop"."""
    prof = {"source": "benchmark", "metric": "time_ms", "declared_bottleneck": None, "declared_why": ""}
    diag = diagnose.diagnose(prof, records(1), "scale", None)
    assert diag["bound"] is None and diag["tier_order"] == [1, 2, 3, 4, 5]
    assert diag["next_tier"] == 2 and not diag["tiers_exhausted"]
    assert diag["why"] == "unknown: the test's metric (time_ms) does not tell"
    assert diag["how"] == "no profiler and no declared bottleneck: the test's metric"
    guessed = diagnose.diagnose({**prof, "metric": "gbps"}, records(1), "scale", None)
    assert guessed["bound"] == "memory" and guessed["tier_order"] == [1, 2, 3] and guessed["next_tier"] == 2


@pytest.mark.parametrize("metric, bound", [("GB/s", "memory"), ("benchmarks.triton_tflops", "compute"),
                                           ("bandwidth_gbps", "memory"), ("time_ms", None)])
def test_a_metric_named_as_a_bandwidth_is_a_bandwidth_however_spelled(metric, bound):
    prof = {"source": "benchmark", "metric": metric, "declared_bottleneck": None, "declared_why": ""}
    assert diagnose.diagnose(prof, records(), "k", None)["bound"] == bound


@pytest.mark.parametrize("bound, profiled, unprofiled", [
    ("memory", [2, 1, 3], [1, 2, 3]), ("compute", [3, 1, 5], [1, 3, 5]), ("latency", [4, 3], [1, 4, 3])])
def test_without_a_profiler_tier_1_comes_first(bound, profiled, unprofiled):
    """A bound no counter confirmed (declared in the kernel's skill, or guessed from its metric) starts
    with the safest change, as skills/profiling/SKILL.md says; a profile's bound keeps its own order."""
    metrics = {"memory": {"dram_pct": 86.0, "sm_pct": 20.0}, "compute": {"dram_pct": 10.0, "sm_pct": 90.0},
               "latency": {"dram_pct": 5.0, "sm_pct": 5.0}}[bound]
    with_profile = diagnose.diagnose({"source": "profiler", "tool": "ncu", "metrics": metrics}, records(), "k", None)
    declared = diagnose.diagnose({"source": "benchmark", "declared_bottleneck": bound, "declared_why": "declared"},
                                 records(), "k", None)
    assert with_profile["tier_order"] == profiled and with_profile["next_tier"] == profiled[0]
    assert declared["tier_order"] == unprofiled and declared["next_tier"] == 1


def test_no_coalescing_hint_when_no_load_went_through_the_load_units():
    # The H200 GEMM loads through TMA: ncu reports 0% sector efficiency for plain global loads.
    assert not [h for h in diagnose.hints({"global_ld_efficiency_pct": 0.0}, []) if h["tier"] == 2]
    assert [h for h in diagnose.hints({"global_ld_efficiency_pct": 25.0}, []) if h["tier"] == 2]


def test_the_vendor_comes_from_the_profiler_the_gpus_name_or_this_machine():
    from kgit import machine

    assert diagnose.vendor_of({"tool": "rocprofv3"}, None) == "amd"
    assert diagnose.vendor_of(None, "AMD Instinct MI300X") == "amd"
    assert diagnose.vendor_of(None, "NVIDIA H200") == "nvidia"
    # a record made in the interpreter names no GPU: the vendor is this machine's ('cpu' without a GPU)
    assert diagnose.vendor_of(None, "cpu") == machine.vendor() and diagnose.vendor_of(None, None) == machine.vendor()


def test_a_tier_is_tried_by_evidence_not_by_noise():
    from kgit.model.record import Record, Status

    def tried(*statuses):
        out = [Record("k", 0, "baseline", Status.BASELINE, value=1.0)]
        return diagnose.tried_tiers(out + [Record("k", i + 1, "x", s, tier=2) for i, s in enumerate(statuses)])

    assert tried(Status.WITHIN_NOISE) == [] and tried(Status.FAILED, Status.WITHIN_NOISE) == []
    assert tried(*[Status.WITHIN_NOISE] * (diagnose.TIER_ATTEMPTS - 1)) == []
    assert tried(*[Status.WITHIN_NOISE] * diagnose.TIER_ATTEMPTS) == [2]  # given up after that many
    assert tried(Status.IMPROVED) == [2] and tried(Status.KEPT_ANYWAY) == [2] and tried(Status.TARGET_MET) == [2]
    # a loss is one idea's verdict (and may be the noise's: a regression decided with a prior from a loaded
    # machine), never the tier's: it counts as one attempt
    assert tried(Status.REGRESSED) == [] and tried(Status.REGRESSED, Status.WITHIN_NOISE) == []
    assert tried(Status.REGRESSED, Status.WITHIN_NOISE, Status.FAILED) == [2]
