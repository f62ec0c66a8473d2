"""Nsight Compute's CSV read back: stored reports, units, numbers, the metric ncu does not know.

Every tests/data/ncu_*.csv with a <name>.expect.json beside it is read by the same test: a report
captured on a real GPU is checked by dropping it there with its expectation (bound, primary kernel,
metrics that must be present).
"""

import json
import math
from pathlib import Path

import pytest

from kgit.profiling import diagnose, ncu

DATA = Path(__file__).parents[1] / "data"
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


def test_real_h200_report_durations_are_in_microseconds():
    # ncu 2025.3 on the H200 wrote its durations in 'ns' despite --print-units base.
    summary = ncu.summarize(ncu.parse_csv((DATA / "ncu_gemm_h200.csv").read_text()))
    assert summary["primary"] == "_matmul_kernel"
    assert 1000 < summary["metrics"]["duration_us"] < 3000  # an 8192^3 bf16 GEMM at 400-1000 TFLOP/s
