"""A kernel's records as runs, one loop on one device each, and a run in numbers."""

from kgit.model.record import Record, Status, StopReason
from kgit.model.runs import sections, summarize


def record(iteration, status, started, gpu="NVIDIA H200", value=100.0, **fields):
    return Record("softmax", iteration, f"step {iteration}", status, started=started, gpu=gpu, metric="gbps",
                  value=value, correctness=True, **fields)


def test_records_of_two_devices_are_two_runs_and_a_crash_joins_its_loops_device():
    gpu = [record(0, Status.BASELINE, "2026-01-01T00"), record(1, Status.REGRESSED, "2026-01-01T01", value=90.0)]
    cpu = [record(0, Status.BASELINE, "2026-01-02T00", gpu="cpu", cpu_timing=True),
           record(1, Status.FAILED, "2026-01-02T01", gpu=None, value=None)]  # crashed before naming its device
    runs = sections(cpu + gpu)
    assert list(runs) == [("softmax", "NVIDIA H200", "2026-01-01T00"), ("softmax", "cpu", "2026-01-02T00")]
    assert [[r.iteration for r in run] for run in runs.values()] == [[0, 1], [0, 1]]


def test_a_run_in_numbers():
    records = [record(0, Status.BASELINE, "a", target=150.0), record(1, Status.IMPROVED, "b", value=120.0, target=150.0),
               record(2, Status.REGRESSED, "c", value=90.0), record(3, Status.KEPT_ANYWAY, "d", value=110.0)]
    summary = summarize("NVIDIA H200", records)
    assert (summary.kernel, summary.gpu, summary.baseline, summary.best, summary.best_iteration) == \
        ("softmax", "NVIDIA H200", 100.0, 120.0, 1)
    assert (summary.iterations, summary.reverted, summary.target, summary.target_met) == (3, 1, 150.0, False)
    met = summarize("NVIDIA H200", records + [record(4, Status.TARGET_MET, "e", value=160.0,
                                                      stop_reason=StopReason.TARGET_MET)])
    assert met.target_met and met.best == 160.0
