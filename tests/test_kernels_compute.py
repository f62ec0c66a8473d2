"""Compute-bound kernels (gemm, flash-attention, fused-moe) in Triton's interpreter, and the harness's
anti-cheat checks. CPU only, tiny shapes: each test file runs as kgit runs it (a subprocess printing
the contract JSON); the cheat tests hand the harness deliberately broken launchers."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
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
    assert res["tflops"] > 0 and res["latency_us"] > 0
    assert all(s["correct"] for s in res["shapes"])


def test_quick_checks_only_the_headline_dtype_and_times_no_baseline(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, TESTS["gemm"]), "--json", "--quick"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=170)
    res = _last_json(proc.stdout)
    checks = [s for s in res["shapes"] if s["role"] == "check"]
    assert res["correctness"] is True and res["tflops"] > 0
    assert checks and {s["dtype"] for s in checks} == {"float16"}  # the CPU headline is fp16; fp32 is skipped
    assert res["speedup"] is None


# ------------------------------------------------------------------------------------------------
# anti-cheat: a launcher that does not compute what it claims must fail verification
# ------------------------------------------------------------------------------------------------
def _bc():
    sys.path.insert(0, ROOT)
    from kgit import bench_compute

    return bench_compute


def _gemm_problem(launch_factory, M=24, N=20, K=16, dtype="float16"):
    """A GEMM problem whose launcher is launch_factory(a, b, out) -> callable."""
    import torch

    bc = _bc()
    gen = bc.new_generator()
    a = bc.randn_(torch.empty((M, K), dtype=getattr(torch, dtype)), gen)
    b = bc.randn_(torch.empty((K, N), dtype=getattr(torch, dtype)), gen)
    out = torch.empty((M, N), dtype=getattr(torch, dtype))

    def refill():
        bc.randn_(a, gen)
        bc.randn_(b, gen)

    return bc.Problem(label="cheat", dtype=dtype, flops=2.0 * M * N * K, out=out, launch=launch_factory(a, b, out),
                      reference=lambda: (out, a.float() @ b.float()), refill=refill)


def _honest(a, b, out):
    gemm = _bc().load_sibling(os.path.join(ROOT, TESTS["gemm"]), "triton_template", "kgit_gemm_template")

    return lambda: gemm.gemm(a, b, out=out)


def test_honest_launcher_passes():
    assert _bc().verify(_gemm_problem(_honest))["ok"]


def test_calling_torch_matmul_is_caught():
    def factory(a, b, out):
        return lambda: out.copy_(torch_mm(a, b))

    import torch

    torch_mm = torch.matmul
    res = _bc().verify(_gemm_problem(factory))
    assert not res["ok"] and "torch matrix ops" in res["reason"]


def test_sdpa_call_is_caught():
    import torch

    bc = _bc()
    q = torch.randn(1, 1, 8, 4)
    out = torch.empty_like(q)
    p = bc.Problem(label="sdpa", dtype="float32", flops=1.0, out=out,
                   launch=lambda: out.copy_(torch.nn.functional.scaled_dot_product_attention(q, q, q)),
                   reference=lambda: (out, torch.nn.functional.scaled_dot_product_attention(q, q, q)),
                   refill=lambda: q.normal_())
    res = bc.verify(p)
    assert not res["ok"] and "attention" in res["reason"]


def test_cached_output_is_caught():
    """Computes once (honestly) and then replays the first result: stale after the in-place refill."""
    def factory(a, b, out):
        honest = _honest(a, b, out)
        cache = {}

        def launch():
            if "c" not in cache:
                honest()
                cache["c"] = out.clone()
            out.copy_(cache["c"])
        return launch

    res = _bc().verify(_gemm_problem(factory))
    assert not res["ok"] and "refilling" in res["reason"]


def test_partial_write_is_caught():
    """Writes every row but the last: the NaN poison survives there."""
    def factory(a, b, out):
        gemm = _bc().load_sibling(os.path.join(ROOT, TESTS["gemm"]), "triton_template", "kgit_gemm_template")

        def launch():
            gemm.gemm(a[:-1], b, out=out[:-1])
        return launch

    res = _bc().verify(_gemm_problem(factory))
    assert not res["ok"] and "non-finite" in res["reason"]


def test_unwritten_output_is_caught():
    res = _bc().verify(_gemm_problem(lambda a, b, out: (lambda: None)))
    assert not res["ok"] and "non-finite" in res["reason"]


def test_wrong_math_is_caught():
    """A skipped K block (the last 4 of 16) is an error of ~50%, far over the 1e-2 tolerance."""
    def factory(a, b, out):
        gemm = _bc().load_sibling(os.path.join(ROOT, TESTS["gemm"]), "triton_template", "kgit_gemm_template")
        return lambda: gemm.gemm(a[:, :-4].contiguous(), b[:-4].contiguous(), out=out)

    res = _bc().verify(_gemm_problem(factory))
    assert not res["ok"] and "relative error" in res["reason"]


def test_one_wrong_row_is_caught_by_the_row_check():
    """One corrupted row of many barely moves the Frobenius norm; the worst-row check catches it."""
    import torch

    bc = _bc()
    ref = torch.randn(400, 64)
    got = ref.clone()
    got[7] *= 1.2                          # 20% off in 1 row of 400: Frobenius error ~1%
    res = bc.compare(got, ref, "bfloat16")
    assert not res["ok"] and res["worst_row_err"] > 0.1


def test_nan_never_passes():
    import torch

    bc = _bc()
    ref = torch.randn(16, 16)
    got = ref.clone()
    got[3, 3] = float("nan")
    assert not bc.compare(got, ref, "float32")["ok"]


def test_pointer_paths_match_reference():
    """The non-TMA paths (AMD, pre-Hopper, unaligned rows) on shapes where TMA would also be allowed."""
    import torch

    bc = _bc()
    g = bc.load_sibling(os.path.join(ROOT, TESTS["gemm"]), "triton_template", "kgit_gemm_template")
    a, b = torch.randn(40, 32), torch.randn(32, 48)
    c = torch.full((40, 48), float("nan"))
    g.gemm(a, b, out=c, config={"USE_TMA": 0, "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16})
    assert bc.compare(c, a @ b, "float32")["ok"]

    m = bc.load_sibling(os.path.join(ROOT, TESTS["fused-moe"]), "triton_template", "kgit_fused_moe_template")
    x, logits = torch.randn(12, 32), torch.randn(12, 4)
    w13, w2 = torch.randn(4, 96, 32) / 6, torch.randn(4, 32, 48) / 7
    out = torch.full((12, 32), float("nan"))
    m.fused_moe(x, w13, w2, logits, 2, out=out, use_tma=False, config={"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16,
                                                                        "DOWN_BLOCK_N": 32})
    assert bc.compare(out, m.reference(x, w13, w2, logits, 2), "float32")["ok"]


def test_attention_small_key_blocks():
    """BLOCK_N < BLOCK_M: the causal diagonal stage walks several masked key blocks."""
    import torch

    bc = _bc()
    fa = bc.load_sibling(os.path.join(ROOT, TESTS["flash-attention"]), "triton_template",
                         "kgit_flash_attention_template")
    q, k, v = (torch.randn(1, 2, 64, 16) for _ in range(3))
    for causal in (True, False):
        o = torch.full_like(q, float("nan"))
        fa.flash_attention(q, k, v, causal=causal, out=o, config={"BLOCK_M": 32, "BLOCK_N": 16})
        assert bc.compare(o.reshape(-1, 16), fa.reference(q, k, v, causal).reshape(-1, 16), "float32")["ok"]
