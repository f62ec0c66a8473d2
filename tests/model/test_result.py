"""The test contract: every way a kernel's test can fail is FAILED with a reason, never a traceback."""

import math

import pytest

from kgit.model.result import Reading, from_output, last_json_object, unit_of, validate
from workspace import KERNEL


@pytest.mark.parametrize("mode, reason", [
    ("crash", "crashed: exit status 3: RuntimeError: boom"),  # the exception, the last line of stderr
    ("segv", "crashed: killed by signal SIGSEGV"),
    ("nojson", "no JSON object on stdout"),
    ("malformed", "no JSON object on stdout"),
    ("nan", "invalid metric: gbps = nan"),
    ("negative", "invalid metric: gbps = -1.0"),
])
def test_broken_tests_are_failed_and_reverted(started, mode, reason):
    started.set_kernel(MODE=mode, METRIC=150.0)
    run = started.ok("step", "-m", mode, "--json")
    record = run.json()
    assert record["status"] == "FAILED" and record["reason"] == reason
    assert record["output_tail"] is not None and "Traceback" not in run.stderr
    assert "METRIC = 100.0" in started.kernel_text()
    started.check_invariants()


def test_output_tail_is_kept(started):
    started.set_kernel(MODE="crash")
    record = started.ok("step", "-m", "crash", "--json").json()
    assert "RuntimeError: boom" in record["output_tail"]


def test_indented_json_after_a_marker_is_accepted(started):
    started.set_kernel(MODE="multiline", METRIC=130.0)
    record = started.ok("step", "-m", "gemm-style output", "--json").json()
    assert record["status"] == "IMPROVED" and record["value"] == 130.0


def test_last_json_object_picks_the_last_top_level_object():
    out = '{"a": 1}\nnoise\n--- JSON ---\n{\n  "b": {\n    "c": 2\n  }\n}\n'
    assert last_json_object(out) == {"b": {"c": 2}}
    assert last_json_object('{"x": 1}\n{"y": 2}\ntrailing text\n') == {"y": 2}
    assert last_json_object("[1, 2]\nnothing\n") is None
    assert last_json_object('  {"indented": true}\n') is None  # only top-level objects count


GEMM = {"kernel": "gemm", "gpu": "NVIDIA H200", "correctness": True, "status": "pass", "avg_vs_pytorch": 0.95,
        "benchmarks": [{"size": "4096x4096x4096", "triton_tflops": 642.1, "pytorch_tflops": 695.9, "vs_pytorch": 0.92},
                       {"size": "8192x8192x8192", "triton_tflops": 700.0, "pytorch_tflops": 710.0, "vs_pytorch": 0.99}]}


def test_a_per_shape_list_gives_the_geometric_mean_of_the_kernels_figures_not_the_references():
    found = validate(GEMM, None, 1.0, "")
    assert found.passed and found.metric == "benchmarks.triton_tflops"
    assert found.value == pytest.approx(math.sqrt(642.1 * 700.0))
    assert found.figure == "geometric mean of 2 figures at benchmarks.triton_tflops"
    assert validate({"correctness": True, "gbps": 10.0, "benchmarks": GEMM["benchmarks"]}, None, 1.0, "").figure is None


@pytest.mark.parametrize("path, value", [("avg_vs_pytorch", 0.95), ("benchmarks.vs_pytorch", math.sqrt(0.92 * 0.99)),
                                         ("benchmarks.pytorch_tflops", math.sqrt(695.9 * 710.0))])
def test_a_named_path_picks_the_figure(path, value):
    found = validate(GEMM, Reading(path), 1.0, "")
    assert found.passed and found.metric == path and found.value == pytest.approx(value)
    # where the figure came from is said only when it is not simply the field kgit.yaml named
    assert (found.figure is None) == ("." not in path)


def test_a_path_to_nothing_or_to_a_bad_number_fails_with_its_reason():
    assert validate(GEMM, Reading("benchmarks.nope"), 1.0, "").reason == "invalid JSON: no number at benchmarks.nope"
    bad = {**GEMM, "benchmarks": [{"triton_tflops": 1.0}, {"triton_tflops": -2.0}]}
    assert validate(bad, None, 1.0, "").reason.startswith("invalid metric: benchmarks.triton_tflops holds")
    assert validate({"correctness": True, "size": 3}, None, 1.0, "").reason.startswith("invalid JSON: no gbps or tflops")


@pytest.mark.parametrize("printed, rounding", [
    ('{"correctness": true, "gbps": 0.02}', -math.log(1 - 0.25)),  # 0.01 steps: the true figure 0.015-0.025
    ('{"correctness": true, "gbps": 642.1}', -math.log(1 - 0.05 / 642.1)),
    ('{"correctness": true, "gbps": 3462}', -math.log(1 - 0.5 / 3462)),  # an int: steps of 1
    ('{"correctness": true, "gbps": 6e-06}', -math.log(1 - 0.5 / 6)),
    ('{"correctness": true, "gbps": 0.01}', math.log(2)),  # the smallest figure printed: half of it may be rounding
    ('{"correctness": true, "benchmarks": [{"x_tflops": 10.0}, {"x_tflops": 1.25}]}',
     # a geometric mean: the mean of the logs' bounds, each figure rounded as the most precise shows (2 decimals)
     (-math.log(1 - 0.005 / 10) - math.log(1 - 0.005 / 1.25)) / 2),
])
def test_a_figures_rounding_bound_comes_from_its_printed_digits(printed, rounding):
    found = from_output(printed + "\n", None, None, 1.0, "")
    assert found.passed and found.rounding == pytest.approx(rounding, rel=1e-9)


def test_correctness_false_is_a_wrong_result_whatever_the_exit_status():
    out = 'checking...\n{"correctness": false, "status": "fail", "error": "max error 0.5"}\n'
    wrong = from_output(out, "crashed: exit status 1", None, 1.0, "")
    assert wrong.ok and not wrong.correctness and wrong.reason == "correctness: max error 0.5"
    crashed = from_output('{"correctness": true, "gbps": 1.0}\n', "crashed: exit status 1", None, 1.0, "")
    assert not crashed.ok and crashed.reason == "crashed: exit status 1"  # a pass that then crashed is a crash
    assert from_output(out, "timeout: no result after 5 s", None, 1.0, "").reason.startswith("timeout")


def test_a_collection_style_test_runs_the_loop_unchanged(ws):
    ws.set_kernel(MODE="collection")
    ws.git("commit", "-qam", "a test in the collection's form")
    start = ws.ok("start", "fake")
    assert "figure: geometric mean of 2 figures at benchmarks.triton_tflops" in start.stdout
    assert "baseline 100.0 TFLOPS" in start.stdout  # sqrt(50 * 200)
    ws.set_kernel(METRIC=130.0)
    assert ws.ok("step", "-m", "faster", "--json").json()["status"] == "IMPROVED"
    ws.set_kernel(CORRECT=False)
    (ws.root / KERNEL).write_text((ws.root / KERNEL).read_text() + "EXIT_ON_WRONG = True\n")
    record = ws.ok("step", "-m", "wrong", "--json").json()
    assert record["status"] == "FAILED" and record["correctness"] is False and record["reason"].startswith("correctness")


@pytest.mark.parametrize("payload, passed, reason", [
    ({"correct": True, "gbps": 10.0}, True, None),  # other collections' name for the verdict
    ({"correct": False, "gbps": 10.0}, False, "correctness: the test reports incorrect results"),
    ({"correctness": False, "correct": True, "gbps": 10.0}, False,  # the contract's name wins
     "correctness: the test reports incorrect results"),
    ({"correct": "yes", "gbps": 10.0}, False, 'invalid JSON: correct = "yes": the verdict must be true or false'),
    ({"correctness": 1, "gbps": 10.0}, False, "invalid JSON: correctness = 1: the verdict must be true or false"),
    ({"ok": True, "gbps": 10.0}, True, None),  # as many hand-written tests print it
    ({"ok": False, "gbps": 10.0}, False, "correctness: the test reports incorrect results"),
    ({"ok": "yes", "gbps": 10.0}, False, 'invalid JSON: ok = "yes": the verdict must be true or false'),
    ({"gbps": 10.0}, False, 'invalid JSON: no verdict: print "correctness": true or false (or "correct", "ok"), or '
                            "say in kgit.yaml what the test's verdict is: 'verdict: {key: passed, pass: true}' or "
                            "'verdict: exit_status'"),
])
def test_the_verdict_is_read_under_either_name_and_never_guessed(payload, passed, reason):
    result = validate(payload, None, 1.0, "")
    assert result.passed is passed and result.reason == reason
    assert result.value == (10.0 if passed else None)


def test_a_wrong_result_printed_as_correct_false_then_exit_1_is_a_wrong_result():
    result = from_output('{"correct": false, "gbps": 3.0}\n', "crashed: exit status 1", None, 1.0, "")
    assert result.ok and not result.correctness  # not a crash: the test ran and said its result is wrong


@pytest.mark.parametrize("payload, metric, value, figure", [
    ({"correct": True, "ms": 0.5, "GB/s": 812.5}, "GB/s", 812.5, "GB/s"),  # as other teams print it
    ({"correctness": True, "TFLOP/s": 640.0}, "TFLOP/s", 640.0, "TFLOP/s"),
    ({"correctness": True, "TFLOPS": 640.0, "gbps": 3.0}, "gbps", 3.0, None),  # the contract's name first
])
def test_a_figure_spelled_with_its_unit_is_found(payload, metric, value, figure):
    result = validate(payload, None, 1.0, "")
    assert (result.metric, result.value, result.figure) == (metric, value, figure)


@pytest.mark.parametrize("payload, named", [
    ({"ok": True, "time_ms": 0.12, "n": 16384}, "time_ms"),
    ({"correct": True, "torch_ms": 0.3, "latency_us": 26.4}, "latency_us"),  # a reference's time is not the kernel's
    ({"correctness": True, "ms": 0.5}, "ms"),
])
def test_a_time_alone_is_never_taken_but_named_with_how_to_use_it(payload, named):
    result = validate(payload, None, 1.0, "")
    assert not result.passed
    assert result.reason == (f"invalid JSON: no gbps or tflops field; {named} looks like a time: name it with "
                             f"'metric: {named}' and 'better: lower' for this kernel in kgit.yaml")
    assert validate(payload, Reading(named), 1.0, "").value == payload[named]  # named, it is the figure


def test_two_figures_spelled_with_units_are_not_guessed_between():
    result = validate({"correctness": True, "GB/s": 1.0, "TFLOP/s": 2.0}, None, 1.0, "")
    assert result.reason.startswith("invalid JSON: no gbps or tflops field")
    assert validate({"correctness": True, "GB/s": 1.0, "TFLOP/s": 2.0}, Reading("TFLOP/s"), 1.0, "").value == 2.0


@pytest.mark.parametrize("name, unit", [
    ("gbps", "gbps"), ("GB/s", "gbps"), ("benchmarks.triton_gbps", "gbps"), ("tflops", "tflops"),
    ("TFLOP/s", "tflops"), ("results.TFLOPS", "tflops"), ("latency_us", None), ("avg_vs_pytorch", None),
    ("TB/s", None), (None, None),
])
def test_the_unit_of_a_figure_is_read_from_its_name(name, unit):
    assert unit_of(name) == unit


def test_a_spread_is_what_the_test_reported_and_none_when_it_reported_none():
    assert validate({"correctness": True, "gbps": 10.0, "spread_pct": 2.5}, None, 1.0, "").spread_pct == 2.5
    assert validate({"correctness": True, "gbps": 10.0}, None, 1.0, "").spread_pct is None  # was 0.0: "no noise"
    assert validate({"correctness": True, "gbps": 10.0, "spread_pct": None}, None, 1.0, "").spread_pct is None
    assert not validate({"correctness": True, "gbps": 10.0, "spread_pct": -1}, None, 1.0, "").ok
    assert validate({"correctness": False, "gbps": 10.0}, None, 1.0, "").spread_pct is None


# --- any test format: kgit.yaml's verdict, metric_pattern and device_us ---------------------------

from kgit.model.device_time import DeviceTime  # noqa: E402
from kgit.model.result import DEVICE_METRIC, decimals_of, rounding_of, reported_latency_us  # noqa: E402

DEVICE = DeviceTime(total_us=2500.0, launches=250, kernels=("_k",), source="cupti", median_launch_us=10.0)


@pytest.mark.parametrize("payload, passed", [
    ({"passed": True, "gbps": 3.0}, True),
    ({"passed": False, "gbps": 3.0}, False),
    ({"passed": 1, "gbps": 3.0}, False),  # true is not 1
    ({"passed": "true", "gbps": 3.0}, False),
])
def test_a_verdict_mapping_names_the_key_and_the_value_that_means_pass(payload, passed):
    result = validate(payload, Reading(verdict={"key": "passed", "pass": True}), 1.0, "")
    assert result.ok and result.passed is passed
    assert result.reason == (None if passed else "correctness: the test reports incorrect results")


def test_a_verdict_mapping_to_a_string_and_a_missing_key():
    reading = Reading(verdict={"key": "status", "pass": "PASS"})
    assert validate({"status": "PASS", "gbps": 3.0}, reading, 1.0, "").passed
    assert not validate({"status": "FAIL", "gbps": 3.0}, reading, 1.0, "").passed
    missing = validate({"gbps": 3.0, "correctness": True}, reading, 1.0, "")
    assert not missing.ok and missing.reason == "invalid JSON: no status in the test's JSON (kgit.yaml's verdict names it)"


def test_the_exit_status_as_the_verdict():
    reading = Reading(figure=DEVICE_METRIC, verdict="exit_status")
    passed = from_output("3 passed in 0.5s\n", None, reading, 1.0, "", DEVICE)
    assert passed.passed and passed.metric == DEVICE_METRIC and passed.value == 2500.0
    failed = from_output("1 failed\n", "crashed: exit status 1: AssertionError", reading, 1.0, "", DEVICE)
    assert failed.ok and not failed.correctness
    assert failed.reason == "correctness: the test failed (exit status 1: AssertionError)"
    killed = from_output("", "crashed: killed by signal SIGSEGV", reading, 1.0, "", DEVICE)
    assert not killed.ok and killed.reason == "crashed: killed by signal SIGSEGV"  # a crash, not a verdict
    timeout = from_output("", "timeout: no result after 5 s", reading, 1.0, "")
    assert not timeout.ok


def test_without_a_verdict_setting_a_test_without_json_fails_with_the_way_out():
    result = from_output("all good\n", None, Reading(), 1.0, "")
    assert not result.ok and result.reason == "no JSON object on stdout"


def test_device_us_is_kgits_device_time_and_needs_a_recorded_launch():
    found = validate({"correctness": True}, Reading(DEVICE_METRIC), 1.0, "", DEVICE)
    assert found.passed and (found.metric, found.value, found.rounding) == (DEVICE_METRIC, 2500.0, 0.0)
    missing = validate({"correctness": True}, Reading(DEVICE_METRIC), 1.0, "", None)
    assert not missing.ok and missing.reason.startswith("no figure: kgit recorded no launch")


def test_a_figure_read_from_plain_text_by_a_pattern():
    reading = Reading(verdict="exit_status", pattern=r"softmax: ([0-9.]+) GB/s")
    out = "warming up\nsoftmax: 812.5 GB/s\nsoftmax: 815.25 GB/s\ndone\n"
    found = from_output(out, None, reading, 1.0, "")
    assert found.passed and found.value == 815.25 and found.printed == (815.25,)  # the last match
    assert not from_output("nothing\n", None, reading, 1.0, "").ok
    bad = from_output("softmax: 1.2.3 GB/s\n", None, reading, 1.0, "")
    assert not bad.ok and "not a number" in bad.reason


def test_a_test_printing_no_figure_is_told_both_ways_out():
    found = from_output("ok\n", None, Reading(verdict="exit_status"), 1.0, "")
    assert not found.ok and "metric_pattern" in found.reason and DEVICE_METRIC in found.reason


def test_rounding_is_read_from_every_run_of_the_figure_not_one_value():
    # round(x, 4) prints 0.004 for 0.00401: taken alone it looks rounded to 3 decimals (a 12.5% bound)
    alone = from_output('{"correctness": true, "gbps": 0.004}\n', None, None, 1.0, "")
    assert decimals_of([alone]) == 3
    other_run = from_output('{"correctness": true, "gbps": 0.0043}\n', None, None, 1.0, "")
    assert decimals_of([alone, other_run]) == 4
    assert rounding_of(alone.printed, decimals_of([alone, other_run])) == pytest.approx(-math.log(1 - 0.00005 / 0.004))


def test_rounding_is_read_from_the_tests_other_figures_too():
    # a test that prints every figure with round(x, 4): its 0.004 is 0.0040
    found = from_output('{"correctness": true, "gbps": 0.004, "latency_us": 12.3456, "ratio": 1.0012}\n',
                        None, None, 1.0, "")
    assert found.other_decimals == 4 and decimals_of([found]) == 4
    # the least precise of the others counts: one at 1 decimal, one at 4, says no more than 1
    mixed = from_output('{"correctness": true, "gbps": 0.004, "latency_us": 12.3, "ratio": 1.0012}\n',
                        None, None, 1.0, "")
    assert decimals_of([mixed]) == 3
    # a figure printed unrounded (17 digits) is not rounded at all, whatever else the test prints
    raw = from_output('{"correctness": true, "gbps": 0.0040123456789012345, "latency_us": 12.3}\n', None, None,
                      1.0, "")
    assert decimals_of([raw]) is None and raw.rounding == 0.0


def test_the_tests_own_time_of_a_call_in_microseconds_():
    assert reported_latency_us({"latency_us": 26.4}) == ("latency_us", 26.4)
    assert reported_latency_us({"pytorch_us": 9.0, "time_ms": 0.03}) == ("time_ms", 30.0)
    assert reported_latency_us({"gbps": 3.0, "ms": True}) is None


@pytest.mark.parametrize("printed, reason", [
    ('{"correctness": true, "gbps": 1' + "0" * 400 + "}", "invalid metric: gbps = 1" + "0" * 56 + "..."),
    ('{"correctness": true, "gbps": 1.0, "spread_pct": 1' + "0" * 400 + "}",
     "invalid JSON: spread_pct = 1" + "0" * 56 + "..."),
    ('{"correctness": true, "gbps": 1' + "0" * 5000 + "}", "no JSON object on stdout"),  # past int's digit limit
    ('{"correctness": true, "gbps": 1.0, "x": ' + "[" * 100000 + "]" * 100000 + "}", "no JSON object on stdout"),
    ('{"correctness": true, "benchmarks": [{"x_gbps": 1' + "0" * 400 + "}]}",
     "invalid JSON: no number at benchmarks.x_gbps"),
])
def test_numbers_no_float_holds_and_json_nested_past_any_limit_are_refused_in_one_short_line(printed, reason):
    found = from_output(printed + "\n", None, None, 1.0, "")
    assert not found.ok and found.reason == reason
