"""benchmarks/held_out_bench.py in Triton's interpreter (HELD_OUT_TINY: two rows a shape; no timing is
asserted): one half of benchmarks/shapes.py alone with --half, every output checked."""

import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from shapes import split  # noqa: E402


def test_half_times_that_half_of_the_shapes_alone(tmp_path):
    kernel_file = os.path.join(ROOT, "skills", "kernels", "rotary-embedding", "rotary_embedding.py")
    rows_file = tmp_path / "rows.jsonl"
    env = dict(os.environ, TRITON_INTERPRET="1", HELD_OUT_TINY="1", HOME=str(tmp_path), PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "held_out_bench.py"), "rotary-embedding",
                           kernel_file, "--half", "held-out", "--json", str(rows_file)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    _, held_out = split("rotary-embedding")
    assert {r["half"] for r in rows} == {"held-out"} and len(rows) == len(held_out)
    assert all(r["new_ok"] for r in rows)
