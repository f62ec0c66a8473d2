"""Each memory-bound kernel's test passes on Triton's interpreter (tiny shapes),
through the same command kgit runs: `python <test> --json`, last JSON line."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from kgit.config import kernel_file

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTS = {
    "softmax": "skills/kernels/softmax/test_softmax.py",
    "layernorm": "skills/kernels/layernorm/test_layernorm.py",
    "rmsnorm": "skills/kernels/rmsnorm/test_rmsnorm.py",
    "cross-entropy": "skills/kernels/cross-entropy/test_cross_entropy.py",
    "rotary-embedding": "skills/kernels/rotary-embedding/test_rotary_embedding.py",
}


def last_json(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError("no JSON line in:\n" + stdout[-2000:])


@pytest.mark.parametrize("name", sorted(TESTS))
def test_kernel_test_passes_on_interpreter(name, tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=ROOT, HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, TESTS[name]), "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = last_json(proc.stdout)
    assert res["kernel"] == name
    assert res["status"] == "pass" and res["correctness"] is True, res["errors"]
    assert res["backend"] == "interpreter" and res["cpu_timing"] is True
    assert res["checks"] > 10
    assert res["gbps"] > 0 and res["latency_us"] > 0


def test_template_configs_are_literals():
    import ast
    for name, path in TESTS.items():
        src = open(os.path.join(ROOT, os.path.dirname(path), kernel_file(name))).read()
        found = {}
        for node in ast.parse(src).body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                if node.targets[0].id in ("CONFIG", "CONFIG_SPACE"):
                    found[node.targets[0].id] = ast.literal_eval(node.value)
        assert set(found) == {"CONFIG", "CONFIG_SPACE"}, path
        for key, value in found["CONFIG"].items():
            assert value in found["CONFIG_SPACE"][key], (path, key)


# The row kernels' CONFIG as they ship, which the dispatch tests below are written for. A clone on a loop's
# branch holds a tuned CONFIG (the README's first command, kgit tune softmax, leaves one): the dispatch it
# gets is the same code's answer for another CONFIG, not what these cases state.
SHIPPED_ROW_CONFIG = {"BLOCK_SIZE": 4096, "num_warps": 4, "num_stages": 1, "PERSISTENT": 0}


def _template(name):
    path = os.path.join(ROOT, os.path.dirname(TESTS[name]), kernel_file(name))
    spec = importlib.util.spec_from_file_location(f"tmpl_{name.replace('-', '_')}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if name in ("softmax", "rmsnorm", "layernorm"):
        mod.CONFIG = {**mod.CONFIG, **SHIPPED_ROW_CONFIG}
    return mod


def test_cross_entropy_split_path_with_last_arriver_combine():
    # chunks of 64 columns: 5 programs per row combine their partials
    ce = _template("cross-entropy")
    x = torch.randn(3, 300)
    t = torch.tensor([5, -100, 299])
    loss = ce.cross_entropy(x, t, config={"CHUNK": 64, "BLOCK_SIZE": 32})
    torch.testing.assert_close(loss.double(), ce.cross_entropy_ref(x, t), rtol=1e-5, atol=1e-6)
    loss2 = ce.cross_entropy(x, t, config={"CHUNK": 64, "BLOCK_SIZE": 32})  # counters were reset
    assert torch.equal(loss, loss2)


@pytest.mark.parametrize("dtype, V, launch", [
    # (BLOCK_N, ROWS, num_warps, num_stages) of the _ce_rows launch
    (torch.bfloat16, 1000, (1024, 2, 1, 1)),  # SHORT_16BIT: two rows of 1024 on one warp
    (torch.float16, 2048, (1024, 1, 1, 3)),  # one row on one warp, two pipelined chunks
    (torch.bfloat16, 4096, (2048, 1, 2, 3)),
    (torch.bfloat16, 4097, (2048, 1, 4, 1)),  # longer rows: CONFIG
    (torch.float32, 1000, (1024, 2, 4, 1)),  # fp32: CONFIG
])
def test_cross_entropy_short_16bit_rows_take_few_warps(monkeypatch, record_launches, dtype, V, launch):
    ce = _template("cross-entropy")
    launched = record_launches(ce, "_ce_rows", lambda grid, args, kw: (kw["BLOCK_N"], kw["ROWS"], kw["num_warps"],
                                                                        kw["NUM_STAGES"]))
    x = (torch.randn(3, V) * 3).to(dtype)
    t = torch.tensor([5, -100, V - 1])
    loss = ce.cross_entropy(x, t)
    assert launched == [launch]
    torch.testing.assert_close(loss.double(), ce.cross_entropy_ref(x, t), rtol=1e-5, atol=1e-4)
    ce.cross_entropy(x, t, config=ce.CONFIG)  # a config passed in wins over the table
    assert launched[1][2] == ce.CONFIG["num_warps"]


@pytest.mark.parametrize("dtype, N, persistent, launch", [
    # (ROWS, WB_PER_TILE, grid) of _layernorm_rows's launch, 40 rows, 4 SMs in the interpreter
    (torch.bfloat16, 4096, 0, (1, 1, 40)),  # 16-bit rows over 2048, one a program: w and b after the stats
    (torch.float16, 2049, 0, (1, 1, 40)),  # one element over
    (torch.bfloat16, 2048, 0, (2, 0, 20)),  # up to 2048: w and b first
    (torch.float32, 4096, 0, (1, 0, 40)),  # fp32: w and b first
    (torch.bfloat16, 1000, 0, (4, 0, 10)),  # four rows of 1024 a tile
    (torch.bfloat16, 4096, 1, (1, 0, 4)),  # persistent: w and b once a program, for all its tiles
])
def test_layernorm_rows_load_w_and_b_per_tile_on_long_16bit_rows(monkeypatch, record_launches, dtype, N, persistent,
                                                                  launch):
    m = _template("layernorm")
    launched = record_launches(m, "_layernorm_rows", lambda grid, args, kw: (kw["ROWS"], kw["WB_PER_TILE"], grid[0]))
    x = (torch.randn(40, N) * 2 + 3).to(dtype)
    w, b = torch.randn(N).to(dtype), torch.randn(N).to(dtype)
    y = m.layernorm(x, w, b, config={"PERSISTENT": persistent})
    assert launched == [launch]
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(y.double(), m.layernorm_ref(x, w, b), **tol)


def _norm_run(name, m, x, config=None):
    """One row kernel's template m on x (w near 1 and b around 0 where it takes them): (output, reference)."""
    N = x.shape[1]
    w, b = (torch.rand(N) + 0.5).to(x.dtype), torch.randn(N).to(x.dtype)
    if name == "softmax":
        return m.softmax(x, config=config), m.softmax_ref(x)
    if name == "rmsnorm":
        return m.rmsnorm(x, w, config=config), m.rmsnorm_ref(x, w)
    return m.layernorm(x, w, b, config=config), m.layernorm_ref(x, w, b)


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "layernorm"])
@pytest.mark.parametrize("dtype, N, gpu, config, launch", [
    # (ROWS, num_warps) of the rows kernel's launch; CONFIG tiles 4096 elements on 4 warps
    (torch.float32, 1000, True, None, (1, 4)),  # fp32 on an NVIDIA GPU: one row a program, 8 elements a thread
    (torch.float32, 100, True, None, (1, 4)),
    (torch.float32, 2048, True, None, (1, 8)),  # layernorm: CONFIG from 2048 (below)
    (torch.float32, 4096, True, None, (1, 16)),
    (torch.bfloat16, 1000, True, None, (4, 4)),  # 16-bit rows: CONFIG's tile of four rows of 1024
    (torch.float32, 1000, True, {}, (4, 4)),  # a config passed in wins over the table
    (torch.float32, 1000, False, None, (4, 4)),  # the interpreter (or AMD): CONFIG, whose knobs a tuner moves
])
def test_short_fp32_rows_take_one_row_a_program_on_nvidia_gpus(monkeypatch, record_launches, name, dtype, N, gpu,
                                                                config, launch):
    m = _template(name)
    rows_kernel_name = {"softmax": "_softmax_rows", "rmsnorm": "_rmsnorm_rows", "layernorm": "_layernorm_rows"}[name]
    launched = record_launches(m, rows_kernel_name, lambda grid, args, kw: (kw["ROWS"], kw["num_warps"]))
    monkeypatch.setattr(m, "_on_nvidia_gpu", lambda x: gpu)
    if name == "layernorm" and N > 1024 and dtype == torch.float32:
        launch = (max(1, 4096 // N), 4)  # its one row on 16 warps read 94.5% of copy at 4096, CONFIG 97.7
    if name == "layernorm" and dtype != torch.float32 and gpu and config is None:
        launch = (2, 4)  # SHORT_TILE: two rows of 1024 on 4 warps (the test after the next)
    x = (torch.randn(12, N) * 2 + 0.5).to(dtype)
    y, ref = _norm_run(name, m, x, config)
    if name == "layernorm" and N > m.FP32_WHOLE_ROW_ABOVE and dtype == torch.float32 and gpu and config is None:
        assert launched == []  # the 1-D whole-row kernel serves them (the test below)
        return
    assert launched == [launch]
    rows, warps = launch  # what the sweep's "ran" column reads: the tile and warps as launched
    assert m.last_config == {"kernel": rows_kernel_name, "BLOCK_SIZE": rows * max(16, 1 << (N - 1).bit_length()),
                             "num_warps": warps}
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(y.double(), ref.double(), **tol)
    _norm_run(name, m, x[:0], config)  # a later call that launches nothing leaves no stale keys behind
    assert m.last_config == {}


@pytest.mark.parametrize("dtype, N, gpu, config, whole_row", [
    (torch.float32, 4096, True, None, True),
    (torch.float32, 3000, True, None, True),  # masked columns
    (torch.float32, 2049, True, None, True),
    (torch.float32, 2048, True, None, False),  # the bound: CONFIG's tile of two rows of 2048
    (torch.float16, 4096, True, None, False),
    (torch.float32, 4096, False, None, False),  # the interpreter (or AMD)
    (torch.float32, 4096, True, {}, False),  # a config passed in: CONFIG's rows, whose knobs a tuner moves
])
def test_layernorm_fp32_rows_over_2048_take_the_whole_row_kernel_with_its_mask(monkeypatch, record_launches, dtype, N,
                                                                             gpu, config, whole_row):
    m = _template("layernorm")
    row = record_launches(m, "_layernorm_row", lambda grid, args, kw: (grid, kw["BLOCK_N"], kw["EVEN"],
                                                                       kw["num_warps"]))
    rows = record_launches(m, "_layernorm_rows", lambda grid, args, kw: kw["ROWS"])
    monkeypatch.setattr(m, "_on_nvidia_gpu", lambda x: gpu)
    x = (torch.randn(12, N) * 2 + 0.5).to(dtype)
    y, ref = _norm_run("layernorm", m, x, config)
    if whole_row:  # the peer's kernel: masked even where N is BLOCK_N (it read 0.16% faster so)
        assert (row, rows) == ([((12,), 1 << (N - 1).bit_length(), False, m.WHOLE_ROW_WARPS)], [])
        assert m.last_config == {"kernel": "_layernorm_row"}
    else:
        assert row == [] and len(rows) == 1
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(y.double(), ref.double(), **tol)


@pytest.mark.parametrize("dtype, N, gpu, config, max_bytes, launch", [
    # (ROWS, num_warps, WB_PER_TILE, PREFETCH, grid) of _layernorm_rows's launch: 40 rows, 4 "SMs" in the
    # interpreter x 2 programs an SM; `max_bytes` SHORT_MAX_BYTES_PER_SM (x is 40 x N x 2 bytes)
    (torch.bfloat16, 1000, True, None, 20000, (2, 4, 0, True, 8)),  # SHORT_TILE: two rows of 1024, 16 a thread
    (torch.float16, 1600, True, None, 32000, (1, 4, 0, True, 8)),  # x of exactly 4 SMs' bytes
    (torch.bfloat16, 2049, True, None, 1 << 20, (1, 8, 1, True, 8)),  # over WB_PER_TILE_ABOVE: w and b late
    (torch.float16, 4096, True, None, 1 << 20, (1, 8, 1, True, 8)),
    (torch.float16, 1600, True, None, 31999, (2, 4, 0, False, 20)),  # x over 4 SMs' bytes: CONFIG's two rows
    (torch.bfloat16, 512, True, None, 1 << 20, (8, 4, 0, False, 5)),  # blocks under SHORT_ROWS (rows to 512)
    (torch.float32, 1600, True, None, 1 << 20, (2, 4, 0, False, 20)),  # fp32: CONFIG's two rows of 2048
    (torch.bfloat16, 1000, True, {}, 1 << 20, (4, 4, 0, False, 10)),  # a config passed in: CONFIG
    (torch.bfloat16, 1000, False, None, 1 << 20, (4, 4, 0, False, 10)),  # the interpreter (or AMD): CONFIG
])
def test_layernorm_short_16bit_rows_prefetch_their_next_tile_on_a_persistent_grid(monkeypatch, record_launches, dtype,
                                                                                  N, gpu, config, max_bytes, launch):
    # The prefetching loop runs here in the interpreter, each program over several tiles, and is checked.
    m = _template("layernorm")
    launched = record_launches(m, "_layernorm_rows", lambda grid, args, kw: (
        kw["ROWS"], kw["num_warps"], kw["WB_PER_TILE"], kw["PREFETCH"], grid[0]))
    monkeypatch.setattr(m, "_on_nvidia_gpu", lambda x: gpu)
    monkeypatch.setattr(m, "SHORT_MAX_BYTES_PER_SM", max_bytes)
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 2)
    x = (torch.randn(40, N) * 2 + 3).to(dtype)
    y, ref = _norm_run("layernorm", m, x, config)
    assert launched == [launch]
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(y.double(), ref.double(), **tol)


# (name, dtype, N, rows, (programs an SM, spilled bytes) of each of 4, 8, 16 and 32 warps, warps launched): 4
# "SMs" in the interpreter; rows of 5000 16-bit elements are 10 KB, of 10000 fp32 ones 40 KB (IN_FLIGHT_BYTES 64)
WHOLE_ROW_WARPS_CASES = [
    *[(name, torch.bfloat16, 5000, 12, ((3, 0), (3, 0), (2, 0), (2, 0)), 8)  # 3 rows an SM on 4 or 8 warps
      for name in ("softmax", "layernorm")],
    *[(name, torch.float32, 5000, 12, ((3, 0), (3, 0), (3, 0), (2, 0)), 16)  # a tie with the default
      for name in ("softmax", "layernorm")],
    *[(name, torch.bfloat16, 5000, 4, ((3, 0), (3, 0), (2, 0), (2, 0)), 16)  # one row an SM is all the grid gives
      for name in ("softmax", "layernorm")],
    *[(name, torch.bfloat16, 5000, 12, ((3, 64), (2, 0), (1, 0), (1, 0)), 8)  # 4 warps spill
      for name in ("softmax", "layernorm")],
    ("softmax", torch.float32, 10000, 12, ((2, 0), (2, 0), (1, 0), (2, 0)), 32),  # 80 KB counts as 64: a tie
    ("layernorm", torch.float32, 10000, 12, ((2, 0), (2, 0), (2, 0), (1, 0)), 16),  # default WIDE_ROW_WARPS
    ("softmax", torch.bfloat16, 4608, 12, ((3, 0), (3, 0), (2, 0), (2, 0)), None),  # 16-element groups: grouped
]


@pytest.mark.parametrize("name, dtype, N, M, fits, warps", WHOLE_ROW_WARPS_CASES)
@pytest.mark.parametrize("gpu", [True, False])
def test_whole_rows_take_the_warps_that_keep_the_most_rows_in_flight(monkeypatch, record_launches, name, dtype, N, M,
                                                                     fits, warps, gpu):
    m = _template(name)
    launched = record_launches(m, f"_{name}_row", lambda grid, args, kw: kw["num_warps"])
    monkeypatch.setattr(m, "_on_nvidia_gpu", lambda x: gpu)
    asked = []
    monkeypatch.setattr(m, "_fit", lambda kernel, args, consts, num_warps, *rest: asked.append(num_warps) or
                        dict(zip(m.ROW_WARPS, fits))[num_warps])
    x = (torch.randn(M, N) * 2 + 0.5).to(dtype)
    y, ref = _norm_run(name, m, x)
    default = m.WIDE_ROW_WARPS if name == "layernorm" and N * x.element_size() > m.WIDE_ROW_BYTES else m.WHOLE_ROW_WARPS
    assert launched == [warps if gpu and warps else default]
    if not (gpu and warps):
        assert asked == []  # the grouped row, the interpreter and AMD keep the kernel's warps
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(y.double(), ref.double(), **tol)


@pytest.mark.parametrize("dtype, N, programs_an_sm, interpreting, launch", [
    # (grid, P) of the split team's launch with softmax's bounds scaled down (GROUPED_ROW_MAX 128,
    # WHOLE_ROW_MAX 512, SPLIT's chunk 128): 20 rows, 4 SMs x `programs_an_sm`
    (torch.bfloat16, 300, 4, False, ((15,), 3)),  # not in 16-element groups: 5 teams of 3
    (torch.float16, 1001, 4, False, ((16,), 8)),  # over WHOLE_ROW_MAX too: 2 teams of 8
    (torch.bfloat16, 304, 4, False, None),  # in 16-element groups: the pipelined loop or the teams of old
    (torch.bfloat16, 127, 4, False, None),  # up to GROUPED_ROW_MAX: the whole row
    (torch.float32, 300, 4, False, None),  # fp32 up to WHOLE_ROW_MAX: the whole row
    (torch.bfloat16, 2001, 1, False, None),  # P = 16 does not fit 4 programs: streamed
    (torch.bfloat16, 300, 4, True, None),  # the interpreter: a team would wait forever
])
def test_softmax_16bit_rows_not_in_16_element_groups_take_the_split_team(monkeypatch, record_launches, dtype, N,
                                                                         programs_an_sm, interpreting, launch):
    # The team's programs wait for each other: it runs on a GPU only (the held-out bench checks it); a row
    # it does not take is computed by another kernel, here in the interpreter, and checked.
    m = _template("softmax")
    m.GROUPED_ROW_MAX, m.WHOLE_ROW_MAX = 128, 512
    m.SPLIT = {**m.SPLIT, "BLOCK_N": 128}
    launched = record_launches(m, "_softmax_split", lambda grid, args, kw: (grid, kw["P"]), launch=False)
    monkeypatch.setattr(m, "_interpreting", lambda: interpreting)
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: programs_an_sm)
    x = torch.randn(20, N).to(dtype)
    y = m.softmax(x, config={"BLOCK_SIZE": 64})
    assert launched == ([launch] if launch else [])
    if not launch:
        torch.testing.assert_close(y.double(), m.softmax_ref(x), rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("M, V, dtype, gpu, config, launch", [
    # (grid, P, CHUNK) of the split launch; 4 "SMs" in the interpreter x SPLIT_PROGRAMS_PER_SM = 64 programs
    (2, 32000, torch.bfloat16, True, None, ((16,), 8, 4096)),  # P a power of 2, chunks of 2 blocks at least
    (3, 100000, torch.float32, True, None, ((75,), 25, 4096)),  # 32 chunks asked, 25 of 2 blocks make the row
    (40, 32000, torch.bfloat16, True, None, ((80,), 2, 16384)),  # 40 rows want 2 programs a row
    (8, 70000, torch.float16, True, None, ((56,), 7, 10240)),  # CHUNK's 3 a row: 8 asked, 7 of 5 blocks make it
    (64, 32000, torch.bfloat16, True, None, None),  # rows enough: the rows kernel
    (2, 1000, torch.bfloat16, True, None, None),  # one block a row: the rows kernel
    (2, 32000, torch.bfloat16, True, {}, None),  # a config passed in: CONFIG
    (2, 32000, torch.bfloat16, False, None, None),  # the interpreter: CONFIG
])
def test_cross_entropy_splits_rows_too_few_for_the_gpu(monkeypatch, record_launches, M, V, dtype, gpu, config, launch):
    ce = _template("cross-entropy")
    launched = record_launches(ce, "_ce_split", lambda grid, args, kw: (grid, kw["P"], kw["CHUNK"]))
    monkeypatch.setattr(ce, "_on_gpu", lambda x: gpu)
    x = (torch.randn(M, V) * 3).to(dtype)
    t = torch.randint(0, V, (M,))
    t[0] = -100
    loss = ce.cross_entropy(x, t, config=config)
    assert launched == ([launch] if launch else [])
    torch.testing.assert_close(loss.double(), ce.cross_entropy_ref(x, t), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name, N, launch", [
    # (BLOCK_N, P, num_warps, maxnreg) of the split team's launch, with the templates' settings scaled down
    ("softmax", 300, (128, 3, 8, 64)),  # SPLIT, its registers capped
    ("rmsnorm", 300, (128, 3, 8, None)),  # rows over SPLIT_LONG_ABOVE: SPLIT_LONG
    ("rmsnorm", 256, (64, 4, 4, None)),  # rows up to it: CONFIG's chunk and warps
    ("layernorm", 300, (128, 3, 8, None)),  # SPLIT
])
def test_long_fp32_rows_take_the_split_teams_chunk_and_warps(monkeypatch, record_launches, name, N, launch):
    m = _template(name)
    m.WHOLE_ROW_MAX = 128
    m.SPLIT = {"BLOCK_N": 128, "num_warps": 8, "maxnreg": 64}
    m.SPLIT_LONG, m.SPLIT_LONG_ABOVE = {"BLOCK_N": 128, "num_warps": 8}, 256
    launched = record_launches(m, f"_{name}_split", lambda grid, args, kw: (kw["BLOCK_N"], kw["P"], kw["num_warps"],
                                                                          kw.get("maxnreg")), launch=False)
    monkeypatch.setattr(m, "_interpreting", lambda: False)
    x, config = torch.randn(2, N), {"BLOCK_SIZE": 64, "num_warps": 4}
    w, b = torch.rand(N) + 0.5, torch.randn(N)
    call = {"softmax": lambda: m.softmax(x, config=config), "rmsnorm": lambda: m.rmsnorm(x, w, config=config),
            "layernorm": lambda: m.layernorm(x, w, b, config=config)}[name]
    call()
    assert launched == [launch]
    launched.clear()
    x, w, b = x.half(), w.half(), b.half()  # read by call() when it runs
    call()
    assert launched == []  # 16-bit rows of this length take the streamed kernel


# Each template's bounds scaled down (the attributes set), and how to call it and its reference.
SMEM_TEAM_TEMPLATES = {
    "softmax": ({"GROUPED_ROW_MAX": 128, "WHOLE_ROW_MAX": 512},
                lambda m, x, w, b, cfg: m.softmax(x, config=cfg), lambda m, x, w, b: m.softmax_ref(x)),
    "rmsnorm": ({"WHOLE_ROW_MAX": 512},
                lambda m, x, w, b, cfg: m.rmsnorm(x, w, config=cfg), lambda m, x, w, b: m.rmsnorm_ref(x, w)),
    "layernorm": ({"SMEM_TEAM_ABOVE": 128, "WHOLE_ROW_MAX": 512},
                  lambda m, x, w, b, cfg: m.layernorm(x, w, b, config=cfg),
                  lambda m, x, w, b: m.layernorm_ref(x, w, b)),
}


def _scaled_down_team_template(name):
    """The template with its bounds scaled down and a team on parts of 2 x 64 elements, 4 warps, up to
    3 programs an SM; how to call it, and its reference."""
    m = _template(name)
    bounds, call, ref = SMEM_TEAM_TEMPLATES[name]
    for attr, value in bounds.items():
        setattr(m, attr, value)
    m.SMEM_TEAM = {**m.SMEM_TEAM, "CHUNK": 64, "NCH": 2, "num_warps": 4, "PROGRAMS_PER_SM": 3}
    return m, call, ref


@pytest.mark.parametrize("name, dtype, N, launch", [
    # (grid, P) of the shared-memory team's launch: parts of 2 x 64 elements, 4 SMs in the interpreter
    # x 3 programs an SM = 12 programs at once
    ("softmax", torch.bfloat16, 300, ((12,), 3)),  # over GROUPED_ROW_MAX: 4 teams of 3
    ("softmax", torch.float16, 129, ((12,), 2)),  # one element over
    ("softmax", torch.bfloat16, 1000, ((8,), 8)),  # over WHOLE_ROW_MAX too: one team of 8
    ("softmax", torch.bfloat16, 128, None),  # up to GROUPED_ROW_MAX: the whole row, grouped
    ("rmsnorm", torch.bfloat16, 600, ((10,), 5)),  # over WHOLE_ROW_MAX: 2 teams of 5
    ("rmsnorm", torch.float16, 513, ((10,), 5)),  # one element over
    ("rmsnorm", torch.bfloat16, 512, None),  # up to WHOLE_ROW_MAX: the whole row
    ("layernorm", torch.bfloat16, 300, ((12,), 3)),  # over SMEM_TEAM_ABOVE
    ("layernorm", torch.float16, 129, ((12,), 2)),
    ("layernorm", torch.bfloat16, 128, None),  # up to SMEM_TEAM_ABOVE: the whole row
    *[(name, torch.float32, 600, None) for name in ("softmax", "rmsnorm")],  # fp32: not their teams (layernorm: below)
    *[(name, torch.bfloat16, 1700, None) for name in SMEM_TEAM_TEMPLATES],  # P = 14 does not fit 12: streamed
])
def test_16bit_long_rows_go_to_the_shared_memory_team(monkeypatch, name, dtype, N, launch):
    # The Gluon kernels run on a GPU only (the sweep checks them); a row they do not take is computed
    # by another kernel, here in the interpreter, and checked.
    m, call, ref = _scaled_down_team_template(name)
    launched = []

    class Recorder:
        def __getitem__(self, grid):
            def record(*args, **kw):
                assert (kw["CHUNK"], kw["NCH"], kw["num_warps"]) == (64, 2, 4)
                assert kw.get("maxnreg") == (96 if name == "softmax" else None)  # softmax's cap, launched
                launched.append((grid, kw["P"]))
            return record

    monkeypatch.setattr(m, f"_{name}_smem_team", Recorder(), raising=False)
    monkeypatch.setattr(m, "_smem_team_run", lambda x2, y2, *wb: x2.element_size() == 2)
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 5)  # more than SMEM_TEAM asks for
    x, w, b = torch.randn(20, N).to(dtype), (torch.rand(N) + 0.5).to(dtype), torch.randn(N).to(dtype)
    y = call(m, x, w, b, {"BLOCK_SIZE": 64})
    assert launched == ([launch] if launch else [])
    if not launch:
        torch.testing.assert_close(y.float(), ref(m, x, w, b).float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype, N, launch", [
    # (grid, P, CHUNK, EXACT, EVEN, VEC) of layernorm's team: bounds scaled down (SMEM_TEAM_ABOVE 128,
    # WHOLE_ROW_MAX 512), parts of 2 x CHUNK, CHUNK 64 16-bit elements; 4 SMs x 3 programs = 12 at once
    (torch.float32, 600, ((10,), 10, 32, True, False, 4)),  # over WHOLE_ROW_MAX: the same bytes, exact words
    (torch.float32, 640, ((10,), 10, 32, True, True, 4)),  # a multiple of the part: unmasked
    (torch.float32, 513, ((9,), 9, 32, True, False, 4)),  # one element over
    (torch.float32, 512, None),  # WHOLE_ROW_MAX itself: the whole row
    (torch.float32, 300, None),  # over SMEM_TEAM_ABOVE, as 16-bit rows that go to the team: the whole row
    (torch.float32, 800, None),  # P = 13 does not fit 12: another kernel
    (torch.bfloat16, 600, ((10,), 5, 64, False, False, 8)),  # 16-bit: as before, one word a part
    (torch.float16, 640, ((10,), 5, 64, False, True, 8)),
])
def test_layernorm_fp32_rows_over_whole_row_max_go_to_the_team_with_exact_words(monkeypatch, record_launches, dtype,
                                                                                N, launch):
    # The team runs on a GPU only; a row it does not take is computed here in the interpreter and checked.
    m, call, ref = _scaled_down_team_template("layernorm")
    launched = record_launches(m, "_layernorm_smem_team", lambda grid, args, kw: (
        grid, kw["P"], kw["CHUNK"], kw["EXACT"], kw["EVEN"], kw["VEC"]), launch=False)
    monkeypatch.setattr(m, "_smem_team_run", lambda *args: True)
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 5)  # more than SMEM_TEAM asks for
    x, w, b = torch.randn(20, N).to(dtype), (torch.rand(N) + 0.5).to(dtype), torch.randn(N).to(dtype)
    y = call(m, x, w, b, {"BLOCK_SIZE": 64})
    assert launched == ([launch] if launch else [])
    if not launch:
        torch.testing.assert_close(y.double(), ref(m, x, w, b), rtol=1e-4, atol=1e-4)


def test_layernorm_team_that_failed_in_16_bits_is_still_tried_in_fp32(monkeypatch, uncompilable):
    # Two compilations of one kernel (EXACT or not): the one that failed keeps its rows off the team, the
    # other is tried once in its turn.
    m, call, ref = _scaled_down_team_template("layernorm")
    monkeypatch.setattr(m, "_layernorm_smem_team", uncompilable)
    monkeypatch.setattr(m, "_smem_team_run", lambda *args: True)
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 3)
    x, w, b = torch.randn(20, 600), torch.rand(600) + 0.5, torch.randn(600)
    with pytest.warns(UserWarning, match="does not run"):
        call(m, x.bfloat16(), w.bfloat16(), b.bfloat16(), {"BLOCK_SIZE": 64})
    with pytest.warns(UserWarning, match="does not run"):
        y = call(m, x, w, b, {"BLOCK_SIZE": 64})
    torch.testing.assert_close(y.double(), ref(m, x, w, b), rtol=1e-4, atol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call(m, x, w, b, {"BLOCK_SIZE": 64})
        call(m, x.half(), w.half(), b.half(), {"BLOCK_SIZE": 64})
    assert len(uncompilable.attempts) == 2


@pytest.mark.parametrize("dtype, uncapped, capped, spills, launch", [
    # programs an SM uncapped and capped, the uncapped kernel's spilled bytes -> (grid, maxnreg) of the launch;
    # 4 SMs, P = 3, up to 3 an SM
    (torch.bfloat16, 2, 3, 0, ((12,), 80)),  # the cap buys a program an SM: capped
    (torch.bfloat16, 3, 3, 0, ((12,), None)),  # it buys nothing (and spilled on the H200): uncapped
    (torch.bfloat16, 3, 3, 24, ((12,), 80)),  # it buys nothing, but uncapped spills: capped
    (torch.bfloat16, 3, 2, 24, ((12,), None)),  # uncapped spills, but the cap would cost a program: uncapped
    (torch.float16, 1, 2, 0, ((6,), 80)),
    (torch.float16, 2, 2, 0, ((6,), None)),
])
def test_layernorm_team_caps_its_registers_only_where_that_fits_more_programs(monkeypatch, record_launches, dtype,
                                                                               uncapped, capped, spills, launch):
    m, call, _ = _scaled_down_team_template("layernorm")
    launched = record_launches(m, "_layernorm_smem_team", lambda grid, args, kw: (grid, kw.get("maxnreg"), kw["PAIRS"]),
                               launch=False)
    monkeypatch.setattr(m, "_smem_team_run", lambda *args: True)
    monkeypatch.setattr(m, "_programs_per_sm",
                        lambda kernel, args, consts, *rest: capped if consts.get("maxnreg") == 80 else uncapped)
    monkeypatch.setattr(m, "_spilled_bytes",
                        lambda kernel, args, consts, *rest: 0 if consts.get("maxnreg") == 80 else spills)
    x, w, b = torch.randn(20, 300).to(dtype), (torch.rand(300) + 0.5).to(dtype), torch.randn(300).to(dtype)
    call(m, x, w, b, {"BLOCK_SIZE": 64})
    assert launched == [(*launch, dtype == torch.bfloat16)]  # bf16 read as int32 pairs, fp16 not


@pytest.mark.parametrize("name", list(SMEM_TEAM_TEMPLATES))
def test_a_team_that_does_not_compile_falls_back_once_and_says_so(monkeypatch, name, uncompilable):
    # Gluon's API moves between Triton releases: on a Triton the team does not compile with, its rows
    # go to the other kernels (computed here in the interpreter and checked), with one warning.
    m, call, ref = _scaled_down_team_template(name)
    monkeypatch.setattr(m, f"_{name}_smem_team", uncompilable, raising=False)
    monkeypatch.setattr(m, "_smem_team_run", lambda x2, y2, *wb: True)
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 3)
    x, w, b = torch.randn(20, 600).to(torch.bfloat16), (torch.rand(600) + 0.5).to(torch.bfloat16), torch.randn(600)
    b = b.to(torch.bfloat16)
    with pytest.warns(UserWarning, match=r"does not run with Triton .*RuntimeError: error: no such op"):
        y = call(m, x, w, b, {"BLOCK_SIZE": 64})
    torch.testing.assert_close(y.float(), ref(m, x, w, b).float(), rtol=2e-2, atol=2e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        call(m, x, w, b, {"BLOCK_SIZE": 64})
    assert len(uncompilable.attempts) == 1  # not tried again on this device


@pytest.mark.parametrize("name", list(SMEM_TEAM_TEMPLATES))
def test_shared_memory_team_needs_gluon_an_nvidia_gpu_and_16_byte_groups(monkeypatch, name):
    m = _template(name)
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")

    class Rows:  # what _smem_team_run reads of a tensor
        def __init__(self, n=32768, stride=32768, ptr=1 << 20, elem=2, device="cuda"):
            self.shape, self._stride, self._ptr, self._elem = (4, n), stride, ptr, elem
            self.device = torch.device(device)

        def stride(self, dim):
            return self._stride

        def data_ptr(self):
            return self._ptr

        def element_size(self):
            return self._elem

    def run(x2, y2):  # layernorm's team copies w and b too: aligned here, misaligned below
        return m._smem_team_run(x2, y2, Rows(), Rows()) if name == "layernorm" else m._smem_team_run(x2, y2)

    monkeypatch.setattr(m, "_interpreting", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.version, "hip", None)
    assert run(Rows(), Rows())
    assert not run(Rows(n=32767), Rows(n=32767))  # a last group of 7 elements
    assert not run(Rows(n=32776), Rows(n=32776))  # 8 mod 16: Triton cannot prove the groups
    assert not run(Rows(), Rows(stride=32772))  # rows 8 bytes apart from 16
    assert not run(Rows(), Rows(stride=32776))  # rows 16 bytes apart, not 32
    assert not run(Rows(ptr=(1 << 20) + 8), Rows())  # misaligned start
    assert run(Rows(elem=4), Rows(elem=4)) == (name == "layernorm")  # fp32: layernorm's team alone
    assert not run(Rows(device="cpu"), Rows(device="cpu"))
    monkeypatch.setattr(torch.version, "hip", "6.2")
    assert not run(Rows(), Rows())  # AMD: no cp.async
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert not run(Rows(), Rows())  # before Ampere: no cp.async
    if name == "layernorm":
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
        assert not m._smem_team_run(Rows(), Rows(), Rows(ptr=(1 << 20) + 4), Rows())  # w 4 bytes off
        assert not m._smem_team_run(Rows(), Rows(), Rows(), Rows(ptr=(1 << 20) + 2))  # b 2 bytes off


@pytest.mark.parametrize("dtype, N, stages, pipelined", [
    # softmax's bounds scaled down: GROUPED_ROW_MAX 128, WHOLE_ROW_MAX 512
    (torch.bfloat16, 300, 4, True),  # not in 16-element groups: the body of 296 at most
    (torch.float16, 129, 3, True),  # one element over GROUPED_ROW_MAX, the fewest stages that pay: a body of 128
    (torch.bfloat16, 400, 4, True),  # padded to WHOLE_ROW_MAX
    (torch.bfloat16, 512, 4, False),  # WHOLE_ROW_MAX itself: the row in pairs
    (torch.bfloat16, 128, 4, False),  # up to GROUPED_ROW_MAX: the whole row, grouped
    (torch.bfloat16, 513, 4, False),  # over WHOLE_ROW_MAX: the team or the streamed kernel
    (torch.float32, 300, 4, False),  # fp32 rows: the whole row
    (torch.bfloat16, 300, 0, False),  # no room for MIN_PIPELINED_STAGES: the team
])
def test_softmax_16bit_rows_up_to_32768_take_the_pipelined_row_loop(monkeypatch, record_launches, dtype, N, stages,
                                                                    pipelined):
    # The row loop runs here in the interpreter (which ignores the stages) and is checked.
    m = _template("softmax")
    m.GROUPED_ROW_MAX, m.WHOLE_ROW_MAX = 128, 512
    asked = []
    launched = record_launches(m, "_softmax_rows", lambda grid, args, kw: (
        grid, kw["BLOCK_N"], kw["ROWS"], kw["NUM_STAGES"], kw["num_warps"], kw["num_stages"], kw["EVEN"]))
    monkeypatch.setattr(m, "_pipelined_stages", lambda device, row_bytes: asked.append(row_bytes) or stages)
    monkeypatch.setattr(m, "_programs_per_sm", lambda kernel, *args: 2 if kernel is m._softmax_row_pairs else 1)
    x = torch.randn(20, N).to(dtype)
    y = m.softmax(x, config={"BLOCK_SIZE": 64})
    torch.testing.assert_close(y.double(), m.softmax_ref(x), rtol=2e-2, atol=2e-3)
    if pipelined:  # 4 "SMs" in the interpreter x 1 program an SM; the row (its body) padded to a power of 2
        block_n = 1 << ((N if N % 16 == 0 else N // 8 * 8) - 1).bit_length()
        assert launched == [((4,), block_n, 1, stages, 16, stages, N == block_n)]  # unmasked: N is the block
        assert asked == [block_n * 2]
    else:
        assert launched == []


@pytest.mark.parametrize("dtype, N, occ, paired", [
    # softmax's bounds scaled down: GROUPED_ROW_MAX 128, WHOLE_ROW_MAX 512; `occ` programs of the pairs an SM
    (torch.float16, 512, 2, True),  # WHOLE_ROW_MAX itself
    (torch.bfloat16, 512, 2, True),
    (torch.bfloat16, 256, 2, True),
    (torch.bfloat16, 512, 1, False),  # one program an SM: the pairs' point is two
    (torch.bfloat16, 400, 2, False),  # padded to 512: the pipelined loop (the pairs have no masks)
    (torch.bfloat16, 128, 2, False),  # up to GROUPED_ROW_MAX: the grouped row
    (torch.bfloat16, 1024, 2, False),  # over WHOLE_ROW_MAX
    (torch.float32, 512, 2, False),  # fp32: no pairs
])
def test_softmax_16bit_rows_of_32768_stay_in_registers_as_pairs(monkeypatch, record_launches, dtype, N, occ,
                                                                paired):
    # Each pass unpacks the words again: a wrong half or a lost word shows against torch.
    m = _template("softmax")
    m.GROUPED_ROW_MAX, m.WHOLE_ROW_MAX = 128, 512
    launched = record_launches(m, "_softmax_row_pairs",  # args[4]: `zero`
                               lambda grid, args, kw: (grid, kw["BLOCK_N"], args[4], kw["num_warps"]))
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: occ)
    x = torch.randn(6, N) * 3
    x[0, -1] = 30.0  # the max in the last word's high half
    x[1, 0] = 30.0  # in the first word's low half
    x[2, 1::2] = float("-inf")  # every high half -inf
    x[3] *= 1e3
    x[4, : N // 2] = float("-inf")
    x = x.clamp(-6e4, 6e4).to(dtype)
    y = torch.full_like(x, float("nan"))
    m.softmax(x, out=y, config={"BLOCK_SIZE": 64})
    assert launched == ([((6,), N, 0, m.PAIRED_ROW_WARPS)] if paired else [])
    torch.testing.assert_close(y.double(), m.softmax_ref(x), rtol=2e-2, atol=2e-3)
    assert y[2, 1::2].eq(0).all()


def test_softmax_pairs_need_16bit_in_and_out_and_rows_of_16(monkeypatch):
    m = _template("softmax")
    m.GROUPED_ROW_MAX, m.WHOLE_ROW_MAX = 128, 512
    monkeypatch.setattr(m, "_softmax_row_pairs", None)  # a launch would raise
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 2)
    small = {"BLOCK_SIZE": 64}
    x = torch.randn(3, 512).to(torch.bfloat16)
    y = m.softmax(x, out=torch.empty(3, 512), config=small)  # fp32 out: Triton's conversion on the store
    torch.testing.assert_close(y.double(), m.softmax_ref(x), rtol=2e-2, atol=2e-3)
    wide = torch.randn(3, 544).to(torch.bfloat16)[:, 1:513]  # rows of 512 starting 2 bytes off 16
    torch.testing.assert_close(m.softmax(wide, config=small).double(), m.softmax_ref(wide), rtol=2e-2, atol=2e-3)


def _half_word(half: torch.Tensor) -> int:
    """The word _layernorm_half_rows posts for a half row: its mean's fp32 bits high, its M2's low."""
    half = half.float()
    mean = half.mean()
    m2 = ((half - mean) ** 2).sum()
    return (int(mean.view(torch.int32)) << 32) | (int(m2.view(torch.int32)) & 0xFFFFFFFF)


def _layernorm_rows_for_halves(M, N, dtype):
    x = torch.randn(M, N) * 2 + 0.5
    x[0, -1] = 50.0  # in the last word's high half
    x[1] += 300.0  # far off zero: the variance about the mean, not E[x^2] - mean^2
    x[1, N // 2:] += 40.0  # halves with different means: Chan's merge term carries the variance
    x[2] = 1.0  # all equal: variance 0
    x[3] = 1.0
    x[3, 1::2] = 1.0078125  # a variance of 1.5e-5, near eps: eps's place in rstd shows
    x = x.to(dtype)
    w, b = (torch.rand(N) + 0.5).to(dtype), torch.randn(N).to(dtype)
    return x, w, b


@pytest.mark.parametrize("M, N, dtype, occ, halves", [
    # layernorm's bounds scaled down: SMEM_TEAM_ABOVE 128, WHOLE_ROW_MAX 512; 4 "SMs" in the interpreter,
    # `occ` programs of the halves an SM: HALF_ROW_MIN_WAVES (3) waves of 2M programs over 4 x occ
    (24, 512, torch.bfloat16, 4, True),  # 48 programs: three waves of 16
    (24, 256, torch.float16, 4, True),
    (23, 512, torch.bfloat16, 4, False),  # a program short: the team's (or the whole row's)
    (30, 512, torch.float16, 5, True),
    (24, 512, torch.bfloat16, 3, False),  # three programs an SM: not what was measured
    (24, 400, torch.bfloat16, 4, False),  # not a power of two: no halves (they have no masks)
    (24, 128, torch.bfloat16, 4, False),  # up to SMEM_TEAM_ABOVE
    (24, 512, torch.float32, 4, False),
])
def test_layernorm_16bit_rows_of_32768_go_to_two_programs_a_row(monkeypatch, M, N, dtype, occ, halves):
    # The interpreter runs programs one after another, so a half would wait for its partner in vain: here
    # each second half's word is posted ahead (as its program would post it), and each first half takes it.
    m = _template("layernorm")
    m.SMEM_TEAM_ABOVE, m.WHOLE_ROW_MAX = 128, 512
    launched, real = [], m._layernorm_half_rows
    x, w, b = _layernorm_rows_for_halves(M, N, dtype)

    class Recorder:
        def __getitem__(self, grid):
            def run(*args, **kw):
                words = args[4]
                launched.append((grid, kw["HALF"], args[9], kw["num_warps"], words.eq(-1).all().item()))
                for r in range(M):
                    words[2 * r + 1] = _half_word(x[r, N // 2:])
                real[grid](*args, **kw)
                # each first half took its partner's word; each second half posted its own, as ahead
                assert words[0::2].eq(-1).all()
                for r in range(M):
                    posted = words[2 * r + 1:2 * r + 2].view(torch.float32)  # little-endian: M2, then the mean
                    ahead = torch.tensor([_half_word(x[r, N // 2:])]).view(torch.float32)
                    torch.testing.assert_close(posted, ahead, rtol=1e-5, atol=1e-3)
            return run

    monkeypatch.setattr(m, "_layernorm_half_rows", Recorder())
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: occ)
    monkeypatch.setattr(m, "_interpreting", lambda: False)
    y = torch.full_like(x, float("nan"))
    m.layernorm(x, w, b, out=y, config={"BLOCK_SIZE": 64})
    assert launched == ([((2 * M,), N // 2, 0, m.HALF_ROW_WARPS, True)] if halves else [])
    torch.testing.assert_close(y.double(), m.layernorm_ref(x, w, b), rtol=2e-2, atol=2e-2)


def test_layernorm_half_rows_stay_off_the_interpreter(monkeypatch):
    m = _template("layernorm")
    m.SMEM_TEAM_ABOVE, m.WHOLE_ROW_MAX = 128, 512
    monkeypatch.setattr(m, "_layernorm_half_rows", None)  # a launch would raise
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 4)
    x, w, b = _layernorm_rows_for_halves(24, 512, torch.bfloat16)
    y = m.layernorm(x, w, b, config={"BLOCK_SIZE": 64})
    torch.testing.assert_close(y.double(), m.layernorm_ref(x, w, b), rtol=2e-2, atol=2e-2)


def test_a_half_row_whose_partner_never_comes_writes_nan_and_withdraws_its_word():
    # In the interpreter no half ever meets its partner: each waits SPIN tries, withdraws its post, writes
    # NaN; the words are left as found (the next launch must not take a stale half).
    m = _template("layernorm")
    x, w, b = _layernorm_rows_for_halves(4, 256, torch.float16)
    y = torch.zeros_like(x)
    words = torch.full((8,), -1, dtype=torch.int64)
    m._layernorm_half_rows[(8,)](x, w, b, y, words, 256, x.stride(0), y.stride(0), m.EPS, 0, HALF=128, SPIN=3,
                                 num_warps=m.HALF_ROW_WARPS)
    assert y.isnan().all()
    assert words.eq(-1).all()


def test_layernorm_halves_need_16bit_x_w_b_and_y_alike_and_aligned(monkeypatch):
    m = _template("layernorm")
    m.SMEM_TEAM_ABOVE, m.WHOLE_ROW_MAX = 128, 512
    monkeypatch.setattr(m, "_layernorm_half_rows", None)  # a launch would raise
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 4)
    monkeypatch.setattr(m, "_interpreting", lambda: False)
    x, w, b = torch.randn(80, 512).to(torch.bfloat16), torch.rand(512).to(torch.bfloat16), torch.randn(512).to(torch.bfloat16)
    small = {"BLOCK_SIZE": 64}
    for args, out in [((x, w.float(), b), None),  # fp32 w
                      ((x, w, b), torch.empty(80, 512)),  # fp32 y
                      ((torch.randn(80, 544).to(torch.bfloat16)[:, 1:513], w, b), None),  # rows 2 bytes off 16
                      ((x, torch.rand(520).to(torch.bfloat16)[4:516], b), None)]:  # w 8 bytes off 16
        y = m.layernorm(*args, out=out, config=small)
        torch.testing.assert_close(y.double(), m.layernorm_ref(*args), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("name, buffers", [
    # the buffers of the kernels whose programs trade partials: (template, its function of (device, programs))
    ("layernorm", "_half_row_words"), ("rmsnorm", "_half_row_words"), ("layernorm", "_team_words"),
    ("rmsnorm", "_team_words"), ("softmax", "_team_words"), ("layernorm", "_sync_buffers"),
    ("cross-entropy", "_counters"),
])
def test_trading_buffers_are_one_set_a_stream(monkeypatch, name, buffers):
    # Launches on two streams may run at once: each stream gets its own buffers (no GPU here: the streams
    # and the CUDA allocations are stand-ins).
    m = _template(name)
    stream = [7]
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: type("S", (), {"cuda_stream": stream[0]}))
    for make in ("full", "zeros", "empty"):
        real = getattr(torch, make)
        monkeypatch.setattr(torch, make, lambda *a, _real=real, device=None, **kw: _real(*a, **kw))

    def first_buffer(n):
        got = getattr(m, buffers)(torch.device("cuda", 0), n)
        return got[0] if isinstance(got, tuple) else got

    first = first_buffer(8)
    assert first_buffer(6) is first
    stream[0] = 9
    assert first_buffer(8) is not first
    stream[0] = 7
    assert first_buffer(8) is first


def _rmsnorm_rows_for_halves(M, N, dtype):
    x = torch.randn(M, N) * 2 + 0.5
    x[0, -1] = 50.0  # in the last word's high half
    x[1, N // 2:] *= 30.0  # halves of very different sums: each counts
    x[2] = 0.0  # all zero: rstd is 1 / sqrt(eps), y zero
    x[3] = 1e-3  # mean square 1e-6, eps's size: eps's place shows
    return x.to(dtype), (torch.rand(N) + 0.5).to(dtype)


@pytest.mark.parametrize("M, N, dtype, occ, halves", [
    # rmsnorm's bounds scaled down: HALF_ROWS_ABOVE 128, WHOLE_ROW_MAX 512, BLOCK_SIZE 64; 4 "SMs" in the
    # interpreter, `occ` programs of the halves an SM: HALF_ROW_MIN_WAVES (5) waves of 2M programs over 4 x occ
    (20, 512, torch.float32, 2, True),  # 40 programs: five waves of 8
    (19, 512, torch.float32, 2, False),  # a program short of five waves: the whole row
    (20, 256, torch.float32, 2, True),
    (20, 512, torch.float32, 1, False),  # one fp32 program an SM: fewer than measured
    (30, 512, torch.bfloat16, 3, True),  # 16-bit in pairs: 60 programs, five waves of 12
    (30, 512, torch.float16, 3, True),
    (29, 512, torch.bfloat16, 3, False),
    (30, 512, torch.bfloat16, 2, False),  # two 16-bit programs an SM: fewer than measured
    (30, 400, torch.bfloat16, 3, False),  # not a power of two: no halves (they have no masks)
    (30, 128, torch.float32, 3, False),  # up to HALF_ROWS_ABOVE: the whole row
])
def test_rmsnorm_rows_of_32768_go_to_two_programs_a_row(monkeypatch, M, N, dtype, occ, halves):
    # As layernorm's: the interpreter runs programs one after another, so each second half's word (its
    # sum of squares's bits, low) is posted ahead, as its program would post it.
    m = _template("rmsnorm")
    m.HALF_ROWS_ABOVE, m.WHOLE_ROW_MAX = 128, 512
    launched, real = [], m._rmsnorm_half_rows
    x, w = _rmsnorm_rows_for_halves(M, N, dtype)
    ahead = [int((x[r, N // 2:].float() ** 2).sum().view(torch.int32)) & 0xFFFFFFFF for r in range(M)]

    class Recorder:
        def __getitem__(self, grid):
            def run(*args, **kw):
                words = args[3]
                launched.append((grid, kw["HALF"], kw["PAIRS"], args[8], kw["num_warps"], words.eq(-1).all().item()))
                words[1::2] = torch.tensor(ahead)
                real[grid](*args, **kw)
                assert words[0::2].eq(-1).all()  # each first half took its partner's word
                posted = words[1::2].to(torch.int32).view(torch.float32)  # each second half's, as ahead
                torch.testing.assert_close(posted, torch.tensor(ahead).to(torch.int32).view(torch.float32),
                                           rtol=1e-5, atol=0)
            return run

    monkeypatch.setattr(m, "_rmsnorm_half_rows", Recorder())
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: occ)
    monkeypatch.setattr(m, "_interpreting", lambda: False)
    y = torch.full_like(x, float("nan"))
    m.rmsnorm(x, w, out=y, config={"BLOCK_SIZE": 64})
    pairs = dtype != torch.float32
    assert launched == ([((2 * M,), N // 2, pairs, 0, m.HALF_ROW_WARPS, True)] if halves else [])
    torch.testing.assert_close(y.double(), m.rmsnorm_ref(x, w), rtol=2e-2 if pairs else 1e-5,
                               atol=2e-2 if pairs else 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_rmsnorm_half_row_whose_partner_never_comes_writes_nan_and_withdraws_its_word(dtype):
    m = _template("rmsnorm")
    x, w = _rmsnorm_rows_for_halves(4, 256, dtype)
    y = torch.zeros_like(x)
    words = torch.full((8,), -1, dtype=torch.int64)
    m._rmsnorm_half_rows[(8,)](x, w, y, words, 256, x.stride(0), y.stride(0), m.EPS, 0, HALF=128, SPIN=3,
                               PAIRS=dtype != torch.float32, num_warps=m.HALF_ROW_WARPS)
    assert y.isnan().all()
    assert words.eq(-1).all()


def test_rmsnorm_halves_stay_off_the_interpreter_and_need_16bit_x_w_y_alike_and_aligned(monkeypatch):
    m = _template("rmsnorm")
    m.HALF_ROWS_ABOVE, m.WHOLE_ROW_MAX = 128, 512
    monkeypatch.setattr(m, "_rmsnorm_half_rows", None)  # a launch would raise
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 3)
    x, w = _rmsnorm_rows_for_halves(40, 512, torch.bfloat16)
    small = {"BLOCK_SIZE": 64}
    torch.testing.assert_close(m.rmsnorm(x, w, config=small).double(), m.rmsnorm_ref(x, w), rtol=2e-2, atol=2e-2)
    monkeypatch.setattr(m, "_interpreting", lambda: False)
    for args, out in [((x, w.float()), None),  # fp32 w
                      ((x, w), torch.empty(40, 512)),  # fp32 y
                      ((torch.randn(40, 544).to(torch.bfloat16)[:, 1:513], w), None),  # rows 2 bytes off 16
                      ((x, torch.rand(520).to(torch.bfloat16)[4:516]), None)]:  # w 8 bytes off 16
        y = m.rmsnorm(*args, out=out, config=small)
        torch.testing.assert_close(y.double(), m.rmsnorm_ref(*args), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("M, N, launch", [
    # (BLOCK_N, ROWS, EVEN) of _softmax_rows's launch under BLOCK_SIZE 256
    (8, 64, (64, 4, True)),  # rows of exactly BLOCK_N, whole tiles of 4: unmasked
    (10, 64, (64, 4, False)),  # a last tile of 2 rows
    (8, 60, (64, 4, False)),  # rows padded to 64
    (3, 256, (256, 1, True)),
])
def test_softmax_row_tiles_drop_their_masks_only_on_whole_tiles(monkeypatch, record_launches, M, N, launch):
    m = _template("softmax")
    launched = record_launches(m, "_softmax_rows", lambda grid, args, kw: (kw["BLOCK_N"], kw["ROWS"], kw["EVEN"]))
    x = torch.randn(M, N) * 3
    x[0, -1] = 20.0  # the row's max at its last column: a dropped column would show
    y = m.softmax(x, config={"BLOCK_SIZE": 256})
    assert launched == [launch]
    torch.testing.assert_close(y.double(), m.softmax_ref(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype, N, grouped", [
    (torch.float16, 240, True), (torch.bfloat16, 240, True),  # a ragged last group of 48
    (torch.bfloat16, 250, False),  # a length Triton does not see as a multiple of 16: the plain row
])
def test_softmax_grouped_row_combines_its_groups_once(monkeypatch, record_launches, dtype, N, grouped):
    # 16-bit rows over BLOCK_SIZE up to GROUPED_ROW_MAX: groups of 64, combined by one reduction. Rows whose
    # groups are all -inf, far below zero, huge, or ragged must come out as torch's.
    m = _template("softmax")
    launched = record_launches(m, "_softmax_row", lambda grid, args, kw: (kw["BLOCK_N"], kw["GROUPED"], kw["GROUP"]))
    x = torch.randn(4, N) * 3
    x[0, 64:] -= 200.0
    x[2] *= 1e4  # a huge range: each group's sum is rescaled by exp(m_g - m) near 0
    x = x.clamp(-6e4, 6e4).to(dtype)  # inside fp16's range
    x[0, :64] = float("-inf")  # a whole group of -inf beside a row max of about -190: its scale must be
    # exp(-inf) = 0, not exp(190) = inf times its zeros
    x[1, :] = float("-inf")
    x[1, 200] = 1.0  # one finite value in the last, ragged group
    y = m.softmax(x, config={"BLOCK_SIZE": 64})
    assert launched == [(256, grouped, 64)]
    assert not y.isnan().any()
    torch.testing.assert_close(y.double(), m.softmax_ref(x), rtol=2e-2, atol=2e-3)


# Row lengths around the 16-byte groups (8 elements of 16 bits, 4 of fp32): a row's start falls at every
# offset into a group over 9 rows when the length is odd; rows shorter than a group; a length of whole
# groups that are not 16-element ones (every row starts on a boundary: no edge)
ALIGNED_LENGTHS = [5, 17, 23, 25, 31, 33, 40, 72, 129]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("N", ALIGNED_LENGTHS)
def test_softmax_rows_not_in_16_element_groups_are_cut_at_16_byte_boundaries(record_launches, dtype, N):
    # Rows over BLOCK_SIZE (4 here) go to _softmax_row whole; those Triton does not see in 16-element
    # groups are loaded as a body of whole 16-byte groups and an edge of the elements at either end. The row
    # max in the head, in the tail, or its only finite element there must come out as torch's.
    m = _template("softmax")
    launched = record_launches(m, "_softmax_row", lambda grid, args, kw: (kw["ALIGNED"], kw["VEC"]))
    x = torch.randn(9, N) * 3
    x[0, 0] = 30.0  # the max at a row's first element (in the head, where row 0 has none: body)
    x[3, -1] = 30.0  # at its last
    x[5, :] = float("-inf")
    x[5, -1] = 1.0  # the one finite element last
    x = x.to(dtype)
    y = torch.full_like(x, float("nan"))
    m.softmax(x, out=y, config={"BLOCK_SIZE": 4})
    assert launched == [(True, 16 // x.element_size())]
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-3)
    torch.testing.assert_close(y.double(), m.softmax_ref(x), **tol)


def _misaligned(M, N, dtype):
    """Rows of N elements a stride of N + 1 apart, starting one element past a 16-byte boundary."""
    return (torch.randn(M, N + 1) * 3).to(dtype)[:, 1:]


@pytest.mark.parametrize("case, aligned", [
    ("contiguous odd rows", True),
    ("x one element past a 16-byte boundary", False),
    ("y with its own stride", False),
    ("rows of 16-element groups: the grouped row", False),
])
def test_softmax_rows_are_cut_only_where_x_and_y_share_their_16_byte_boundaries(record_launches, case, aligned):
    m = _template("softmax")
    launched = record_launches(m, "_softmax_row", lambda grid, args, kw: kw["ALIGNED"])
    N = 80 if "16-element" in case else 67
    x = _misaligned(6, N, torch.bfloat16) if "past" in case else (torch.randn(6, N) * 3).to(torch.bfloat16)
    y = torch.full((6, N + 8 if "own stride" in case else N), float("nan"), dtype=torch.bfloat16)[:, :N]
    m.softmax(x, out=y, config={"BLOCK_SIZE": 16})
    assert launched == [aligned]
    torch.testing.assert_close(y.double(), m.softmax_ref(x), rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("case, dtype, N, unit", [
    ("rows of whole 16-byte groups", torch.bfloat16, 40, 8),
    ("rows of whole 16-byte groups", torch.float32, 20, 4),
    ("rows of 16-element groups: Triton sees them", torch.bfloat16, 48, 1),
    ("rows not of whole groups", torch.float16, 44, 1),
    ("x one element past a 16-byte boundary", torch.bfloat16, 40, 1),
    ("y with a stride not of whole groups", torch.bfloat16, 40, 1),
])
def test_softmax_row_tiles_take_lengths_and_strides_in_16_byte_groups_where_rows_are_of_them(
        record_launches, case, dtype, N, unit):
    m = _template("softmax")
    launched = record_launches(m, "_softmax_rows", lambda grid, args, kw: (args[3:], kw["UNIT"]))
    x = _misaligned(7, N, dtype) if "past" in case else (torch.randn(7, N) * 3).to(dtype)
    y = torch.full((7, N + 3 if "stride" in case else N), float("nan"), dtype=dtype)[:, :N]
    m.softmax(x, out=y)
    assert launched == [((N // unit, x.stride(0) // unit, y.stride(0) // unit), unit)]
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-3)
    torch.testing.assert_close(y.double(), m.softmax_ref(x), **tol)


@pytest.mark.parametrize("case, dtype, N, block_n", [
    # softmax's bounds scaled down (BLOCK_SIZE 16, GROUPED_ROW_MAX 128, WHOLE_ROW_MAX 512); the body's block
    ("a row start at every offset into a group", torch.bfloat16, 131, 128),
    ("a row start at every offset into a group", torch.float16, 129, 128),  # one over GROUPED_ROW_MAX
    ("a row start at every offset into a group", torch.bfloat16, 300, 512),
    ("whole groups of 8, not of 16: no edge", torch.float16, 136, 256),
    ("up to GROUPED_ROW_MAX: the whole row, one program", torch.bfloat16, 67, None),
    ("up to GROUPED_ROW_MAX: the whole row, one program", torch.float16, 127, None),
    ("rows of 16-element groups: the pipelined whole row", torch.bfloat16, 144, None),
    ("over WHOLE_ROW_MAX", torch.bfloat16, 513, None),
    ("fp32", torch.float32, 131, None),
    ("x one element past a 16-byte boundary", torch.bfloat16, 131, None),
    ("y with its own stride", torch.bfloat16, 131, None),
])
def test_softmax_16bit_rows_not_in_16_element_groups_pipeline_their_bodies(monkeypatch, record_launches, case,
                                                                          dtype, N, block_n):
    # 4 "SMs" x 1 program: each program loops over 2-3 of the 9 rows, each row's edge loaded one row ahead,
    # the last program's next row past M. The row max in a head, in a tail, or its only finite element there
    # must come out as torch's.
    m = _template("softmax")
    m.GROUPED_ROW_MAX, m.WHOLE_ROW_MAX = 128, 512
    monkeypatch.setattr(m, "_pipelined_stages", lambda device, row_bytes: 3)
    launched = record_launches(m, "_softmax_rows", lambda grid, args, kw: (grid, kw["BLOCK_N"], kw["ALIGNED"]))
    x = torch.randn(9, N + (1 if "past" in case else 0)) * 3
    x[0, -N] = 30.0  # the max at a row's first element
    x[3, -1] = 30.0  # at its last
    x[5, :] = float("-inf")
    x[5, -1] = 1.0  # the one finite element last
    x = x.to(dtype)[:, -N:]
    y = torch.full((9, N + (8 if "own stride" in case else 0)), float("nan"), dtype=dtype)[:, :N]
    m.softmax(x, out=y, config={"BLOCK_SIZE": 16})
    assert [launch for launch in launched if launch[2]] == ([((4,), block_n, True)] if block_n else [])
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-3)
    torch.testing.assert_close(y.double(), m.softmax_ref(x), **tol)


@pytest.mark.parametrize("M, fits, choice", [
    # (programs an SM, spilled bytes) of the compiled loop by (warps, stages); 4 "SMs", rows of 600 bytes
    (40, {(8, 3): (2, 0), (8, 4): (2, 0), (16, 3): (1, 0), (16, 4): (1, 0)}, (8, 4)),  # 6 rows held an SM
    (40, {(8, 3): (1, 0), (8, 4): (1, 0), (16, 3): (2, 0), (16, 4): (1, 0)}, (16, 3)),  # 4 rows
    (40, {(8, 3): (2, 0), (8, 4): (2, 8), (16, 3): (1, 0), (16, 4): (1, 0)}, (8, 3)),  # never one that spills
    (40, {(8, 3): (1, 0), (8, 4): (1, 0), (16, 3): (1, 0), (16, 4): (1, 0)}, (16, 4)),  # ties: 16 warps, 4 stages
    (8, {(8, 3): (2, 0), (8, 4): (2, 0), (16, 3): (1, 0), (16, 4): (1, 0)}, (16, 4)),  # 2 rows an SM: all hold 2
])
def test_softmax_pipelined_bodies_take_the_warps_and_stages_that_hold_the_most_rows(monkeypatch, record_launches,
                                                                                   M, fits, choice):
    m = _template("softmax")
    m.GROUPED_ROW_MAX, m.WHOLE_ROW_MAX = 128, 512
    monkeypatch.setattr(m, "_pipelined_stages", lambda device, row_bytes: 4)
    monkeypatch.setattr(m, "_on_nvidia_gpu", lambda x: True)
    monkeypatch.setattr(m, "_fit", lambda kernel, args, consts, warps, stages, device: (
        fits[warps, stages] if consts["NUM_STAGES"] == stages else (0, 1)))
    launched = record_launches(m, "_softmax_rows", lambda grid, args, kw: (
        (kw["num_warps"], kw["num_stages"]), kw["NUM_STAGES"], grid))
    x = (torch.randn(M, 300) * 3).to(torch.bfloat16)
    y = m.softmax(x, config={"BLOCK_SIZE": 16})
    assert launched == [(choice, choice[1], (min(M, 4 * fits[choice][0]),))]
    torch.testing.assert_close(y.double(), m.softmax_ref(x), rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("V, config, kernel", [
    (5, {"BLOCK_SIZE": 4}, "_ce_rows"),  # rows shorter than a group
    (203, {"BLOCK_SIZE": 16}, "_ce_rows"),  # one row a program, its body in 16-wide steps
    (200, {"BLOCK_SIZE": 16}, "_ce_rows"),  # whole groups of 8, not of 16
    (203, {"BLOCK_SIZE": 16, "CHUNK": 64}, "_ce_split"),  # chunks cut at their own boundaries
    (201, {"BLOCK_SIZE": 16, "CHUNK": 48}, "_ce_split"),
])
def test_cross_entropy_rows_not_in_16_element_groups_are_cut_at_16_byte_boundaries(record_launches, dtype, V,
                                                                                      config, kernel):
    ce = _template("cross-entropy")
    launched = record_launches(ce, kernel, lambda grid, args, kw: (kw["ALIGNED"], kw["VEC"]))
    x = torch.randn(9, V) * 3
    x[0, 0] = 30.0  # the max at a row's first logit
    x[3, -1] = 30.0  # at its last
    x[5, :] = float("-inf")
    x[5, -1] = 1.0  # the one finite logit last
    x = x.to(dtype)
    t = torch.tensor([0, 1, V - 1, V - 1, 2, V - 1, 0, -100, 3])
    loss = ce.cross_entropy(x, t, config=config)
    assert launched == [(True, 16 // x.element_size())]
    torch.testing.assert_close(loss.double(), ce.cross_entropy_ref(x, t), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("case, config, aligned", [
    ("contiguous odd rows", {"BLOCK_SIZE": 16}, True),
    ("x one element past a 16-byte boundary", {"BLOCK_SIZE": 16}, False),
    ("a stride of 16 elements: Triton sees the groups", {"BLOCK_SIZE": 16}, False),
    ("rows a program", {"BLOCK_SIZE": 512}, False),
])
def test_cross_entropy_rows_are_cut_only_where_x_is_aligned_one_row_a_program(record_launches, case, config,
                                                                               aligned):
    ce = _template("cross-entropy")
    launched = record_launches(ce, "_ce_rows", lambda grid, args, kw: kw["ALIGNED"])
    V = 80 if "stride of 16" in case else 67
    x = _misaligned(6, V, torch.float16) if "past" in case else (torch.randn(6, V) * 3).to(torch.float16)
    t = torch.randint(0, V, (6,))
    loss = ce.cross_entropy(x, t, config=config)
    assert launched == [aligned]
    torch.testing.assert_close(loss.double(), ce.cross_entropy_ref(x, t), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("N, even_programs, masked_programs, even", [
    # fp32 whole rows (BLOCK_SIZE 64): programs an SM unmasked and masked -> EVEN of the launch
    (256, 2, 2, True),  # rows of exactly BLOCK_N, unmasked at no cost
    (256, 1, 2, False),  # unmasked would cost a program an SM (fp32 16384 on the H200)
    (256, 3, 2, True),
    (300, 2, 2, False),  # rows padded to 512: masked
])
def test_layernorm_whole_row_drops_its_masks_where_that_costs_no_program(monkeypatch, record_launches, N,
                                                                         even_programs, masked_programs, even):
    m = _template("layernorm")
    launched = record_launches(m, "_layernorm_row", lambda grid, args, kw: kw["EVEN"])
    monkeypatch.setattr(m, "_programs_per_sm",
                        lambda kernel, args, consts, *rest: even_programs if consts["EVEN"] else masked_programs)
    x, w, b = torch.randn(5, N) * 2 + 3, torch.rand(N) + 0.5, torch.randn(N)
    y = m.layernorm(x, w, b, config={"BLOCK_SIZE": 64})
    assert launched == [even]
    torch.testing.assert_close(y.double(), m.layernorm_ref(x, w, b), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("N, even", [(256, True), (384, True), (300, False), (192, False)])  # 192: 3 chunks, not whole parts
def test_layernorm_team_drops_its_column_masks_on_rows_of_whole_parts(monkeypatch, record_launches, N, even):
    # parts of 2 x 64 = 128 elements in the scaled-down team
    m, call, _ = _scaled_down_team_template("layernorm")
    launched = record_launches(m, "_layernorm_smem_team", lambda grid, args, kw: kw["EVEN"], launch=False)
    monkeypatch.setattr(m, "_smem_team_run", lambda *args: True)
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 3)
    x, w, b = torch.randn(20, N).half(), (torch.rand(N) + 0.5).half(), torch.randn(N).half()
    call(m, x, w, b, {"BLOCK_SIZE": 64})
    assert launched == [even]


def test_pipelined_stages_fit_the_gpus_shared_memory(monkeypatch):
    m = _template("softmax")
    props = {}
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: type("P", (), props)())
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(m, "_interpreting", lambda: False)
    gpu, row = torch.device("cuda"), 65536  # a 16-bit row of 32768
    for smem, stages in [(232448, 4), (166912, 3), (2 * row + 1024, 3), (2 * row + 1023, 0),
                          (3 * row + 1023, 3), (101376, 0)]:
        props.update(shared_memory_per_block_optin=smem, shared_memory_per_block=49152)  # H200, A100, ..., 99 KB
        assert m._pipelined_stages(gpu, row) == stages, smem
    assert m._pipelined_stages(gpu, row // 2) == 4  # PIPELINED_ROWS's, where more would fit
    props.pop("shared_memory_per_block_optin")
    assert m._pipelined_stages(gpu, 16384) == 3  # no opt-in figure: the per-block 48 KB
    props.update(shared_memory_per_block_optin=232448)
    assert m._pipelined_stages(torch.device("cpu"), row) == 0
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert m._pipelined_stages(gpu, row) == 0  # no cp.async before Ampere
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.version, "hip", "6.2")
    assert m._pipelined_stages(gpu, row) == 0
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(m, "_interpreting", lambda: True)
    assert m._pipelined_stages(gpu, row) == 0


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "layernorm"])
def test_streamed_kernel_reads_rows_in_chunks(name):
    # Rows over WHOLE_ROW_MAX take the streamed kernel in the interpreter (as 16-bit ones do on a GPU).
    # 300 columns in chunks of 64: four full chunks and a ragged one. The
    # norms' rows sit at 1000 with a spread of 1: a variance taken as E[x^2] - mean^2 in fp32 would be
    # off by percents; the mean's own rounding (an ulp of 1000 is 6e-5) sets the tolerance.
    m = _template(name)
    m.WHOLE_ROW_MAX = 256
    m.STREAMED = {"BLOCK_N": 64, "num_warps": 4, "num_stages": 2}
    x = 1000 + torch.randn(3, 300)
    w, b = torch.rand(300) + 0.5, torch.randn(300)
    if name == "softmax":
        x = x - 1000
        x[1, :70] = -float("inf")  # a first chunk of only -inf, and part of the next
        out, ref = m.softmax(x, config={"BLOCK_SIZE": 64}), m.softmax_ref(x)
        torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-5)
        return
    if name == "rmsnorm":
        out, ref = m.rmsnorm(x, w, config={"BLOCK_SIZE": 64}), m.rmsnorm_ref(x, w)
    else:
        out, ref = m.layernorm(x, w, b, config={"BLOCK_SIZE": 64}), m.layernorm_ref(x, w, b)
    torch.testing.assert_close(out.double(), ref, rtol=1e-3, atol=2e-4)


def test_streamed_rmsnorm_row_loop_covers_every_row():
    # rmsnorm's streamed kernel runs on a persistent grid (PROGRAMS_PER_SM per SM; the interpreter
    # counts 4 SMs): 11 rows on 4 programs is 3, 3, 3 and 2 rows a program. The output starts as NaN,
    # so a row no program reached fails.
    m = _template("rmsnorm")
    m.WHOLE_ROW_MAX = 256
    m.STREAMED = {"BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "PROGRAMS_PER_SM": 1}
    x, w = torch.randn(11, 300), torch.rand(300) + 0.5
    out = torch.full_like(x, float("nan"))
    m.rmsnorm(x, w, out=out, config={"BLOCK_SIZE": 64})
    torch.testing.assert_close(out.double(), m.rmsnorm_ref(x, w), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name, aligned", [("softmax", False), ("softmax", True), ("rmsnorm", False)])
def test_split_team_exchanges_stamped_words_and_leaves_them_unstamped(name, aligned):
    # The interpreter runs one program after another, so only a team of one program can run here
    # (siblings would wait for each other forever): each program publishes and reads back its own
    # stamped words, through 4 buffers and more than 128 rows (the stamp is the iteration % 128), and
    # the last to leave unstamps them. Waiting on siblings' stamps is checked on a GPU, by the sweep.
    m = _template(name)
    M, N, block, teams = 133, 50, 64, 1
    x, w = torch.randn(M, N) * 3, torch.rand(N) + 0.5
    if name == "softmax":
        x[5, :20] = -float("inf")
    y = torch.full_like(x, float("nan"))
    words, exits = m._team_words(x.device, teams)
    # a team writes words (team * 4 + iteration % 4) * values a partial * P + part: softmax two values
    # (max, sum), rmsnorm one; softmax's exit counters end with its shared-memory team's row counter
    assert words.numel() == {"softmax": 8, "rmsnorm": 4}[name] * teams
    assert exits.numel() == teams + (name == "softmax")
    words.fill_(m.UNSTAMPED.value)
    rows = (M, N, x.stride(0), y.stride(0))
    args = (x, y, words, exits, *rows) if name == "softmax" else (x, w, y, words, exits, *rows, m.EPS)
    # softmax's rows of 50 fp32 elements start 8 bytes into a 16-byte group every other row: ALIGNED cuts them
    cut = {"ALIGNED": aligned, "VEC": 4} if name == "softmax" else {}
    getattr(m, f"_{name}_split")[(teams,)](*args, BLOCK_N=block, P=1, P_POW2=1, MAX_SPIN=4, **cut)
    ref = m.softmax_ref(x) if name == "softmax" else m.rmsnorm_ref(x, w)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)
    assert bool((words == m.UNSTAMPED.value).all()) and not exits.any()


class Spy:
    """Stands in for a kernel object: records its name at each launch, then launches the kernel."""

    def __init__(self, name, kernel, launched):
        self.name, self.kernel, self.launched = name, kernel, launched

    def __getitem__(self, grid):
        self.launched.append(self.name)
        return self.kernel[grid]


@pytest.mark.parametrize("name, call", [
    ("softmax", lambda m, x, cfg: m.softmax(x, config=cfg)),
    ("layernorm", lambda m, x, cfg: m.layernorm(x, torch.ones(x.shape[1]), torch.zeros(x.shape[1]), config=cfg)),
    ("rmsnorm", lambda m, x, cfg: m.rmsnorm(x, torch.ones(x.shape[1]), config=cfg)),
    ("cross-entropy", lambda m, x, cfg: m.cross_entropy(x, torch.zeros(x.shape[0], dtype=torch.int64), config=cfg)),
])
def test_the_launcher_names_the_kernel_it_chose_for_the_sweep(monkeypatch, name, call):
    # last_config["kernel"] (the sweep's "ran" column) is the kernel that ran, at every row length the
    # interpreter takes: rows of one block, whole rows, and rows past WHOLE_ROW_MAX (scaled down)
    m = _template(name)
    if hasattr(m, "WHOLE_ROW_MAX"):
        monkeypatch.setattr(m, "WHOLE_ROW_MAX", 256)
    launched = []
    for kernel in set(re.findall(r"^\s*(_\w+)\[[^\]]*\]\(", Path(m.__file__).read_text(), re.MULTILINE)):  # launch sites
        monkeypatch.setattr(m, kernel, Spy(kernel, getattr(m, kernel), launched))
    named = []
    for N in (48, 200, 600):
        call(m, torch.randn(3, N), {"BLOCK_SIZE": 64, "CHUNK": 128})
        named.append(m.last_config["kernel"])
        assert named[-1] == launched[-1], (N, launched)
    assert len(set(named)) >= 2, named  # the choice is by shape
    call(m, torch.randn(0, 48), {"BLOCK_SIZE": 64, "CHUNK": 128})  # no rows: no kernel, none named
    assert m.last_config == {}


@pytest.mark.parametrize("M, stride, block_n, wide", [
    (2, 2 ** 31 - 16, 16, False),  # the last row's last column is element 2^31 - 1: a 32-bit offset
    (2, 2 ** 31 - 16, 17, True),  # one column further: 2^31
    (2 ** 15 + 1, 2 ** 16 - 1, 2 ** 15, False),  # 2^31 - 2^15 + 2^15 - 1
    (2 ** 15 + 1, 2 ** 16, 1, True),  # the last row starts at 2^31
    (1, 2 ** 40, 2 ** 20, False),  # a single row starts at 0 whatever its stride
])
def test_rmsnorm_row_offsets_widen_only_past_2_31_elements(M, stride, block_n, wide):
    assert _template("rmsnorm").row_offsets_64(M, stride, block_n) is wide


@pytest.mark.parametrize("wide", [False, True])
def test_rmsnorm_whole_rows_take_the_offset_width_the_shape_needs(monkeypatch, record_launches, wide):
    # Rows over BLOCK_SIZE go to _rmsnorm_row; either offset width computes every row (x's stride is not y's)
    m = _template("rmsnorm")
    m.WHOLE_ROW_MAX, m.HALF_ROWS_ABOVE = 512, 512
    launched = record_launches(m, "_rmsnorm_row", lambda grid, args, kw: kw["OFFSETS_64"])
    sizes = []
    monkeypatch.setattr(m, "row_offsets_64", lambda M, stride, block_n: sizes.append((M, stride, block_n)) or wide)
    x = (torch.randn(6, 400) * 2 + 0.5)[:, :300]  # rows of 300 a stride of 400 apart; y's 500 apart
    w = torch.rand(300) + 0.5
    y = torch.full((6, 500), float("nan"))[:, :300]
    m.rmsnorm(x, w, out=y, config={"BLOCK_SIZE": 64})
    assert launched == [wide] and sizes == [(6, 500, 512)]  # the larger stride decides
    torch.testing.assert_close(y.double(), m.rmsnorm_ref(x, w).double(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------
# softmax's shared-memory team on 16-bit rows not in 16-element groups, cut at 16-byte boundaries (SMEM_CUT).
# Gluon has no interpreter: its helpers' own source runs here on torch tensors (_cut_on_torch), the dispatch
# is checked with the launch recorded, and the kernel is compiled for sm_90; the device script
# (5be4e92:.stage/softmax_cut_check.py) checks every output element on a GPU.

class _GluonOnTorch:
    """The gl functions softmax's cut helpers call, on torch tensors. Pointers are indices into `memory` (a
    flat fp32 tensor). multiple_of asserts what it promises Triton: a false hint would miscompile silently."""
    int32, int64, float32 = torch.int32, torch.int64, torch.float32

    def __init__(self, memory=None):
        self.memory = memory

    @staticmethod
    def multiple_of(x, v):
        assert bool((torch.as_tensor(x) % v == 0).all()), (x, v)
        return x

    @staticmethod
    def maximum(a, b):
        return torch.maximum(torch.as_tensor(a), torch.as_tensor(b))

    @staticmethod
    def minimum(a, b):
        return torch.minimum(torch.as_tensor(a), torch.as_tensor(b))

    @staticmethod
    def where(c, a, b):
        return torch.where(c, torch.as_tensor(a), torch.as_tensor(b))

    @staticmethod
    def max(x, axis):
        return x.max(dim=axis).values

    @staticmethod
    def sum(x, axis):
        return x.sum(dim=axis)

    exp2 = staticmethod(torch.exp2)

    def load(self, at, mask, other):
        got = self.memory[at.clamp(0, self.memory.numel() - 1)]
        return torch.where(mask, got, torch.tensor(other, dtype=got.dtype))


_CUT_HELPERS = ("_cut", "_cut_edge", "_row_body", "_y_body", "_edge_load", "_with_edge")


def _cut_on_torch(m, memory=None):
    """softmax's Gluon cut helpers as Python functions of their own source, calling _GluonOnTorch."""
    import types
    scope = dict(m._cut.fn.__globals__, gl=_GluonOnTorch(memory), LOG2E=m.LOG2E.value)
    for name in _CUT_HELPERS:
        fn = getattr(m, name).fn
        scope[name] = types.FunctionType(fn.__code__, scope, name)
    return types.SimpleNamespace(**{name: scope[name] for name in _CUT_HELPERS})


CUT_CHUNK, CUT_NCH, CUT_VEC = 16, 2, 8  # the team scaled down: parts of 32 elements


@pytest.mark.parametrize("N", [1, 5, 7, 8, 9, 15, 16, 17, 23, 31, 33, 64, 65, 100, 131, 300])
def test_softmax_cut_takes_each_element_of_a_row_once_at_every_offset(N):
    # Rows at element off + r * stride of a 16-byte aligned base: eight strides N .. N + 7 and eight offsets,
    # so every row start's offset 0-7 from a 16-byte boundary, with lengths around multiples of 8 and rows
    # inside one group. The P parts' chunks of the body (from its first 16-byte boundary, whole 8-element
    # groups) and program P - 1's edge must hold each element of [start, start + N) exactly once; the body
    # starts on a boundary (multiple_of asserts it), and y's part of each row is as far into y's row as
    # x's body is into x's, wherever y's rows start (Y_CUT: y's own cut, on a 16-byte boundary too).
    m = _template("softmax")
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")
    g = _cut_on_torch(m)
    part = CUT_CHUNK * CUT_NCH
    P = m._team_parts(N, part, CUT_VEC)
    lanes = torch.arange(2 * CUT_VEC)
    for stride in range(N, N + 8):
        for off in range(8):
            for r in map(torch.tensor, range(8)):
                start = int(r) * stride + off
                a0, body = g._row_body(0, r, stride, off, N, True, CUT_VEC)
                assert int(a0) % CUT_VEC == 0 and int(body) % CUT_VEC == 0 and int(body) <= P * part
                held = [int(a0) + k for p in range(P) for c in range(CUT_NCH)
                        for k in range(p * part + c * CUT_CHUNK, p * part + (c + 1) * CUT_CHUNK) if k < int(body)]
                col, ok = g._cut_edge(torch.tensor(start), N, lanes, CUT_VEC)
                assert int(ok.sum()) <= 2 * (CUT_VEC - 1)
                held += (start + col[ok]).tolist()
                assert sorted(held) == list(range(start, start + N)), (N, stride, off, int(r))
                for stride_y, off_y in [(stride, off), (stride + 8, off), (stride + 3, off), (stride, (off + 5) % 8),
                                        (N + 1000, 0)]:
                    y_cut = off_y == off and (stride_y - stride) % CUT_VEC == 0
                    y0 = g._y_body(0, r, stride, stride_y, off, off_y, N, True, y_cut, CUT_VEC)
                    assert int(y0) - (int(r) * stride_y + off_y) == int(a0) - start


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("N, off, stride", [(301, 0, 301), (301, 3, 305), (300, 7, 300), (37, 1, 37), (9, 5, 12),
                                            (7, 2, 7)])
def test_softmax_cut_rows_fold_their_edge_into_the_last_part(dtype, N, off, stride):
    # Each part's (max, sum) of its body, program P - 1's with the row's edge folded in (_edge_load,
    # _with_edge: their own source), combined and written as the kernel does; rows whose max is in the head,
    # in the tail, whose one finite element is the last or the first, and a row of -inf but one in the body.
    m = _template("softmax")
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")
    M = 9
    x = torch.randn(M, N) * 3
    x[0, 0] = 30.0  # max at the first element (a head where the row starts off a boundary)
    x[1, -1] = 30.0  # at the last (a tail)
    x[2, :] = -float("inf")
    x[2, -1] = 1.0  # the one finite element last
    x[3, :] = -float("inf")
    x[3, 0] = -2.0  # ... first
    x[4, :] = -float("inf")
    x[4, N // 2] = 0.5  # ... in the body
    x = x.to(dtype)
    memory = torch.full((off + M * stride + 16,), float("nan"))
    for r in range(M):
        memory[off + r * stride: off + r * stride + N] = x[r].float()
    g = _cut_on_torch(m, memory)
    part = CUT_CHUNK * CUT_NCH
    P = m._team_parts(N, part, CUT_VEC)
    lanes = torch.arange(2 * CUT_VEC)
    y = torch.full_like(memory, float("nan"))
    for r in map(torch.tensor, range(M)):
        a0, body = g._row_body(0, r, stride, off, N, True, CUT_VEC)
        partials, values = [], []
        for p in range(P):
            k = p * part + torch.arange(part)
            xb = torch.where(k < body, memory[(a0 + k).clamp(max=memory.numel() - 1)], -float("inf"))
            mp = xb.max()
            safe = 0.0 if mp == -float("inf") else mp
            mp, sp = g._with_edge(mp, torch.exp2((xb - safe) * m.LOG2E.value).sum(),
                                  g._edge_load(0, r, stride, off, N, torch.tensor(p == P - 1), lanes, CUT_VEC))
            partials.append((mp, sp))
            values.append((k, xb))
        pm, ps = torch.stack([p[0] for p in partials]), torch.stack([p[1] for p in partials])
        gm = pm.max()
        shift = gm * m.LOG2E.value + torch.log2((ps * torch.exp2((pm - gm) * m.LOG2E.value)).sum())
        for k, xb in values:
            ok = k < body
            y[(a0 + k)[ok]] = torch.exp2(xb * m.LOG2E.value - shift)[ok]
        col, ok = g._cut_edge(r * stride + off, N, lanes, CUT_VEC)
        e = g._edge_load(0, r, stride, off, N, torch.tensor(True), lanes, CUT_VEC)
        y[(r * stride + off + col)[ok]] = torch.exp2(e * m.LOG2E.value - shift)[ok]
    out = torch.stack([y[off + r * stride: off + r * stride + N] for r in range(M)])
    torch.testing.assert_close(out.double(), m.softmax_ref(x), rtol=1e-5, atol=1e-7)


def _cut_case(case, dtype, N, M=20):
    """x and an output y (None: softmax's own) for a dispatch case of the team on cut rows."""
    if "x one element past" in case or "both" in case:
        x = (torch.randn(M, N + 1) * 3).to(dtype)[:, 1:]  # stride N + 1, one element past a 16-byte boundary
    else:
        x = (torch.randn(M, N) * 3).to(dtype)
    if "both" in case:  # y's rows at x's offsets: one element past, a stride 8 elements longer
        return x, torch.full((M, N + 9), float("nan"), dtype=dtype)[:, 1:N + 1]
    if "own stride" in case:
        return x, torch.full((M, N + 3), float("nan"), dtype=dtype)[:, :N]
    if "fp32 out" in case:
        return x, torch.full((M, N), float("nan"))
    return x, None


@pytest.mark.parametrize("case, dtype, N, launch", [
    # (grid, P, CUT, Y_CUT, off_x, off_y) of the team's launch; softmax's bounds scaled down (GROUPED_ROW_MAX 128,
    # WHOLE_ROW_MAX 512), parts of 2 x 64 elements, 4 SMs x 3 programs = 12 at once
    ("contiguous", torch.bfloat16, 600, ((10,), 5, True, True, 0, 0)),  # over WHOLE_ROW_MAX: 2 teams of 5
    ("contiguous", torch.float16, 601, ((10,), 5, True, True, 0, 0)),
    ("contiguous", torch.bfloat16, 641, ((10,), 5, True, True, 0, 0)),  # a body of 640 at most: 5 parts, not 6
    ("x one element past a 16-byte boundary", torch.float16, 601, ((10,), 5, True, False, 1, 0)),
    ("both one element past", torch.bfloat16, 601, ((10,), 5, True, True, 1, 1)),
    ("y with its own stride", torch.bfloat16, 601, ((10,), 5, True, False, 0, 0)),
    ("fp32 out", torch.bfloat16, 601, ((10,), 5, True, False, 0, 0)),
    ("y with its own stride", torch.float16, 300, ((12,), 3, True, False, 0, 0)),  # the loop cannot cut: the team
    ("contiguous", torch.bfloat16, 300, None),  # up to WHOLE_ROW_MAX, x and y cut alike: the pipelined loop
    ("contiguous", torch.bfloat16, 640, ((10,), 5, False, False, 0, 0)),  # rows of 16-element groups: whole
    ("contiguous", torch.float32, 601, None),  # fp32: the split team (or the streamed kernel)
    ("contiguous", torch.bfloat16, 1700, None),  # P = 14 does not fit 12: the split team or the streamed kernel
])
def test_softmax_16bit_rows_not_in_16_element_groups_go_to_the_team_cut(monkeypatch, record_launches, case, dtype,
                                                                       N, launch):
    m, call, ref = _scaled_down_team_template("softmax")
    monkeypatch.setattr(m, "_smem_team_device", lambda x2: x2.element_size() == 2)  # as on an H100 with Gluon
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 5)  # more than SMEM_TEAM asks for
    monkeypatch.setattr(m, "_pipelined_stages", lambda device, row_bytes: 3)
    x, y = _cut_case(case, dtype, N)
    # args[9], args[10]: off_x, off_y (after x, y, words, exits, the row counter, M, N and the two strides)
    launched = record_launches(m, "_softmax_smem_team", lambda grid, args, kw: (
        (grid, kw["P"], kw["CUT"], kw["Y_CUT"], args[9], args[10]),
        # the kernel's x (and y where Y_CUT) start on 16 bytes, off_x (off_y) elements before the rows' first
        args[0].data_ptr() == x.data_ptr() - args[9] * x.element_size() and args[0].data_ptr() % 16 == 0,
        args[1].data_ptr()), launch=False)
    out = m.softmax(x, out=y, config={"BLOCK_SIZE": 64})
    # y's start rounded down to 16 bytes where Y_CUT, else y as it is
    y_at = out.data_ptr() - (launch[5] * out.element_size() if launch else 0)
    assert launched == ([(launch, True, y_at)] if launch else [])
    if launch:
        assert m.last_config["kernel"] == "_softmax_smem_team" and m.last_config["CUT"] == launch[2]
    else:
        torch.testing.assert_close(out.double(), m.softmax_ref(x), rtol=2e-2, atol=2e-3)


def test_softmax_team_on_cut_rows_that_does_not_compile_falls_back_once_and_leaves_whole_rows_to_the_team(
        monkeypatch, uncompilable):
    # The cut rows' compilation failing (a Gluon API moved) sends them to the split team (the streamed kernel
    # in the interpreter), with one warning; rows of 16-element groups still try the team, a compilation of
    # their own.
    m, call, ref = _scaled_down_team_template("softmax")
    monkeypatch.setattr(m, "_softmax_smem_team", uncompilable)
    monkeypatch.setattr(m, "_smem_team_device", lambda x2: x2.element_size() == 2)
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 3)
    x = (torch.randn(20, 601) * 3).to(torch.bfloat16)
    with pytest.warns(UserWarning, match=r"rows cut at 16-byte boundaries\) does not run"):
        y = m.softmax(x, config={"BLOCK_SIZE": 64})
    torch.testing.assert_close(y.double(), m.softmax_ref(x), rtol=2e-2, atol=2e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        m.softmax(x, config={"BLOCK_SIZE": 64})
    assert len(uncompilable.attempts) == 1
    with pytest.warns(UserWarning, match="team does not run"):  # the whole rows' compilation: tried in its turn
        m.softmax((torch.randn(20, 640)).to(torch.bfloat16), config={"BLOCK_SIZE": 64})
    assert len(uncompilable.attempts) == 2


def test_softmax_team_cuts_16bit_rows_from_a_16_byte_aligned_x_in_its_storage(monkeypatch):
    m = _template("softmax")
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")

    class At:  # what _smem_team_cuts and _aligned_base read of a tensor
        def __init__(self, ptr=1 << 20, storage_offset=0, elem=2, device="cuda"):
            self._ptr, self._so, self._elem, self.device = ptr, storage_offset, elem, torch.device(device)

        def data_ptr(self):
            return self._ptr

        def element_size(self):
            return self._elem

        def storage_offset(self):
            return self._so

        def as_strided(self, size, stride, offset):
            return At(self._ptr - (self._so - offset) * self._elem, offset, self._elem)

    monkeypatch.setattr(m, "_interpreting", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.version, "hip", None)
    base = 1 << 20
    assert m._smem_team_cuts(At(), At())
    for skew in range(0, 16, 2):  # every 16-bit offset from a 16-byte boundary, the storage starting on one
        x = At(base + 1024 + skew, 512 + skew // 2)
        view, off = m._aligned_base(x)
        assert m._smem_team_cuts(x, At()) and off == skew // 2 and view.data_ptr() == base + 1024
    assert not m._smem_team_cuts(At(base + 6, 2), At())  # the storage starts 2 bytes past 16: base outside it
    assert m._smem_team_cuts(At(base + 6, 3), At())
    assert not m._smem_team_cuts(At(base + 7, 7, elem=1), At())  # not 16-bit
    assert not m._smem_team_cuts(At(elem=4), At())  # fp32: the split team
    assert not m._smem_team_cuts(At(device="cpu"), At())
    monkeypatch.setattr(torch.version, "hip", "6.2")
    assert not m._smem_team_cuts(At(), At())  # AMD: no cp.async
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert not m._smem_team_cuts(At(), At())  # before Ampere: no cp.async
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(m, "gluon", None)
    assert not m._smem_team_cuts(At(), At())  # no Gluon: the split team


# Compiles softmax's _softmax_smem_team for sm_90 as its launcher launches it on cut rows (argv[1]: the
# template; a line a case: registers, stack, and the PTX's cp.async copies and stores by width). Run in a process
# of its own, without the interpreter.
_COMPILE_SOFTMAX_TEAM_FOR_SM90 = r"""
import importlib.util, json, os, re, subprocess, sys, tempfile
import torch, triton
from triton.backends.compiler import BaseBackend, GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import native_specialize_impl

spec = importlib.util.spec_from_file_location("template", sys.argv[1])
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
fn, st = t._softmax_smem_team, t.SMEM_TEAM
for N, dtype, off_x, off_y, y_cut in [(50257, torch.bfloat16, 0, 0, True), (50257, torch.float16, 3, 0, False),
                                      (100277, torch.bfloat16, 5, 5, True)]:
    P = t._team_parts(N, st["CHUNK"] * st["NCH"], 8)
    x = torch.empty(4, N, dtype=dtype)
    values = dict(x_ptr=x, y_ptr=torch.empty_like(x), words=torch.empty(64, dtype=torch.int64),
                  exits=torch.empty(64, dtype=torch.int32), deal=torch.empty(1, dtype=torch.int32), M=512, N=N,
                  stride_x=N, stride_y=N, off_x=off_x, off_y=off_y)
    consts = dict(CHUNK=st["CHUNK"], NCH=st["NCH"], P=P, P_POW2=triton.next_power_of_2(P), SPIN=t.MAX_SPIN,
                  CUT=True, Y_CUT=y_cut, VEC=8, DEAL=True)
    signature, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            signature[name] = "constexpr"
            continue
        if name in ("off_x", "off_y"):  # not specialized (do_not_specialize)
            signature[name] = "i32"
            continue
        signature[name], s = native_specialize_impl(BaseBackend, values[name], False, True, True)
        if signature[name] == "constexpr":  # an integer 1, as a launch specializes it
            consts[name] = s
        elif s == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    k = triton.compile(GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": st["num_warps"], "maxnreg": st["maxnreg"]})
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"])
        f.flush()
        usage = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
    ptx, ttgir = k.asm["ptx"], k.asm["ttgir"]
    per_thread = dict(re.findall(r"#(\w+) = #ttg\.blocked<\{sizePerThread = \[(\d+)\]", ttgir))
    stores = sorted({(int(n), int(per_thread[lay])) for n, lay in
                     re.findall(r"tt\.store [^:]*: tensor<(\d+)x!tt\.ptr<\w+>, #(\w+)>", ttgir) if int(n) > 16})
    print(json.dumps({"case": [N, str(dtype), off_x, y_cut], "stores": stores,
                      "regs": int(re.search(r"REG:(\d+)", usage).group(1)),
                      "stack": int(re.search(r"STACK:(\d+)", usage).group(1)), "shared": k.metadata.shared,
                      "cp16": len(re.findall(r"cp\.async\.c[ag]\.shared\.global[^\n]*, 0x10,", ptx)),
                      "cp_all": len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx)),
                      "st_v4": len(re.findall(r"st\.global[^\n]*\.v4", ptx)),
                      "st_b16": len(re.findall(r"st\.global(\.[a-z0-9]+)*\.b16 ", ptx))}))
"""


def test_softmax_team_on_cut_rows_compiles_for_hopper_to_16_byte_copies(tmp_path):
    """Gluon has no interpreter: compile the team for sm_90 on cut rows here (no GPU needed). Every cp.async
    copies 16 bytes (the cut's point: an unaligned row's copies of 2 bytes do not compile), the stores are
    16-byte vectors where y shares x's cut and single elements where not, and the program stays within its
    96 registers without a stack: five programs an SM, as on rows of 16-element groups (Triton 3.9: 85-88
    registers; the device's 3.6: 95-96, 8 bytes of stack at 65537 fp16)."""
    m = _template("softmax")
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    path = os.path.join(ROOT, "skills", "kernels", "softmax", "softmax.py")
    proc = subprocess.run([sys.executable, "-c", _COMPILE_SOFTMAX_TEAM_FOR_SM90, path], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 3
    for r in rows:
        y_cut = r["case"][3]
        assert r["regs"] <= m.SMEM_TEAM["maxnreg"] and r["stack"] == 0, r
        # 8 copy sites (NCH chunks of two rows in the start, of two halves in the loop), each 4 copies a thread
        # (32 elements of a 4096-element chunk on 128 threads)
        assert r["cp_all"] == r["cp16"] == 8 * 4, r
        assert r["shared"] < 33 * 1024, r  # two rows' parts: six programs an SM by shared memory
        if y_cut:  # the body in vectors (a chunk of 8 elements a thread), the edge element by element
            assert r["st_v4"] > 0 and r["st_b16"] <= 2 and r["stores"] == [[4096, 8]], r
        else:  # element by element, a warp's 32 consecutive ones a store, a quarter chunk at a time
            assert r["st_v4"] == 0 and r["st_b16"] > 16 and r["stores"] == [[1024, 1]], r


class _TeamOnThreads:
    """softmax's _softmax_smem_team run from its own source on the CPU: one Python thread a program (so that a
    team's programs wait for one another as on a GPU), Gluon's functions on torch tensors (_GluonOnTorch, and
    shared memory, cp.async, atomics and pointers below). Every copy it is given must move whole 16-byte groups
    (8 lanes of one group each, all in or all out), and every load and store must stay inside its tensor's
    storage, or the launch fails. A copy fills its shared memory with NaN when issued (lanes it masks off stay
    NaN: the kernel must not use them) and lands only when cp.wait_group retires its commit group, so a chunk
    read before its copies were waited for, or refilled before its last read, shows in the output. Each launch
    counts the stores to each element of y's storage and notes the team of the last (written), so that a row
    taken by two teams or by none shows even where its values come out right; `slow` delays the teams it names
    in each of their polls, so that the others overtake them."""

    class Ptr:
        def __init__(self, mem, off=0):
            self.mem, self.off = mem, off

        def __add__(self, other):
            return _TeamOnThreads.Ptr(self.mem, self.off + other)

        __radd__ = __add__

        @property
        def dtype(self):
            import types
            return types.SimpleNamespace(element_ty=self.mem.dtype)

        def at(self, mask):
            off = torch.as_tensor(self.off).to(torch.int64)
            if mask is None:
                mask = torch.ones_like(off, dtype=torch.bool)
            off, mask = torch.broadcast_tensors(off, torch.as_tensor(mask))
            inside = (off >= 0) & (off < self.mem.numel())
            assert bool(inside[mask].all()), "an access outside the tensor"
            return off.clamp(0, self.mem.numel() - 1), mask

    class Smem:
        def __init__(self, data):
            self.data = data

        def index(self, i):
            return _TeamOnThreads.Smem(self.data[int(i)])

        def slice(self, start, length, dim=0):
            return _TeamOnThreads.Smem(self.data[start:start + length])

        def load(self, layout):
            return self.data.clone()

    def __init__(self, module, slow=None):
        import threading
        import types
        self.m, self.lock, self.local, self.slow = module, threading.Lock(), threading.local(), slow or {}
        self.y_mem = None
        gl = _GluonOnTorch()
        team = self
        extra = dict(
            program_id=lambda axis: torch.tensor(team.local.pid),
            num_programs=lambda axis: torch.tensor(team.local.grid),
            num_warps=lambda: 4, static_range=range, BlockedLayout=lambda *a, **k: None,
            SwizzledSharedLayout=lambda *a, **k: None, log2=torch.log2,
            arange=lambda lo, hi, layout=None: torch.arange(lo, hi, dtype=torch.int32),
            full=lambda shape, value, dtype, layout=None: torch.full(shape, value, dtype=dtype),
            zeros=lambda shape, dtype, layout=None: torch.zeros(shape, dtype=dtype),
            min=lambda x, axis: x.min(dim=axis).values,
            allocate_shared_memory=lambda dtype, shape, layout: _TeamOnThreads.Smem(
                torch.full(shape, float("nan"), dtype=dtype)),
            load=self.load, store=self.store, atomic_xchg=self.atomic_xchg, atomic_add=self.atomic_add)
        for name, fn in extra.items():
            setattr(gl, name, fn)
        cp = types.SimpleNamespace(commit_group=self.commit_group, wait_group=self.wait_group)
        self.scope = dict(module._softmax_smem_team.fn.__globals__, gl=gl, cp=cp, copy_to_shared=self.copy,
                          cta_barrier=lambda: None, LOG2E=module.LOG2E.value, UNSTAMPED=module.UNSTAMPED.value)
        for name, value in vars(module).items():  # every Gluon function, from its own source
            if type(value).__name__.startswith("Gluon"):
                self.scope[name] = types.FunctionType(value.fn.__code__, self.scope, name)

    def load(self, ptr, mask=None, other=None, volatile=False):
        if volatile:
            import time
            time.sleep(self.slow.get(self.local.pid // self.local.P, 0))  # a sibling's turn, or more
        off, mask = ptr.at(mask)
        got = ptr.mem[off]
        return got if other is None else torch.where(mask, got, torch.tensor(other, dtype=got.dtype))

    def store(self, ptr, value, mask=None):
        off, mask = ptr.at(mask)
        value = torch.broadcast_to(torch.as_tensor(value), off.shape).to(ptr.mem.dtype)
        ptr.mem[off[mask]] = value[mask]
        if ptr.mem is self.y_mem:
            with self.lock:
                self.stores.index_put_((off[mask],), torch.ones_like(off[mask], dtype=torch.int32), accumulate=True)
                self.writer[off[mask]] = self.local.pid // self.local.P

    def written(self, y):
        """(stores, writing team) of each element of y (the output of the last launch) in that launch, and the
        stores anywhere in y's storage."""
        def on_y(flat, fill):
            full = torch.full((y.untyped_storage().nbytes() // y.element_size(),), fill, dtype=flat.dtype)
            full[self.y_base:self.y_base + flat.numel()] = flat
            return full.as_strided(y.shape, y.stride(), y.storage_offset())
        return on_y(self.stores, 0), on_y(self.writer, -1), int(self.stores.sum())

    def atomic_xchg(self, ptr, value, mask=None, sem=None):
        with self.lock:
            off, mask = ptr.at(mask)
            old = ptr.mem[off].clone()
            self.store(ptr, value, mask)
            return old

    def atomic_add(self, ptr, value, mask=None, sem=None):
        with self.lock:  # lanes at one address would all get its first value here: the kernel gives each its own
            off, mask = ptr.at(mask)
            value = torch.broadcast_to(torch.as_tensor(value), off.shape).to(ptr.mem.dtype)
            old = ptr.mem[off].clone()
            ptr.mem.index_put_((off[mask],), value[mask], accumulate=True)
            return old

    def copy(self, smem, ptr, mask=None):
        off, mask = ptr.at(mask)
        groups, ok = off.view(-1, 8), mask.view(-1, 8)  # 8 lanes of a thread: one 16-byte copy
        assert bool((ok.all(1) | ~ok.any(1)).all()), "a copy of part of a 16-byte group"
        whole = ((groups[:, :1] % 8 == 0) & (groups == groups[:, :1] + torch.arange(8))).all(1)
        assert bool(whole[ok[:, 0]].all()), "a copy off a 16-byte group"
        self.local.copies.append((smem.data, torch.where(mask, ptr.mem[off], torch.tensor(float("nan"),
                                                                                            dtype=ptr.mem.dtype))))
        smem.data[:] = float("nan")  # in flight

    def commit_group(self):
        self.local.groups.append(self.local.copies)
        self.local.copies = []

    def wait_group(self, n):
        while len(self.local.groups) > n:
            for data, value in self.local.groups.pop(0):
                data[:] = value

    def __getitem__(self, grid):
        import threading

        def flat(t):  # the tensor's storage from its start on, as the pointer the kernel gets
            return t.as_strided((t.untyped_storage().nbytes() // t.element_size() - t.storage_offset(),), (1,),
                                t.storage_offset())

        def launch(*args, num_warps=None, maxnreg=None, **kw):
            y = args[1]
            self.y_base = y.storage_offset()
            args = [_TeamOnThreads.Ptr(flat(a)) if isinstance(a, torch.Tensor) else a for a in args]
            self.y_mem = args[1].mem
            self.stores = torch.zeros(self.y_mem.numel(), dtype=torch.int32)
            self.writer = torch.full((self.y_mem.numel(),), -1, dtype=torch.int32)
            kw["SPIN"] = min(kw["SPIN"], 20000)  # a sibling that failed: the others give up in a second
            failures = []

            def program(pid):
                self.local.pid, self.local.grid, self.local.P = pid, grid[0], kw["P"]
                self.local.copies, self.local.groups = [], []  # cp.async: the open group, the committed ones
                try:
                    self.scope["_softmax_smem_team"](*args, **kw)
                except BaseException as e:  # noqa: BLE001 - reported below
                    failures.append(e)

            orig_to = torch.Tensor.to

            def to(t, *a, bitcast=False, **k):  # Gluon's bitcast, as a view
                return t.view(a[0]) if bitcast else orig_to(t, *a, **k)
            torch.Tensor.to = to
            try:
                threads = [threading.Thread(target=program, args=(pid,)) for pid in range(grid[0])]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            finally:
                torch.Tensor.to = orig_to
            if failures:
                raise failures[0]
        return launch


@pytest.mark.parametrize("case, dtype, N, M", [
    ("contiguous", torch.bfloat16, 601, 20),  # over WHOLE_ROW_MAX (scaled down): 2 teams of 5, 10 rows each
    ("contiguous", torch.float16, 641, 9),  # 5 parts; an odd number of rows a team
    ("x one element past a 16-byte boundary", torch.float16, 603, 20),
    ("both one element past", torch.bfloat16, 605, 13),
    ("y with its own stride", torch.bfloat16, 300, 21),  # up to WHOLE_ROW_MAX, y not cut as x: P = 3, 4 teams
    ("fp32 out", torch.float16, 777, 8),
    ("contiguous", torch.bfloat16, 640, 11),  # rows of 16-element groups: the team whole, as before
    ("contiguous", torch.bfloat16, 601, 4),  # two rows a team: none dealt (DEAL off), each team's rows fixed
    ("contiguous", torch.float16, 601, 3),  # a team of one row
])
def test_softmax_team_on_cut_rows_runs_its_own_source_on_cpu_threads(monkeypatch, case, dtype, N, M):
    # Every output element against float64, the rows' extremes at their heads, bodies and tails; launched by the
    # real launcher (4 "SMs" x 3 programs, parts of 2 x 64), the words and the row counter left as they were for
    # the next launch (two launches), each element of y written once (a row taken by two teams or by none fails).
    m, _, _ = _scaled_down_team_template("softmax")
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")
    monkeypatch.setattr(m, "_smem_team_device", lambda x2: x2.element_size() == 2)
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 3)
    monkeypatch.setattr(m, "_pipelined_stages", lambda device, row_bytes: 3)
    team = _TeamOnThreads(m)
    publish, published = team.scope["_publish"], []

    def counted(words, team_, part, it, *rest):
        published.append((int(team_), int(part), int(it)))
        return publish(words, team_, part, it, *rest)
    team.scope["_publish"] = counted
    monkeypatch.setattr(m, "_softmax_smem_team", team)
    x, y = _cut_case(case, dtype, N, M)
    xf = x.float()
    for r in range(M):  # the max at the row's first, second, last, next-to-last element, or alone
        at = [0, 1, N - 1, N - 2, N // 2][r % 5]
        xf[r, at] = xf[r].max() + 1.0
        if r % 7 == 6:
            xf[r, :] = -float("inf")
            xf[r, [0, N - 1][r % 2]] = 2.0
    x.copy_(xf.to(dtype))
    warnings.simplefilter("error")  # a team that failed would warn and fall back
    for _ in range(2):
        out = m.softmax(x, out=y, config={"BLOCK_SIZE": 64})
        assert m.last_config["kernel"] == "_softmax_smem_team"
        assert m.last_config.get("CUT", False) == (N % 16 != 0)
        ref = m.softmax_ref(x)
        rtol = {torch.bfloat16: 1e-2, torch.float16: 4e-3}[out.dtype] if out.dtype != torch.float32 else 1e-3
        torch.testing.assert_close(out.double(), ref, rtol=rtol, atol=1e-7)
        words, exits = m._team_words(x.device, 4 * 32)
        assert bool((words == m.UNSTAMPED.value).all()) and not exits.any()  # the row counter is exits' last
        stores, _, anywhere = team.written(out)
        assert bool((stores == 1).all()) and anywhere == out.numel(), stores.sum(1)
        # each part's partial of each row once, none of a row past the last (its reduce would sit in the tail)
        parts = {part for _, part, _ in published}
        assert len(set(published)) == len(published) == M * len(parts), sorted(published)
        assert m.last_config["DEAL"] == (M > 2 * min(M, 12 // len(parts)))  # rows past each team's first two
        published.clear()
        if y is not None:
            y.fill_(float("nan"))


@pytest.mark.parametrize("fault", ["copies read before they land", "the second row's copies not waited for"])
def test_softmax_team_on_threads_fails_on_a_copy_read_in_flight(monkeypatch, fault):
    # The check above has teeth: a team that reads a chunk whose copies it has not waited for comes out wrong
    # (here NaN, as in flight), whether it never waits or waits for none of the second row's groups.
    m, _, _ = _scaled_down_team_template("softmax")
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")
    monkeypatch.setattr(m, "_smem_team_device", lambda x2: x2.element_size() == 2)
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 3)
    team = _TeamOnThreads(m)
    wait_group = team.scope["cp"].wait_group

    def faulty(n):
        team.local.waits = getattr(team.local, "waits", 0) + 1  # this program's (a thread a program a launch)
        if fault == "the second row's copies not waited for" and team.local.waits == 2:
            n += m.SMEM_TEAM["NCH"]  # its second wait, before the second row's reduce: it waits for nothing
        if fault != "copies read before they land":
            wait_group(n)
    team.scope["cp"].wait_group = faulty
    monkeypatch.setattr(m, "_softmax_smem_team", team)
    x = (torch.randn(20, 601) * 3).to(torch.bfloat16)
    out = m.softmax(x, config={"BLOCK_SIZE": 64})
    assert m.last_config["kernel"] == "_softmax_smem_team"
    assert torch.isnan(out).any()


def _team_on_threads_at(monkeypatch, slow=None):
    """softmax scaled down (4 "SMs" x 3 programs, parts of 2 x 64) with its shared-memory team on CPU threads."""
    m, _, _ = _scaled_down_team_template("softmax")
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")
    monkeypatch.setattr(m, "_smem_team_device", lambda x2: x2.element_size() == 2)
    monkeypatch.setattr(m, "_programs_per_sm", lambda *args: 3)
    team = _TeamOnThreads(m, slow)
    monkeypatch.setattr(m, "_softmax_smem_team", team)
    return m, team


def test_softmax_team_deals_rows_to_the_teams_that_come_first(monkeypatch):
    # Two teams of 5 over 20 rows, team 0 slowed in every poll: past their first two rows each, the rows go to
    # whichever team asks first (DEAL), so team 1 takes more than the static deal's half, every row exactly once,
    # in two launches in a row (the counter set back to 0 by the launch's last claim).
    m, team = _team_on_threads_at(monkeypatch, slow={0: 0.05})
    x = (torch.randn(20, 601) * 3).to(torch.bfloat16)
    for _ in range(2):
        out = m.softmax(x, config={"BLOCK_SIZE": 64})
        assert m.last_config["kernel"] == "_softmax_smem_team" and m.last_config["DEAL"]
        torch.testing.assert_close(out.double(), m.softmax_ref(x), rtol=1e-2, atol=1e-7)
        stores, writer, _ = team.written(out)
        assert bool((stores == 1).all())
        by_team = writer[:, 0].tolist()
        assert all(len(set(w)) == 1 for w in writer.tolist())  # a row is one team's
        assert by_team[:4] == [0, 1, 0, 1]  # rows team and team + n_teams: each team's own
        assert by_team.count(0) < 10 < by_team.count(1), by_team
        assert not m._team_words(x.device, 4 * 32)[1].any()


@pytest.mark.parametrize("fault", ["a row claimed twice", "a row never claimed", "the counter not set back"])
def test_softmax_team_on_threads_fails_on_a_row_taken_twice_or_never(monkeypatch, fault):
    # The once-a-row check above has teeth: a counter that hands one value twice, skips one, or starts the next
    # launch where the last one left it leaves some element of y written twice or never.
    m, team = _team_on_threads_at(monkeypatch)
    claim, post, faults = team.scope["_claim"], team.scope["_post_row"], []

    def faulty_claim(deal, lane, went):
        got = claim(deal, lane, went)
        if bool(went.any()) and not faults:  # once a launch, right after a claim
            faults.append(fault)
            team.atomic_add(deal, -1 if fault == "a row claimed twice" else 1)
        return got
    if fault == "the counter not set back":
        team.scope["_post_row"] = lambda *a: post(*a[:8], -1, *a[9:])  # `last`: no claim is the launch's last
    else:
        team.scope["_claim"] = faulty_claim
    x = (torch.randn(20, 601) * 3).to(torch.bfloat16)
    once = []
    for _ in range(2):
        out = m.softmax(x, config={"BLOCK_SIZE": 64})
        assert m.last_config["kernel"] == "_softmax_smem_team" and m.last_config["DEAL"]
        once.append(bool((team.written(out)[0] == 1).all()))
    assert once == ([True, False] if fault == "the counter not set back" else [False, True]), once

