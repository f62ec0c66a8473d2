"""rocprofv3's CSV read back into the same summary as ncu's (no AMD GPU here: hand-written CSV)."""

import pytest

from kgit.profiling import rocprof

COUNTERS = """Dispatch_Id,Kernel_Name,Counter_Name,Counter_Value
4,fill_kernel,MemUnitBusy,5
1,softmax_kernel(float*),MemUnitBusy,80
2,softmax_kernel(float*),MemUnitBusy,90
3,softmax_kernel(float*),MemUnitBusy,85
1,softmax_kernel(float*),VALUBusy,20
1,softmax_kernel(float*),FETCH_SIZE,1024
1,softmax_kernel(float*),WRITE_SIZE,1024
1,softmax_kernel(float*),SQ_INSTS_MFMA,0
1,softmax_kernel(float*),L2CacheHit,not-a-number
"""
TRACE = """Kernel_Name,Start_Timestamp,End_Timestamp
softmax_kernel(float*),1000,3000
softmax_kernel(float*),5000,7000
fill_kernel,0,100
"""


def test_counters_and_durations_give_the_summary():
    summary = rocprof.parse(COUNTERS, TRACE)
    assert summary["tool"] == "rocprofv3" and summary["source"] == "profiler"
    assert summary["primary"] == "softmax_kernel"  # the kernel that took the most time
    assert [k["name"] for k in summary["kernels"]] == ["softmax_kernel", "fill_kernel"]
    assert summary["kernels"][0]["launches"] == 3 and summary["kernels"][0]["total_us"] == pytest.approx(4.0)
    m = summary["metrics"]
    assert m["memory_pct"] == 85 and m["compute_pct"] == 20 and m["valu_busy_pct"] == 20  # medians
    assert m["duration_us"] == pytest.approx(2.0)  # ns -> us
    assert m["achieved_gbps"] == pytest.approx(2048 * 1024 / 2e-6 / 1e9)  # sizes in KB
    assert m["l2_hit_pct"] is None  # an unreadable value is skipped, not a crash
    assert m["mfma_insts"] == 0


def test_named_kernels_only_and_no_trace():
    summary = rocprof.parse(COUNTERS, None, ["fill_kernel"])
    assert summary["primary"] == "fill_kernel" and summary["metrics"]["memory_pct"] == 5
    assert summary["metrics"]["duration_us"] is None and summary["metrics"]["achieved_gbps"] is None
    empty = rocprof.parse(COUNTERS, TRACE, ["other"])
    assert empty["primary"] is None and empty["metrics"] == {} and empty["kernels"] == []
