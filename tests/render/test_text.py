"""Numbers, statuses and table rows as kgit writes them everywhere: terminal, README, hook."""

import pytest

from kgit.model.record import Measurement, Record, Status, StopReason
from kgit.model.runs import summarize
from kgit.render import text


def rec(iteration=1, status=Status.IMPROVED, **fields):
    return Record("fake", iteration, f"step {iteration}", status, **fields)


@pytest.mark.parametrize("value, shown", [
    (0.0, "0 GBps"), (0.0123, "0.0123 GBps"), (0.999, "0.999 GBps"), (1, "1.0 GBps"), (1.04, "1.0 GBps"),
    (99.9, "99.9 GBps"), (100, "100 GBps"), (100.4, "100 GBps"), (2048.2, "2048 GBps"),
])
def test_metric_precision_at_its_boundaries(value, shown):
    assert text.metric(value, "gbps") == shown


def test_metric_units_cpu_timing_and_nothing_measured():
    assert text.metric(12.0, "tflops") == "12.0 TFLOPS"
    assert text.metric(12.0, "tflops", cpu_timing=True) == "12.0 TFLOPS (CPU)"
    assert text.metric(3.0, "ms") == "3.0 ms"  # a unit kgit does not know is printed as named
    assert text.metric(None, "gbps") == "-" and text.metric(3.0, None) == "-"


@pytest.mark.parametrize("pct, shown", [(12.345, "+12.3%"), (-4.0, "-4.0%"), (0.0, "+0.0%"), (None, "-")])
def test_delta_carries_its_sign(pct, shown):
    assert text.delta(pct) == shown


def test_status_words_with_and_without_a_reason_and_max_iterations():
    assert text.status_words(rec(status=Status.BASELINE)) == "baseline"
    assert text.status_words(rec(status=Status.IMPROVED)) == "improved"
    assert text.status_words(rec(status=Status.TARGET_MET)) == "TARGET_MET"
    assert text.status_words(rec(status=Status.WITHIN_NOISE)) == "within noise, reverted"
    assert text.status_words(rec(status=Status.REGRESSED, reason="slower")) == "regressed, reverted"
    assert text.status_words(rec(status=Status.FAILED)) == "failed, reverted"
    assert text.status_words(rec(status=Status.FAILED, reason="crashed: exit status 3")) == \
        "failed, reverted (crashed: exit status 3)"
    assert text.status_words(rec(status=Status.IMPROVED, stop_reason=StopReason.MAX_ITERATIONS)) == \
        "improved; MAX_ITERATIONS"
    assert text.status_words(rec(status=Status.FAILED, reason="boom", stop_reason=StopReason.MAX_ITERATIONS)) == \
        "failed, reverted (boom); MAX_ITERATIONS"
    long = "x" * 300
    assert text.status_words(rec(status=Status.FAILED, reason=long), reason_chars=None) == f"failed, reverted ({long})"


def test_a_change_stepped_untested_says_so_in_its_status():
    untested = rec(status=Status.WITHIN_NOISE, untested=("_bwd_kernel", "Op.backward"),
                   stop_reason=StopReason.MAX_ITERATIONS)
    assert text.status_words(untested) == ("within noise, reverted; UNTESTED: _bwd_kernel, Op.backward; "
                                           "MAX_ITERATIONS")


def test_a_log_row():
    row = text.log_row(rec(status=Status.REGRESSED, tier=2, correctness=True, metric="gbps", value=90.0,
                           delta_pct=-10.0))
    assert row == ["1", "step 1", "T2", "PASS", "90.0 GBps", "-10.0%", "regressed, reverted"]
    assert text.log_row(rec(status=Status.FAILED))[2:6] == ["-", "-", "-", "-"]


def test_the_final_line():
    base = rec(0, Status.BASELINE, metric="gbps", value=100.0, pct_of_peak=10.0)
    assert text.final_line([rec(0, Status.FAILED)]) == "Final: no successful run yet."
    assert text.final_line([base]) == "Final: 100 GBps (10% of peak; iteration 0's own runs), 0 iterations, in progress."
    better = rec(1, Status.IMPROVED, metric="gbps", value=120.0)
    assert text.final_line([base, better]) == "Final: 120 GBps (iteration 1's own runs), 1 iteration, in progress."
    met = rec(2, Status.TARGET_MET, metric="gbps", value=150.0, stop_reason=StopReason.TARGET_MET, target=150.0)
    assert text.final_line([base, better, met]).endswith("2 iterations, target met.")
    stopped = rec(2, Status.REGRESSED, metric="gbps", value=90.0, stop_reason=StopReason.MAX_ITERATIONS)
    assert text.final_line([base, better, stopped]).endswith(", done (max_iterations).")
    targeted = better.replace(target=200.0)
    assert text.final_line([base, targeted, stopped]).endswith(", target not met (stopped at max_iterations).")


def test_the_final_line_says_when_the_best_was_measured_and_the_latest_re_measurement():
    best = rec(1, Status.IMPROVED, metric="gbps", value=150.0, started="2026-12-06T07:10:33.000001+00:00")
    later = rec(2, Status.WITHIN_NOISE, metric="gbps", value=260.0, started="2026-12-06T08:02:00.000001+00:00",
                measurement=Measurement(best=[262.0, 258.0, 270.0]))
    assert text.final_line([best, later]) == (
        "Final: 150 GBps (iteration 1's own runs, 2026-12-06 07:10 UTC; measured again: 262 GBps, 3 runs in "
        "iteration 2's pairs, 2026-12-06 08:02 UTC), 2 iterations, in progress.")


def test_a_long_failure_reason_is_cut_in_the_log_table_but_kept_in_the_record():
    from kgit.model.record import from_json
    from kgit.render.text import status_words

    def failed(reason):
        return from_json({"kernel": "fake", "iteration": 1, "action": "a", "status": "FAILED", "reason": reason})

    long = "crashed: exit status 1: triton.runtime.errors.OutOfResources: " + "x" * 200
    words = status_words(failed(long))
    assert words.startswith("failed, reverted (crashed: exit status 1: triton") and words.endswith("…)")
    assert len(words) < 130
    assert status_words(failed("short")) == "failed, reverted (short)"
    # cut between words, never inside one ("elements not fin…")
    nan = ("correctness: (3, 33) fp32 large: output 0: 3 of 99 elements not finite (3 NaN: unwritten or "
           "overflowed), in 1 rows (+2 more failures)")
    assert status_words(failed(nan)) == ("failed, reverted (correctness: (3, 33) fp32 large: output 0: 3 of 99 "
                                         "elements not finite (3 NaN: unwritten or…)")


def test_the_summary_counts_reverted_iterations_as_kgit_status_does():
    # a change kept anyway stays on the branch: it is not reverted (kgit status counts it so too)
    rows = [rec(0, Status.BASELINE, metric="gbps", value=100.0), rec(1, Status.REGRESSED, metric="gbps", value=90.0),
            rec(2, Status.KEPT_ANYWAY, metric="gbps", value=95.0), rec(3, Status.FAILED)]
    assert text.summary_row(summarize("NVIDIA H200", rows))[text.SUMMARY_HEADERS.index("Reverted")] == "2"


def test_a_change_kept_anyway_is_not_said_twice_in_the_log():
    from kgit.model.record import from_json
    from kgit.render.text import status_words

    kept = from_json({"kernel": "fake", "iteration": 1, "action": "a", "status": "KEPT_ANYWAY", "value": 1.0,
                      "reason": "kept anyway: it lets the next step fuse (-9.0% [-34.4, +26.3] over 6 pairs)"})
    assert status_words(kept) == "kept anyway (it lets the next step fuse (-9.0% [-34.4, +26.3] over 6 pairs))"


def test_the_summary_says_met_as_the_loop_decided_it_whichever_way_the_figure_runs():
    col = text.SUMMARY_HEADERS.index("Target")
    # a latency in microseconds with a target of 50: lower is better, and 100 has not met it
    latency = [rec(0, Status.BASELINE, metric="latency_us", value=100.0, target=50.0)]
    assert text.summary_row(summarize(None, latency))[col].startswith("not met")
    done = latency + [rec(1, Status.TARGET_MET, metric="latency_us", value=48.0, target=50.0,
                          stop_reason=StopReason.TARGET_MET)]
    assert text.summary_row(summarize(None, done))[col] == "met"


def test_the_summary_shows_the_paired_gain_that_kept_the_best_beside_medians_taken_apart():
    # a clone stepping beside another doubled both loads: the kept step's own median (140418 us) is above the
    # baseline's, measured alone, while its pairs said +34.5%; the Best cell and the legend say which is which
    from kgit.render.commands import summary_table

    rows = [rec(0, Status.BASELINE, metric="device_us", value=86286.0),
            rec(1, Status.IMPROVED, metric="device_us", value=140418.0, delta_pct=34.5),
            rec(2, Status.REGRESSED, metric="device_us", value=150000.0, delta_pct=-3.0)]
    summary = summarize(None, rows)
    assert summary.best_gain_pct == 34.5
    best = text.summary_row(summary)[text.SUMMARY_HEADERS.index("Best")]
    assert best == "140418 us on the device (iter 1, kept at +34.5%)"
    assert summary_table([summary]).endswith(text.SUMMARY_LEGEND)
    # the baseline alone is the best: no gain to show, and no legend to explain one
    alone = summarize(None, rows[:1])
    assert alone.best_gain_pct is None
    assert text.summary_row(alone)[text.SUMMARY_HEADERS.index("Best")] == "86286 us on the device (iter 0)"
    assert text.SUMMARY_LEGEND not in summary_table([alone])


def test_the_summary_counts_the_steps_of_two_clones_numbered_alike():
    # alice and bob each stepped iteration 3 from the same line: four steps, all reverted, not "3 iterations, 4
    # reverted"
    rows = [rec(0, Status.BASELINE, metric="gbps", value=1.0, started="2026-12-07T20:19:00.000000"),
            *(rec(i, Status.WITHIN_NOISE, metric="gbps", value=1.0, started=f"2026-12-07T20:2{i}:00.000000")
              for i in (1, 2, 3)),
            rec(3, Status.WITHIN_NOISE, metric="gbps", value=1.0, started="2026-12-07T20:23:00.100000")]
    row = text.summary_row(summarize(None, rows))
    assert row[text.SUMMARY_HEADERS.index("Iterations")] == "4"
    assert row[text.SUMMARY_HEADERS.index("Reverted")] == "4"
