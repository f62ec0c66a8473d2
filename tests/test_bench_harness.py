"""The harness catches cheating kernels, and lets an honest one pass.

Each cheat is a launcher around the real softmax template (run by Triton's
interpreter on tiny shapes): the harness must fail every one of them.
"""
import importlib.util
import os
import sys

import pytest
import torch

from kgit import bench, gpu

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def _load(name, rel):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


tmpl = _load("softmax_template_for_tests", "skills/kernels/softmax/triton_template.py")


def honest(inputs, outputs):
    tmpl.softmax(inputs[0], out=outputs[0])


def spec_with(kernel, **kw):
    base = dict(
        name="softmax-under-test",
        make_inputs=lambda shape, dtype, device, case: (bench.rand(shape, dtype, device, case),),
        make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
        kernel=kernel,
        reference=lambda inputs: (tmpl.softmax_ref(inputs[0]),),
        torch_impl=lambda inputs: torch.softmax(inputs[0], dim=-1),
        dtypes=("fp32",),
        cases=("normal", "large"),
        interp_check_shapes=[(6, 40), (3, 17)],
        interp_time_shapes=[(6, 40)],
    )
    base.update(kw)
    return bench.Spec(**base)


def run(kernel, **kw):
    return bench.run(spec_with(kernel, **kw), repeats=1)


def test_honest_kernel_passes_and_json_has_contract_fields():
    res = run(honest)
    assert res["status"] == "pass", res["errors"]
    assert res["correctness"] is True
    for key in ("kernel", "gpu", "latency_us", "gbps", "speedup", "spread_pct", "pct_of_peak",
                "pct_of_copy", "shapes", "headline", "backend", "cpu_timing"):
        assert key in res
    assert res["backend"] == "interpreter" and res["cpu_timing"] is True
    assert res["pct_of_peak"] is None  # CPU figures are never compared to a GPU peak
    assert res["gbps"] > 0 and res["spread_pct"] >= 0


def test_calling_torch_is_caught():
    def cheat(inputs, outputs):
        outputs[0].copy_(torch.softmax(inputs[0].float(), dim=-1))

    res = run(cheat)
    assert res["status"] == "fail"
    assert "torch ops" in res["errors"][0]["error"] and "_softmax" in res["errors"][0]["error"]


def test_caching_outputs_by_shape_is_caught():
    cache = {}

    def cheat(inputs, outputs):
        key = tuple(inputs[0].shape)
        if key not in cache:
            tmpl.softmax(inputs[0], out=outputs[0])
            cache[key] = outputs[0].clone()
        outputs[0].copy_(cache[key])

    res = run(cheat)
    assert res["status"] == "fail"
    assert "second input" in res["errors"][0]["error"]


def test_caching_outputs_by_pointer_is_caught():
    cache = {}

    def cheat(inputs, outputs):
        key = (inputs[0].data_ptr(), outputs[0].data_ptr())
        if key not in cache:
            tmpl.softmax(inputs[0], out=outputs[0])
            cache[key] = outputs[0].clone()
        outputs[0].copy_(cache[key])

    res = run(cheat)
    assert res["status"] == "fail"
    assert "in place" in res["errors"][0]["error"]


def test_writing_only_some_rows_is_caught():
    def cheat(inputs, outputs):
        half = max(1, inputs[0].shape[0] // 2)
        tmpl.softmax(inputs[0][:half], out=outputs[0][:half])

    res = run(cheat)
    assert res["status"] == "fail"
    assert "not finite" in res["errors"][0]["error"]


def test_writing_only_some_columns_is_caught():
    def cheat(inputs, outputs):
        x = inputs[0]
        outputs[0][:, :-1].copy_(tmpl.softmax(x.contiguous())[:, :-1])

    res = run(cheat)
    assert res["status"] == "fail"


def test_a_kernel_wrong_only_at_the_timed_shape_is_caught():
    # a tuner's candidate can break a path that only the timed shape takes (e.g. long rows)
    def cheat(inputs, outputs):
        tmpl.softmax(inputs[0], out=outputs[0])
        if inputs[0].shape[1] == 64:
            outputs[0].zero_()

    res = run(cheat, interp_time_shapes=[(4, 64)])
    assert res["status"] == "fail"
    assert res["errors"][0]["case"] == "timing"
    assert "timed output is wrong" in res["errors"][0]["error"]
    assert res["reason"].startswith("(4, 64) fp32 timing: the timed output is wrong")  # what kgit's log shows


def test_leaving_outputs_unwritten_is_caught():
    def cheat(inputs, outputs):
        return tmpl.softmax(inputs[0])  # a new tensor; the given output is never written

    res = run(cheat)
    assert res["status"] == "fail"
    assert "NaN" in res["errors"][0]["error"]


def test_nondeterminism_is_caught():
    # no torch compute: alternates between two code paths (whole row in
    # registers; looped online two-pass) whose roundings differ in the last bit
    calls = []

    def cheat(inputs, outputs):
        calls.append(1)
        cfg = {"BLOCK_SIZE": 16} if len(calls) % 2 else None
        tmpl.softmax(inputs[0], out=outputs[0], config=cfg)

    res = run(cheat, interp_check_shapes=[(8, 100)])
    assert res["status"] == "fail"
    assert "two runs on the same input differ" in res["errors"][0]["error"]


def test_computing_with_torch_under_another_name_is_caught():
    def cheat(inputs, outputs):
        x = inputs[0].float()
        e = (x - x.amax(-1, keepdim=True)).exp()
        outputs[0].copy_(e / e.sum(-1, keepdim=True))

    res = run(cheat)
    assert res["status"] == "fail" and "torch ops" in res["errors"][0]["error"]


def test_wrong_values_fail_and_all_zero_softmax_fails_at_long_rows():
    def zeros(inputs, outputs):
        outputs[0].zero_()

    res = run(zeros, interp_check_shapes=[(2, 4096)])
    assert res["status"] == "fail"
    assert "out of tolerance" in res["errors"][0]["error"]


def test_compare_rejects_nan_and_inf():
    ref = torch.ones(2, 3, dtype=torch.float64)
    tol = bench.TOLERANCES["fp32"]
    assert bench.compare(torch.ones(2, 3), ref, tol) is None
    for bad in (float("nan"), float("inf")):
        out = torch.ones(2, 3)
        out[1, 2] = bad
        assert "not finite" in bench.compare(out, ref, tol)


def test_tolerances_are_per_dtype_and_ordered():
    t = bench.TOLERANCES
    assert t["fp32"]["rtol"] < t["fp16"]["rtol"] < t["bf16"]["rtol"]


def test_cases_generate_what_they_say():
    x = bench.rand((4, 64), torch.float32, "cpu", "equal")
    assert torch.all(x == x[:, :1])
    y = bench.rand((4, 64), torch.float32, "cpu", "neginf")
    assert torch.isinf(y).any() and torch.isfinite(y).any(dim=-1).all()
    z = bench.rand((4, 64), torch.float16, "cpu", "large")
    assert torch.isfinite(z).all() and z.abs().max() > 100


def test_profile_mode_runs_without_checks(capsys):
    res = bench.profile(spec_with(honest))
    assert res["status"] == "profiled" and res["launches"] == 3


def test_peak_table():
    assert gpu.peak_for("NVIDIA H200", "gbps") == 4800
    assert gpu.peak_for("NVIDIA H100 80GB HBM3", "tflops", "bf16") == pytest.approx(989.4)
    assert gpu.peak_for("NVIDIA H100 PCIe", "gbps") == 2000
    assert gpu.peak_for("NVIDIA A100-SXM4-80GB", "gbps") == 2039
    assert gpu.peak_for("NVIDIA GeForce RTX 4090", "tflops", "fp16") == pytest.approx(165.2)
    assert gpu.peak_for("AMD Instinct MI300X", "gbps") == 5300
    assert gpu.peak_for("AMD Instinct MI250X / MI250", "tflops", "torch.bfloat16") == pytest.approx(383.0)
    assert gpu.peak_for("AMD Instinct MI250", "tflops", "tf32") is None
    assert gpu.peak_for("triton-interpreter (CPU)", "gbps") is None
    with pytest.raises(ValueError):
        gpu.peak_for("NVIDIA H200", "flops")


def test_detect_interpreter():
    info = gpu.detect()
    assert info["backend"] == "interpreter" and info["vendor"] == "interpreter"
    assert gpu.measured_copy_gbps() is None
    assert "torch" not in sys.modules or True  # detect() itself may import torch; gpu's top level does not


def test_gpu_module_is_import_light():
    import subprocess
    code = "import sys, kgit.gpu; assert 'torch' not in sys.modules and 'triton' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
