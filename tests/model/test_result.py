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
