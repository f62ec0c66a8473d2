"""Compute-bound kernels (gemm, flash-attention, fused-moe) in Triton's interpreter. CPU only, tiny
shapes: each test file runs as kgit runs it (a subprocess printing the contract JSON); the harness's
own checks are tested in tests/harness/."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

from kgit.harness.tolerance import NORM, compare

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTS = {
    "gemm": "skills/kernels/gemm/test_gemm.py",
    "flash-attention": "skills/kernels/flash-attention/test_flash_attention.py",
    "fused-moe": "skills/kernels/fused-moe/test_fused_moe.py",
}


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.chdir(tmp_path)


def _last_json(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError("no JSON line in:\n" + stdout)


@pytest.mark.parametrize("kernel", sorted(TESTS))
def test_kernel_passes_in_interpreter(kernel, tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, TESTS[kernel]), "--json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = _last_json(proc.stdout)
    assert res["kernel"] == kernel
    assert res["correctness"] is True and res["status"] == "pass", res
    assert res["backend"] == "interpreter" and res["cpu_timing"] is True
    assert res["tflops"] > 0 and res["latency_us"] > 0 and "gbps" not in res
    assert res["checks"] >= 6 and res["speedup"] > 0
    assert [s["role"] for s in res["shapes"]] == ["headline"] and res["headline"] == res["shapes"][0]["label"] + " fp16"


def test_quick_checks_only_the_headline_dtype_and_times_no_baseline(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, TESTS["gemm"]), "--json", "--quick"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=170)
    res = _last_json(proc.stdout)
    assert res["correctness"] is True and res["tflops"] > 0
    assert res["checks"] == 3  # the first three check shapes, in fp16 (the CPU headline's dtype) only
    assert res["speedup"] is None


def test_sweep_reports_the_headline_shapes_own_figure(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, TESTS["gemm"]), "--json", "--sweep", "--no-torch"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=170)
    res = _last_json(proc.stdout)
    head = [s for s in res["shapes"] if s["role"] == "headline"]
    assert len(head) == 1 and len(res["shapes"]) == 4  # 2 sweep shapes x fp16, fp32, one of them the headline
    assert res["headline"] == "64x64x64 fp16" and res["tflops"] == head[0]["tflops"]


# ------------------------------------------------------------------------------------------------
# the templates' other paths, compared with the harness's norm tolerance
# ------------------------------------------------------------------------------------------------
def _template(kernel):
    path = os.path.join(ROOT, os.path.dirname(TESTS[kernel]), "triton_template.py")
    spec = importlib.util.spec_from_file_location(f"{kernel.replace('-', '_')}_template_for_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pointer_paths_match_reference():
    """The non-TMA paths (AMD, pre-Hopper, unaligned rows) on shapes where TMA would also be allowed."""
    g = _template("gemm")
    a, b = torch.randn(40, 32), torch.randn(32, 48)
    c = torch.full((40, 48), float("nan"))
    g.gemm(a, b, out=c, config={"USE_TMA": 0, "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16})
    assert compare(c, a @ b, NORM["fp32"]) is None

    m = _template("fused-moe")
    x, logits = torch.randn(12, 32), torch.randn(12, 4)
    w13, w2 = torch.randn(4, 96, 32) / 6, torch.randn(4, 32, 48) / 7
    out = torch.full((12, 32), float("nan"))
    m.fused_moe(x, w13, w2, logits, 2, out=out, use_tma=False, config={"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16,
                                                                        "DOWN_BLOCK_N": 32})
    assert compare(out, m.reference(x, w13, w2, logits, 2), NORM["fp32"]) is None


def test_gemm_takes_any_config_dict_and_reports_what_it_ran():
    """A config of {} is CONFIG, and last_config names the configuration each call ran (gemm() keys its
    launch cache on the config, so an empty or reordered one must still work)."""
    g = _template("gemm")
    a, b = torch.randn(33, 19), torch.randn(19, 70)
    for config in ({}, {"BLOCK_N": 32, "BLOCK_M": 32, "BLOCK_K": 16}, {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16}):
        c = torch.full((33, 70), float("nan"))
        g.gemm(a, b, out=c, config=config)
        assert compare(c, a @ b, NORM["fp32"]) is None
        assert g.last_config == {**g.CONFIG, **config}


def test_attention_small_key_blocks():
    """BLOCK_N < BLOCK_M: the causal diagonal stage walks several masked key blocks."""
    fa = _template("flash-attention")
    q, k, v = (torch.randn(1, 2, 64, 16) for _ in range(3))
    for causal in (True, False):
        o = torch.full_like(q, float("nan"))
        fa.flash_attention(q, k, v, causal=causal, out=o, config={"BLOCK_M": 32, "BLOCK_N": 16})
        assert compare(o, fa.reference(q, k, v, causal), NORM["fp32"]) is None
