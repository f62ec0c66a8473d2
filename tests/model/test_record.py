"""The typed record: what a valid note holds, and how each kind of invalid note is reported."""

import json
import re

import pytest

from kgit.model.record import (InvalidNote, InvalidRecord, Record, Status, StopReason, from_json, note_text,
                               parse_note, same_environment, to_json)

SHA = "a" * 40

VALID = {
    "kgit": 1, "kernel": "softmax", "iteration": 2, "action": "BLOCK 4096->8192", "status": "IMPROVED",
    "started": "2026-11-30T10:00:00.000001+00:00", "tier": 1, "gpu": "NVIDIA H200", "cpu_timing": False,
    "correctness": True, "metric": "gbps", "value": 3500.0, "spread_pct": 0.4, "peak": 4800.0,
    "pct_of_peak": 72.9, "target": None, "best_before": 3300.0, "delta_pct": 6.06, "reason": None,
    "stop_reason": None, "test": {"gbps": 3500.0}, "output_tail": None, "base": SHA, "duration_s": 12.5,
}


def test_a_record_round_trips_through_json_unchanged():
    record = from_json(VALID)
    assert record.status is Status.IMPROVED and record.kept and record.value == 3500.0
    assert to_json(record) == VALID
    assert parse_note(SHA, note_text([record])) == ([record], [])


def test_unknown_keys_of_a_newer_kgit_are_kept():
    record = from_json({**VALID, "noise": {"pairs": 3}})
    assert to_json(record)["noise"] == {"pairs": 3}


def test_attachments_are_written_only_when_present():
    record = from_json(VALID)
    assert "profile" not in to_json(record)
    assert to_json(record.replace(profile={"tool": "ncu"}))["profile"] == {"tool": "ncu"}


def test_the_kernels_a_run_launched_and_what_a_step_left_untested_are_written_only_when_known():
    record = from_json({**VALID, "launched": ["_fwd", "_bwd"], "untested": ["Op.backward"]})
    assert (record.launched, record.untested) == (("_fwd", "_bwd"), ("Op.backward",))
    assert to_json(record) == {**VALID, "launched": ["_fwd", "_bwd"], "untested": ["Op.backward"]}
    assert "launched" not in to_json(from_json(VALID)) and "untested" not in to_json(from_json(VALID))


def test_which_run_the_test_output_is_is_written_only_when_known():
    labelled = {**VALID, "test_run": "the candidate's first run"}
    assert from_json(labelled).test_run == "the candidate's first run" and to_json(from_json(labelled)) == labelled
    assert "test_run" not in to_json(from_json(VALID))  # a record from before the key reads back as it was


@pytest.mark.parametrize("change, reason", [
    ({"iteration": "2"}, "iteration must be an integer"),
    ({"iteration": -1}, "iteration must be 0 or more"),
    ({"iteration": True}, "iteration must be an integer"),
    ({"value": "fast"}, "value must be a finite number"),
    ({"value": float("nan")}, "value must be a finite number"),
    ({"value": 0}, "value must be above 0"),
    ({"value": None}, "a kept record (IMPROVED) needs a value"),
    ({"spread_pct": [1]}, "spread_pct must be a finite number"),
    ({"status": "BETTER"}, "status 'BETTER' is none of"),
    ({"stop_reason": "TIRED"}, "stop_reason 'TIRED' is none of"),
    ({"tier": 9}, "tier must be an integer from 1 to 5"),
    ({"test_run": ["first"]}, "test_run must be a string"),
    ({"correctness": "yes"}, "correctness must be true, false or null"),
    ({"base": "--output=/tmp/x"}, "base must be a full object id"),
    ({"base": "HEAD"}, "base must be a full object id"),
    ({"test": [1, 2]}, "test must be an object"),
    ({"kernel": 7}, "kernel must be a string"),
    ({"launched": "_kernel"}, "launched must be a list of at most 1000 names"),
    ({"launched": ["_kernel", 3]}, "launched must be a list of at most 1000 names"),
    ({"untested": [""]}, "untested must be a list of at most 1000 names"),
    ({"untested": ["x" * 201]}, "untested must be a list of at most 1000 names"),
])
def test_a_wrong_type_names_the_key(change, reason):
    with pytest.raises(InvalidRecord, match=re.escape(reason)):
        from_json({**VALID, **change})


@pytest.mark.parametrize("key", ["kernel", "iteration", "action", "status"])
def test_a_missing_key_is_named(key):
    with pytest.raises(InvalidRecord, match=f"missing key '{key}'"):
        from_json({k: v for k, v in VALID.items() if k != key})


def test_a_note_that_is_not_json_is_reported_with_its_commit():
    records, invalid = parse_note(SHA, "this is not JSON")
    assert records == [] and invalid == [InvalidNote(SHA, "not JSON at character 0: Expecting value")]
    assert invalid[0].describe().startswith(f"the note on {SHA[:10]} is not a valid kgit record (not JSON")


def test_a_truncated_note_keeps_its_valid_records_and_reports_the_rest():
    good = json.dumps(VALID)
    other = json.dumps({**VALID, "iteration": 3})
    records, invalid = parse_note(SHA, good + "\n" + other[: len(other) // 2])
    assert [r.iteration for r in records] == [2]
    assert len(invalid) == 1 and invalid[0].reason.startswith("not JSON")


def test_a_json_value_that_is_not_an_object_is_reported():
    records, invalid = parse_note(SHA, "[1, 2, 3]")
    assert records == [] and invalid[0].reason == "a record is a JSON object, not list"


def test_two_runs_in_one_note_are_two_records_with_their_own_keys():
    a = from_json(VALID)
    b = a.replace(started="2026-11-30T11:00:00.000001+00:00")
    records, invalid = parse_note(SHA, note_text([a, b]))
    assert records == [a, b] and not invalid and a.key != b.key


def test_status_and_stop_reason_print_as_their_words():
    assert f"{Status.WITHIN_NOISE}" == "WITHIN_NOISE" and f"{StopReason.MAX_ITERATIONS}" == "MAX_ITERATIONS"
    assert [s for s in Status if s.kept] == [Status.BASELINE, Status.IMPROVED, Status.TARGET_MET]


def test_a_record_is_a_value():
    record = Record("k", 0, "baseline", Status.BASELINE, value=1.0)
    with pytest.raises(AttributeError):
        record.value = 2.0


@pytest.mark.parametrize("status", list(Status))
def test_every_record_on_the_branch_needs_a_value_and_no_attempt_does(status):
    """The boundary is Status.on_branch, not Status.kept: a KEPT_ANYWAY commit stays on the branch and the
    log, README and tune read its figure, so one without a value is as invalid as an IMPROVED one."""
    data = {**VALID, "status": status.value, "value": None}
    if status in (Status.BASELINE, Status.IMPROVED, Status.TARGET_MET, Status.KEPT_ANYWAY):
        with pytest.raises(InvalidRecord, match=re.escape(f"a kept record ({status.value}) needs a value")):
            from_json(data)
        records, invalid = parse_note(SHA, json.dumps(data))
        assert records == [] and invalid == [InvalidNote(SHA, f"a kept record ({status.value}) needs a value")]
    else:
        assert from_json(data).value is None  # an attempt that crashed has no figure
    assert from_json({**data, "value": 1e-9}).value == 1e-9  # any figure above 0 will do


MEASUREMENT = {
    "best": [3300.0, 3310.0], "candidate": [3500.0, 3490.0], "log_ratios": [0.0588, 0.0527], "pairs": 2,
    "runs": 5, "warmups": 1, "verdict": "better", "gain_pct": 5.6, "interval_pct": [4.9, 6.3], "sd": 0.004,
    "rounding": 0.0, "df": 1, "decided_on": "device",
    "device_us": {"best": [2046.2, 2046.0], "candidate": [1938.0, 1941.5]},
}
SPREAD = {"runs": 4, "test": [742.5, 558.6, 701.2, 613.2], "device_us": [2046.4, 2054.5, 2054.5, 2054.1],
          "sd_pct": {"test": 13.753, "device": 0.194}, "decides_on": "device", "max_pairs": 12,
          "smallest_keepable_pct": 1.27, "why": "launch-bound timing"}


def test_a_measurement_is_read_by_name_and_round_trips_unchanged():
    record = from_json({**VALID, "measurement": MEASUREMENT})
    found = record.measurement
    assert (found.pairs, found.runs, found.decided_on, found.interval_pct) == (2, 5, "device", [4.9, 6.3])
    assert to_json(record)["measurement"] == MEASUREMENT
    baseline = from_json({**VALID, "status": "BASELINE", "measurement": {**MEASUREMENT, "spread": SPREAD}})
    assert baseline.measurement.spread.decides_on == "device" and baseline.measurement.spread.sd_pct["test"] == 13.753
    assert to_json(baseline)["measurement"]["spread"] == SPREAD
    # a start without a device recording writes no device_us, and one from a newer kgit keeps its keys
    quiet = {k: v for k, v in SPREAD.items() if k != "device_us"}
    newer = {**MEASUREMENT, "spread": {**quiet, "decides_on": "test", "sd_pct": {"test": 1.0}, "seed": 7}, "cost": 3}
    assert to_json(from_json({**VALID, "measurement": newer}))["measurement"] == newer


def test_a_measurement_from_before_its_keys_reads_with_their_defaults():
    found = from_json({**VALID, "measurement": {"best": [1.0], "candidate": [1.1], "log_ratios": [0.095]}}).measurement
    assert (found.decided_on, found.runs, found.interval_pct, found.spread) == ("test", 0, None, None)


@pytest.mark.parametrize("change, reason", [
    ("x", "measurement must be an object"),
    ({"log_ratios": "xx"}, "measurement.log_ratios must be a list of finite numbers"),
    ({"best": [1.0, float("inf")]}, "measurement.best must be a list of finite numbers"),
    ({"candidate": [True]}, "measurement.candidate must be a list of finite numbers"),
    ({"runs": -1}, "measurement.runs must be a count"),
    ({"warmups": 1.5}, "measurement.warmups must be a count"),
    ({"gain_pct": "5%"}, "measurement.gain_pct must be a finite number"),
    ({"rounding": -0.1}, "measurement.rounding must be a number of 0 or more"),
    ({"interval_pct": [6.3, 4.9]}, "measurement.interval_pct must be [low, high]"),
    ({"interval_pct": [1.0]}, "measurement.interval_pct must be [low, high]"),
    ({"verdict": "faster"}, "measurement.verdict 'faster' is none of"),
    ({"decided_on": "wall"}, "measurement.decided_on 'wall' is neither"),
    ({"device_us": {"best": "fast"}}, "measurement.device_us must hold lists of device times"),
    ({"figure": 3}, "measurement.figure must be a figure's name"),
    ({"spread": []}, "measurement.spread must be an object"),
    ({"spread": {**SPREAD, "runs": "4"}}, "measurement.spread.runs must be a count"),
    ({"spread": {**SPREAD, "test": None}}, "measurement.spread.test must be a list of finite numbers"),
    ({"spread": {**SPREAD, "device_us": ["x"]}}, "measurement.spread.device_us must be a list of finite numbers"),
    ({"spread": {**SPREAD, "sd_pct": {"x": 1.0}}}, "measurement.spread.sd_pct must give"),
    ({"spread": {**SPREAD, "sd_pct": {"test": -1.0}}}, "measurement.spread.sd_pct must give"),
    ({"spread": {**SPREAD, "decides_on": "both"}}, "measurement.spread.decides_on 'both' is neither"),
    ({"spread": {**SPREAD, "max_pairs": 0}}, "measurement.spread.max_pairs must be a count of pairs"),
    ({"spread": {**SPREAD, "smallest_keepable_pct": "1%"}}, "measurement.spread.smallest_keepable_pct must be"),
    ({"spread": {**SPREAD, "why": 5}}, "measurement.spread.why must be a line of text"),
])
def test_a_wrong_measurement_names_its_key(change, reason):
    """A measurement is untrusted input like the rest of a note: a step's noise prior, the start's
    detectable change and the log read it by name, so a value of the wrong kind is refused where it enters."""
    measurement = change if not isinstance(change, dict) else {**MEASUREMENT, **change}
    with pytest.raises(InvalidRecord, match=re.escape(reason)):
        from_json({**VALID, "measurement": measurement})


ENVIRONMENT = {"host": "gpu-7", "device": "nvidia", "python": "3.12.3", "torch": "2.11.0", "triton": "3.6.0",
               "gpu": "NVIDIA H100 80GB HBM3", "gpu_uuid": "GPU-bf85a172", "driver": "580.159.04",
               "clock_sm_mhz": "1980", "clock_mem_mhz": "3201"}


def test_an_environment_is_read_by_name_and_round_trips_unchanged():
    record = from_json({**VALID, "environment": ENVIRONMENT})
    assert (record.environment.host, record.environment.gpu, record.environment.cpu) == (
        "gpu-7", "NVIDIA H100 80GB HBM3", None)
    assert to_json(record)["environment"] == ENVIRONMENT  # what could not be read stays out
    newer = {**ENVIRONMENT, "numa_node": 1}  # a newer kgit's key: kept, written back
    assert to_json(from_json({**VALID, "environment": newer}))["environment"] == newer


def test_two_environments_compare_on_machine_device_driver_and_compilers_not_clocks():
    here = from_json({**VALID, "environment": ENVIRONMENT}).environment
    clocks_moved = from_json({**VALID, "environment": {**ENVIRONMENT, "clock_sm_mhz": "1410"}}).environment
    assert same_environment(here, clocks_moved)
    for key in ("host", "device", "gpu_uuid", "driver", "torch", "triton"):
        there = from_json({**VALID, "environment": {**ENVIRONMENT, key: "other"}}).environment
        assert not same_environment(here, there), key
    assert not same_environment(here, None) and not same_environment(None, None)


@pytest.mark.parametrize("change, reason", [
    ([], "environment must be an object"),
    ({"host": 7}, "environment.host must be a line of text, not 7"),
    ({"gpu": ["H100"]}, "environment.gpu must be a line of text"),
    ({"driver": "5" * 201}, "environment.driver must be a line of text"),
    ({"clock_sm_mhz": 1980}, "environment.clock_sm_mhz must be a line of text"),
])
def test_a_wrong_environment_names_its_key(change, reason):
    environment = change if not isinstance(change, dict) else {**ENVIRONMENT, **change}
    with pytest.raises(InvalidRecord, match=re.escape(reason)):
        from_json({**VALID, "environment": environment})
