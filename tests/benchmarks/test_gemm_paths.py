"""benchmarks/gemm_paths.py in Triton's interpreter (PROBE_CPU: tiny shapes; no timing is asserted): each
path is checked against the reference before it is timed, and the autotune's pick is named."""

import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_gemm_paths_names_the_path_and_checks_every_timed_one(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", PROBE_CPU="1", HOME=str(tmp_path), PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "gemm_paths.py")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert out.count("autotune picked: ") == 2 and out.count("ok=True; gemm relerr") == 2
    assert "WRONG relerr" not in out and ": FAILED" not in out
    assert out.count("x cuBLAS  torch.matmul (cuBLAS)") == 2 and out.count("gemm default (autotuned)") == 2
