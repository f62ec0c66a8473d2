"""benchmarks/held_out_bench.py in Triton's interpreter (HELD_OUT_TINY: two rows a shape, a compute-bound
kernel's shape cut down; no timing is asserted): one half of benchmarks/shapes.py alone with --half, every
output checked, a wrong one reported and not timed."""

import json
import os
import subprocess
import sys

import pytest

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
    # beside each shape, a copy of its own traffic timed in the same two rounds (the small shapes' bound)
    assert all(len(r["copy_us_rounds"]) == 2 and r["copy_us"] > 0 for r in rows)
    assert "%same" in proc.stdout


def run_bench(tmp_path, kernel, old_file, *args):
    rows_file = tmp_path / "rows.jsonl"
    env = dict(os.environ, TRITON_INTERPRET="1", HELD_OUT_TINY="1", HOME=str(tmp_path), PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "held_out_bench.py"), kernel, str(old_file),
                           *args, "--json", str(rows_file)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()] if rows_file.exists() else []
    return proc, rows


KERNEL_FILES = {"gemm": "gemm/gemm.py", "flash-attention": "flash-attention/flash_attention.py",
                "fused-moe": "fused-moe/fused_moe.py"}


@pytest.mark.parametrize("kernel", sorted(KERNEL_FILES))
def test_a_compute_bound_kernel_is_checked_and_timed_beside_what_its_test_compares_it_with(tmp_path, kernel):
    kernel_file = os.path.join(ROOT, "skills", "kernels", KERNEL_FILES[kernel])
    proc, rows = run_bench(tmp_path, kernel, kernel_file, "--half", "held-out")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    _, held_out = split(kernel)
    assert [r["shape"] for r in rows] == [s.size for s in held_out] and {r["half"] for r in rows} == {"held-out"}
    for r in rows:
        assert r["old_ok"] and r["new_ok"] and r["torch_ok"], r
        assert r["flops"] > 0 and all(len(r[f"{n}_us_rounds"]) == 2 for n in ("old", "new", "torch", *r["others"]))
        assert r["old_path"] == r["path"] != ""  # the same file on both sides: the same launch recorded
    assert "summary: new/old geomean" in proc.stdout


def test_a_wrong_old_kernel_is_reported_and_not_timed(tmp_path):
    text = open(os.path.join(ROOT, "skills", "kernels", "gemm", "gemm.py")).read()
    assert text.count("\n    return c\n") == 1
    wrong = tmp_path / "gemm.py"
    wrong.write_text(text.replace("\n    return c\n", "\n    c.add_(1)\n    return c\n"))  # every element off by one
    proc, rows = run_bench(tmp_path, "gemm", wrong, "--half", "held-out")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]  # the new kernel is right
    assert rows and all(not r["old_ok"] and "old_us" not in r and r["new_ok"] for r in rows)
    assert all(r["old_error"].startswith("output 0:") for r in rows)


def test_shapes_times_the_synthetic_shapes_named_beside_a_copy_of_their_own_traffic(tmp_path):
    kernel_file = os.path.join(ROOT, "skills", "kernels", "softmax", "softmax.py")
    proc, rows = run_bench(tmp_path, "softmax", kernel_file, "--shapes", "4x4100:bf16", "3x33:fp32")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [(r["shape"], r["dtype"], r["half"]) for r in rows] == [("4x4100", "bf16", "synthetic"),
                                                                   ("3x33", "fp32", "synthetic")]
    assert all(r["new_ok"] and len(r["copy_us_rounds"]) == 2 for r in rows)
    # beside the peer, the one-program-a-row kernel of Triton's tutorial, checked and timed in the same rounds
    assert all(r["peer_ok"] and len(r["peer_us_rounds"]) == 2 for r in rows)
    assert "x peer" in proc.stdout and "ok(o/n/t/p)" in proc.stdout  # (no summary line without a GPU copy)
    (tmp_path / "rows.jsonl").unlink()
    proc, rows = run_bench(tmp_path, "softmax", kernel_file, "--shapes", "4x4100:int8")
    assert proc.returncode != 0 and "one of bf16, fp16, fp32" in proc.stderr and not rows


def test_layernorm_is_timed_beside_the_peer(tmp_path):
    kernel_file = os.path.join(ROOT, "skills", "kernels", "layernorm", "layernorm.py")
    proc, rows = run_bench(tmp_path, "layernorm", kernel_file, "--shapes", "3x4544:fp16")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = rows
    assert row["peer_ok"] and row["peer_us"] > 0 and "ok(o/n/t/p)" in proc.stdout


def test_a_synthetic_attention_shape_reads_its_fifth_size_as_causal():
    import held_out_bench
    causal = held_out_bench.synthetic("flash-attention", "4x16x1024x128x1:bf16").dims
    assert causal == (4, 16, 1024, 128, True) and causal[4] is True  # SDPA's is_causal takes a bool only
    assert held_out_bench.synthetic("flash-attention", "64x12x512x64x0:bf16").dims[4] is False
    assert held_out_bench.synthetic("gemm", "512x4096x1:fp16").dims == (512, 4096, 1)


def test_a_compute_bound_rows_path_is_whole_in_the_json_and_cut_in_the_table(tmp_path):
    """gemm's path is its config, every key (past 120 characters): the JSON keeps all of it, so that a pick's
    TAIL_BLOCK_N or GLUON can be read back; the table's line shows its first PATH_CHARS."""
    import held_out_bench
    kernel_file = os.path.join(ROOT, "skills", "kernels", "gemm", "gemm.py")
    proc, rows = run_bench(tmp_path, "gemm", kernel_file, "--shapes", "100x200x300:bf16")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = rows
    assert len(row["path"]) > held_out_bench.PATH_CHARS and row["path"] == row["old_path"]
    assert row["path"].startswith("BLOCK_M ") and ", AUTOTUNE " in row["path"]  # CONFIG's last key
    assert row["path"][:held_out_bench.PATH_CHARS] in proc.stdout and row["path"] not in proc.stdout
