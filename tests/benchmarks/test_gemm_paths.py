"""benchmarks/gemm_paths.py in Triton's interpreter (PROBE_CPU: tiny shapes; no timing is asserted): each
path is checked against the reference before it is timed, and the autotune's pick is named."""

import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _probe(tmp_path, **env):
    env = dict(os.environ, TRITON_INTERPRET="1", PROBE_CPU="1", HOME=str(tmp_path), PYTHONPATH=ROOT, **env)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "gemm_paths.py")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def test_gemm_paths_names_the_path_and_checks_every_timed_one(tmp_path):
    out = _probe(tmp_path)
    # one of each a shape: decode, ragged, wave
    assert out.count("autotune picked: ") == 3 and out.count("ok=True; gemm relerr") == 3
    assert "WRONG relerr" not in out and ": FAILED" not in out
    assert out.count("x cuBLAS  torch.matmul (cuBLAS)") == 3 and out.count("gemm default (autotuned)") == 3


def test_gemm_paths_times_the_shapes_named_alone(tmp_path):
    out = _probe(tmp_path, PROBE_SHAPES="wave")
    assert out.count("autotune picked: ") == 1 and "== wave " in out
