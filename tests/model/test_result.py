"""The test contract: every way a kernel's test can fail is FAILED with a reason, never a traceback."""

import pytest

from kgit.model.result import last_json_object


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
