"""What a person sees: a kept and a reverted step, a status, a doctor with and without problems."""

from kgit.loop.history import Status as LoopStatus
from kgit.model.record import InvalidNote, Record, Spread, Status, StopReason
from kgit.model.remeasured import Remeasured
from kgit.render import commands
from kgit.share.doctor import Problem

SHA = "0123456789abcdef0123456789abcdef01234567"


def step_record(status, **fields):
    return Record("softmax", 3, "BLOCK 1024->2048", status, metric="gbps", value=fields.pop("value", 120.0),
                  best_before=100.0, delta_pct=fields.pop("delta_pct", 20.0), correctness=True, **fields)


def test_a_kept_step():
    text = commands.step(step_record(Status.IMPROVED, pct_of_peak=12.0), SHA, with_tail=True)
    assert text.splitlines() == [
        "iteration 3: IMPROVED  120 GBps (12% of peak)  +20.0% vs best 100 GBps",
        "kept at 0123456789; best/softmax moved there",
    ]


def test_a_reverted_step_with_its_reason_the_tests_output_and_the_stop():
    record = step_record(Status.FAILED, value=None, delta_pct=None, reason="crashed: exit status 3",
                         output_tail="line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nRuntimeError: boom\n",
                         stop_reason=StopReason.MAX_ITERATIONS)
    lines = commands.step(record, SHA, with_tail=True).splitlines()
    assert lines[0] == "iteration 3: FAILED; the best stays at 100 GBps"  # never "- -" without a unit
    assert lines[1:4] == ["reason: crashed: exit status 3",
                          "reverted; the attempt stays at refs/kgit/attempts/softmax/3", "test output ends:"]
    assert lines[4:9] == ["  line 3", "  line 4", "  line 5", "  line 6", "  RuntimeError: boom"]
    assert lines[9:] == ["loop stopped: MAX_ITERATIONS"]
    assert "test output ends:" not in commands.step(record, SHA, with_tail=False)
    assert commands.loop_round(record, SHA).startswith("[BLOCK 1024->2048] iteration 3: FAILED")


def status_state(**fields):
    best = Record("softmax", 2, "x", Status.IMPROVED, metric="gbps", value=120.0, pct_of_peak=12.0,
                  started="2026-12-06T07:10:33.000001+00:00")
    base = dict(kernel="softmax", branch="opt/softmax", on_branch=True, kernel_path="k.py", test_path="t.py",
                iteration=3, max_iterations=5, metric="gbps", target=150.0, best=best, best_commit=SHA, gap=30.0,
                gap_pct=20.0, stopped=None, kernel_modified=False, reverted=1, invalid=[], better="higher")
    return LoopStatus(**{**base, **fields})


def test_a_status():
    assert commands.status(status_state()).splitlines() == [
        "kernel         softmax (k.py)",
        "branch         opt/softmax",
        "target         150 GBps",
        "iteration      3 of 5 (1 reverted)",
        "best           120 GBps (12% of peak): iteration 2's own runs, 2026-12-06 07:10 UTC",
        "gap to target  30.0 GBps (20.0%)",
        "state          waiting for an edit of the kernel",
    ]
    # later steps ran the best again in their pairs: the latest of them, beside the figure the best was kept on
    again = Remeasured(210.0, 4, 5, "2026-12-06T08:02:00.000001+00:00")
    assert commands.status(status_state(remeasured=again)).splitlines()[4] == (
        "best           120 GBps (12% of peak): iteration 2's own runs, 2026-12-06 07:10 UTC; measured again: "
        "210 GBps, 4 runs in iteration 5's pairs, 2026-12-06 08:02 UTC")
    other = commands.status(status_state(on_branch=False, target=None, gap=None, gap_pct=None, best=None,
                                         stopped=StopReason.MAX_ITERATIONS)).splitlines()
    assert other[1] == "branch         opt/softmax (not checked out)"
    assert other[2] == "target         none set" and other[4] == "best           -"
    assert other[5] == "gap to target  -" and other[6] == "state          stopped: MAX_ITERATIONS"
    assert commands.status(status_state(kernel_modified=True)).endswith("kernel edited, ready to step")


def test_a_doctor_with_and_without_problems():
    assert commands.doctor([], [], repaired=False) == "no problems found"
    assert commands.doctor(["moved best/softmax"], [], repaired=True) == "fixed: moved best/softmax\nno problems left"
    problems = [Problem("best/softmax is missing", "move it to 0123456789 (iteration 2)",
                        ("set_tag", "softmax", "0123456789"))]
    assert commands.doctor([], problems, repaired=False).splitlines() == [
        "best/softmax is missing; fix: move it to 0123456789 (iteration 2)",
        "run 'kgit doctor --fix' to repair",
    ]
    manual = [Problem("opt/softmax has diverged from origin's", "none automatic: keep one side")]
    assert commands.doctor([], manual, repaired=False).splitlines() == [  # never sent to a --fix that does nothing
        "opt/softmax has diverged from origin's; fix: none automatic: keep one side",
        "none of these is repaired automatically: each says what to do",
    ]
    assert commands.doctor([], problems + manual, repaired=False).splitlines()[-1] == \
        "run 'kgit doctor --fix' to repair 1 of these; each of the others says what to do"
    assert commands.doctor([], problems, repaired=True) == \
        "best/softmax is missing; fix: move it to 0123456789 (iteration 2)"


def test_start_best_report_and_an_invalid_note():
    base = Record("softmax", 0, "baseline", Status.BASELINE, metric="gbps", value=100.0, gpu="NVIDIA H200")
    assert commands.start(base, SHA) == ("softmax: baseline 100 GBps on NVIDIA H200; branch opt/softmax, "
                                         "tag best/softmax at 0123456789")
    met = commands.start(base.replace(stop_reason=StopReason.TARGET_MET), SHA)
    assert met.endswith("\nThe baseline already meets the target: TARGET_MET.")
    assert commands.best(base, SHA, "best/softmax", SHA).splitlines() == [
        "softmax: best is iteration 0 (baseline): 100 GBps on NVIDIA H200, commit 0123456789, tag best/softmax",
        "measured: iteration 0's own runs"]  # a record of a kgit before start times: none to show
    # which figure, and when; the latest re-measurement beside it
    timed = base.replace(started="2026-12-06T07:10:33.000001+00:00")
    again = Remeasured(175.0, 1, 3, "2026-12-06T09:00:00.000001+00:00")
    assert commands.best(timed, SHA, "best/softmax", SHA, again=again).splitlines()[1] == (
        "measured: iteration 0's own runs, 2026-12-06 07:10 UTC; measured again: 175 GBps, 1 run in iteration 3's "
        "pairs, 2026-12-06 09:00 UTC")
    # a test that names no GPU (one written the way others write them): never "on None"
    assert commands.best(base.replace(gpu=None), SHA, "best/softmax", SHA).splitlines()[0] == \
        "softmax: best is iteration 0 (baseline): 100 GBps on an unknown device, commit 0123456789, tag best/softmax"
    # the tag deleted or moved by hand: said, with the repair
    assert commands.best(base, SHA, "best/softmax", None).splitlines()[0].endswith(
        "tag best/softmax (missing: 'kgit doctor --fix' sets it)")
    assert commands.best(base, SHA, "best/softmax", "f" * 40).splitlines()[0].endswith(
        "tag best/softmax (on ffffffffff, not the best: 'kgit doctor --fix' moves it)")
    assert commands.report(None, "experiments/README.md") == "experiments/README.md is up to date"
    assert commands.report(SHA, "log.md") == "log.md rendered and committed at 0123456789"
    warning = commands.invalid_note(InvalidNote(SHA, "not JSON"))
    assert warning.startswith("warning: the note on 0123456789 is not a valid kgit record (not JSON)")


def test_show_gives_the_whole_reason_and_the_tests_last_lines():
    from types import SimpleNamespace
    reason = "(4096, 32768) bf16 normal: max abs error 0.5 at index 12345, tolerance 0.01 " * 3
    record = step_record(Status.FAILED, value=None, delta_pct=None, reason=reason, started="t", duration_s=1.0,
                         output_tail="".join(f"line {i}\n" for i in range(20)))
    text = commands.show(SimpleNamespace(record=record, commit=SHA, diff="a diff"))
    assert f"reason: {reason}" in text.splitlines()
    assert text.split("test output ends:\n")[1].splitlines()[:10] == [f"  line {i}" for i in range(10, 20)]
    # a turn the agent failed ran no test: what is kept is the agent's own output
    failed_turn = step_record(Status.FAILED, value=None, delta_pct=None, reason="agent exit status 1", started="t",
                              duration_s=1.0, output_tail="Traceback ...\n")
    text = commands.show(SimpleNamespace(record=failed_turn, commit=SHA, diff=""))
    assert "the agent's output ends:\n  Traceback ..." in text and "test output ends" not in text


def test_a_log_says_when_a_loop_went_on_past_a_limit_it_had_stopped_at():
    stopped = Record("softmax", 2, "b", Status.REGRESSED, metric="gbps", value=90.0, correctness=True,
                     stop_reason=StopReason.MAX_ITERATIONS)
    later = Record("softmax", 3, "c", Status.IMPROVED, metric="gbps", value=130.0, correctness=True)
    from kgit.loop.history import runs

    rows = commands.log(runs([(SHA, stopped), (SHA, later)])).splitlines()
    assert rows[2].split("  ")[-2].strip() == "regressed, reverted; MAX_ITERATIONS, raised later"
    last = commands.log(runs([(SHA, stopped)])).splitlines()  # the loop still stands there
    assert "regressed, reverted; MAX_ITERATIONS  " in last[2] and "raised later" not in last[2]


def test_a_log_shows_runs_on_different_devices_apart_each_with_its_own_count():
    """A pulled GPU run and a CPU run of one kernel: two tables, two final lines, never one mixed count."""
    from kgit.loop.history import runs

    def record(iteration, gpu, started, status=Status.IMPROVED, value=100.0, cpu=False):
        return Record("softmax", iteration, f"change {iteration}", status, started=started, gpu=gpu, cpu_timing=cpu,
                      metric="gbps", value=value, correctness=True)

    gpu = [record(0, "NVIDIA H200", "2026-01-01T00:00", Status.BASELINE, 3000.0),
           record(1, "NVIDIA H200", "2026-01-01T01:00", Status.REGRESSED, 2900.0),
           record(2, "NVIDIA H200", "2026-01-01T02:00", Status.IMPROVED, 3200.0)]
    cpu = [record(0, "cpu", "2026-02-01T00:00", Status.BASELINE, 0.002, cpu=True),
           record(1, "cpu", "2026-02-01T01:00", Status.WITHIN_NOISE, 0.002, cpu=True),
           record(2, "cpu", "2026-02-01T02:00", Status.FAILED, None, cpu=True).replace(gpu=None)]  # a crash: no GPU named
    found = runs([(SHA, r) for r in sorted(gpu + cpu, key=lambda r: r.iteration)])
    assert [(run.gpu, [r.iteration for r in run.records]) for run in found] == [("NVIDIA H200", [0, 1, 2]),
                                                                             ("cpu", [0, 1, 2])]
    text = commands.log(found)
    assert "softmax on NVIDIA H200, started 2026-01-01 00:00 UTC: 3 records, 1 reverted" in text
    assert "softmax on cpu (Triton interpreter on the CPU: timings are CPU timings, not comparable to a GPU), " \
           "started 2026-02-01 00:00 UTC: 3 records, 2 reverted" in text
    assert text.count("Final: ") == 2 and \
        "Final: 3200 GBps (iteration 2's own runs, 2026-01-01 02:00 UTC), 2 iterations, in progress." in text
    assert "2 runs, each apart: a run is one loop from its baseline on one device" in text
    one = commands.log(runs([(SHA, r) for r in gpu]))
    assert "runs, each apart" not in one and one.count("Final: ") == 1  # one device: the table alone


def test_the_start_says_which_figure_decides_how_much_each_varies_and_the_smallest_keepable_change():
    both = Spread(4, [1.0] * 4, {"test": 13.75, "device": 0.194}, "device", 12, 1.27, "launch-bound timing: x")
    assert commands.detectable(both) == (
        "decided on kgit's device time of the kernel's launches, which varies 0.19% from run to run (the test's "
        "figure varies 14%); the smallest change a step can keep at 12 pairs (max_pairs): 1.3%\n"
        "(launch-bound timing: x)")
    alone = Spread(4, [1.0] * 4, {"device": 16.0}, "device", 12, 23.6, None)
    assert commands.detectable(alone) == (
        "decided on kgit's device time of the kernel's launches, which varies 16% from run to run; the smallest "
        "change a step can keep at 12 pairs (max_pairs): 23.6%\n"
        "warning: a step cannot keep a change under 24% here, above 5%; a steadier test, or more pairs, would see more")
    # 5% itself warns of nothing; the reason replaces the generic advice where kgit knows it
    assert "warning" not in commands.detectable(Spread(4, [1.0] * 4, {"test": 2.0}, "test", 12, 5.0))
    assert commands.detectable(Spread(4, [1.0] * 4, {"test": 9.0}, "test", 12, 5.01, "it times Python")).endswith(
        "above 5%: it times Python")
    assert commands.detectable(Spread(4, [1.0] * 4, {"test": 0.5}, "test", 12, None)) == (
        "decided on the test's figure, which varies 0.5% from run to run; the noise is unknown")


def test_a_tune_summary_says_what_each_stop_of_the_search_means():
    best = step_record(Status.IMPROVED)
    exhausted = commands.loop_summary("tune", StopReason.SPACE_EXHAUSTED, best)
    assert exhausted.startswith("tune stopped: SPACE_EXHAUSTED (every configuration it may run was measured); "
                                f"best is iteration {best.iteration}")
    nothing = commands.loop_summary("tune", StopReason.NO_EXPECTED_GAIN, best)
    assert "NO_EXPECTED_GAIN (every neighbour of the best was measured, and no configuration left" in nothing
    assert commands.loop_summary("run", StopReason.MAX_ITERATIONS, best).startswith("run stopped: MAX_ITERATIONS; ")
