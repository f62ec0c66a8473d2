"""The JSON a test prints: the headline and the failure rule (synthetic entries, no timing)."""

import json
import math

import pytest

from kgit.harness import contract

INFO = {"name": "NVIDIA H200", "backend": "cuda"}


def entry(label, ms, role="headline", dtype="bf16", flops=2e12, bytes_=4e9, **extra):
    median = sorted(ms)[len(ms) // 2]
    return {"shape": [1], "label": label, "dtype": dtype, "role": role, "bytes": bytes_, "flops": flops,
            "ms_repeats": ms, "latency_us": median * 1e3, "tflops": flops / (median * 1e-3) / 1e12,
            "gbps": bytes_ / (median * 1e-3) / 1e9, "spread_pct": 0.0, **extra}


def build(spec, entries, failures=()):
    return contract.build(spec, INFO, 7, 3, 0.5, list(failures), entries, None)


@pytest.fixture
def tflops_spec(gemm_spec):
    return gemm_spec(lambda i, o: None)


def test_one_headline_entry_gives_its_own_figures_under_its_own_label(tflops_spec):
    # the bug this fixes: --sweep reported the first sweep shape's figure under the headline's label
    result = build(tflops_spec, [entry("1024^3", [1.0, 1.0, 1.0], role="sweep"),
                                 entry("4096^3", [4.0, 5.0, 4.5], speedup=0.9, pct_of_peak=45.0),
                                 entry("8192^3", [9.0, 9.0, 9.0], role="sweep")])
    assert result["headline"] == "4096^3 bf16"
    assert result["tflops"] == pytest.approx(2e12 / 4.5e-3 / 1e12, rel=1e-4)
    assert result["latency_us"] == 4500.0 and result["speedup"] == 0.9 and result["pct_of_peak"] == 45.0
    # the spread of the metric over the repeats: (500 - 400) / 444.44
    assert result["spread_pct"] == pytest.approx(22.5, rel=1e-4)


def test_several_headline_entries_give_their_geometric_mean(softmax_spec):
    spec = softmax_spec(lambda i, o: None)
    result = build(spec, [entry("a", [1.0, 2.0], bytes_=1e9, dtype="fp32"),
                          entry("b", [4.0, 4.0], bytes_=1e9, dtype="fp16")])
    # per repeat: geomean(1000, 250) = 500 and geomean(500, 250) = 353.6 GB/s; spread 146.4 / 426.8
    assert result["gbps"] == pytest.approx(math.sqrt(1e9 / 2e-3 / 1e9 * 250.0), rel=1e-4)
    assert result["spread_pct"] == pytest.approx(100 * (500 - math.sqrt(500 * 250)) / ((500 + math.sqrt(500 * 250)) / 2),
                                                 rel=1e-4)
    assert result["headline"] == "geometric mean over 2 timed entries (2 shapes x fp16,fp32)"
    assert result["speedup"] is None  # not every entry timed torch


def test_a_tflops_kernel_reports_no_top_level_gbps(tflops_spec):
    # kgit reads whichever of gbps and tflops it finds first: there must be one
    result = build(tflops_spec, [entry("x", [1.0])])
    assert "tflops" in result and "gbps" not in result


def test_the_failure_rule(tflops_spec):
    failure = {"shape": [3, 5], "dtype": "bf16", "case": "large", "error": "1 of 15 elements not finite",
               "kind": "not_finite"}
    result = build(tflops_spec, [], [failure])
    assert result["correctness"] is False and result["status"] == "fail"
    for key in ("latency_us", "tflops", "speedup", "spread_pct", "pct_of_peak", "pct_of_copy", "headline"):
        assert result[key] is None, key
    assert result["reason"] == "(3, 5) bf16 large: 1 of 15 elements not finite"
    assert result["n_errors"] == 1 and result["errors"] == [failure]


INTERPRETER = {"name": "triton-interpreter (CPU)", "backend": "interpreter"}
BF16_FAILURE = {"shape": [3, 33], "dtype": "bf16", "case": "normal", "error": "1 of 99 elements not finite",
                "kind": "not_finite"}


@pytest.mark.parametrize("info, failures, explained", [
    (INTERPRETER, [BF16_FAILURE], True),  # Triton's interpreter does not compute on bf16
    (INTERPRETER, [BF16_FAILURE, {**BF16_FAILURE, "dtype": "fp32"}], False),  # fp32 failed too: the kernel
    (INFO, [BF16_FAILURE], False),  # on a GPU a bf16 failure is the kernel's
])
def test_a_bf16_only_failure_in_the_interpreter_says_why(tflops_spec, info, failures, explained):
    result = contract.build(tflops_spec, info, 7, 3, 0.5, failures, [], None)
    assert result["reason"].startswith("(3, 33) bf16 normal: 1 of 99 elements not finite")
    assert (contract.INTERPRETER_BF16 in result["reason"]) == explained
    assert len(result["reason"]) <= 300
    assert (contract.INTERPRETER_BF16 in contract.human(result, "tflops")) == explained


def test_a_wrong_timed_entry_fails_the_run(tflops_spec):
    result = build(tflops_spec, [entry("x", [1.0], error="the timed output is wrong: NaN")])
    assert result["status"] == "fail" and result["tflops"] is None
    assert result["errors"][0]["case"] == "timing" and result["errors"][0]["kind"] == "wrong"


def failure(dtype, error, kind, case="normal"):
    return {"shape": [3, 33], "dtype": dtype, "case": case, "error": error, "kind": kind}


def test_the_reason_names_the_failure_that_matters_most(tflops_spec):
    # found in plan order: the fp16 refusal first, the NaNs at fp32 later; the reason names the NaNs
    declined = failure("fp16", "raised TypeError: fp16 is not supported", "unsupported")
    crashed = failure("fp32", "raised IndexError: list index out of range", "crash")
    nan = failure("fp32", "output 0: 3 of 99 elements not finite (3 NaN: unwritten or overflowed), in 1 rows",
                  "not_finite", case="large")
    result = build(tflops_spec, [], [declined, crashed, nan])
    assert result["reason"] == ("(3, 33) fp32 large: output 0: 3 of 99 elements not finite (3 NaN: unwritten or "
                                "overflowed), in 1 rows (+2 more failures)")
    assert [e["kind"] for e in result["errors"]] == ["not_finite", "crash", "unsupported"]
    # a wrong value outranks them all, a timed entry's included; within a kind, the order found
    wrong = build(tflops_spec, [entry("x", [1.0], error="the timed output is wrong: output 0: 2 of 99 elements "
                                                        "out of tolerance")], [declined, nan, {**nan, "dtype": "fp16"}])
    assert wrong["reason"].startswith("(1,) bf16 timing: the timed output is wrong")
    assert [(e["kind"], e["dtype"]) for e in wrong["errors"]] == [
        ("wrong", "bf16"), ("not_finite", "fp32"), ("not_finite", "fp16"), ("unsupported", "fp16")]


def test_a_long_reason_is_cut_between_words(tflops_spec):
    long = failure("fp32", "raised RuntimeError: " + " ".join(f"word{i}" for i in range(100)), "crash")
    reason = build(tflops_spec, [], [long])["reason"]
    whole = f"(3, 33) fp32 normal: {long['error']}"
    assert len(reason) <= contract.REASON_CHARS and reason.endswith("…")
    assert whole.startswith(reason[:-1]) and whole[len(reason) - 1] == " "  # the last word shown is whole


def test_floats_are_rounded_and_non_finite_ones_become_null(tflops_spec):
    result = build(tflops_spec, [entry("x", [1.0 / 3.0], pct_of_peak=float("nan"))])
    assert result["latency_us"] == 333.33
    assert result["shapes"][0]["pct_of_peak"] is None


def test_the_json_object_is_printed_last(tflops_spec, capsys):
    result = build(tflops_spec, [entry("x", [1.0], speedup=1.0, baseline="torch", torch_latency_us=1.0)])
    contract.emit(result, "tflops", human_text=True)
    lines = capsys.readouterr().out.strip().splitlines()
    assert "headline (x bf16)" in lines[-2] and json.loads(lines[-1]) == result
