"""The test's command line: what is checked and timed, and the end-to-end JSON."""

import contextlib
import json
import os
import subprocess
import sys

import pytest
import torch

from kgit import harness
from kgit.harness.run import check_plan, main, time_plan

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

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


def test_each_timed_shape_records_the_configuration_its_launch_ran(gemm_spec, gemm_t):
    """A launcher that chooses per shape (AUTOTUNE, a kernel per shape) says what served each timed
    shape; a spec that cannot say records nothing."""
    spec = gemm_spec(lambda i, o: gemm_t.gemm(*i, out=o[0], config={"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16}),
                     launched=lambda: gemm_t.last_config)
    result = main(spec, ["--json", "--repeats", "2"])
    assert [s["config"] for s in result["shapes"]] == [{**gemm_t.CONFIG, "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16}]
    result = main(gemm_spec(lambda i, o: gemm_t.gemm(*i, out=o[0])), ["--json", "--repeats", "2"])
    assert "config" not in result["shapes"][0]


def test_check_only_and_profile(softmax_spec, softmax_t):
    spec = softmax_spec(lambda i, o: softmax_t.softmax(i[0], out=o[0]))
    checked = main(spec, ["--json", "--check-only"])
    assert checked["status"] == "pass" and checked["shapes"] == [] and checked["gbps"] is None
    profiled = main(spec, ["--profile"])
    assert profiled == {"kernel": "softmax-under-test", "gpu": "triton-interpreter (CPU)", "profile": True,
                        "launches": 3, "range": "kgit-profile", "shape": [6, 40], "dtype": "fp32",
                        "status": "profiled"}


def test_profile_launches_once_to_compile_then_in_the_range_and_says_what_they_ran(gemm_spec, gemm_t, monkeypatch):
    from kgit.harness import device

    events = []

    @contextlib.contextmanager
    def profiled_range(name):
        events.append(f"push {name}")
        yield
        events.append("pop")

    monkeypatch.setattr(device, "profiled_range", profiled_range)
    config = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16}

    def launch(inputs, outputs):
        events.append("launch")
        gemm_t.gemm(*inputs, out=outputs[0], config=config)

    profiled = main(gemm_spec(launch, launched=lambda: gemm_t.last_config), ["--profile"])
    assert events == ["launch", "push kgit-profile", "launch", "launch", "launch", "pop"]
    assert profiled["config"] == {**gemm_t.CONFIG, **config}


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


A_TEST_RUN_BY_HAND = '''
import torch
import triton
import triton.language as tl

from kgit import harness


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def double(x, out):
    _double[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)


SPEC = harness.Spec(
    name="double", metric="gbps",
    make_inputs=lambda shape, dtype, device, case: (harness.rand(shape, dtype, device, case),),
    make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
    kernel=lambda inputs, outputs: double(inputs[0], outputs[0]),
    reference=lambda inputs: (inputs[0].double() * 2,),
    gpu=harness.Plan(check_shapes=[(3, 100)], time_shapes=[(1024, 1024)]),
    interpreter=harness.Plan(check_shapes=[(3, 100)], time_shapes=[(8, 64)], dtypes=("fp32",)),
)
if __name__ == "__main__":
    harness.main(SPEC)
'''


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the test runs on it")
@pytest.mark.parametrize("interpret", [None, "0"])
def test_a_test_run_by_hand_without_a_gpu_runs_in_the_interpreter(tmp_path, interpret):
    # As kgit init's hint says: `python test_x.py --check-only`, no TRITON_INTERPRET. Triton would find
    # no driver and fail every check; the harness starts the test again in the interpreter and says so.
    # Set to 0 by the user, TRITON_INTERPRET is left alone (and Triton fails, as asked).
    (tmp_path / "test_double.py").write_text(A_TEST_RUN_BY_HAND)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret is not None:
        env["TRITON_INTERPRET"] = interpret
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "test_double.py", "--check-only", "--json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if interpret is None:
        assert "no GPU found: running again in Triton's interpreter" in proc.stderr
        assert result["backend"] == "interpreter" and result["status"] == "pass" and result["checks"] == 1
    else:
        assert "running again" not in proc.stderr
        assert result["status"] == "fail"


@pytest.mark.parametrize("factor, status", [(2, 0), (3, 1)])
def test_a_test_run_as_a_script_exits_1_on_a_wrong_result_and_prints_its_json_still(tmp_path, factor, status):
    (tmp_path / "test_double.py").write_text(A_TEST_RUN_BY_HAND.replace("* 2, mask", f"* {factor}, mask"))
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "test_double.py", "--check-only", "--json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == status, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["correctness"] is (status == 0)
