"""benchmarks/sweep.py: finds the kernels by itself and writes one table, here on two kernels in
Triton's interpreter (tiny shapes; no timing is asserted)."""

import importlib.util
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _sweep_module():
    spec = importlib.util.spec_from_file_location("benchmarks_sweep", os.path.join(ROOT, "benchmarks", "sweep.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_kernel_folder_with_a_test_is_found():
    found = _sweep_module().discover()
    assert set(found) == {"cross-entropy", "flash-attention", "fused-moe", "gemm", "layernorm", "rmsnorm",
                          "rotary-embedding", "softmax"}
    assert found["gemm"].name == "test_gemm.py"


def test_config_overrides_parse():
    assert _sweep_module().parse_sets(["softmax.BLOCK_SIZE=16384", "gemm.USE_TMA=0", "x.MODE=fast"]) == {
        "softmax": {"BLOCK_SIZE": 16384}, "gemm": {"USE_TMA": 0}, "x": {"MODE": "fast"}}


def test_the_sweep_writes_one_table_of_both_kinds_of_kernel(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "sweep.py"), "--kernels", "softmax,gemm",
                           "--out", str(tmp_path), "--repeats", "1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((tmp_path / "sweep.json").read_text())
    columns = report["columns"]
    assert columns == ["kernel", "shape", "dtype", "role", "kgit", "torch", "unit", "speedup", "% of copy",
                       "% of peak", "spread %", "torch spread %", "ran"]
    rows = [(r["kernel"], r["shape"], r["dtype"], r["role"], r["unit"]) for r in report["rows"]]
    assert rows == [("softmax", "8x256", d, "headline", "GB/s") for d in ("fp32", "fp16", "bf16")] + [
        ("gemm", "64x64x64", "fp16", "headline", "TFLOP/s"), ("gemm", "64x64x64", "fp32", "sweep", "TFLOP/s"),
        ("gemm", "48x80x33", "fp16", "sweep", "TFLOP/s"), ("gemm", "48x80x33", "fp32", "sweep", "TFLOP/s")]
    for row in report["rows"]:
        assert float(row["kgit"]) > 0 and float(row["torch"]) > 0 and float(row["speedup"]) > 0
        assert float(row["spread %"]) >= 0
        assert row["% of copy"] == row["% of peak"] == "-"  # CPU figures are never compared with a GPU
    assert report["machine"]["cpu_timing"] is True and report["machine"]["repeats"] == 1
    # what each launch ran: softmax's kernel for rows of 256, gemm's CONFIG (the interpreter never autotunes)
    assert [r["ran"] for r in report["rows"]] == ["_softmax_rows"] * 3 + ["CONFIG"] * 4

    table = (tmp_path / "sweep.md").read_text().splitlines()
    header = table.index("| " + " | ".join(columns) + " |")
    body = table[header + 2:]
    assert len(body) == len(report["rows"])
    assert body[3] == "| " + " | ".join(str(report["rows"][3][c]) for c in columns) + " |"
    assert "Triton interpreter: CPU figures" in "\n".join(table)


def test_ran_names_what_a_shape_ran_against_the_templates_config():
    ran = _sweep_module().ran
    base = {"GLUON": 1, "NUM_BUFFERS": 2, "BLOCK_M": 128}
    assert ran({"GLUON": 1, "NUM_BUFFERS": 2, "BLOCK_M": 128, "USE_TMA": True}, base) == "CONFIG"
    assert ran({"GLUON": 2, "NUM_BUFFERS": 2, "BLOCK_M": 128}, base) == "GLUON=2"
    assert ran({"GLUON": 0, "NUM_BUFFERS": 2, "BLOCK_M": 64}, base) == "GLUON=0 BLOCK_M=64"
    assert ran(None, base) == "-"
    assert ran({"kernel": "_softmax_split"}, {"BLOCK_SIZE": 4096}) == "_softmax_split"


def test_a_failed_kernel_is_one_row_saying_why():
    module = _sweep_module()
    rows = module.rows_of("softmax", "gbps", {"status": "fail", "reason": "wrong output at 8x256"})
    assert rows == [{**dict.fromkeys(module.COLUMNS, ""), "kernel": "softmax", "shape": "FAIL",
                     "kgit": "wrong output at 8x256"}]
    assert list(rows[0]) == module.COLUMNS


def test_the_table_names_the_measured_copy_bandwidth_of_a_gpu_run():
    machine = {"gpu": "NVIDIA H200", "time": "2026-11-30 22:00 UTC", "torch": "2.11", "triton": "3.6",
               "copy_gbps_start": 4216.4, "copy_gbps_end": 4219.6, "repeats": 3, "cpu_timing": False}
    text = _sweep_module().markdown({"machine": machine, "rows": []})
    assert "measured copy 4216 GB/s at the start, 4220 at the end." in text


def test_a_sweep_cut_short_keeps_the_kernels_it_finished(tmp_path, monkeypatch):
    module = _sweep_module()
    finished = {"status": "pass", "cpu_timing": True, "shapes": []}

    def run(spec, **kwargs):
        if spec.name == "gemm":
            raise KeyboardInterrupt  # what a time limit's signal does in the middle of the second kernel
        return finished

    monkeypatch.setattr(module.harness, "run", run)
    monkeypatch.setattr(module.device, "measured_copy_gbps", lambda refresh=False: 4200.0)
    try:
        module.sweep(["softmax", "gemm"], {}, module.harness.Timer(repeats=1), quick=True, out=tmp_path)
    except KeyboardInterrupt:
        pass
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert list(saved["results"]) == ["softmax"]
    assert saved["machine"]["copy_gbps_end"] is None
    assert "at the start, - at the end" in (tmp_path / "sweep.md").read_text()
