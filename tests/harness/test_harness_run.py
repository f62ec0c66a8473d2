"""The test's command line: what is checked and timed, and the end-to-end JSON."""

from kgit import harness
from kgit.harness.run import check_plan, main, time_plan

PLAN = harness.Plan(check_shapes=[(1,), (2,), (3,), (4,)], extreme_shapes=[(5,), (6,)],
                    time_shapes=[(10,), (20,), (30,), (40,), (50,)], dtypes=("fp32", "bf16"),
                    time_dtypes=("bf16", "fp32"), sweep_shapes=[(20,), (60,)], sweep_dtypes=("bf16",))


def test_checks_cover_the_shapes_in_normal_values_and_the_extreme_ones_in_every_case(softmax_spec):
    spec = softmax_spec(None, cases=("normal", "large", "tiny"))
    plan = check_plan(spec, PLAN, quick=False)
    assert len(plan) == 4 * 2 + 2 * 2 * 2
    assert ((5,), "bf16", "tiny") in plan and ((5,), "bf16", "normal") not in plan
    # --quick: three shapes and one extreme, in the headline's dtype
    assert check_plan(spec, PLAN, quick=True) == [((1,), "bf16", "normal"), ((2,), "bf16", "normal"),
                                                  ((3,), "bf16", "normal"), ((5,), "bf16", "large"),
                                                  ((5,), "bf16", "tiny")]


def test_timing_plans():
    assert len(time_plan(PLAN, quick=False, sweep=False)) == 10
    assert time_plan(PLAN, quick=True, sweep=False) == [((10,), "bf16", "headline"), ((30,), "bf16", "headline"),
                                                        ((50,), "bf16", "headline")]
    swept = time_plan(PLAN, quick=False, sweep=True)
    assert swept[10:] == [((60,), "bf16", "sweep")]  # (20,) bf16 is a headline entry already


def test_a_test_prints_the_contract(softmax_spec, softmax_t, capsys):
    spec = softmax_spec(lambda i, o: softmax_t.softmax(i[0], out=o[0]))
    result = main(spec, ["--json", "--repeats", "2"])
    assert capsys.readouterr().out.count("\n") == 1  # --json: the object alone
    assert result["status"] == "pass" and result["checks"] == 3
    assert result["backend"] == "interpreter" and result["cpu_timing"] is True and result["pct_of_peak"] is None
    assert result["gbps"] > 0 and result["spread_pct"] >= 0 and result["speedup"] > 0
    assert len(result["shapes"][0]["ms_repeats"]) == 2


def test_check_only_and_profile(softmax_spec, softmax_t):
    spec = softmax_spec(lambda i, o: softmax_t.softmax(i[0], out=o[0]))
    checked = main(spec, ["--json", "--check-only"])
    assert checked["status"] == "pass" and checked["shapes"] == [] and checked["gbps"] is None
    profiled = main(spec, ["--profile"])
    assert profiled == {"kernel": "softmax-under-test", "gpu": "triton-interpreter (CPU)", "profile": True,
                        "launches": 3, "shape": [6, 40], "dtype": "fp32", "status": "profiled"}


def test_a_timing_only_run_skips_the_checks_but_still_verifies_what_it_timed(softmax_spec, softmax_t, monkeypatch):
    monkeypatch.setenv("KGIT_TIMING_ONLY", "1")
    honest = main(softmax_spec(lambda i, o: softmax_t.softmax(i[0], out=o[0])), ["--json", "--repeats", "2"])
    assert honest["status"] == "pass" and honest["checks"] == 0 and honest["gbps"] > 0

    def wrong(inputs, outputs):
        softmax_t.softmax(inputs[0], out=outputs[0])
        outputs[0].mul_(1.5)

    wrong = main(softmax_spec(wrong), ["--json", "--repeats", "2"])
    assert wrong["correctness"] is False and wrong["errors"][0]["case"] == "timing"
    monkeypatch.setenv("KGIT_TIMING_ONLY", "0")  # any other value: a full run
    assert main(softmax_spec(lambda i, o: softmax_t.softmax(i[0], out=o[0])), ["--json", "--repeats", "2"])["checks"] == 3
