"""Compute-bound kernels (gemm, flash-attention, fused-moe) in Triton's interpreter. CPU only, tiny
shapes: each test file runs as kgit runs it (a subprocess printing the contract JSON); the harness's
own checks are tested in tests/harness/."""

import gc
import importlib.util
import json
import os
import re
import subprocess
import sys
import warnings
import weakref

import pytest
import torch
import triton

from kgit.config import kernel_file
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
    path = os.path.join(ROOT, os.path.dirname(TESTS[kernel]), kernel_file(kernel))
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


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_moe_sum_adds_each_tokens_k_rows_and_no_other(top_k):
    """The layer's last step: out[t] = the sum of y's rows t*k .. t*k + k - 1 (k = 3 pads the k axis to 4:
    the fourth row is the next token's and must not count), over hidden sizes that end inside a block."""
    m = _template("fused-moe")
    T, HD = 5, 40
    y = torch.randn(T * top_k, HD)
    out = torch.full((T, HD), float("nan"))
    m.moe_sum_kernel[(T, triton.cdiv(HD, 32))](y, out, None, None, HD, out.stride(0), TOP_K=top_k,
                                                K_PAD=triton.next_power_of_2(top_k), BLOCK_D=32, SORTED=0)
    assert torch.allclose(out, y.view(T, top_k, HD).sum(1), atol=1e-6)


def test_moe_sum_of_sorted_rows_weights_each_pair_and_reads_its_row():
    """SORTED (the Gluon path): y holds the down GEMM's rows in expert-sorted order, unweighted, so
    out[t] = sum_j w[t*k + j] * y[sorted_row[t*k + j]]."""
    m = _template("fused-moe")
    T, top_k, HD = 5, 3, 40
    y = torch.randn(2 * T * top_k, HD)  # padding rows too
    sorted_row = torch.randperm(2 * T * top_k)[:T * top_k].int()
    weights = torch.rand(T * top_k)
    out = torch.full((T, HD), float("nan"))
    m.moe_sum_kernel[(T, triton.cdiv(HD, 32))](y, out, sorted_row, weights, HD, out.stride(0), TOP_K=top_k,
                                                K_PAD=4, BLOCK_D=32, SORTED=1)
    expected = (y[sorted_row.long()] * weights[:, None]).view(T, top_k, HD).sum(1)
    assert torch.allclose(out, expected, atol=1e-5)


def _route_and_align_checked(m, logits, top_k, block_m):
    """route_and_align's outputs, each checked against torch's routing: the weights; each expert's run
    holds exactly its pairs (in any order), then sentinels up to a multiple of block_m; sorted_row is the
    inverse of sorted_ids; expert_start[e] is expert e's first row block (expert_start[E]: the blocks in
    use) and block_expert agrees with it, -1 past the end. Returns the routing's weights and layout."""
    T, E = logits.shape
    routed = m.route_and_align(logits, top_k, block_m)
    weights, sorted_ids, sorted_row, block_expert, expert_start, num_m_blocks, expert_rows = routed
    ref_w, ref_ids = m.route(logits, top_k)
    assert torch.allclose(weights, ref_w.flatten(), atol=1e-6)
    assert torch.equal(sorted_ids[sorted_row.long()], torch.arange(T * top_k, dtype=torch.int32))
    ids, row = ref_ids.flatten(), 0
    for e in range(E):
        pairs = torch.nonzero(ids == e).flatten()
        padded = triton.cdiv(len(pairs), block_m) * block_m
        run = sorted_ids[row:row + padded].long()
        assert torch.equal(run[:len(pairs)].sort().values, pairs), f"expert {e}'s run"
        assert torch.all(run[len(pairs):] == T * top_k), f"expert {e}'s padding"
        assert int(expert_start[e]) * block_m == row and torch.all(block_expert[row // block_m:(row + padded) // block_m] == e)
        assert int(expert_rows[e]) == len(pairs), f"expert {e}'s count"
        row += padded
    assert int(expert_start[E]) * block_m == row and torch.all(block_expert[row // block_m:] == -1)
    assert num_m_blocks == triton.cdiv(T * top_k, block_m) + E == len(block_expert)
    return routed


@pytest.mark.parametrize("T, E, top_k, block_m", [
    (1, 8, 2, 16),      # one token
    (150, 7, 2, 16),    # T not a multiple of route_block_t (36); experts 2 and 5 get no pair (below)
    (37, 64, 6, 64),    # DeepSeek-style: 4 tokens a program, 10 programs, most experts with 0-4 pairs
    (9, 256, 8, 128),   # E=256 (one token a program), top_k 8
    (200, 3, 3, 16),    # E not a power of two, every expert chosen by most tokens
])
def test_moe_route_and_align_places_each_pair_in_its_experts_run(T, E, top_k, block_m):
    m = _template("fused-moe")
    torch.manual_seed(T * E + top_k)
    logits = torch.randn(T, E)
    if E == 7:
        logits[:, [2, 5]] = -100.0
    logits[: T // 2, 0] += 3.0  # uneven: expert 0 takes most of the first half
    _route_and_align_checked(m, logits, top_k, block_m)


def test_moe_route_and_align_breaks_logit_ties_toward_the_lowest_expert():
    """Equal logits: each token's k pairs go to experts 0..k-1, in slot order, each weighted 1/k (torch.topk's
    order on ties is its own, so this is checked directly)."""
    m = _template("fused-moe")
    T, E, top_k = 5, 16, 4
    weights, sorted_ids, _, block_expert, expert_start, _, _ = m.route_and_align(torch.zeros(T, E), top_k, 16)
    assert torch.equal(expert_start, torch.tensor([0, 1, 2, 3] + [4] * (E - 3), dtype=torch.int32))
    assert torch.equal(block_expert[:5], torch.tensor([0, 1, 2, 3, -1], dtype=torch.int32))
    for e in range(top_k):  # expert e's run: pair t*k + e of each token t
        assert torch.equal(sorted_ids[16 * e:16 * e + T].sort().values, torch.arange(T, dtype=torch.int32) * top_k + e)
    assert torch.allclose(weights, torch.full((T * top_k,), 1 / top_k))


def test_moe_route_and_align_catches_a_wrong_rank(monkeypatch):
    """The check above fails when one pair's rank is off by one (two pairs then share a row)."""
    m = _template("fused-moe")
    real = m.moe_align_kernel

    class OffByOne:
        def __getitem__(self, grid):
            def launch(ids, rank, *args, **kw):
                rank[3] += 1
                return real[grid](ids, rank, *args, **kw)
            return launch

    monkeypatch.setattr(m, "moe_align_kernel", OffByOne())
    with pytest.raises(AssertionError):
        _route_and_align_checked(m, torch.randn(40, 8), 2, 16)


@pytest.mark.parametrize("pad_zeros", [0, 1])
def test_moe_gather_copies_the_pairs_rows_and_zeros_padding_rows_only_if_asked(pad_zeros):
    """x_sorted's rows of the blocks in use: each pair's token row; padding rows zeros for the Triton GEMMs
    (PAD_ZEROS), else as they were (NaN here) for the Gluon ones: no GEMM row reads another's, and no padding
    row of h or y is read."""
    m = _template("fused-moe")
    T, E, top_k, HD = 40, 6, 2, 200
    x, logits = torch.randn(T, HD).half(), torch.randn(T, E)
    _, sorted_ids, _, block_expert, expert_start, num_m_blocks, _ = m.route_and_align(logits, top_k, 16)
    x_sorted = torch.full((num_m_blocks * 16, HD), float("nan"), dtype=torch.half)
    m.moe_gather_kernel[(num_m_blocks, triton.cdiv(HD, m.GATHER_BLOCK_D))](
        x, x_sorted, sorted_ids, block_expert, T * top_k, HD, x.stride(0), TOP_K=top_k, BLOCK_M=16,
        BLOCK_D=m.GATHER_BLOCK_D, PAD_ZEROS=pad_zeros)
    in_use = int(expert_start[E]) * 16  # rows past the blocks in use: neither routed nor written
    pairs, x_sorted = sorted_ids[:in_use].long(), x_sorted[:in_use]
    real = pairs < T * top_k
    assert torch.equal(x_sorted[real], x[pairs[real] // top_k]) and int(real.sum()) == T * top_k
    padding = x_sorted[~real]
    assert int((~real).sum()) > 0 and bool((padding == 0).all() if pad_zeros else padding.isnan().all())


def _nan_filled_empties(monkeypatch, module):
    """The module's torch.empty fills floating tensors with NaN: a row it leaves unwritten and then reads shows."""
    real_empty = torch.empty

    class NanEmpty:
        def __getattr__(self, name):
            return getattr(torch, name)

        def empty(self, *args, **kw):
            t = real_empty(*args, **kw)
            return t.fill_(float("nan")) if t.is_floating_point() else t

    monkeypatch.setattr(module, "torch", NanEmpty())


def test_moe_layer_ignores_what_x_sorteds_padding_rows_hold(monkeypatch):
    """x_sorted, h and y come from torch.empty: filled with NaN before use, the layer on the Gluon contract
    (x_sorted's padding rows left unwritten) still equals the reference (padding rows computed, never read)."""
    m, _ = _moe_gluon_in_torch(monkeypatch, sms=3)
    config = {"GLUON": 1, "BLOCK_M": 64, "BLOCK_N": 64, "DOWN_BLOCK_N": 64, "BLOCK_K": 32}
    _nan_filled_empties(monkeypatch, m)
    x, w13, w2, logits = _moe_inputs(70, 6, 64, 96)
    out = m.fused_moe(x, w13, w2, logits, 2, config=config)
    assert compare(out.float(), m.reference(x, w13, w2, logits, 2), NORM["fp16"]) is None


@pytest.mark.parametrize("path", ["pointers", "tma", "gluon"])
def test_moe_output_is_bitwise_the_same_whatever_the_order_within_an_experts_run(monkeypatch, path):
    """moe_route_kernel's atomics order the programs' pairs within an expert's run as they land, which varies
    run to run on a GPU (the interpreter runs programs in order). The layer's output must not depend on it:
    with each run reversed (sorted_row following), the output is bitwise the one of the order as routed, on
    the Triton GEMMs (pointer loads or TMA: y indexed by pair) and the Gluon path (its GEMMs' contract in
    torch: y in sorted order, read back through sorted_row)."""
    T, E, top_k, HD, I = 70, 6, 2, 64, 96
    if path == "gluon":
        m, _ = _moe_gluon_in_torch(monkeypatch, sms=3)
        config, use_tma = {"GLUON": 1, "BLOCK_M": 64, "BLOCK_N": 64, "DOWN_BLOCK_N": 64, "BLOCK_K": 32}, None
    else:
        m = _template("fused-moe")
        config, use_tma = {"GLUON": 0, "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "DOWN_BLOCK_N": 32}, path == "tma"
    x, w13, w2, logits = _moe_inputs(T, E, HD, I)
    first = m.fused_moe(x, w13, w2, logits, top_k, config=config, use_tma=use_tma)
    assert m.last_config["GLUON"] == (path == "gluon")
    assert torch.equal(m.fused_moe(x, w13, w2, logits, top_k, config=config, use_tma=use_tma), first)
    real = m.route_and_align

    def reversed_runs(router_logits, k, block_m, **kw):
        routed = real(router_logits, k, block_m, **kw)
        weights, sorted_ids, sorted_row, block_expert, expert_start, num_m_blocks, expert_rows = routed
        counts = torch.bincount(m.route(router_logits, k)[1].flatten(), minlength=E)
        for e in range(E):
            row = int(expert_start[e]) * block_m
            sorted_ids[row:row + int(counts[e])] = sorted_ids[row:row + int(counts[e])].flip(0)
        placed = torch.nonzero(sorted_ids[:int(expert_start[E]) * block_m] < T * k).flatten()
        sorted_row[sorted_ids[placed].long()] = placed.int()
        return weights, sorted_ids, sorted_row, block_expert, expert_start, num_m_blocks, expert_rows

    monkeypatch.setattr(m, "route_and_align", reversed_runs)
    assert torch.equal(m.fused_moe(x, w13, w2, logits, top_k, config=config, use_tma=use_tma), first)


class _GluonGemmByTorch:
    """moe_gemm_gluon_kernel's contract, in torch (Gluon kernels run on a GPU only): for every row block b
    in use, of expert e = block_expert[b], its 64 * CONSUMERS rows of A times the expert's weight rows into
    C; SWIGLU writes silu(gate) * up. Records each launch's grid, boxes and scalars."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        def launch(a_desc, w_desc, c_desc, c_rows_desc, block_expert, expert_start, expert_rows, tile_counter,
                   num_m_blocks, n_tiles, K, **options):
            self.launches.append((grid, [d.block_shape for d in (a_desc, w_desc, c_desc)], n_tiles, K, options))
            a, w, c = a_desc.base, w_desc.base, c_desc.base
            assert c_rows_desc.base is c and c_rows_desc.block_shape == [8, c_desc.block_shape[1]]
            bm = 64 * options["CONSUMERS"]
            assert int(expert_start[-1]) == int((block_expert >= 0).sum())
            assert tile_counter.shape == (1, ) and int(tile_counter) == 0  # CLAIM's counter, zeroed for the launch
            for b in range(num_m_blocks):
                e = int(block_expert[b])
                if e < 0:
                    continue
                rows = a[b * bm:(b + 1) * bm].float()
                if options["SWIGLU"]:
                    gate, up = rows @ w[2 * e].float().T, rows @ w[2 * e + 1].float().T
                    result = (torch.nn.functional.silu(gate) * up).to(c.dtype)
                else:
                    result = (rows @ w[e].float().T).to(c.dtype)
                # PAIRS_ONLY: the rows that hold a pair alone (the kernel may round them up to 8): the first
                # expert_rows[e] of the expert's run, which starts at row block expert_start[e]; else the 64-row
                # halves that hold a pair (a half of padding alone is not computed)
                local = torch.arange(bm) + (b - int(expert_start[e])) * bm
                stored = local < int(expert_rows[e]) if options["PAIRS_ONLY"] else local // 64 * 64 < int(expert_rows[e])
                c[b * bm:(b + 1) * bm][stored] = result[stored]
        return launch


def _moe_gluon_in_torch(monkeypatch, sms: int):
    """The fused-MoE template on `sms` SMs, its Gluon GEMM replaced by the kernel's contract in torch."""
    m = _template("fused-moe")
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")
    gemms = _GluonGemmByTorch()
    monkeypatch.setattr(m, "moe_gemm_gluon_kernel", gemms)
    monkeypatch.setattr(m, "_gluon_runs", lambda x, w13, w2, cfg: True)
    monkeypatch.setattr(m, "_num_sms", lambda device: sms)
    return m, gemms


def _moe_inputs(T: int, E: int, HD: int, I: int):
    """x, w13, w2 (fp16, scaled so that the layer's values stay near one) and the router's logits."""
    x, logits = torch.randn(T, HD).half(), torch.randn(T, E)
    return x, (torch.randn(E, 2 * I, HD) / 8).half(), (torch.randn(E, HD, I) / 10).half(), logits


def test_moe_gluon_path_launches_both_gemms_persistent_and_sums_sorted_rows(monkeypatch):
    """GLUON 1 with the kernel's contract in torch: two launches of min(SMs, tiles) programs (gate/up: the
    [2, BLOCK_N, BLOCK_K] box of gate and up rows, h in [64, BLOCK_N] boxes; down: [1, DOWN_BLOCK_N,
    BLOCK_K] boxes of w2, y in [64, DOWN_BLOCK_N / 2] halves), then moe_sum_kernel's SORTED path: the
    layer equals the reference."""
    m, gemms = _moe_gluon_in_torch(monkeypatch, sms=5)
    T, E, top_k, HD, I = 150, 5, 2, 64, 96
    x, w13, w2, logits = _moe_inputs(T, E, HD, I)
    config = {"GLUON": 1, "BLOCK_M": 128, "BLOCK_N": 64, "DOWN_BLOCK_N": 32, "BLOCK_K": 32, "num_stages": 3,
              "DOWN_num_stages": 2}
    out = m.fused_moe(x, w13, w2, logits, top_k, config=config)
    assert compare(out.float(), m.reference(x, w13, w2, logits, top_k), NORM["fp16"]) is None
    assert m.last_config["GLUON"] == 1
    regs = dict(LOADER_REGS=m.GLUON_LOADER_REGS, CONSUMER_REGS=m.GLUON_CONSUMER_REGS, PDL=1, PAIRS_ONLY=1, num_warps=4,
                launch_pdl=True)
    # (the host's bound on the row blocks, ceil(T*k / 128) + E = 8) x 2 column tiles = 16 tiles on 5 SMs
    assert gemms.launches == [
        ((5, ), [[64, 32], [2, 64, 32], [64, 64]], 2, HD, dict(NUM_STAGES=3, SWIGLU=1, CONSUMERS=2, CLAIM=1, **regs)),
        ((5, ), [[64, 32], [1, 32, 32], [64, 16]], 2, I, dict(NUM_STAGES=2, SWIGLU=0, CONSUMERS=2, CLAIM=1, **regs)),
    ]
    monkeypatch.setattr(m, "_num_sms", lambda device: 132)
    gemms.launches.clear()
    m.fused_moe(x, w13, w2, logits, top_k, config=config)
    assert [grid for grid, *_ in gemms.launches] == [(16, ), (16, )]  # no more programs than tiles


def test_moe_streaming_layout_runs_64_row_blocks_on_one_consumer(monkeypatch):
    """Few rows an expert (T*k <= 128 E): with no config, fused_moe takes streaming_config's layout, the
    Gluon GEMM (its contract in torch) on 64-row blocks, one consumer, 5 / 8 stages; each expert's rows fill
    ceil(rows / 64) blocks (the host's bound, ceil(T*k / 64) + E, sizes the grid), and the layer equals the
    reference. One token more than 128 rows an expert keeps CONFIG's 128-row blocks on two consumers."""
    m, gemms = _moe_gluon_in_torch(monkeypatch, sms=3)
    T, E, top_k, HD, I = 80, 5, 2, 64, 96  # 32 rows an expert
    x, w13, w2, logits = _moe_inputs(T, E, HD, I)
    out = m.fused_moe(x, w13, w2, logits, top_k)
    assert compare(out.float(), m.reference(x, w13, w2, logits, top_k), NORM["fp16"]) is None
    assert m.last_config["BLOCK_M"] == 64 and m.last_config["GLUON"] == 1
    regs = dict(LOADER_REGS=m.GLUON_LOADER_REGS, CONSUMER_REGS=m.GLUON_CONSUMER_REGS, PDL=1, PAIRS_ONLY=1, num_warps=4,
                launch_pdl=True)
    # 8 blocks (ceil(160 / 64) + 5) x 1 column tile of 128 gate/up and 1 of 128 down (8 tiles < 4 an SM)
    assert gemms.launches == [
        ((3, ), [[64, 64], [2, 128, 64], [64, 128]], 1, HD, dict(NUM_STAGES=5, SWIGLU=1, CONSUMERS=1, CLAIM=0, **regs)),
        ((3, ), [[64, 64], [1, 128, 64], [64, 64]], 1, I, dict(NUM_STAGES=8, SWIGLU=0, CONSUMERS=1, CLAIM=0, **regs)),
    ]
    _, _, _, block_expert, _, _, _ = m.route_and_align(logits, top_k, 64)
    rows = torch.bincount(torch.topk(logits, top_k).indices.flatten(), minlength=E)
    assert torch.equal(torch.bincount(block_expert[block_expert >= 0].long(), minlength=E), (rows + 63) // 64)

    T = 321  # 128.4 rows an expert
    x, logits = torch.randn(T, HD).half(), torch.randn(T, E)
    gemms.launches.clear()
    m.fused_moe(x, w13, w2, logits, top_k)
    assert m.last_config["BLOCK_M"] == 128 and [o["CONSUMERS"] for *_, o in gemms.launches] == [2, 2]


def test_moe_streaming_config_takes_each_n_tile_by_the_rounds_of_the_blocks_in_use():
    """Each GEMM's N tile by the round fill of the row blocks expected in use (not route_and_align's bound),
    and the rings the deepest that fit one consumer."""
    m = _template("fused-moe")
    assert m.streams_weights(64, 64, 6) and m.streams_weights(512, 8, 2) and not m.streams_weights(513, 8, 2)
    picks = {shape: m.streaming_config(*shape, 132) for shape in [
        (512, 64, 6, 2048, 1408),   # 64.5 blocks: gate/up 710 tiles of 128 fill 6 rounds to 0.90, 1419 of 64 11 to 0.98
        (1024, 64, 6, 2048, 1408),  # two 64-row blocks an expert: 64 of 128 rows on two consumers; gate/up 704
                                    # tiles of 128 fill 6 rounds to 0.89, 1408 of 64 11 rounds to 0.97
        (512, 8, 2, 4096, 14336),   # 19.8 blocks: down 317 of 256 fill 3 rounds to 0.80, 634 of 128 5 to 0.96
        (64, 8, 2, 4096, 14336),    # 8 blocks: down 128 of 256 fill 1 round to 0.97, 256 of 128 2 rounds to 0.97
    ]}
    assert [(c["BLOCK_M"], c["BLOCK_N"], c["DOWN_BLOCK_N"]) for c in picks.values()] == [
        (64, 64, 256), (128, 64, 256), (64, 128, 128), (64, 128, 256)]
    # where a wider tile adds no tile fewer (64 hidden columns), the narrower: a wider one only pads
    assert m.streaming_config(80, 5, 2, 64, 96, 3)["DOWN_BLOCK_N"] == 128
    for cfg in picks.values():
        up, down, bm = cfg["BLOCK_N"], cfg["DOWN_BLOCK_N"], cfg["BLOCK_M"]
        rings = [(cfg["num_stages"], bm + 2 * up, up), (cfg["DOWN_num_stages"], bm + down, down // 2)]
        for stages, rows, cols in rings:
            ring = lambda n: n * rows * 64 * 2 + bm * cols * 2 + 1024  # each consumer's [64, cols] store buffer
            assert ring(stages) <= m.SHARED_MEMORY and (stages == 8 or ring(stages + 1) > m.SHARED_MEMORY)


def test_moe_autotune_times_the_rules_pick_first_then_the_other_gate_up_tile_then_configs(monkeypatch):
    """Streaming shapes: the rule's configs are its pick, then the same with the other gate/up N tile (its ring
    re-sized), both before CONFIG's candidates; a shape past STREAM_MAX_ROWS rows an expert has CONFIG alone."""
    m, _ = _moe_gluon_in_torch(monkeypatch, sms=4)
    x, w13, w2, logits = _moe_inputs(80, 5, 64, 192)  # 5 blocks x 3 gate/up tiles of 64 fill 4 SMs' rounds best
    rules = m.rule_configs(x, w13, w2, 2)
    assert [(c["BLOCK_N"], c["num_stages"]) for c in rules] == [(64, 8), (128, 5)]
    assert all({**c, "BLOCK_N": 0, "num_stages": 0} == {**rules[0], "BLOCK_N": 0, "num_stages": 0} for c in rules)
    timed = []
    monkeypatch.setattr(m, "_TUNED", {})
    monkeypatch.setattr(m, "_fastest", lambda run, candidates: timed.extend(candidates) or candidates[0])
    m._autotune((x, w13, w2, logits, 2), torch.empty_like(x), None, rules)
    assert timed[:2] == rules and timed[2] == m.CONFIG and len(timed) == 2 + 1 + len(m.AUTOTUNE_CONFIGS)
    assert m.rule_configs(torch.randn(321, 64).half(), w13, w2, 2) == [m.CONFIG]


def test_round_fill_is_the_share_of_the_grids_rounds_its_tiles_keep_busy():
    m = _template("fused-moe")
    assert m.round_fill(132, 132) == 1.0 and m.round_fill(133, 132) == 133 / 264
    assert m.round_fill(710, 132) == pytest.approx(710 / 792) and m.round_fill(5, 3) == 5 / 6
    assert m.expected_row_blocks(80, 5, 2, 64) == 5.0  # a whole number of blocks stays whole: 15 tiles are 5 rounds of 3


@pytest.mark.parametrize("T, E, top_k, block_m", [(64, 8, 2, 16), (40, 16, 4, 8), (24, 4, 4, 16)])
def test_expected_row_blocks_is_the_mean_of_the_routed_blocks(T, E, top_k, block_m):
    """The binomial expectation against routings of random logits (the blocks route_and_align fills): within
    4 standard errors of their mean, where neither E * ceil(r / block_m) nor the host's bound is (64 tokens on
    8 experts, top 2, 16-row blocks: ~11.5 blocks, against 8 and 16); top_k = E fills every expert."""
    m = _template("fused-moe")
    g = torch.Generator().manual_seed(T * E + top_k)
    counts = torch.stack([torch.bincount(torch.topk(torch.randn(T, E, generator=g), top_k).indices.flatten(),
                                         minlength=E) for _ in range(2000)])
    blocks = ((counts + block_m - 1) // block_m).sum(1).double()
    expected = m.expected_row_blocks(T, E, top_k, block_m)
    assert abs(expected - blocks.mean().item()) <= 4 * blocks.std().item() / 2000 ** 0.5 + 1e-9, (expected, blocks.mean())


def test_moe_streaming_layout_takes_64_wide_gate_up_tiles_where_they_fill_the_rounds(monkeypatch):
    """5 blocks in use on 4 SMs, I 192: 10 gate/up tiles of 128 fill 3 rounds to 0.83, 15 of 64 4 rounds to
    0.94, so the layer runs [2, 64, 64] boxes of w13 on an 8-stage ring and h in [64, 64] boxes, and equals the
    reference; on 5 SMs (10 of 128 in 2 rounds, 15 of 64 in 3: both full) it keeps 128, the fewer tiles."""
    m, gemms = _moe_gluon_in_torch(monkeypatch, sms=4)
    T, E, top_k, HD, I = 80, 5, 2, 64, 192
    x, w13, w2, logits = _moe_inputs(T, E, HD, I)
    out = m.fused_moe(x, w13, w2, logits, top_k)
    assert compare(out.float(), m.reference(x, w13, w2, logits, top_k), NORM["fp16"]) is None
    (_, boxes, n_tiles, _, options), _ = gemms.launches
    assert (boxes[1:], n_tiles, options["NUM_STAGES"]) == ([[2, 64, 64], [64, 64]], 3, 8)
    monkeypatch.setattr(m, "_num_sms", lambda device: 5)
    gemms.launches.clear()
    m.fused_moe(x, w13, w2, logits, top_k)
    assert gemms.launches[0][1][1] == [2, 128, 64]


def test_moe_streaming_layout_takes_128_row_blocks_on_two_consumers_where_experts_fill_two_of_64(monkeypatch):
    """Where most experts' rows fill two 64-row blocks and one of 128 (1024 tokens on 64 experts, top 6: 96 +- 9
    rows), the streaming layout's blocks are 128 rows on two consumers, each weight tile read once for both
    halves; one block an expert (512 tokens: 48 +- 7) or many experts past 128 rows (Mixtral at 512 tokens:
    128 +- 10) keep 64 rows on one. In the layer (180 tokens on 5 experts, top 2: 72 +- 8 rows an expert), the
    GEMMs run CONSUMERS 2 on the deepest rings that fit two consumers (6 stages of 128 + 128 rows for gate/up 64
    wide and for down 128 wide), and the layer equals the reference."""
    m, gemms = _moe_gluon_in_torch(monkeypatch, sms=4)
    assert [m.streaming_consumers(*shape) for shape in [(1024, 64, 6), (768, 64, 6), (512, 64, 6), (64, 64, 6),
                                                        (512, 8, 2), (64, 8, 2), (180, 5, 2)]] == [2, 2, 1, 1, 1, 1, 2]
    T, E, top_k, HD, I = 180, 5, 2, 64, 192
    x, w13, w2, logits = _moe_inputs(T, E, HD, I)
    out = m.fused_moe(x, w13, w2, logits, top_k)
    assert compare(out.float(), m.reference(x, w13, w2, logits, top_k), NORM["fp16"]) is None
    assert m.last_config["BLOCK_M"] == 128
    # 5 blocks of 128 x 3 gate/up tiles of 64 fill 4 SMs' rounds to 0.94 (128 wide: 10 tiles, 0.83)
    assert [(boxes[1], o["CONSUMERS"], o["NUM_STAGES"]) for _, boxes, _, _, o in gemms.launches] == [
        ([2, 64, 64], 2, 6), ([1, 128, 64], 2, 6)]
    rows = torch.bincount(torch.topk(logits, top_k).indices.flatten(), minlength=E)
    assert bool((rows > 64).any()) and bool((rows <= 128).all())  # the shape does what it says


def test_moe_gluon_path_launches_its_kernels_as_programmatic_dependents(monkeypatch):
    """On the Gluon path route, align, gather, both GEMMs and the sum are launched with launch_pdl (each may start
    before the kernel before it ends; the kernels wait for it: the compile tests), PDL 1 for the GEMMs (the
    Triton kernels' PDL is 0 in the interpreter, which cannot run griddepcontrol); the Triton GEMMs' path and
    PDL_LAUNCH False launch everything as before, with no launch_pdl option at all (AMD's backend has none)."""
    m, gemms = _moe_gluon_in_torch(monkeypatch, sms=3)
    launched = []

    class Recording:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            def launch(*args, **kw):
                launched.append((self.kernel.fn.__name__, kw.get("launch_pdl"), kw["PDL"]))
                return self.kernel[grid](*args, **kw)
            return launch

    for kernel in ("moe_route_kernel", "moe_align_kernel", "moe_gather_kernel", "moe_sum_kernel"):
        monkeypatch.setattr(m, kernel, Recording(getattr(m, kernel)))
    x, w13, w2, logits = _moe_inputs(80, 5, 64, 96)
    config = {"GLUON": 1, "BLOCK_M": 64, "BLOCK_N": 64, "DOWN_BLOCK_N": 64, "BLOCK_K": 32}
    reference = m.reference(x, w13, w2, logits, 2)
    for pdl_launch in (True, False):
        monkeypatch.setattr(m, "PDL_LAUNCH", pdl_launch)
        launched.clear()
        gemms.launches.clear()
        out = m.fused_moe(x, w13, w2, logits, 2, config=config)
        assert compare(out.float(), reference, NORM["fp16"]) is None
        assert launched == [(name, True if pdl_launch else None, 0) for name in
                            ("moe_route_kernel", "moe_align_kernel", "moe_gather_kernel", "moe_sum_kernel")]
        assert [(o["PDL"], o.get("launch_pdl")) for *_, o in gemms.launches] == [(int(pdl_launch), True if pdl_launch
                                                                                   else None)] * 2
        assert m.last_config["PDL"] == int(pdl_launch)
    monkeypatch.setattr(m, "PDL_LAUNCH", True)
    launched.clear()
    m.fused_moe(x, w13, w2, logits, 2, config={**config, "GLUON": 0, "BLOCK_M": 16, "DOWN_BLOCK_N": 32})
    assert launched == [(name, None, 0) for name in ("moe_route_kernel", "moe_align_kernel", "moe_gather_kernel",
                                                     "moe_sum_kernel")] and m.last_config["PDL"] == 0


def test_moe_gluon_gemms_store_the_rows_that_hold_pairs_alone_unless_told_otherwise(monkeypatch):
    """PAIRS_ONLY (the default) hands the Gluon GEMMs PAIRS_ONLY 1 and sorted_ids with the sentinel n_pairs: the
    contract in torch then writes only the pairs' rows of h and y, left NaN elsewhere, and the layer still equals
    the reference (nothing reads a padding row as a pair's); PAIRS_ONLY False: 0, whole blocks."""
    m, gemms = _moe_gluon_in_torch(monkeypatch, sms=3)
    _nan_filled_empties(monkeypatch, m)
    x, w13, w2, logits = _moe_inputs(70, 6, 64, 96)
    reference = m.reference(x, w13, w2, logits, 2)
    config = {"GLUON": 1, "BLOCK_M": 64, "BLOCK_N": 64, "DOWN_BLOCK_N": 64, "BLOCK_K": 32}
    for pairs_only in (True, False):
        monkeypatch.setattr(m, "PAIRS_ONLY", pairs_only)
        gemms.launches.clear()
        out = m.fused_moe(x, w13, w2, logits, 2, config=config)
        assert compare(out.float(), reference, NORM["fp16"]) is None
        assert [o["PAIRS_ONLY"] for *_, o in gemms.launches] == [int(pairs_only)] * 2


def test_moe_gluon_gemms_claim_their_tiles_on_two_consumers(monkeypatch):
    """CLAIM_TILES None (the default): the Gluon GEMMs claim their tiles from a zeroed counter (CLAIM 1) where the
    row blocks are 128 rows on two consumers (an expert's last block may skip its second half, so tiles differ in
    cost), and take every num_programs-th (0) on one; False forces 0. The layer equals the reference either way."""
    m, gemms = _moe_gluon_in_torch(monkeypatch, sms=3)
    x, w13, w2, logits = _moe_inputs(70, 6, 64, 96)
    reference = m.reference(x, w13, w2, logits, 2)
    for block_m, claim_tiles, claim in [(128, None, 1), (64, None, 0), (128, False, 0)]:
        monkeypatch.setattr(m, "CLAIM_TILES", claim_tiles)
        gemms.launches.clear()
        config = {"GLUON": 1, "BLOCK_M": block_m, "BLOCK_N": 64, "DOWN_BLOCK_N": 64, "BLOCK_K": 32}
        out = m.fused_moe(x, w13, w2, logits, 2, config=config)
        assert compare(out.float(), reference, NORM["fp16"]) is None
        assert [o["CLAIM"] for *_, o in gemms.launches] == [claim] * 2 and m.last_config["CLAIM"] == claim


def test_moe_pdl_and_pairs_only_where_the_layer_streams_its_weights(monkeypatch):
    """PDL_LAUNCH and PAIRS_ONLY None (the defaults): the Gluon path launches its kernels as programmatic
    dependents, and stores the pairs' rows of h and y alone, where the layer streams its weights (T*k <= 128 E:
    pdl_pays, pairs_only_pays, which read the shape alone, so fp16 and bf16 take the same path), and does neither
    one token past that (there the tensor cores set the time). Forced True / False override each rule on either
    side, one switch apart from the other; the layer equals the reference every time."""
    m, gemms = _moe_gluon_in_torch(monkeypatch, sms=3)
    assert m.PDL_LAUNCH is None and m.PAIRS_ONLY is None
    # 64 experts, top 6: 128 rows an expert up to 1365 tokens; Mixtral (8, top 2) up to 512; OLMoE's 8192 tokens
    # (64, top 8) are 1024 rows an expert
    shapes = [(64, 64, 6), (1024, 64, 6), (1365, 64, 6), (1366, 64, 6), (4096, 64, 6), (512, 8, 2), (513, 8, 2),
              (2048, 8, 2), (8192, 64, 8)]
    assert [m.pairs_only_pays(*shape) for shape in shapes] == [True, True, True, False, False, True, False, False, False]
    # PDL where each expert's rows also fit one block of the layout: 1100 tokens on 64 experts fill one 128-row
    # block on two consumers, 1200 spill into second blocks; Mixtral at 512 tokens (128 rows an expert on 64-row
    # blocks, where PDL was measured 28% slower) does not, at 256 (one 128-row block on two consumers) does
    shapes += [(1100, 64, 6), (1200, 64, 6), (256, 8, 2), (64, 8, 2)]
    rows = [64 * m.streaming_consumers(*shape) for shape in shapes]  # the streaming layout's blocks
    assert [m.pdl_pays(*shape, block_m) for shape, block_m in zip(shapes, rows)] == [
        True, True, False, False, False, False, False, False, False, True, False, True, True]
    assert m.pdl_pays(512, 64, 6, 64) and not m.pdl_pays(512, 8, 2, 64) and m.pdl_pays(512, 8, 2, 256)
    E, top_k, HD, I = 4, 2, 64, 96
    config = {"GLUON": 1, "BLOCK_M": 64, "BLOCK_N": 64, "DOWN_BLOCK_N": 64, "BLOCK_K": 32}
    for T, streams in ((256, True), (257, False)):  # 512 pairs on 4 experts: 128 rows an expert, then 128.5
        x, w13, w2, logits = _moe_inputs(T, E, HD, I)
        reference = m.reference(x, w13, w2, logits, top_k)
        for forced_pdl, forced_pairs in ((None, None), (not streams, None), (None, not streams),
                                         (not streams, not streams)):
            monkeypatch.setattr(m, "PDL_LAUNCH", forced_pdl)
            monkeypatch.setattr(m, "PAIRS_ONLY", forced_pairs)
            gemms.launches.clear()
            out = m.fused_moe(x, w13, w2, logits, top_k, config=config)
            assert compare(out.float(), reference, NORM["fp16"]) is None
            pdl = m.pdl_pays(T, E, top_k, config["BLOCK_M"]) if forced_pdl is None else forced_pdl
            pairs = streams if forced_pairs is None else forced_pairs
            assert [(o["PDL"], o.get("launch_pdl"), o["PAIRS_ONLY"]) for *_, o in gemms.launches] == [
                (int(pdl), True if pdl else None, int(pairs))] * 2, (T, forced_pdl, forced_pairs)
            assert (m.last_config["PDL"], m.last_config["PAIRS_ONLY"]) == (int(pdl), int(pairs))


def test_moe_gluon_runs_on_hopper_16bit_64_or_128_row_blocks_one_wgmma_wide(monkeypatch):
    m = _template("fused-moe")
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setattr(m, "_has_tma", lambda device: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    cfg = {**m.CONFIG, "GLUON": 1}
    x = _Matrix()
    w13, w2 = torch.empty(2, 64, 32, dtype=torch.bfloat16), torch.empty(2, 32, 32, dtype=torch.bfloat16)
    assert m._gluon_runs(x, w13, w2, cfg) and m._gluon_runs(_Matrix(torch.float16), w13.half(), w2.half(), cfg)
    assert not m._gluon_runs(_Matrix(torch.float32), w13.float(), w2.float(), cfg)
    assert not m._gluon_runs(_Matrix(device="cpu"), w13, w2, cfg)
    assert m._gluon_runs(x, w13, w2, {**cfg, "BLOCK_M": 64})  # one warpgroup of 64 rows
    assert not m._gluon_runs(x, w13, w2, {**cfg, "BLOCK_M": 32}) and not m._gluon_runs(x, w13, w2, {**cfg, "BLOCK_M": 256})
    assert m._gluon_runs(x, w13, w2, {**cfg, "BLOCK_N": 128, "DOWN_BLOCK_N": 256})
    assert not m._gluon_runs(x, w13, w2, {**cfg, "BLOCK_N": 256})  # gate + up: 512 wide, no wgmma
    assert not m._gluon_runs(x, w13, w2, {**cfg, "DOWN_BLOCK_N": 512})
    odd = torch.empty(2, 20, 10, dtype=torch.bfloat16)  # rows of 20 bytes: no TMA
    assert not m._gluon_runs(x, odd, w2, cfg) and not m._gluon_runs(x, w13, odd, cfg)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not m._gluon_runs(x, w13, w2, cfg)  # Gluon has no interpreter
    monkeypatch.delenv("TRITON_INTERPRET")
    for capability in [(8, 0), (10, 0)]:  # wgmma is Hopper's alone
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, c=capability: c)
        assert not m._gluon_runs(x, w13, w2, cfg)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.version, "hip", "6.2")
    assert not m._gluon_runs(x, w13, w2, cfg)
    monkeypatch.setattr(torch.version, "hip", None)
    m._GLUON_FAILED[torch.device("cuda")] = "RuntimeError: no such op"
    assert not m._gluon_runs(x, w13, w2, cfg)  # failed here before: not tried again


# the Triton GEMMs that take over must not read the padding rows the gather left for the Gluon ones (NaN, inf)
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_moe_gluon_gemms_that_do_not_compile_fall_back_once_and_say_so(monkeypatch, uncompilable):
    m = _template("fused-moe")
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")
    monkeypatch.setattr(m, "moe_gemm_gluon_kernel", uncompilable)
    monkeypatch.setattr(m, "_gluon_runs", lambda x, w13, w2, cfg: x.device not in m._GLUON_FAILED)
    monkeypatch.setattr(m, "_num_sms", lambda device: 4)
    T, E, top_k, HD, I = 40, 4, 2, 32, 48
    x, logits = torch.randn(T, HD).half(), torch.randn(T, E)
    w13, w2 = (torch.randn(E, 2 * I, HD) / 6).half(), (torch.randn(E, HD, I) / 7).half()
    config = {"GLUON": 1, "BLOCK_M": 128, "BLOCK_N": 32, "DOWN_BLOCK_N": 32, "BLOCK_K": 16}
    with pytest.warns(UserWarning, match=r"fused-moe: the Gluon GEMMs do not run with Triton .*error: no such op"):
        out = m.fused_moe(x, w13, w2, logits, top_k, config=config)
    assert compare(out.float(), m.reference(x, w13, w2, logits, top_k), NORM["fp16"]) is None
    assert m.last_config["GLUON"] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        m.fused_moe(x, w13, w2, logits, top_k, config=config)
    assert len(uncompilable.attempts) == 1  # not tried again on this device


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


@pytest.mark.parametrize("kernel", ["fused-moe"])  # gemm's takes turns: test_gemm_autotune_*
def test_autotune_times_each_call_after_a_clean_l2_clear_and_keeps_the_median(kernel, monkeypatch):
    """_median_ms: every call (warm-up ones too) follows a clear of the L2; the warm-up calls' times are
    dropped and the median of the rest is kept."""
    g = _template(kernel)
    events, order = [], []
    # 5 warm-up calls (whatever they read: here fast, where counting them would move the median), then 20
    # timed ones of 1..20 ms in shuffled order
    elapsed = iter([0.5] * 5 + [float(t) for t in (7, 19, 3, 12, 1, 15, 9, 20, 5, 11, 2, 17, 14, 6, 10, 4, 18, 8,
                                                     16, 13)])

    class Event:
        def __init__(self, enable_timing):
            events.append(self)

        def record(self):
            order.append("event")

        def elapsed_time(self, end):
            return end.ms

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)

    def fn():
        order.append("call")
        events[-1].ms = next(elapsed)  # the end event of this call, recorded after it

    assert g._median_ms(fn, lambda: order.append("clear")) == 11.0  # the upper median of 1..20; no warm-up
    assert order == ["clear", "event", "call", "event"] * 25


@pytest.mark.parametrize("kernel", ["fused-moe"])
def test_autotune_runs_every_candidate_before_timing_and_times_them_twice(kernel, monkeypatch):
    """A session's first timing runs before the GPU's clocks rise and reads slow: the candidate timed
    first must not lose to a slower one for that. A candidate that does not run is dropped; when none
    runs, CONFIG stays."""
    t = _template(kernel)
    true_ms = {"config": 1.0, "slower": 1.1, "slowest": 3.0}
    ran, timed = [], []

    def run(cfg):
        if cfg["name"] == "broken":
            raise RuntimeError("out of shared memory")
        ran.append(cfg["name"])

    def median_ms(fn, clear):
        fn()
        timed.append(ran[-1])
        cold = 1.3 if len(timed) == 1 else 1.0  # the first timing of the session, on cold clocks
        return true_ms[ran[-1]] * cold

    monkeypatch.setattr(t, "_l2_clear", lambda: None)
    monkeypatch.setattr(t, "_median_ms", median_ms)
    candidates = [{"name": n} for n in ("config", "broken", "slower", "slowest")]
    assert t._fastest(run, candidates) == {"name": "config"}
    assert ran[:3] == ["config", "slower", "slowest"]          # each ran once before the first timing
    assert timed == ["config", "slower", "slowest"] * 2
    assert t._fastest(run, [{"name": "broken"}]) == t.CONFIG


class _FakeEvents:
    """torch.cuda's timing events on a CPU: each call's time is what the timed function sets on the end
    event, which is made before it runs."""

    def __init__(self, monkeypatch):
        self.made, self.order = [], []
        outer = self

        class Event:
            def __init__(self, enable_timing):
                outer.made.append(self)

            def record(self):
                outer.order.append("event")

            def elapsed_time(self, end):
                return end.ms

        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)

    def took(self, ms):
        self.made[-1].ms = ms


def test_attention_autotune_times_the_candidates_in_turns_after_a_clean_l2_clear(monkeypatch):
    """_median_ms_each: call i of every candidate before call i + 1 of any, each after a clear of the L2;
    the warm-up calls' times dropped, each candidate's median kept."""
    fa = _template("flash-attention")
    events = _FakeEvents(monkeypatch)
    times = {"a": iter([0.5] * 5 + [float(t) for t in range(40, 0, -1)]), "b": iter([0.5] * 5 + [2.0] * 40)}

    def timed(name):
        events.order.append(name)
        events.took(next(times[name]))

    medians = fa._median_ms_each([lambda: timed("a"), lambda: timed("b")], lambda: events.order.append("clear"))
    assert medians == [21.0, 2.0]  # the upper median of 1..40; no warm-up
    assert events.order == ["clear", "event", "a", "event", "clear", "event", "b", "event"] * 45


def test_attention_autotune_keeps_the_faster_kernel_while_the_clock_drifts(monkeypatch):
    """Under a clock that slows 0.2% a call (a GPU at its power limit), candidates timed one after the
    other favour whichever went first; taking turns, the one 3% faster is kept. A candidate that does not
    run is dropped; when none runs, CONFIG stays."""
    fa = _template("flash-attention")
    events = _FakeEvents(monkeypatch)
    monkeypatch.setattr(fa, "_l2_clear", lambda: lambda: None)
    true_ms, calls = {"config": 1.0, "faster": 0.97}, []

    def run(cfg):
        if cfg["name"] == "broken":
            raise RuntimeError("out of shared memory")
        calls.append(cfg["name"])
        if events.made:  # a timed call: its end event is the last made
            events.took(true_ms[cfg["name"]] * (1 + 0.002 * len(calls)))

    candidates = [{"name": n} for n in ("config", "broken", "faster")]
    assert fa._fastest(run, candidates) == {"name": "faster"}
    assert calls[:2] == ["config", "faster"]  # each ran once before the first timing
    assert fa._fastest(run, [{"name": "broken"}]) == fa.CONFIG


class _FakeGpu:
    """A GPU's timeline for gemm's autotune on a CPU, passed as its clock: clear() and each launch move the time
    on, mark() reads it, and the times are read after sync(). ms_of(name, launched) is a launch's time, given
    the names launched before it."""

    def __init__(self, ms_of):
        self.ms_of, self.now, self.launched, self.log, self.synced = ms_of, 0.0, [], [], False

    def launch(self, name):
        self.now += self.ms_of(name, self.launched)
        self.launched.append(name)
        self.log.append(name)

    def clear(self):
        self.now += 0.085
        self.log.append("clear")

    def mark(self):
        self.log.append("mark")
        return self.now

    def ms(self, start, end):
        assert self.synced  # an event's time is read once the GPU has passed it
        return end - start

    def sync(self):
        self.synced = True

    def prepare(self, cfg):
        if cfg["name"] == "broken":
            raise RuntimeError("out of shared memory")
        self.launch(cfg["name"])  # the compiling call
        return lambda: self.launch(cfg["name"])


def test_gemm_autotune_times_the_candidates_in_turns_after_a_clean_l2_clear():
    """_times_each: call i of every candidate before call i + 1 of any, each after a clear of the L2 and
    between two marks; the 5 warm-up calls' times dropped."""
    g = _template("gemm")
    gpu = _FakeGpu(lambda name, launched: {"a": 1.0, "b": 2.0}[name] + (9.0 if len(launched) < 10 else 0.0))
    times = g._times_each([lambda: gpu.launch("a"), lambda: gpu.launch("b")], gpu.clear, gpu, calls=7)
    assert times == [pytest.approx([1.0] * 7), pytest.approx([2.0] * 7)]  # the warm-up calls (9 ms more) dropped
    assert gpu.log == ["clear", "mark", "a", "mark", "clear", "mark", "b", "mark"] * 12


def test_gemm_autotune_keeps_the_fastest_while_the_clock_drifts(monkeypatch):
    """Under a clock that slows 0.2% a launch (a GPU at its power limit), candidates timed one after the other
    favour whichever went first; taking turns, the one 3% faster is kept. Every candidate is prepared (compiled)
    before the first timing; one that does not compile is dropped; when none does, CONFIG stays."""
    g = _template("gemm")
    monkeypatch.setattr(g, "_l2_clear", lambda: gpu.clear)
    true_ms = {"config": 1.0, "other": 1.01, "faster": 0.97}
    gpu = _FakeGpu(lambda name, launched: true_ms[name] * (1 + 0.002 * len(launched)))
    # timed last, in blocks the faster one would read 13% slow, and no re-timing would reach it
    candidates = [{"name": n} for n in ("config", "broken", "other", "faster")]
    assert g._fastest(gpu.prepare, candidates, gpu) == {"name": "faster"}
    assert gpu.launched[:3] == ["config", "other", "faster"] and gpu.log[3] == "clear"
    assert g._fastest(gpu.prepare, [{"name": "broken"}], gpu) == g.CONFIG


def test_gemm_autotune_times_the_close_candidates_again_apart_from_a_slow_one(monkeypatch):
    """A slow candidate leaves the clock low for the launch after it, and in turns that is always the same
    candidate: 'fast' (1.00 ms) reads 1.025 behind 'slow', under 'close' (1.01). Within RETIME_WITHIN of the best,
    both are timed again without 'slow' (twice the calls, in the opposite order), and 'fast' is kept."""
    g = _template("gemm")
    monkeypatch.setattr(g, "_l2_clear", lambda: gpu.clear)
    true_ms = {"fast": 1.0, "close": 1.01, "slow": 1.5}
    gpu = _FakeGpu(lambda name, launched: true_ms[name] * (1.025 if launched[-1:] == ["slow"] else 1.0))
    candidates = [{"name": n} for n in ("fast", "close", "slow")]
    assert g._fastest(gpu.prepare, candidates, gpu) == {"name": "fast"}
    first = 3 + 3 * (5 + g.CALLS)
    assert gpu.launched.count("slow") == 1 + 5 + g.CALLS  # not timed again: 50% behind
    assert gpu.launched[first:first + 2] == ["close", "fast"] and len(gpu.launched) == first + 2 * (5 + 2 * g.CALLS)


def test_gemm_autotune_times_the_planned_launches_not_the_jit(monkeypatch):
    """_autotune runs each candidate through _run once (the JIT: it compiles, and binds its arguments) and times
    _replay of the launches that made, as a planned call repeats them; the pick is remembered a shape."""
    g = _template("gemm")
    gpu = _FakeGpu(lambda name, launched: {"CONFIG": 1.0, "other": 0.9}[name])
    cands = [dict(g.CONFIG), {**g.CONFIG, "GROUP_M": 4}]
    name = lambda cfg: "other" if cfg["GROUP_M"] == 4 else "CONFIG"
    ran = []

    def run(a, b, c, cfg):
        ran.append(name(cfg))
        gpu.launch(name(cfg))
        return [("launch of", name(cfg))], cfg

    monkeypatch.setattr(g, "_candidates", lambda a, b, c: cands)
    monkeypatch.setattr(g, "_run", run)
    monkeypatch.setattr(g, "_replay", lambda launches, a, b, c: gpu.launch(launches[0][1]))
    monkeypatch.setattr(g, "_l2_clear", lambda: gpu.clear)
    monkeypatch.setattr(g, "_CudaClock", gpu)
    monkeypatch.setattr(g, "_TUNED", {})
    a = torch.empty(256, 128)
    assert g._autotune(a, a[:128], None) == cands[1] and ran == ["CONFIG", "other"]
    assert len(gpu.launched) > 2 + 2 * g.CALLS
    assert g._autotune(a, a[:128], None) == cands[1] and ran == ["CONFIG", "other"]  # remembered


class _Matrix:
    """What the gemm template's _gluon_runs reads of a, b and c."""

    def __init__(self, dtype=torch.bfloat16, device="cuda", row_stride=1024, address=0):
        self.dtype, self.device = dtype, torch.device(device)
        self._strides, self._address = (row_stride, 1), address

    def stride(self, dim):
        return self._strides[dim]

    def element_size(self):
        return torch.empty((), dtype=self.dtype).element_size()

    def data_ptr(self):
        return self._address


def test_gemm_takes_the_gluon_kernel_on_hopper_16bit_tma_aligned_64_or_128_row_tiles(monkeypatch):
    g = _template("gemm")
    if g.gluon is None:
        pytest.skip("this Triton has no Gluon")
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setattr(g, "_device_facts", lambda device: (132, True))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    cfg = {**g.CONFIG, **g.SMALL_OUTPUT_CONFIGS[0]}
    m = _Matrix()
    assert g._gluon_runs(m, m, m, cfg) and g._gluon_runs(*[_Matrix(torch.float16)] * 3, cfg)
    assert g._gluon_runs(m, m, m, {**cfg, "BLOCK_M": 128})  # two consumer warpgroups of 64 rows
    for block_m in (32, 192, 256):  # one or two consumers' 64 rows, nothing else
        assert not g._gluon_runs(m, m, m, {**cfg, "BLOCK_M": block_m})
    assert g._gluon_runs(m, m, m, {**cfg, "BLOCK_M": 128, "BLOCK_N": 192})  # two boxes: 128 + 64 (gluon_widths)
    assert not g._gluon_runs(m, m, m, {**cfg, "BLOCK_M": 128, "BLOCK_N": 224})  # 128 + 96: no two boxes
    assert not g._gluon_runs(*[_Matrix(torch.float32)] * 3, cfg)
    assert not g._gluon_runs(_Matrix(device="cpu"), m, m, cfg)
    assert not g._gluon_runs(m, _Matrix(row_stride=1001), m, cfg)  # rows not 16-byte aligned: no TMA
    assert not g._gluon_runs(m, m, _Matrix(address=8), cfg)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not g._gluon_runs(m, m, m, cfg)  # Gluon has no interpreter
    monkeypatch.delenv("TRITON_INTERPRET")
    for capability in [(8, 0), (10, 0)]:  # wgmma is Hopper's alone
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, c=capability: c)
        assert not g._gluon_runs(m, m, m, cfg)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.version, "hip", "6.2")
    assert not g._gluon_runs(m, m, m, cfg)
    monkeypatch.setattr(torch.version, "hip", None)
    g._GLUON_FAILED[torch.device("cuda")] = "RuntimeError: no such op"
    assert not g._gluon_runs(m, m, m, cfg)  # failed here before: not tried again


def test_gemm_autotune_offers_the_gluon_kernel_for_small_outputs_and_a_neighbour_for_large(monkeypatch):
    g = _template("gemm")
    monkeypatch.setattr(g, "_num_sms", lambda device: 132)
    a = torch.empty(1024, 1024, dtype=torch.float16)  # 32 CONFIG tiles: fewer than half of 132 SMs
    for runs in (True, False):
        monkeypatch.setattr(g, "_gluon_runs", lambda a, b, c, cfg, runs=runs: runs)
        gluon = [cfg for cfg in g._candidates(a, a, a) if cfg["GLUON"]]
        assert gluon == ([{**g.CONFIG, **g.SMALL_OUTPUT_CONFIGS[0]}] if runs else [])
    monkeypatch.setattr(g, "_gluon_runs", lambda a, b, c, cfg: True)
    big = torch.empty(2048, 2048, dtype=torch.float16)  # 128 tiles: CONFIG and its neighbour on its tiles
    neighbour = {**g.CONFIG, "GROUP_M": 4, "num_stages": 4, "EPILOGUE_SUBTILE": 1}
    assert g._candidates(big, big, big) == [g.CONFIG, neighbour]


# each wave weighed by tile_k_step_share against 128x256: 64x128 0.45, 128x128 0.6, 64x64 0.3, 64x32 0.225
@pytest.mark.parametrize("M, N, tile", [
    (128, 4096, (64, 64)),  # 64 tiles of 64x128 on 132 SMs (1 wave, 0.45); 128 of 64x64 (0.3); 256 of 64x32 (0.45)
    (64, 4096, (64, 32)),  # 32 of 64x128; 128 of 64x32 (0.225) fill the SMs
    (64, 14336, (64, 128)),  # 112 tiles of 64x128; 224 of 64x64 are two waves (0.6), 112 of 128x128 one (0.6)
    (256, 4096, (64, 128)), (1024, 1024, (64, 128)),  # 128 tiles of 64x128: one wave already
    (512, 4096, (128, 128)),  # 256 of 64x128 are two waves (0.9); 128 of 128x128 one (0.6); 512 of 64x64 (1.2)
    (384, 4096, (128, 128)),  # 192 of 64x128 (0.9), 96 of 128x128 (0.6)
    (100, 4096, (64, 64)),  # a ragged M: two tile-rows, as M=128
    (64, 100, (64, 32)),  # one tile of 64x128 or two of 64x64 or four of 64x32: one wave each, the narrowest first
])
def test_gemm_gluon_tile_follows_the_waves(monkeypatch, M, N, tile):
    g = _template("gemm")
    assert g.gluon_tile(M, N, 132) == tile
    monkeypatch.setattr(g, "_num_sms", lambda device: 132)
    monkeypatch.setattr(g, "_gluon_runs", lambda a, b, c, cfg: True)
    a, b = torch.empty(M, 4096, dtype=torch.bfloat16), torch.empty(4096, N, dtype=torch.bfloat16)
    if 2 * triton.cdiv(M, g.CONFIG["BLOCK_M"]) * triton.cdiv(N, g.CONFIG["BLOCK_N"]) >= 132:
        pytest.skip("a large output: CONFIG's tiles and their neighbours")  # none of the cases above
    candidates = g._candidates(a, b, b)
    gluon = [(cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["num_stages"]) for cfg in candidates if cfg["GLUON"]]
    # the ring's 192 KB: the measured 8 at 64x128 and 12 at 64x64
    stages = {(64, 128): 8, (64, 64): 12, (64, 32): 16, (128, 128): 6}
    assert gluon == [(64, 128, 8)] + ([(*tile, stages[tile])] if tile != (64, 128) else [])
    # the Triton kernel's 128x128 tile (measured at M=512 N=4096) beside the Gluon one, and only there
    tall = [cfg for cfg in candidates if not cfg["GLUON"] and cfg["BLOCK_M"] == 128 and cfg["BLOCK_N"] == 128]
    assert tall == ([{**g.CONFIG, **g.TRITON_TALL_CONFIG}] if tile[0] == 128 else [])
    assert tall == [] or (tall[0]["USE_TMA"] and not tall[0]["PERSISTENT"] and tall[0]["num_warps"] == 8)


# wide_tile's makespans in K-steps of CONFIG's tile (rounds x (K-steps x share + WIDE_TILE_EPILOGUE_K_STEPS), the
# persistent 128x192 tile) against CONFIG's (rounds x K-steps), on 132 SMs: where 128x256's last wave is badly filled
# (2.18 waves at 2048x4608, 1.27 at 384x14336) a 128x192 tile's rounds are 0.77 of CONFIG's; 2048x5000x4096 (3.27
# waves of 128x192: 4 rounds, 196 against 192) and the shapes at 0.99-1.02x cuBLAS stay on CONFIG's candidates
@pytest.mark.parametrize("M, N, K, tile, config_steps, wide_steps", [
    (2048, 4608, 3584, (128, 192), 168, 129.0),  # 288 tiles: 3 rounds of 56; 384 of 128x192: 3 of 42 + 1
    (384, 14336, 4096, (128, 192), 128, 98.0),  # 168 tiles: 2 rounds of 64; 225: 2 of 48 + 1
    (2048, 5000, 4096, None, 192, 196.0),  # 320 tiles: 3 of 64; 432 of 128x192: 4 of 48 + 1
    (4096, 4096, 4096, None, 256, 294.0),
    (2048, 3584, 18944, None, 592, 669.0),
    (8192, 4800, 1600, None, 250, 256.75),
    (4096, 6144, 4096, None, 384, 392.0),
])
def test_gemm_wide_tile_where_configs_waves_quantize_badly(monkeypatch, M, N, K, tile, config_steps, wide_steps):
    g = _template("gemm")
    assert g.whole_k_steps(M, N, K, 132, g.CONFIG) == config_steps
    assert min(g.wide_tile_k_steps(M, N, K, 132, t) for t in g.WIDE_TILES) == pytest.approx(wide_steps)
    assert g.wide_tile(M, N, K, 132) == tile
    # the autotune's candidates: the wide tile's Gluon config after the others, where the Gluon kernel runs
    monkeypatch.setattr(g, "_num_sms", lambda device: 132)
    a, b = torch.empty(M, K, dtype=torch.bfloat16), torch.empty(K, N, dtype=torch.bfloat16)
    for runs in (True, False):
        monkeypatch.setattr(g, "_gluon_runs", lambda a, b, c, cfg, runs=runs: runs)
        candidates = g._candidates(a, b, torch.empty(M, N, dtype=torch.bfloat16))
        assert [cfg for cfg in candidates if cfg["GLUON"]] == ([g.wide_tile_config(tile)] if tile and runs else [])


def test_gemm_wide_tile_config_is_the_gluon_kernels_two_consumer_tile_on_the_persistent_grid():
    g = _template("gemm")
    cfg = g.wide_tile_config((128, 192))
    assert (cfg["GLUON"], cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["num_stages"]) == (1, 128, 192, 64, 4)
    assert cfg["PERSISTENT"] == 1 and g.wide_tile_config((128, 192), persistent=0)["PERSISTENT"] == 0
    assert g.wide_tile_config((128, 160))["num_stages"] == 5


def test_gemm_small_outputs_are_offered_no_wide_tile(monkeypatch):
    """1024^3 and 512x4096x4096 (fewer CONFIG tiles than half the SMs) take the small-output candidates, where
    wide_tile is not asked (its formula alone would offer 128x192 at both)."""
    g = _template("gemm")
    monkeypatch.setattr(g, "_num_sms", lambda device: 132)
    monkeypatch.setattr(g, "_gluon_runs", lambda a, b, c, cfg: True)
    for M, N, K in [(1024, 1024, 1024), (512, 4096, 4096)]:
        a, b = torch.empty(M, K, dtype=torch.bfloat16), torch.empty(K, N, dtype=torch.bfloat16)
        widths = [cfg["BLOCK_N"] for cfg in g._candidates(a, b, b) if cfg["GLUON"]]
        assert widths and not set(widths) & {w for _, w in g.WIDE_TILES}


def test_gemm_triton_tall_config_computes_every_element():
    """TRITON_TALL_CONFIG, the autotune's Triton 128x128 candidate, in the interpreter: a ragged C of 2 x 2 tiles
    (boxes sticking out of M, N and K), NaN-poisoned first."""
    g = _template("gemm")
    a, b = torch.randn(150, 80), torch.randn(80, 200)
    c = torch.full((150, 200), float("nan"))
    g.gemm(a, b, out=c, config=g.TRITON_TALL_CONFIG)
    assert compare(c, a @ b, NORM["fp32"]) is None
    assert g.last_config == {**g.CONFIG, **g.TRITON_TALL_CONFIG}


def test_gemm_gluon_ring_holds_the_measured_stages_and_fits_shared_memory():
    g = _template("gemm")
    small = g.SMALL_OUTPUT_CONFIGS[0]
    assert g.gluon_stages(small["BLOCK_M"], small["BLOCK_N"], small["BLOCK_K"]) == small["num_stages"] == 8
    assert g.gluon_stages(64, 64, 64) == 12  # 64x64 on 12 stages: 1.01-1.02x cuBLAS at M=128 (small-m-host/)
    assert g.gluon_stages(128, 128, 64) == 6  # two consumers' A tiles and one B tile a stage: 32 KB
    assert g.gluon_stages(128, 192, 64) == 4 and g.gluon_stages(128, 160, 64) == 5  # the wide tiles: 40 and 36 KB
    for block_m, block_n in g.GLUON_TILES + g.WIDE_TILES:
        stages = g.gluon_stages(block_m, block_n, 64)
        assert stages * (block_m * 64 + 64 * block_n) * 2 + block_m * block_n * 2 + 1024 <= 232448, block_n


@pytest.mark.parametrize("tiles, sms, programs", [
    (512, 132, 128),  # 4096^3 in 128x256 tiles on the H200: 4 waves of 128, not 3.88 of 132
    (2048, 132, 128),  # 8192^3: 16 waves
    (528, 132, 132),  # whole waves: every SM
    (529, 132, 106),  # one tile over: 5 waves, 106 programs of 5 tiles or 4
    (133, 132, 67),
    (128, 132, 128),  # under a wave: a program a tile
    (1, 132, 1),
])
def test_the_persistent_gemm_takes_as_few_programs_as_keep_its_waves(tiles, sms, programs):
    g = _template("gemm")
    assert g.persistent_programs(tiles, sms) == programs
    waves = -(-tiles // sms)
    assert -(-tiles // programs) == waves  # the same waves, each program within one tile of the others


@pytest.mark.parametrize("M, N, sms, grid", [(64, 128, 5, 4), (96, 96, 5, 5), (96, 96, 9, 9), (32, 64, 5, 2)])
def test_the_persistent_gemm_launch_covers_c_on_its_programs(monkeypatch, record_launches, M, N, sms, grid):
    # 32x32 tiles: 8 on 5 SMs take 2 waves of 4 programs; 9 take 2 of 5; 9 on 9 SMs one; 2 one of 2
    g = _template("gemm")
    # NUM_PROGRAMS: after the 3 descriptors and M, N, K, the 3 blocks and GROUP_M
    launched = record_launches(g, "gemm_tma_kernel", lambda launch_grid, args, kw: (launch_grid, args[3 + 7]))
    monkeypatch.setattr(g, "_num_sms", lambda device: sms)
    a, b = torch.randn(M, 40), torch.randn(40, N)
    c = torch.full((M, N), float("nan"))
    g.gemm(a, b, out=c, config={"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "PERSISTENT": 1, "GLUON": 0})
    assert launched == [((grid, 1, 1), grid)]
    assert compare(c, a @ b, NORM["fp32"]) is None


def _written(c, launched):
    """How many launches wrote each element of c: each launch's C (a TMA descriptor's base, or the pointer
    kernel's tensor) is a view of c, placed by its address."""
    count = torch.zeros(c.shape, dtype=torch.int32)
    for view in launched:
        offset = (view.data_ptr() - c.data_ptr()) // c.element_size()
        row, col = divmod(offset, c.stride(0))
        count[row:row + view.shape[0], col:col + view.shape[1]] += 1
    return count


@pytest.mark.parametrize("M, N, K, sms, tiles", [
    (96, 160, 40, 5, [(32, 64), (16, 32)]),  # 3x3 tiles of 32x64 on 5 SMs: two tile-columns, the last 32 columns
    (100, 256, 33, 7, [(32, 64), (16, 32)]),  # a ragged row, K not a multiple of BLOCK_K
    (160, 96, 24, 4, [(32, 64), (16, 16)]),  # cut after tile-rows: the last 32 rows in 16x16 tiles
    (100, 150, 33, 5, [(32, 64), (16, 32)]),  # rows of 600 bytes: no TMA, the pointer kernel on the views
])
def test_gemm_tail_split_writes_every_element_of_c_once(monkeypatch, record_launches, M, N, K, sms, tiles):
    """A config with a tail tile: two launches, whole big tiles over a rectangle of C and small ones over
    the rest, which together write each element once (counted from the launches' C views) and right (C
    poisoned with NaN first)."""
    g = _template("gemm")
    monkeypatch.setattr(g, "_num_sms", lambda device: sms)
    launched = []
    for kernel, c_of in (("gemm_tma_kernel", lambda args: args[2].base), ("gemm_ptr_kernel", lambda args: args[2])):
        launched.append(record_launches(g, kernel, lambda grid, args, kw, c_of=c_of: c_of(args)))
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.full((M, N), float("nan"))
    (bm, bn), (tm, tn) = tiles
    config = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 16, "TAIL_BLOCK_M": tm, "TAIL_BLOCK_N": tn}
    g.gemm(a, b, out=c, config=config)
    views = launched[0] + launched[1]
    assert len(views) == 2 and bool((_written(c, views) == 1).all())
    assert compare(c, a @ b, NORM["fp32"]) is None
    assert g.last_config == {**g.CONFIG, **config}
    # the cut best_tail_split chose, the big tiles' rectangle first
    cut = g.best_tail_split(M, N, K, sms, {**g.CONFIG, **config}, [(tm, tn)])[2]
    assert tuple(views[0].shape) == cut


@pytest.mark.parametrize("M, N", [(96, 152), (70, 200)])
def test_gemm_tail_split_at_every_cut_writes_every_element_of_c_once(monkeypatch, record_launches, M, N):
    """Whichever cut best_tail_split picks (each of tail_cuts in turn: after every tile-column, then every
    tile-row), the two launches write each element of C once, and right."""
    g = _template("gemm")
    launched = record_launches(g, "gemm_tma_kernel", lambda grid, args, kw: args[2].base)
    config = {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 16, "TAIL_BLOCK_M": 16, "TAIL_BLOCK_N": 32}
    a, b = torch.randn(M, 24), torch.randn(24, N)
    cuts = g.tail_cuts(M, N, (32, 64))
    assert len(cuts) == triton.cdiv(N, 64) - 1 + triton.cdiv(M, 32) - 1
    for cut in cuts:
        monkeypatch.setattr(g, "best_tail_split", lambda *args, cut=cut: (0.0, (16, 32), cut))
        launched.clear()
        c = torch.full((M, N), float("nan"))
        g.gemm(a, b, out=c, config=config)
        assert len(launched) == 2 and tuple(launched[0].shape) == cut, cut
        assert bool((_written(c, launched) == 1).all()), cut
        assert compare(c, a @ b, NORM["fp32"]) is None, cut


def test_gemm_tail_split_counts_a_region_written_twice_or_missed():
    c = torch.zeros(4, 6)
    assert bool((_written(c, [c[:, :4], c[:, 4:]]) == 1).all())
    assert not bool((_written(c, [c[:, :4], c[:, 3:]]) == 1).all())  # column 3 twice
    assert not bool((_written(c, [c[:, :4], c[1:, 4:]]) == 1).all())  # row 0 of the tail missed


def test_gemm_tail_split_of_one_tile_runs_whole_and_says_so(monkeypatch, record_launches):
    g = _template("gemm")
    monkeypatch.setattr(g, "_num_sms", lambda device: 4)
    launched = record_launches(g, "gemm_tma_kernel", lambda grid, args, kw: grid)
    a, b = torch.randn(30, 24), torch.randn(24, 60)
    c = torch.full((30, 60), float("nan"))
    g.gemm(a, b, out=c, config={"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 16, "TAIL_BLOCK_M": 16,
                                "TAIL_BLOCK_N": 32})
    assert launched == [(1, 1, 1)] and compare(c, a @ b, NORM["fp32"]) is None
    assert g.last_config["TAIL_BLOCK_M"] == 0 and g.last_config["TAIL_BLOCK_N"] == 0


def test_gemm_tail_tile_given_by_half_is_refused_in_one_line():
    g = _template("gemm")
    a, b = torch.randn(64, 16), torch.randn(16, 128)
    with pytest.raises(ValueError, match=r"^gemm: TAIL_BLOCK_M and TAIL_BLOCK_N are set together \(got 16 and 0\)$"):
        g.gemm(a, b, config={"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 16, "TAIL_BLOCK_M": 16})


def test_gemm_tail_split_arithmetic_at_2048x4608x3584_on_132_sms():
    """288 CONFIG tiles are 3 waves of 56 K-steps; 256 of them (C's first 4096 columns) are 2, and the last
    512 columns in 128 tiles of 128x64 one wave at 0.45 of a big tile's K-step time (its share of the loaded
    bytes, 0.5, x 0.9), plus the gap between the launches."""
    g = _template("gemm")
    assert g.whole_k_steps(2048, 4608, 3584, 132, g.CONFIG) == 168
    assert g.tile_k_step_share((128, 64), (128, 256)) == pytest.approx(0.45)
    assert g.tile_k_step_share((128, 128), (128, 256)) == pytest.approx(0.6)
    assert g.tile_k_step_share((128, 256), (128, 256)) == 1
    assert g.split_k_steps(2048, 4608, 3584, 132, g.CONFIG, (128, 64), (2048, 4096)) == pytest.approx(
        112 + 0.45 * 56 + g.TAIL_GAP_K_STEPS)
    assert g.best_tail_split(2048, 4608, 3584, 132, g.CONFIG, g.TAIL_TILES)[1:] == ((128, 64), (2048, 4096))
    assert g.tail_rectangle(2048, 4608, (2048, 4096)) == ((0, 2048), (4096, 4608))
    assert g.tail_rectangle(2048, 4608, (1792, 4608)) == ((1792, 2048), (0, 4608))


@pytest.mark.parametrize("M, N, K, tail", [
    (2048, 4608, 3584, (128, 64)),  # 2.18 waves run as 3 -> 2 and a quarter-weight wave of 128x64
    (8192, 1600, 6400, (128, 64)),  # 3.39 -> 3 waves and the last 64 columns
    (128, 37888, 3584, (128, 64)),  # 1.12 -> 1 wave and 132 tiles of 128x64
    (3000, 5000, 2000, None),  # 3.64 waves: no cut leaves a tail small enough
    (4096, 4096, 4096, None), (4000, 4000, 4000, None), (2048, 3584, 18944, None), (8192, 4800, 1600, None),
    (4096, 28672, 4096, None), (2048, 2048, 2048, None), (8192, 8192, 8192, None),
])
def test_gemm_autotune_times_a_tail_split_where_the_waves_say_it_pays(monkeypatch, M, N, K, tail):
    g = _template("gemm")
    monkeypatch.setattr(g, "_num_sms", lambda device: 132)
    assert g.tail_split_pays(M, N, K, 132, g.CONFIG) == tail
    a, b = torch.empty(M, K, dtype=torch.float16), torch.empty(K, N, dtype=torch.float16)
    split = [cfg for cfg in g._candidates(a, b, b) if cfg.get("TAIL_BLOCK_M")]
    assert split == ([{**g.CONFIG, "TAIL_BLOCK_M": tail[0], "TAIL_BLOCK_N": tail[1]}] if tail else [])


@pytest.mark.parametrize("M, N, K, dtype, offered", [
    # B's and C's rows 10000 bytes: 16-byte multiples, not whole 128-byte lines: C through its pointer (B's TMA loads
    # stay: a copy of B every call costs more than they lose)
    (3000, 5000, 2000, torch.bfloat16, [{"C_PTR": 1}]),
    (2048, 5000, 4096, torch.float16, [{"C_PTR": 1}]),
    (4096, 1000, 4096, torch.float32, [{"C_PTR": 1}]),  # 4000 B rows
    # rows of 8200 bytes: no TMA descriptor for B or C (CONFIG runs the pointer kernel): the one config that lets
    # the TMA kernel run, B copied to lined rows and C through its pointer (on the split's tiles too, below)
    (4096, 4100, 4096, torch.bfloat16, [{"B_PAD": 1, "C_PTR": 1}]),
    (3000, 5120, 2000, torch.bfloat16, []),  # every B and C row whole lines (A's 4000 B cost nothing measured)
    (4096, 4096, 4096, torch.float16, []),
    (3000, 5000, 2001, torch.bfloat16, []),  # A's rows not 16-byte multiples: no TMA for A, nothing to time
])
def test_gemm_autotune_offers_c_ptr_and_b_pad_where_rows_are_not_whole_lines(monkeypatch, M, N, K, dtype, offered):
    g = _template("gemm")
    monkeypatch.setattr(g, "_num_sms", lambda device: 132)
    a, b, c = (torch.empty(r, k, dtype=dtype) for r, k in ((M, K), (K, N), (M, N)))
    assert g.row_alignment_configs(a, b, c) == offered
    # after CONFIG, its neighbour and any tail split: each on CONFIG's tiles, then each on the split's
    tail = g.tail_split_pays(M, N, K, 132, g.CONFIG)
    split = [{**g.CONFIG, "TAIL_BLOCK_M": tail[0], "TAIL_BLOCK_N": tail[1]}] if tail else []
    expected = [{**base, **e} for base in [g.CONFIG] + split for e in offered]
    candidates = g._candidates(a, b, c)
    assert [cfg for cfg in candidates if {"C_PTR", "B_PAD"} & set(cfg)] == expected
    assert candidates[len(candidates) - len(expected):] == expected
    assert bool(split) == ((M, N, K) in [(4096, 4100, 4096), (2048, 5000, 4096)])  # their last wave: a split
    if N == 4100:  # what the autotune picked on the H100 (250 us against the pointer kernel's 757) is timed
        assert {**split[0], "B_PAD": 1, "C_PTR": 1} in candidates and {**g.CONFIG, "B_PAD": 1, "C_PTR": 1} in candidates
    monkeypatch.setattr(g, "_device_facts", lambda device: (132, False))  # no TMA here: nothing
    assert g.row_alignment_configs(a, b, c) == []


def test_gemm_row_alignment_configs_follow_the_strides_not_the_shapes():
    """A C view of aligned rows needs no C_PTR though N is ragged; B's rows off lines but 16-byte multiples are left
    to TMA; a B view of rows that are not 16-byte multiples needs B_PAD though N is a multiple of 64; a C whose
    columns are strided cannot be stored by C_PTR, so nothing is offered for it."""
    g = _template("gemm")
    a = torch.empty(256, 512, dtype=torch.float16)
    b_lined = torch.empty(512, 5056, dtype=torch.float16)[:, :5000]
    c_lined = torch.empty(256, 5056, dtype=torch.float16)[:, :5000]
    assert g.row_alignment_configs(a, b_lined, c_lined) == []
    assert g.row_alignment_configs(a, torch.empty(512, 5000, dtype=torch.float16), c_lined) == []
    assert g.row_alignment_configs(a, b_lined, torch.empty(256, 5000, dtype=torch.float16)) == [{"C_PTR": 1}]
    b_off_lines = torch.empty(512, 5000, dtype=torch.float16)[:, :4096]
    assert g.row_alignment_configs(a, b_off_lines, c_lined[:, :4096]) == []
    b_ragged = torch.empty(512, 4100, dtype=torch.float16)[:, :4096]  # 8200-byte rows: no descriptor
    assert g.row_alignment_configs(a, b_ragged, c_lined[:, :4096]) == [{"B_PAD": 1}]
    assert g.row_alignment_configs(a, b_ragged, torch.empty(256, 4100, dtype=torch.float16)[:, :4096]) == [
        {"B_PAD": 1, "C_PTR": 1}]
    c_strided = torch.empty(5000, 256, dtype=torch.float16).t()[:, :4100]  # column stride 256
    assert g.row_alignment_configs(a, torch.empty(512, 4100, dtype=torch.float16), c_strided) == []
    # B transposed (column stride 512): no TMA descriptor and no vectors along its rows: only the copy
    b_t = torch.empty(4096, 512, dtype=torch.float16).t()
    assert g.row_alignment_configs(a, b_t, c_lined[:, :4096]) == [{"B_PAD": 1}]


@pytest.mark.parametrize("N, dtype, vector", [(5000, torch.bfloat16, 8), (4100, torch.float16, 4),
                                             (4098, torch.bfloat16, 2), (4097, torch.float16, 1),
                                             (1000, torch.float32, 4), (1001, torch.float32, 1),
                                             (4096, torch.bfloat16, 8)])
def test_gemm_c_ptr_vector_is_what_the_row_stride_and_width_share_up_to_16_bytes(N, dtype, vector):
    g = _template("gemm")
    c = torch.empty(3, N, dtype=dtype)
    assert g.row_vector(c) == vector
    assert g.row_vector(torch.empty(3, N + 64, dtype=dtype)[:, :N]) == g.row_vector(torch.empty(3, N, dtype=dtype))
    assert g.row_vector(torch.empty(8, 3, dtype=dtype).t()) == 0  # columns not unit-strided: no C_PTR


@pytest.mark.parametrize("M, N, K, config", [
    (70, 100, 40, {"C_PTR": 1}),  # fp32 rows of 400 B: 16-byte multiples, not 128
    (70, 100, 40, {"B_PAD": 1}),
    (70, 100, 40, {"B_PAD": 1, "C_PTR": 1}),
    (70, 101, 32, {"B_PAD": 1, "C_PTR": 1}),  # 404 B: no TMA for B or C without them
    (96, 100, 40, {"C_PTR": 1, "TAIL_BLOCK_M": 16, "TAIL_BLOCK_N": 32}),  # both launches of a split store by pointer
    (70, 100, 40, {"C_PTR": 1, "B_PAD": 1, "PERSISTENT": 0}),
    (70, 101, 36, {"B_PAD": 1, "C_PTR": 1}),  # K ragged: B's copy's rows past K read as zeros
    # 404-byte rows and a split, as 4096x4100x4096 is offered: the split's views, B copied once for both launches
    (96, 101, 40, {"B_PAD": 1, "C_PTR": 1, "TAIL_BLOCK_M": 16, "TAIL_BLOCK_N": 32}),
])
def test_gemm_c_ptr_and_b_pad_run_the_tma_kernel_and_write_every_element(monkeypatch, record_launches, M, N, K,
                                                                         config):
    """C_PTR: the TMA kernel gets C itself (its pointer) and C's row stride in vectors, and writes all of C (NaN
    first) right, its ragged last tile-row and tile-column masked; B_PAD: B's descriptor is over a copy whose rows
    are whole 128-byte lines, of B's shape."""
    g = _template("gemm")
    monkeypatch.setattr(g, "_num_sms", lambda device: 3)
    launched = record_launches(g, "gemm_tma_kernel", lambda grid, args, kw: args)
    pointer = record_launches(g, "gemm_ptr_kernel", lambda grid, args, kw: args)
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.full((M, N), float("nan"))
    g.gemm(a, b, out=c, config={"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 16, **config})
    assert compare(c, a @ b, NORM["fp32"]) is None
    assert pointer == [] and len(launched) == (2 if config.get("TAIL_BLOCK_M") else 1)
    for args in launched:  # ..., C's row stride in vectors, C_PTR's vector
        if config.get("C_PTR"):  # C (a view of it, in a split) itself
            vector = g.row_vector(c)
            assert isinstance(args[2], torch.Tensor) and args[2].stride() == c.stride()
            assert args[-1] == vector and args[-2] == c.stride(0) // vector
        else:
            assert args[-1] == 0 and tuple(args[2].strides) == (N, 1)
        b_rows = args[1].strides[0]  # B always by its descriptor
        assert (b_rows * 4) % 128 == 0 if config.get("B_PAD") else b_rows == N
        assert list(args[1].shape)[0] == K
    assert g.last_config == {**g.CONFIG, "BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 16, **config}


def test_gemm_b_pad_copies_b_again_on_every_planned_call(monkeypatch):
    """A planned call (_replay) copies B to whole lines again: a B whose values changed since the plan was made is
    multiplied as it is now, not as it was when the plan copied it."""
    g = _template("gemm")
    monkeypatch.setattr(g, "_num_sms", lambda device: 3)
    a, b = torch.randn(70, 40), torch.randn(40, 100)
    c = torch.full((70, 100), float("nan"))
    launches, _ = g._run(a, b, c, {**g.CONFIG, "BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 16, "B_PAD": 1, "C_PTR": 1})
    assert [launch[7] for launch in launches] == ["pad"]
    # the interpreter returns no compiled kernel: replay the jitted one, as a GPU's plan replays its binary
    launches = [(*launch[:2], g.gemm_tma_kernel, *launch[3:]) for launch in launches]
    copies = []
    real = g.padded_rows
    monkeypatch.setattr(g, "padded_rows", lambda t: copies.append(t) or real(t))
    b2 = torch.randn(40, 100)
    c2 = torch.full((70, 100), float("nan"))
    g._replay(launches, a, b2, c2)
    assert len(copies) == 1 and copies[0] is b2
    assert compare(c2, a @ b2, NORM["fp32"]) is None


# B_KEEP in the interpreter: fp32 B of 100 columns, rows of 400 bytes (16-byte multiples, not whole 128-byte lines:
# a TMA descriptor, rows off lines); its lined copy's rows hold 128 elements
KEEP = {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 16, "B_KEEP": 1}


def _keeping(monkeypatch, record_launches):
    """The gemm template on 3 SMs, with B's descriptor's row stride recorded at each TMA kernel launch and
    padded_rows's copies counted."""
    g = _template("gemm")
    monkeypatch.setattr(g, "_num_sms", lambda device: 3)
    b_rows = record_launches(g, "gemm_tma_kernel", lambda grid, args, kw: args[1].strides[0])
    copies = []
    real = g.padded_rows
    monkeypatch.setattr(g, "padded_rows", lambda t: copies.append(t) or real(t))
    return g, b_rows, copies


def _planned(g, a, b, c, config):
    """A planned call's launches as _run makes them on a call's first pass (the JIT): the interpreter returns no
    compiled kernel, so the jitted one (the recorder, where a test put one) stands in for the binary a GPU's plan
    replays."""
    launches, _ = g._run(a, b, c, {**g.CONFIG, **config})
    return [(*launch[:2], g.gemm_tma_kernel, *launch[3:]) for launch in launches]


def _replayed(g, launches, a, b):
    """C from a planned call, NaN first."""
    c = torch.full((a.shape[0], b.shape[1]), float("nan"))
    g._replay(launches, a, b, c)
    return c


def test_gemm_b_keep_reads_b_first_then_its_lined_copy_made_once_while_b_is_unchanged(monkeypatch, record_launches):
    """The first call runs on B itself and notes its version; the second, finding B unchanged, copies it to lined rows
    and reads the copy; the third reads the same copy. Each C right."""
    g, b_rows, copies = _keeping(monkeypatch, record_launches)
    a, b = torch.randn(70, 40), torch.randn(40, 100)
    c = torch.full((70, 100), float("nan"))
    launches = _planned(g, a, b, c, KEEP)
    assert compare(c, a @ b, NORM["fp32"]) is None
    assert [launch[7] for launch in launches] == ["keep"] and b_rows == [100] and copies == []
    for _ in range(2):
        assert compare(_replayed(g, launches, a, b), a @ b, NORM["fp32"]) is None
    assert b_rows == [100, 128, 128] and len(copies) == 1 and copies[0] is b
    assert g._KEPT_B[id(b)].copy.stride() == (128, 1)
    # gemm itself (on a CPU every call goes through _run): the same B, already kept, is read from its copy
    g.gemm(a, b, out=c, config=KEEP)
    assert b_rows[-1] == 128 and len(copies) == 1 and compare(c, a @ b, NORM["fp32"]) is None


def test_gemm_b_keep_reads_b_itself_after_an_in_place_change_then_keeps_it_again(monkeypatch, record_launches):
    g, b_rows, copies = _keeping(monkeypatch, record_launches)
    a, b = torch.randn(70, 40), torch.randn(40, 100)
    launches = _planned(g, a, b, torch.empty(70, 100), KEEP)
    _replayed(g, launches, a, b)  # kept
    b.add_(1)
    assert compare(_replayed(g, launches, a, b), a @ b, NORM["fp32"]) is None
    assert b_rows == [100, 128, 100] and g._KEPT_B[id(b)].copy is None  # the stale copy dropped
    assert compare(_replayed(g, launches, a, b), a @ b, NORM["fp32"]) is None  # unchanged since: copied again
    assert b_rows[-1] == 128 and len(copies) == 2
    # a write torch's version counter does not see (through .data, as a raw-pointer kernel's) leaves the copy stale
    # until the writer says so: the remedy the code's comment gives
    b.data.mul_(-1)
    torch.autograd.graph.increment_version(b)
    assert compare(_replayed(g, launches, a, b), a @ b, NORM["fp32"]) is None and b_rows[-1] == 100


def test_gemm_b_keep_sees_an_in_place_change_through_another_view_of_bs_storage(monkeypatch, record_launches):
    """B a view (100 of 120 columns: 480-byte rows); written through the base and through another view, both bump the
    version counter its views share."""
    g, b_rows, copies = _keeping(monkeypatch, record_launches)
    w = torch.randn(40, 120)
    a, b = torch.randn(70, 40), w[:, :100]
    launches = _planned(g, a, b, torch.empty(70, 100), KEEP)
    for write in (lambda: w[5:, 50:].mul_(-2), lambda: w.view(-1)[:300].add_(3)):
        _replayed(g, launches, a, b)  # kept (copied again after the first write)
        assert b_rows[-1] == 128
        write()
        assert compare(_replayed(g, launches, a, b), a @ b, NORM["fp32"]) is None and b_rows[-1] == 120
    assert len(copies) == 2


def test_gemm_b_keep_reads_b_itself_once_b_points_at_other_memory(monkeypatch, record_launches):
    """b.data = ... gives B other memory without a version bump: its data_ptr differs from the kept one's."""
    g, b_rows, _ = _keeping(monkeypatch, record_launches)
    a, b = torch.randn(70, 40), torch.randn(40, 100)
    launches = _planned(g, a, b, torch.empty(70, 100), KEEP)
    _replayed(g, launches, a, b)
    version = b._version
    b.data = torch.randn(40, 100)
    assert b._version == version
    assert compare(_replayed(g, launches, a, b), a @ b, NORM["fp32"]) is None and b_rows == [100, 128, 100]


def test_gemm_b_keep_never_keeps_inference_tensors_or_with_keeping_off(monkeypatch, record_launches):
    """An inference tensor has no version counter (reading _version raises): B itself on every call, nothing noted.
    KEEP_LINED_B False: the same for any B."""
    g, b_rows, copies = _keeping(monkeypatch, record_launches)
    a = torch.randn(70, 40)
    with torch.inference_mode():
        inference_b = torch.randn(40, 100)
    with pytest.raises(RuntimeError, match="version counter"):
        inference_b._version
    c = torch.empty(70, 100)
    launches = _planned(g, a, inference_b, c, KEEP)
    for _ in range(2):
        assert compare(_replayed(g, launches, a, inference_b), a @ inference_b, NORM["fp32"]) is None
    b = torch.randn(40, 100)
    monkeypatch.setattr(g, "KEEP_LINED_B", False)
    launches = _planned(g, a, b, c, KEEP)
    for _ in range(2):
        assert compare(_replayed(g, launches, a, b), a @ b, NORM["fp32"]) is None
    assert b_rows == [100] * 6 and copies == [] and g._KEPT_B == {}


def test_gemm_b_keep_drops_bs_entry_and_copy_when_b_is_freed():
    g = _template("gemm")
    b = torch.randn(40, 100)
    for _ in range(2):
        g.kept_lined_b(b)
    copy = weakref.ref(g._KEPT_B[id(b)].copy)
    del b
    gc.collect()
    assert g._KEPT_B == {} and copy() is None


def test_gemm_b_keep_copies_a_b_that_requires_grad_as_data_and_never_while_a_cuda_graph_is_captured(monkeypatch):
    """A weight's copy is not a step of its autograd graph. Under CUDA graph capture nothing is kept (the graph would
    keep reading the copy's address after the copy is dropped): on a CPU, a B that says it is on the GPU."""
    g = _template("gemm")
    weight = torch.randn(40, 100, requires_grad=True)
    for _ in range(2):
        copy = g.kept_lined_b(weight)
    assert copy is not weight and not copy.requires_grad and copy.grad_fn is None

    class OnTheGpu(_Matrix):
        is_cuda = True

        def is_inference(self):
            return False

    b = OnTheGpu(torch.float16, row_stride=5000)  # 10000-byte rows
    for capturing in (False, True):
        monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda capturing=capturing: capturing)
        assert g.lined_b_keepable(b) == (not capturing)


def test_gemm_b_keep_drops_the_least_recently_used_copies_past_the_budget(monkeypatch):
    """Room for two lined copies of 40 x 128 fp32 (20480 bytes each): keeping a third drops the copy of the B used
    least recently, and a B larger than the whole budget is never copied."""
    g = _template("gemm")
    monkeypatch.setattr(g, "KEPT_B_BYTES", 2 * 40 * 128 * 4)
    b1, b2, b3 = (torch.randn(40, 100) for _ in range(3))

    def keep(b):  # two calls: noted, then copied
        return [g.kept_lined_b(b) is not b for _ in range(2)]

    def kept():
        return [b for b in (b1, b2, b3) if id(b) in g._KEPT_B and g._KEPT_B[id(b)].copy is not None]

    assert keep(b1) == [False, True] and keep(b2) == [False, True]
    g.kept_lined_b(b1)  # b1 used last: b2 is now the least recently used
    assert keep(b3) == [False, True] and kept() == [b1, b3]
    assert g.kept_lined_b(b2) is not b2 and kept() == [b2, b3]  # unchanged: copied again, b1 dropped
    held = sum(g._KEPT_B[id(b)].copy.untyped_storage().nbytes() for b in kept())
    assert held == g.KEPT_B_BYTES
    big = torch.randn(81, 100)  # 81 x 128 x 4 bytes: more than the whole budget
    assert keep(big) == [False, False] and kept() == [b2, b3]
    assert compare(g.kept_lined_b(b3), b3, NORM["fp32"]) is None  # a copy holds B's values


def test_gemm_b_keep_only_where_b_is_read_by_descriptor_and_off_lines(monkeypatch, record_launches):
    """Not on the pointer kernel (its arguments keep the strides it was planned with), nor on rows already lined (a
    view whose rows are whole lines is read as it is)."""
    g, b_rows, copies = _keeping(monkeypatch, record_launches)
    a, b = torch.randn(70, 40), torch.randn(40, 100)
    c = torch.full((70, 100), float("nan"))
    launches, _ = g._run(a, b, c, {**g.CONFIG, **KEEP, "USE_TMA": 0})
    assert [launch[7] for launch in launches] == [""] and b_rows == [] and g._KEPT_B == {}
    lined = torch.randn(40, 128)[:, :100]
    launches = _planned(g, a, lined, c, KEEP)
    for _ in range(2):
        _replayed(g, launches, a, lined)
    assert b_rows == [128] * 3 and copies == [] and g._KEPT_B == {}
    # a tail split: every part reads the kept copy's columns, and C is right
    split = {**KEEP, "TAIL_BLOCK_M": 16, "TAIL_BLOCK_N": 32}
    a, b = torch.randn(96, 40), torch.randn(40, 100)
    launches = _planned(g, a, b, torch.empty(96, 100), split)
    assert len(launches) == 2 and [launch[7] for launch in launches] == ["keep"] * 2
    for _ in range(2):
        assert compare(_replayed(g, launches, a, b), a @ b, NORM["fp32"]) is None
    assert b_rows[-6:] == [100, 100, 128, 128, 128, 128]


def test_gemm_b_keep_hands_the_gluon_kernel_the_copy_too(monkeypatch, record_launches):
    """The Gluon kernel reads B by descriptor as well: its launches get B's descriptor, then the copy's."""
    g = _template("gemm")
    if g.gluon is None:
        pytest.skip("this Triton has no Gluon")
    launched = record_launches(g, "gemm_gluon_kernel", lambda grid, args, kw: list(args[1].strides), launch=False)
    monkeypatch.setattr(g, "_gluon_runs", lambda a, b, c, cfg: True)
    a, b = torch.randn(130, 72).half(), torch.randn(72, 200).half()  # 400-byte rows; 256 elements a lined row
    config = {"GLUON": 1, "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 8, "B_KEEP": 1}
    for _ in range(3):
        g.gemm(a, b, config=config)
    assert launched == [[200, 1], [256, 1], [256, 1]]


def test_gemm_b_keep_descriptors_of_b_and_its_copy_specialize_alike():
    """Why a plan made on B replays on its copy and back: a descriptor's strides are not part of what Triton
    specializes a kernel on (Triton's descriptors and Gluon's alike), only its dtype, box and layout."""
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import native_specialize_impl
    g = _template("gemm")
    b = torch.randn(64, 5000).to(torch.bfloat16)
    copy = g.padded_rows(b)
    assert copy.stride() == (5056, 1)
    box = [64, 256]
    made = [g._descriptors(t, t, t, [box] * 3) for t in (b, copy)]
    if g.gluon is not None:
        made += [g._descriptors(t, t, t, [box] * 3, gluon_layouts=True) for t in (b, copy)]
    kinds = [native_specialize_impl(BaseBackend, descriptors[1], False, True, True) for descriptors in made]
    assert kinds[0] == kinds[1] and kinds[-2] == kinds[-1]
    assert [list(descriptors[1].strides) for descriptors in made[:2]] == [[5000, 1], [5056, 1]]


def test_gemm_autotune_times_its_pick_against_the_pick_on_bs_lined_copy_made_once(monkeypatch):
    """Where B's rows are off lines: the candidates first, then the pick against itself with B_KEEP, whose timed calls
    read a lined copy made once, when prepared. Not where B's rows are lined, B is an inference tensor, keeping is
    off, or the pick runs the pointer kernel; kept only where it is faster."""
    g = _template("gemm")
    monkeypatch.setattr(g, "_num_sms", lambda device: 132)
    lined_share = [0.8]  # a launch's time on B's rows lined, as a share of its time on B's rows off lines
    gpu = _FakeGpu(lambda name, launched: {"CONFIG": 1.0, "other": 0.9, "pointer": 0.5}[name.split()[0]] * (
        lined_share[0] if name.endswith("lined") else 1.0))
    # fp32 rows of 32 elements are whole lines
    name = lambda cfg, b: ("pointer" if not cfg["USE_TMA"] else "other" if cfg["GROUP_M"] == 4 else "CONFIG") + (
        " lined" if b.stride(0) % 32 == 0 else "")
    candidates = [dict(g.CONFIG), {**g.CONFIG, "GROUP_M": 4}]
    run_on = []

    def run(a, b, c, cfg):
        run_on.append((name(cfg, b), cfg.get("B_KEEP", 0)))
        gpu.launch(name(cfg, b))
        return [("launch of", name(cfg, b))], cfg

    copies = []
    real = g.padded_rows
    monkeypatch.setattr(g, "padded_rows", lambda t: copies.append(t) or real(t))
    monkeypatch.setattr(g, "_candidates", lambda a, b, c: candidates)
    monkeypatch.setattr(g, "_run", run)
    monkeypatch.setattr(g, "_replay", lambda launches, a, b, c: gpu.launch(launches[0][1]))
    monkeypatch.setattr(g, "_l2_clear", lambda: gpu.clear)
    monkeypatch.setattr(g, "_CudaClock", gpu)

    def tune(b):
        monkeypatch.setattr(g, "_TUNED", {})
        copies.clear(), run_on.clear()
        return g._autotune(torch.empty(64, 40), b, torch.empty(64, b.shape[1]))

    b = torch.empty(40, 100)  # 400-byte rows
    assert tune(b) == {**candidates[1], "B_KEEP": 1}
    assert run_on == [("CONFIG", 0), ("other", 0), ("other", 0), ("other lined", 1)] and copies == [b]
    assert gpu.launched.count("other lined") == 1 + 5 + g.CALLS  # timed on the copy, which was made once
    with torch.inference_mode():
        inference_b = torch.empty(40, 100)
    for not_kept in (torch.empty(40, 128), torch.empty(40, 160)[:, :100], inference_b):
        assert tune(not_kept) == candidates[1] and copies == [] and len(run_on) == 2  # the candidates alone
    monkeypatch.setattr(g, "KEEP_LINED_B", False)
    assert tune(b) == candidates[1] and copies == [] and len(run_on) == 2
    monkeypatch.setattr(g, "KEEP_LINED_B", True)
    candidates[1]["USE_TMA"] = 0  # the pick runs the pointer kernel: nothing to keep for
    assert tune(b) == candidates[1] and copies == [] and len(run_on) == 2
    candidates[1]["USE_TMA"] = 1
    lined_share[0] = 1.05
    assert tune(b) == candidates[1] and copies == [b]  # timed, and slower on the copy: not kept


@pytest.mark.parametrize("block_m, block_n, stages, programs", [(64, 128, 8, 6), (64, 64, 12, 12), (64, 32, 16, 24),
                                                                 (128, 128, 6, 4), (128, 192, 4, 4), (128, 160, 5, 4)])
def test_gemm_gluon_launch_covers_c_in_one_program_a_tile(monkeypatch, record_launches, block_m, block_n, stages,
                                                          programs):
    g = _template("gemm")
    if g.gluon is None:
        pytest.skip("this Triton has no Gluon")
    launched = record_launches(g, "gemm_gluon_kernel", lambda grid, args, options: (
        grid, [d and d.block_shape for d in args[:5]], args[5:], options), launch=False)
    monkeypatch.setattr(g, "_gluon_runs", lambda a, b, c, cfg: True)
    a, b = torch.randn(130, 72).half(), torch.randn(72, 256).half()
    config = {"GLUON": 1, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": 64, "num_stages": stages, "PERSISTENT": 0}
    g.gemm(a, b, config=config)
    # 130 / block_m tile-rows (the last 2 rows deep: TMA clips it) x 256 / block_n tile-columns (on 192 the second
    # tile's second box, columns 320-383, lies wholly past N); A and C in boxes of a consumer's 64 rows, whatever the
    # tile's height; B and C in a first box of a power of two and a second of the rest (none where that is 0)
    first = 1 << (block_n.bit_length() - 1)
    second = block_n - first
    seconds = [[64, second], [64, second]] if second else [None, None]
    assert launched == [((programs, 1, 1), [[64, 64], [64, first], [64, first]] + seconds,
                         (130, 256, 72, block_m, first, 64, stages, 24, 240, second, 0),
                         {"num_warps": 4, "maxnreg": 168 if block_m == 128 else 128})]
    assert g.last_config == {**g.CONFIG, **config}
    launched.clear()
    c = g.gemm(a.float(), b.float(), config={**config, "GLUON": 0})
    assert launched == [] and g.last_config["GLUON"] == 0  # a Triton kernel, here in the interpreter
    assert g.last_config["BLOCK_N"] == first  # its tiles a power of two wide: a wide tile's first box
    assert compare(c, a.float() @ b.float(), NORM["fp32"]) is None


@pytest.mark.parametrize("block_m, block_n, programs, persistent", [(128, 192, 4, 1), (128, 128, 4, 1),
                                                                      (64, 128, 24, 0)])
def test_gemm_persistent_gluon_launch_walks_c_on_persistent_programs(monkeypatch, record_launches, block_m, block_n,
                                                                     programs, persistent):
    """PERSISTENT on a 128-row Gluon tile (two consumers): persistent_programs(tiles, SMs) programs (4 SMs here, the
    interpreter's device), the kernel told so; a 64-row tile (one consumer) runs one tile a program whatever the
    config says. 130 x 1000: 2 x 6 = 12 tiles of 128x192 (3 waves: 4 programs), 2 x 8 = 16 of 128x128 (4 waves: 4),
    3 x 8 = 24 of 64x128."""
    g = _template("gemm")
    if g.gluon is None:
        pytest.skip("this Triton has no Gluon")
    launched = record_launches(g, "gemm_gluon_kernel", lambda grid, args, options: (grid, args[-1]), launch=False)
    monkeypatch.setattr(g, "_gluon_runs", lambda a, b, c, cfg: True)
    a, b = torch.randn(130, 72).half(), torch.randn(72, 1000).half()
    g.gemm(a, b, config={"GLUON": 1, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": 64, "num_stages": 4,
                         "PERSISTENT": 1})
    assert launched == [((programs, 1, 1), persistent)]


def test_gemm_gluon_kernel_that_does_not_compile_falls_back_once_and_says_so(monkeypatch, uncompilable):
    g = _template("gemm")
    if g.gluon is None:
        pytest.skip("this Triton has no Gluon")
    monkeypatch.setattr(g, "gemm_gluon_kernel", uncompilable)
    monkeypatch.setattr(g, "_gluon_runs", lambda a, b, c, cfg: a.device not in g._GLUON_FAILED)
    a, b = torch.randn(40, 32).half(), torch.randn(32, 48).half()
    config = {"GLUON": 1, "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 8}
    with pytest.warns(UserWarning, match=r"gemm: the Gluon kernel does not run with Triton .*error: no such op"):
        c = g.gemm(a, b, config=config)
    assert compare(c.float(), g.reference(a, b), NORM["fp16"]) is None
    assert g.last_config["GLUON"] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        g.gemm(a, b, config=config)
    assert len(uncompilable.attempts) == 1  # not tried again on this device


class _Tensor:
    """What _gluon_runs reads of q."""

    def __init__(self, S=1024, D=128, dtype=torch.bfloat16, device="cuda"):
        self.shape, self.dtype, self.device = (2, 4, S, D), dtype, torch.device(device)


def test_attention_takes_the_gluon_kernel_on_hopper_16bit_tiled_shapes(monkeypatch):
    fa = _template("flash-attention")
    if fa.gluon is None:
        pytest.skip("this Triton has no Gluon")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.delenv("TRITON_INTERPRET")
    assert fa._gluon_runs(_Tensor()) and fa._gluon_runs(_Tensor(S=128, D=64, dtype=torch.float16))
    assert fa._gluon_runs(_Tensor(S=1000)) and fa._gluon_runs(_Tensor(S=1))  # a ragged S: the masked last blocks
    assert [fa._ragged(S) for S in (1, 127, 128, 1000, 1088, 1024, 3000)] == [True, True, False, True, True, False,
                                                                               True]
    assert not fa._gluon_runs(_Tensor(D=32))
    assert not fa._gluon_runs(_Tensor(dtype=torch.float32))
    assert not fa._gluon_runs(_Tensor(device="cpu"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not fa._gluon_runs(_Tensor())  # Gluon has no interpreter
    monkeypatch.delenv("TRITON_INTERPRET")
    for capability in [(8, 0), (10, 0)]:  # wgmma is Hopper's alone
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, c=capability: c)
        fa._hopper.cache_clear()  # asked once a device: another GPU here
        assert not fa._gluon_runs(_Tensor())
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.version, "hip", "6.2")
    fa._hopper.cache_clear()
    assert not fa._gluon_runs(_Tensor())
    monkeypatch.setattr(torch.version, "hip", None)
    fa._hopper.cache_clear()
    fa._GLUON_FAILED[torch.device("cuda")] = "RuntimeError: no such op"
    assert not fa._gluon_runs(_Tensor())  # failed here before: not tried again


def test_attention_asks_torch_for_the_gpu_once_a_device(monkeypatch):
    """The Hopper check and the SM count are host time on every call (issue 52's small shapes): asked of
    torch once a device, each device on its own."""
    fa = _template("flash-attention")
    asked = []
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_capability",
                        lambda device=None: asked.append(("capability", device)) or ((9, 0) if device.index == 0 else (8, 0)))

    class Properties:
        def __init__(self, device):
            self.multi_processor_count = 132 if device.index == 0 else 108

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: asked.append(("SMs", device)) or Properties(device))
    hopper, ampere = torch.device("cuda", 0), torch.device("cuda", 1)
    for _ in range(3):
        assert (fa._hopper(hopper), fa._hopper(ampere), fa._num_sms(hopper), fa._num_sms(ampere)) == (True, False, 132, 108)
    assert asked == [("capability", hopper), ("capability", ampere), ("SMs", hopper), ("SMs", ampere)]


def _count_default_layouts(module, monkeypatch):
    """(made, default_for): a list that NVMMASharedLayout.get_default_for appends (box, dtype) to on each call
    from now on, and the function itself, to make the expected layouts with uncounted."""
    made = []
    default_for = module.gl.NVMMASharedLayout.get_default_for
    monkeypatch.setattr(module.gl.NVMMASharedLayout, "get_default_for",
                        staticmethod(lambda box, dtype: made.append((tuple(box), dtype)) or default_for(box, dtype)))
    return made, default_for


def test_attention_gluon_descriptors_carry_the_default_layout_made_once_a_box(monkeypatch):
    """The four descriptors' shared-memory layouts equal those made afresh (wgmma's default for the box and
    dtype), and a second call builds none: made on every call they were most of a call's host time."""
    fa = _template("flash-attention")
    if fa.gluon is None:
        pytest.skip("this Triton has no Gluon")
    made, default_for = _count_default_layouts(fa, monkeypatch)
    for dtype, gl_dtype in ((torch.float16, fa.gl.float16), (torch.bfloat16, fa.gl.bfloat16)):
        for D in (64, 128):
            q, k, v, o = (torch.empty(2, 3, 256, D, dtype=dtype) for _ in range(4))
            for _ in range(3):
                descs = fa._gluon_descriptors(q, k, v, o)
            boxes = [[64, D], [128, D], [128, D], [64, D]]
            assert [d.block_shape for d in descs] == boxes
            assert [d.layout for d in descs] == [default_for(box, gl_dtype) for box in boxes]
            assert [(d.base.data_ptr(), d.shape, d.strides) for d in descs] == [
                (t.data_ptr(), [2 * 3 * 256, D], [D, 1]) for t in (q, k, v, o)]
    # two boxes a head dim and dtype, each made once however many calls
    assert sorted(made, key=str) == sorted([((rows, D), gl_dtype) for rows in (64, 128) for D in (64, 128)
                                            for gl_dtype in (fa.gl.float16, fa.gl.bfloat16)], key=str)


def test_attention_cdiv_is_tritons():
    fa = _template("flash-attention")
    assert [fa._cdiv(a, b) for a in range(0, 400, 7) for b in (64, 128, 192)] == [
        triton.cdiv(a, b) for a in range(0, 400, 7) for b in (64, 128, 192)]


@pytest.mark.parametrize("causal, config, buffers", [(False, {}, 2), (True, {"NUM_BUFFERS": 3}, 3)])
@pytest.mark.parametrize("S, blocks", [(256, 2), (200, 2), (129, 2), (1, 1)])
def test_gluon_launch_covers_the_heads_in_128_row_blocks(monkeypatch, record_launches, causal, config, buffers, S,
                                                         blocks):
    """Any S: a ragged one (not a multiple of 128) in as many blocks as cover it, RAGGED (the last blocks masked,
    the output also given as a pointer for the last query block's masked store)."""
    fa = _template("flash-attention")
    if fa.gluon is None:
        pytest.skip("this Triton has no Gluon")
    # (q, k, v, o descriptors, o, S, qk_scale)
    launched = record_launches(fa, "_attn_fwd_ws", lambda grid, args, kw: (
        grid, [d.block_shape for d in args[:4]], args[4], args[5], args[6], kw["NUM_BUFFERS"], kw["CAUSAL"],
        kw["RAGGED"], kw["num_warps"]), launch=False)
    monkeypatch.setattr(fa, "_gluon_runs", lambda q: True)
    q, k, v = (torch.randn(1, 3, S, 64).half() for _ in range(3))
    o = torch.empty_like(q)
    fa.flash_attention(q, k, v, causal=causal, config=config, out=o)
    scale = fa.LOG2E / 8  # log2(e) / sqrt(D)
    assert launched == [((blocks, 3), [[64, 64], [128, 64], [128, 64], [64, 64]], o, S, scale, buffers, causal,
                         S % 128 != 0, 4)]
    assert fa.last_config["GLUON"] == 1
    launched.clear()
    o = fa.flash_attention(q.float(), k.float(), v.float(), causal=causal, config={**config, "GLUON": 0})
    assert launched == [] and fa.last_config["GLUON"] == 0  # the Triton kernel, here in the interpreter
    assert compare(o, fa.reference(q, k, v, causal), NORM["fp32"]) is None


@pytest.mark.parametrize("causal", [False, True])
def test_persistent_gluon_launch_walks_the_tiles_on_at_most_one_program_an_sm(monkeypatch, record_launches, causal):
    """GLUON 2: a grid of at most SMs programs, each given its row of the schedule (its tile count,
    its tiles, padding), on PERSISTENT_BUFFERS stages whatever NUM_BUFFERS says: 4 at head dim 64, 2 at 128
    (a third does not fit beside two Q tiles a consumer and O's staging tiles)."""
    fa = _template("flash-attention")
    if fa.gluon is None:
        pytest.skip("this Triton has no Gluon")
    # (q, k, v, o descriptors, o, S, the schedule, its row width, qk_scale)
    launched = record_launches(fa, "_attn_fwd_persist", lambda grid, args, kw: (
        grid, [d.block_shape for d in args[:4]], args[5], args[6].tolist(), args[7], kw["NUM_BUFFERS"], kw["CAUSAL"],
        kw["RAGGED"], args[4].shape), launch=False)

    class Properties:
        multi_processor_count = 4

    monkeypatch.setattr(fa, "_gluon_runs", lambda q: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Properties())
    q, k, v = (torch.randn(1, 3, 256, 64).half() for _ in range(3))
    fa.flash_attention(q, k, v, causal=causal, config={"GLUON": 2, "NUM_BUFFERS": 3})
    # 6 tiles (2 a head), 4 SMs. Causal: tiles 0, 2, 4 hold 2 key blocks (cost 3), 1, 3, 5 one (cost 2);
    # dealt heaviest first, programs 0-2 would take the heavy ones and program 0 would end at 5; each
    # head's pair on a program of its own ends there too, on 3 programs: the pairs
    programs, rows = ((3, [[2, 0, 1, 0], [2, 2, 3, 0], [2, 4, 5, 0]]) if causal else
                      (4, [[2, 0, 4, 0], [2, 1, 5, 0], [1, 2, 0, 0], [1, 3, 0, 0]]))
    assert launched == [((programs,), [[64, 64], [128, 64], [128, 64], [64, 64]], 256, rows, 4, 4,
                         causal, False, q.shape)]
    assert fa.last_config["GLUON"] == 2 and fa.last_config["NUM_BUFFERS"] == 4
    launched.clear()
    q, k, v = (torch.randn(1, 3, 256, 128).half() for _ in range(3))
    fa.flash_attention(q, k, v, causal=causal, config={"GLUON": 2, "NUM_BUFFERS": 3})
    assert [(blocks, buffers) for _, blocks, _, _, _, buffers, *_ in launched] == [
        ([[64, 128], [128, 128], [128, 128], [64, 128]], 2)]
    assert fa.last_config["GLUON"] == 2 and fa.last_config["NUM_BUFFERS"] == 2
    launched.clear()
    q, k, v = (torch.randn(1, 1, 256, 64).half() for _ in range(3))
    fa.flash_attention(q, k, v, causal=causal, config={"GLUON": 2})
    assert launched[0][0] == (2,)  # 2 tiles: a program each
    launched.clear()
    # a ragged S: the query blocks that cover it (here as at 256: 2 a head), masked (RAGGED)
    q, k, v = (torch.randn(1, 3, 200, 64).half() for _ in range(3))
    fa.flash_attention(q, k, v, causal=causal, config={"GLUON": 2, "NUM_BUFFERS": 3})
    assert launched == [((programs,), [[64, 64], [128, 64], [128, 64], [64, 64]], 200, rows, 4, 4,
                         causal, True, q.shape)]
    assert fa.last_config["GLUON"] == 2


def test_persistent_gluon_launch_takes_its_q_tiles_a_consumer_from_persistent_q_slots(monkeypatch, record_launches):
    """Q_SLOTS, the persistent kernel's Q tiles a consumer: PERSISTENT_Q_SLOTS (2; 1 is the device's switch to
    main's one-slot protocol on the Q loader of its own)."""
    fa = _template("flash-attention")
    if fa.gluon is None:
        pytest.skip("this Triton has no Gluon")
    launched = record_launches(fa, "_attn_fwd_persist", lambda grid, args, kw: kw["Q_SLOTS"], launch=False)

    class Properties:
        multi_processor_count = 4

    monkeypatch.setattr(fa, "_gluon_runs", lambda q: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Properties())
    q, k, v = (torch.randn(1, 2, 256, 64).half() for _ in range(3))
    fa.flash_attention(q, k, v, causal=True, config={"GLUON": 2})
    monkeypatch.setattr(fa, "PERSISTENT_Q_SLOTS", 1)
    fa.flash_attention(q, k, v, causal=True, config={"GLUON": 2})
    assert launched == [2, 1]


@pytest.mark.parametrize("gluon, kernel", [(3, "_attn_fwd_ws3")])
def test_a_ragged_S_runs_the_masked_gluon_kernel_whatever_gluon_asks(monkeypatch, record_launches, gluon, kernel):
    """The three-consumer kernel's tiles would cross into the next head unmasked: at a ragged S GLUON 3 runs
    _attn_fwd_ws, and autotuning does not time it there (it would time GLUON 1 again)."""
    fa = _template("flash-attention")
    if fa.gluon is None:
        pytest.skip("this Triton has no Gluon")

    class Properties:
        multi_processor_count = 4

    ws = record_launches(fa, "_attn_fwd_ws", lambda grid, args, kw: grid, launch=False)
    other = record_launches(fa, kernel, lambda grid, args, kw: grid, launch=False)
    monkeypatch.setattr(fa, "_gluon_runs", lambda q: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Properties())
    for S, ragged in [(200, True), (256, False)]:
        q, k, v = (torch.randn(1, 3, S, 64).half() for _ in range(3))
        fa.flash_attention(q, k, v, config={"GLUON": gluon})
        assert (len(ws), len(other)) == ((1, 0) if ragged else (0, 1)) and fa.last_config["GLUON"] == (
            1 if ragged else gluon)
        ws.clear(), other.clear()
    timed = []
    monkeypatch.setattr(fa, "_fastest", lambda run, candidates: timed.append(candidates) or candidates[0])
    for S in (200, 256):
        fa._autotune(*(torch.randn(1, 3, S, 64).half() for _ in range(3)), torch.empty(1, 3, S, 64).half(), False)
    ragged_gluons, even_gluons = ({c["GLUON"] for c in candidates} for candidates in timed)
    assert ragged_gluons == {0, 1, 2} and even_gluons == {0, 1, 2, 3}


def _causal_timeline(dealt, n_m):
    """Each program's (start, end, head) of every tile, running its row back to back, a causal tile
    costing its key blocks and one more (persist_schedule's model)."""
    timeline = []
    for row in dealt:
        spans, start = [], 0
        for t in row:
            cost = n_m - t % n_m + 1
            spans.append((start, start + cost, t // n_m))
            start += cost
        timeline.append(spans)
    return timeline


@pytest.mark.parametrize("S, heads", [(1024, 512), (2048, 256), (4096, 128), (8192, 64), (16384, 32)])
def test_persistent_schedule_deals_every_causal_tile_once_and_evenly(S, heads):
    """The test's causal sweep shapes at head dim 64 on the H200's 132 SMs: every tile once; the last
    program to finish within 1% of the mean (dealt in turn, wave after wave, as before: 3.1% over at
    every one); and at any time the tiles running span about two and a half waves' worth of heads or
    fewer (a wave of 132 tiles covers 132 / n_m heads), so that their K and V share the L2."""
    fa = _template("flash-attention")
    n_m = S // 128
    dealt = fa.persist_schedule(n_m, heads, 132, True)
    assert len(dealt) == 132 and sorted(t for row in dealt for t in row) == list(range(n_m * heads))
    timeline = _causal_timeline(dealt, n_m)
    finish = [spans[-1][1] for spans in timeline]
    assert max(finish) / (sum(finish) / 132) < 1.01
    for i in range(1, 100):
        now = max(finish) * i / 100
        running = {head for spans in timeline for start, stop, head in spans if start <= now < stop}
        assert len(running) <= 5 * 132 // n_m + 2, (now, sorted(running))


@pytest.mark.parametrize("B, H, S", [(4, 16, 1024), (8, 16, 1024), (16, 16, 512), (8, 16, 512), (4, 32, 1000)])
def test_persistent_schedule_pairs_each_heads_heavy_and_light_tiles_where_tiles_are_few(B, H, S):
    """Causal S 512-1024 at a few hundred tiles (issue 52's shapes, where flash-attention read under SDPA):
    every program runs pairs of one head's tiles whose key blocks add to n_m + 1, its busiest program no
    busier than heaviest-first's, and at any time the tiles running span two waves' worth of heads or
    fewer (heaviest-first's one group spans every head)."""
    fa = _template("flash-attention")
    n_m, heads = -(-S // 128), B * H
    dealt = fa.persist_schedule(n_m, heads, 132, True)
    assert sorted(t for row in dealt for t in row) == list(range(n_m * heads))
    for row in dealt:
        assert len(row) % 2 == 0
        for heavy, light in zip(row[::2], row[1::2]):
            assert heavy // n_m == light // n_m and (n_m - heavy % n_m) + (n_m - light % n_m) == n_m + 1
    timeline = _causal_timeline(dealt, n_m)
    finish = [spans[-1][1] for spans in timeline]
    groups = fa._deal(fa._heaviest_first_in_groups(n_m, heads, 132), 132)
    assert max(finish) <= max(spans[-1][1] for spans in _causal_timeline(groups, n_m))
    for i in range(1, 100):
        now = max(finish) * i / 100
        running = {head for spans in timeline for start, stop, head in spans if start <= now < stop}
        assert len(running) <= 2 * 132 // n_m + 2, (now, sorted(running))


def test_persistent_schedule_pairs_an_odd_heads_middle_tile_alone_after_every_pair():
    fa = _template("flash-attention")
    assert fa._head_pairs(3, 2) == [([0, 2], 6), ([3, 5], 6), ([1], 3), ([4], 3)]


def test_persistent_schedule_in_turn_without_causal_and_one_tile_a_program_when_few():
    fa = _template("flash-attention")
    assert fa.persist_schedule(4, 3, 5, False) == [[0, 5, 10], [1, 6, 11], [2, 7], [3, 8], [4, 9]]
    assert fa.persist_schedule(8, 1, 132, True) == [[t] for t in range(8)]  # 8 tiles: 8 programs


@pytest.mark.parametrize("causal", [False, True])
def test_three_consumer_launch_covers_head_dim_64_in_192_row_tiles(monkeypatch, causal):
    """GLUON 3: a grid of ceil(S / 192) tiles a head (S 256: the second tile holds 64 rows), Q and O in
    64-row blocks, the three consumers' register budget; other head dims run GLUON 1, and AUTOTUNE
    times GLUON 3 at head dim 64 only."""
    fa = _template("flash-attention")
    if fa.gluon is None:
        pytest.skip("this Triton has no Gluon")
    launched = []

    def recorder(name):
        class Recorder:
            def __getitem__(self, grid):
                def launch(q_desc, k_desc, v_desc, o_desc, *scalars, **kw):  # _attn_fwd_ws: o, S, qk_scale
                    launched.append((name, grid, [d.block_shape for d in (q_desc, k_desc, v_desc, o_desc)],
                                     kw["BLOCK_M"], kw["NUM_BUFFERS"], kw["CONSUMER_REGS"], kw["CAUSAL"]))
                return launch
        return Recorder()

    monkeypatch.setattr(fa, "_attn_fwd_ws3", recorder("ws3"))
    monkeypatch.setattr(fa, "_attn_fwd_ws", recorder("ws"))
    monkeypatch.setattr(fa, "_gluon_runs", lambda q: True)
    q, k, v = (torch.randn(2, 3, 256, 64).half() for _ in range(3))
    fa.flash_attention(q, k, v, causal=causal, config={"GLUON": 3, "NUM_BUFFERS": 3})
    assert launched == [("ws3", (2, 6), [[64, 64], [128, 64], [128, 64], [64, 64]], 192, 2, 160, causal)]
    assert fa.last_config["GLUON"] == 3 and fa.last_config["BLOCK_M"] == 192 and fa.last_config["NUM_BUFFERS"] == 2
    launched.clear()
    q, k, v = (torch.randn(1, 2, 384, 128).half() for _ in range(3))
    fa.flash_attention(q, k, v, causal=causal, config={"GLUON": 3})
    assert launched == [("ws", (3, 2), [[64, 128], [128, 128], [128, 128], [64, 128]], 128, 2, 240, causal)]
    assert fa.last_config["GLUON"] == 1

    timed = []
    monkeypatch.setattr(fa, "_fastest", lambda run, candidates: timed.append([c["GLUON"] for c in candidates]) or {})
    for D in (64, 128):
        fa._TUNED.clear()
        q = torch.randn(1, 2, 256, D).half()
        fa._autotune(q, q, q, q, causal)
    assert 3 in timed[0] and 3 not in timed[1]


def test_a_gluon_kernel_that_does_not_compile_falls_back_once_and_says_so(monkeypatch, uncompilable):
    fa = _template("flash-attention")
    if fa.gluon is None:
        pytest.skip("this Triton has no Gluon")
    monkeypatch.setattr(fa, "_attn_fwd_ws", uncompilable)
    monkeypatch.setattr(fa, "_gluon_runs", lambda q: q.device not in fa._GLUON_FAILED)
    q, k, v = (torch.randn(1, 2, 128, 16).half() for _ in range(3))
    with pytest.warns(UserWarning, match=r"Gluon kernel does not run with Triton .*RuntimeError: error: no such op"):
        o = fa.flash_attention(q, k, v, causal=True)
    assert compare(o.float(), fa.reference(q, k, v, True), NORM["fp16"]) is None
    assert fa.last_config["GLUON"] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        fa.flash_attention(q, k, v)
    assert len(uncompilable.attempts) == 1  # not tried again on this device


# Compiles a template's Gluon kernels for sm_90 as its launcher would launch them and prints, a line a case,
# the compiled kernel's shared memory and cuobjdump's resource usage. Run in a process of its own: Triton
# decides at import whether its functions are the interpreter's, and these tests import it under it. The
# template's path is argv[1]; the cases follow.
_COMPILE_FOR_SM90 = """
import importlib.util, json, os, subprocess, sys, tempfile
import torch, triton
from triton.backends.compiler import BaseBackend, GPUTarget
from triton.compiler import ASTSource
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import native_specialize_impl

sys.path.insert(0, os.environ["KGIT_TESTS_KERNELS"])  # sass_defs
spec = importlib.util.spec_from_file_location("template", sys.argv[1])
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
GL = {"bf16": (torch.bfloat16, t.gl.bfloat16), "fp16": (torch.float16, t.gl.float16)}


def desc(tensor, block, gl_dtype):
    return t.GluonDescriptor(tensor, list(tensor.shape), list(tensor.stride()), block,
                             t.gl.NVMMASharedLayout.get_default_for(block, gl_dtype))


def compile_triton(fn, args, consts, options):
    # a @triton.jit kernel compiled for sm_90 (args: each argument that is not a constexpr, by name): the
    # compiled kernel and cuobjdump's resource usage
    signature, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            continue
        signature[name], specialization = native_specialize_impl(BaseBackend, args[name], False, True, True)
        if specialization == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    signature.update({name: "constexpr" for name in consts})
    kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                            target=GPUTarget("cuda", 90, 64), options=options)
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        usage = subprocess.run([cuobjdump, "-res-usage", cubin.name], capture_output=True, text=True, check=True)
    return kernel, usage.stdout


def compile_and_report(case, fn, args, consts, options, ptx_facts=None):
    signature, attrs = {}, {}
    for i, (name, arg) in enumerate(zip(fn.arg_names, args)):
        signature[name], specialization = native_specialize_impl(BaseBackend, arg, False, True, True)
        if specialization == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    signature.update({name: "constexpr" for name in consts})
    src = GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        usage = subprocess.run([cuobjdump, "-res-usage", cubin.name], capture_output=True, text=True, check=True)
        sass = subprocess.run([cuobjdump, "-sass", cubin.name], capture_output=True, text=True, check=True).stdout
    facts = ptx_facts(kernel.asm["ptx"]) if ptx_facts else {}
    # wgmma descriptors a register carried from a block that does not dominate the wgmma (sass_defs: fa57's fault)
    from sass_defs import descriptor_reads_not_dominated
    stale = [hex(address) for address, _, _ in descriptor_reads_not_dominated(sass)]
    print(json.dumps({"case": case, "shared": kernel.metadata.shared, "usage": usage.stdout,
                      "stale_descriptors": stale, **facts}))
"""

_ATTENTION_CASES = """
B, H, S = 1, 2, 1024
for which, dtype, causal, D, buffers in [("ws", "bf16", False, 128, 2), ("ws", "fp16", True, 64, 3),
                                         ("ws ragged", "bf16", False, 128, 2), ("ws ragged", "fp16", True, 64, 2),
                                         ("persist", "bf16", True, 128, 2), ("persist", "fp16", False, 64, 4),
                                         ("persist", "fp16", True, 64, 4), ("persist 1-slot", "bf16", True, 128, 2),
                                         ("persist ragged", "bf16", True, 128, 2),
                                         ("persist ragged", "fp16", False, 64, 4),
                                         ("persist ragged", "fp16", True, 64, 4),
                                         ("ws3", "bf16", False, 64, 2), ("ws3", "fp16", True, 64, 2)]:
    torch_dtype, gl_dtype = GL[dtype]
    descs = [desc(torch.empty(B * H * S, D, dtype=torch_dtype), [rows, D], gl_dtype) for rows in (64, 128, 128, 64)]
    consts = dict(BLOCK_M=128, BLOCK_N=128, NUM_BUFFERS=buffers, CAUSAL=causal, LOADER_REGS=t.WS_LOADER_REGS,
                  CONSUMER_REGS=t.WS_CONSUMER_REGS)
    sched = torch.zeros(132, 34, dtype=torch.int32)
    out = torch.empty(B * H * S, D, dtype=torch_dtype)
    fn, scalars = {"ws": (t._attn_fwd_ws, [out, S, 0.1]), "ws ragged": (t._attn_fwd_ws, [out, S - 24, 0.1]),
                   "persist": (t._attn_fwd_persist, [out, S, sched, 34, 0.1]),
                   "persist ragged": (t._attn_fwd_persist, [out, S - 24, sched, 34, 0.1]),
                   "persist 1-slot": (t._attn_fwd_persist, [out, S, sched, 34, 0.1]),
                   "ws3": (t._attn_fwd_ws3, [S, 0.1])}[which]
    if fn is not t._attn_fwd_ws3:
        consts["RAGGED"] = which.endswith("ragged")
    if fn is t._attn_fwd_persist:
        consts["Q_SLOTS"] = 1 if which == "persist 1-slot" else t.PERSISTENT_Q_SLOTS
    if which == "ws3":
        consts.update(BLOCK_M=t.WS3_BLOCK_M, CONSUMER_REGS=t.WS3_CONSUMER_REGS)
    compile_and_report([which, dtype, causal, D, buffers], fn, descs + scalars, consts, {"num_warps": 4})
"""

_GEMM_CASES = """
# SMALL_OUTPUT_CONFIGS[0]'s 64x128 tile, the narrower ones gluon_tile picks at M=128 N=4096 and at two ragged
# shapes (boxes sticking out of M and N), the 128x128 two-consumer tile it picks at M=512 N=4096 and at a
# ragged M of 3 tile-rows, and the wide tiles on the persistent grid: the 128x192 wide_tile picks at 2048x4608x3584
# and 384x14336x4096, and 128x160 at 2048x5000x4096 (its second box of 32 columns partly past N; no longer offered)
for dtype, (M, N, K) in [("bf16", (1024, 1024, 1024)), ("fp16", (1000, 3000, 1000)), ("bf16", (128, 4096, 4096)),
                         ("fp16", (60, 3000, 1000)), ("bf16", (100, 3000, 1000)), ("fp16", (512, 4096, 4096)),
                         ("bf16", (300, 4096, 1000)), ("fp16", (2048, 4608, 3584)), ("bf16", (2048, 5000, 4096))]:
    torch_dtype, gl_dtype = GL[dtype]
    cfg = {**t.CONFIG, **t.SMALL_OUTPUT_CONFIGS[0]}
    if M < 1000:
        BM, BN = t.gluon_tile(M, N, 132)
        cfg.update(BLOCK_M=BM, BLOCK_N=BN, num_stages=t.gluon_stages(BM, BN, cfg["BLOCK_K"]))
    if M == 2048:
        cfg = t.wide_tile_config(t.wide_tile(M, N, K, 132) or (128, 160))
    BM, BN, BK = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    N1, N2 = t.gluon_widths(BN)
    descs = [desc(torch.empty(rows, cols, dtype=torch_dtype), box, gl_dtype) if box else None
             for (rows, cols), box in zip([(M, K), (K, N), (M, N), (K, N), (M, N)],
                                          [[64, BK], [BK, N1], [64, N1], N2 and [BK, N2], N2 and [64, N2]])]
    consts = dict(BLOCK_M=BM, BLOCK_N=N1, BLOCK_K=BK, NUM_STAGES=cfg["num_stages"], LOADER_REGS=t.GLUON_LOADER_REGS,
                  CONSUMER_REGS=t.GLUON_CONSUMER_REGS, BLOCK_N2=N2, PERSISTENT=cfg["PERSISTENT"])
    regs = t.GLUON_TWO_CONSUMER_LAUNCH_REGS if BM == 128 else t.GLUON_LAUNCH_REGS
    compile_and_report([dtype, M, N, K, BM, BN, cfg["num_stages"]], t.gemm_gluon_kernel, descs + [M, N, K], consts,
                       {"num_warps": 4, "maxnreg": regs})
"""

_MOE_CASES = """
# Mixtral's shape (HD 4096, I 14336) and a ragged one whose boxes stick out of I and HD, on CONFIG's two
# consumers and on streaming_config's one (Mixtral at 512 tokens: down 128 wide; DeepSeek-V2-Lite at 512 tokens:
# gate/up 64 wide on 8 stages, down 256) or two (DeepSeek-V2-Lite at 1024 tokens: 128-row blocks, gate/up 64 wide
# on 6 stages, down 256 on 4); PDL and PAIRS_ONLY 0 (Mixtral on CONFIG) and 1 (the layer's launches)
def ptx_facts(ptx):
    # where the grid dependency instructions sit among the loader's copies: the weights' boxes are 3-D
    # (w13's (E * 2, I, HD) view, w2's (E, HD, I)), A's 2-D
    # (global to shared: shared::cluster in Triton 3.6's PTX, shared::cta in 3.9's; the stores read shared::cta)
    import re
    first = lambda pattern: min([m.start() for m in re.finditer(pattern, ptx)], default=-1)
    return {"launch_dependents": ptx.count("griddepcontrol.launch_dependents"),
            "waits": ptx.count("griddepcontrol.wait"), "wait_at": first("griddepcontrol[.]wait"),
            "first_w_load": first(r"cp[.]async[.]bulk[.]tensor[.]3d[.]shared::(cluster|cta)[.]global"),
            "first_a_load": first(r"cp[.]async[.]bulk[.]tensor[.]2d[.]shared::(cluster|cta)[.]global"),
            "stores": len(re.findall(r"cp[.]async[.]bulk[.]tensor[.]2d[.]global[.]shared::cta", ptx)),
            "butterflies": ptx.count("shfl.sync.bfly")}


for dtype, (E, HD, I), rows, cfg, pdl in [
        ("bf16", (8, 4096, 14336), 72 * 128, {**t.CONFIG, "GLUON": 1}, 0),
        ("bf16", (8, 4096, 14336), 72 * 128, {**t.CONFIG, "GLUON": 1}, 1),
        ("fp16", (4, 200, 360), 6 * 128, {**t.CONFIG, "GLUON": 1}, 1),
        ("bf16", (8, 4096, 14336), 24 * 64, {**t.CONFIG, **t.streaming_config(512, 8, 2, 4096, 14336, 132)}, 1),
        ("fp16", (64, 2048, 1408), 112 * 64, {**t.CONFIG, **t.streaming_config(512, 64, 6, 2048, 1408, 132)}, 1),
        ("bf16", (64, 2048, 1408), 80 * 128, {**t.CONFIG, **t.streaming_config(1024, 64, 6, 2048, 1408, 132)}, 1)]:
    torch_dtype, gl_dtype = GL[dtype]
    bn, dbn, bk, consumers = cfg["BLOCK_N"], cfg["DOWN_BLOCK_N"], cfg["BLOCK_K"], cfg["BLOCK_M"] // 64
    x_sorted, h, y = (torch.empty(rows, cols, dtype=torch_dtype) for cols in (HD, I, HD))
    w13, w2 = torch.empty(E * 2, I, HD, dtype=torch_dtype), torch.empty(E, HD, I, dtype=torch_dtype)
    block_expert = torch.empty(rows // cfg["BLOCK_M"], dtype=torch.int32)
    expert_start = torch.empty(E + 1, dtype=torch.int32)
    expert_rows = torch.empty(E, dtype=torch.int32)
    tile_counter = torch.zeros(1, dtype=torch.int32)
    for swiglu, a, w, w_box, c, c_box, K, stages in [(1, x_sorted, w13, [2, bn, bk], h, [64, bn], HD, cfg["num_stages"]),
                                                     (0, h, w2, [1, dbn, bk], y, [64, dbn // 2], I,
                                                      cfg["DOWN_num_stages"])]:
        descs = [desc(a, [64, bk], gl_dtype), desc(w, w_box, gl_dtype), desc(c, c_box, gl_dtype),
                 desc(c, [8, c_box[1]], gl_dtype)]
        consts = dict(NUM_STAGES=stages, SWIGLU=swiglu, CONSUMERS=consumers, LOADER_REGS=t.GLUON_LOADER_REGS,
                      CONSUMER_REGS=t.GLUON_CONSUMER_REGS, PDL=pdl, PAIRS_ONLY=pdl, CLAIM=int(consumers == 2))
        compile_and_report([dtype, HD, I, swiglu, consumers, stages, w_box[0] * w_box[1], pdl], t.moe_gemm_gluon_kernel,
                           descs + [block_expert, expert_start, expert_rows, tile_counter, rows // cfg["BLOCK_M"], 7,
                                    K],
                           consts, {"num_warps": 4}, ptx_facts)
"""

# moe_gather_kernel and moe_sum_kernel (Triton) as the Gluon path launches them, PDL 0 and 1
_MOE_SMALL_CASES = """
x, rows = torch.empty(512, 2048, dtype=torch.bfloat16), torch.empty(4096, dtype=torch.int32)
for name, fn, args, consts in [
        ("gather", t.moe_gather_kernel, [x, x, rows, rows, 3072, 2048, 2048], dict(TOP_K=6, BLOCK_M=64, BLOCK_D=128,
                                                                                   PAD_ZEROS=0)),
        ("sum", t.moe_sum_kernel, [x, x, rows, torch.empty(4096), 2048, 2048], dict(TOP_K=6, K_PAD=8, BLOCK_D=1024,
                                                                                    SORTED=1)),
        ("route", t.moe_route_kernel, [torch.empty(512, 64), rows, rows, torch.empty(3072), rows, 512],
         dict(E=64, TOP_K=6, E_PAD=64, BLOCK_T=4)),
        ("align", t.moe_align_kernel, [rows, rows, rows, rows, rows, rows, rows, 3072, 64, 112],
         dict(E_PAD=64, BLOCK_M=64, BLOCK_P=1024, BLOCK_B=32))]:
    for pdl in (0, 1):
        signature, attrs = {}, {}
        for i, (arg_name, arg) in enumerate(zip(fn.arg_names, args)):
            signature[arg_name], specialization = native_specialize_impl(BaseBackend, arg, False, True, True)
            if specialization == "D":
                attrs[(i,)] = [["tt.divisibility", 16]]
        signature.update({k: "constexpr" for k in [*consts, "PDL"]})
        ptx = triton.compile(ASTSource(fn=fn, signature=signature, constexprs={**consts, "PDL": pdl}, attrs=attrs),
                             target=GPUTarget("cuda", 90, 64), options={"num_warps": 4}).asm["ptx"]
        print(json.dumps({"case": [name, pdl], "waits": ptx.count("griddepcontrol.wait"),
                          "launch_dependents": ptx.count("griddepcontrol.launch_dependents"),
                          "wait_at": ptx.find("griddepcontrol.wait"), "first_load": ptx.find("ld.global")}))
"""


_GEMM_TAIL_CASES = """
from triton.tools.tensor_descriptor import TensorDescriptor
M, N, K = 2048, 4608, 3584
fn = t.gemm_tma_kernel
for tail in [None] + t.TAIL_TILES:
    cfg = t.CONFIG if tail is None else t._parts(M, N, K, 132, {**t.CONFIG, "TAIL_BLOCK_M": tail[0],
                                                                 "TAIL_BLOCK_N": tail[1]})[1][2]
    BM, BN, BK = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    descs = [TensorDescriptor.from_tensor(torch.empty(rows, cols, dtype=torch.bfloat16), box)
             for (rows, cols), box in zip([(M, K), (K, N), (M, N)], [[BM, BK], [BK, BN], [BM, BN]])]
    consts = dict(BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=cfg["GROUP_M"], NUM_PROGRAMS=128, PERSISTENT=1,
                  FLATTEN=cfg["FLATTEN"], WARP_SPECIALIZE=0, EPILOGUE_SUBTILE=cfg["EPILOGUE_SUBTILE"], C_PTR=0)
    args = dict(zip(fn.arg_names, descs + [M, N, K] + [None] * 9 + [N]))
    kernel, usage = compile_triton(fn, args, consts, dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))
    print(json.dumps({"case": [BM, BN, cfg["num_warps"]], "shared": kernel.metadata.shared, "usage": usage}))
"""

# C_PTR: CONFIG's persistent kernel storing C through its pointer, as the launcher passes it (the tensor, its row
# stride in vectors); A and B by descriptors on lined copies (B_PAD's, at N=4100). The line also names the PTX's
# global stores.
_GEMM_POINTER_CASES = """
import re
from triton.tools.tensor_descriptor import TensorDescriptor
fn = t.gemm_tma_kernel
cfg = t.CONFIG
BM, BN, BK = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
for M, N, K, dtype in [(3000, 5000, 2000, torch.bfloat16), (2048, 5000, 4096, torch.float16),
                       (4096, 4100, 4096, torch.bfloat16)]:
    b, c = torch.empty(K, N, dtype=dtype), torch.empty(M, N, dtype=dtype)
    c_vec = t.row_vector(c)
    a_desc = TensorDescriptor.from_tensor(t.padded_rows(torch.empty(M, K, dtype=dtype)), [BM, BK])
    consts = dict(BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=cfg["GROUP_M"], NUM_PROGRAMS=120, PERSISTENT=1,
                  FLATTEN=cfg["FLATTEN"], WARP_SPECIALIZE=0, EPILOGUE_SUBTILE=0, C_PTR=c_vec)
    args = dict(a_desc=a_desc, b_desc=TensorDescriptor.from_tensor(t.padded_rows(b), [BK, BN]), c_desc=c, M=M, N=N,
                K=K, stride_cm=c.stride(0) // c_vec)
    kernel, usage = compile_triton(fn, args, consts, dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))
    ptx = kernel.asm["ptx"]
    stores = sorted(set(re.findall(r"st\\.global[.\\w]*", ptx)))
    print(json.dumps({"case": [M, N, K, str(dtype).split(".")[-1], c_vec], "shared": kernel.metadata.shared,
                      "usage": usage, "stores": stores}))
"""

def _compile_for_sm90(kernel, cases, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["KGIT_TESTS_KERNELS"] = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(ROOT, os.path.dirname(TESTS[kernel]), kernel_file(kernel))
    proc = subprocess.run([sys.executable, "-c", _COMPILE_FOR_SM90 + cases, path], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_gluon_kernel_compiles_for_hopper_without_spilling(tmp_path):
    """Gluon has no interpreter: compile _attn_fwd_ws, _attn_fwd_persist and _attn_fwd_ws3 for sm_90
    here (no GPU needed) and read their registers. The H200's Triton 3.6 gave the same 168 registers a thread and no
    stack."""
    fa = _template("flash-attention")
    if fa.gluon is None:
        pytest.skip("this Triton has no Gluon")
    cases = _compile_for_sm90("flash-attention", _ATTENTION_CASES, tmp_path)
    assert [c["case"] for c in cases] == [["ws", "bf16", False, 128, 2], ["ws", "fp16", True, 64, 3],
                                          ["ws ragged", "bf16", False, 128, 2], ["ws ragged", "fp16", True, 64, 2],
                                          ["persist", "bf16", True, 128, 2], ["persist", "fp16", False, 64, 4],
                                          ["persist", "fp16", True, 64, 4], ["persist 1-slot", "bf16", True, 128, 2],
                                          ["persist ragged", "bf16", True, 128, 2],
                                          ["persist ragged", "fp16", False, 64, 4],
                                          ["persist ragged", "fp16", True, 64, 4],
                                          ["ws3", "bf16", False, 64, 2], ["ws3", "fp16", True, 64, 2]]
    for case in cases:
        assert case["shared"] <= 232448, case  # the H100 / H200's shared memory a block
        # every wgmma's shared-memory descriptors from a block that dominates it: fa56's two Q slots, compiled by
        # Triton 3.6's ptxas, read Q's k-step descriptors in a tile's last block from the middle-block loop's
        # preheader, stale where a tile has 2 key blocks (every causal shape wrong on the H100; sass_defs.py)
        assert case["stale_descriptors"] == [], case
        which, _, _, D, buffers = case["case"]
        if which.startswith("persist"):
            # the launcher's stages (PERSISTENT_BUFFERS) and two Q tiles a consumer (_persist_q_loader's ring)
            # beside O's staging tiles: 229.8 KB at D 128
            assert buffers == fa.PERSISTENT_BUFFERS[D]
            q_tiles = 2 if which == "persist 1-slot" else 2 * fa.PERSISTENT_Q_SLOTS
            assert case["shared"] >= (2 * buffers * 128 + q_tiles * 64 + 2 * 64) * D * 2, case
        stack = int(re.search(r"STACK:(\d+) ", case["usage"]).group(1))
        # no spill; but Triton 3.9's compile of the causal three-consumer kernel keeps 72 bytes on the
        # stack, where the H200's 3.6 keeps none (the kernel runs at 160 registers a consumer thread)
        ws3_causal_elsewhere = case["case"][0] == "ws3" and case["case"][2] and not triton.__version__.startswith("3.6")
        assert stack <= (128 if ws3_causal_elsewhere else 0) and "LOCAL:0 " in case["usage"], case


def test_gemm_gluon_kernel_compiles_for_hopper_without_spilling(tmp_path):
    """The gemm template's Gluon kernel, its small-output candidates' configurations, for sm_90: no stack, no
    spill, within the H200's shared memory (8 stages of 64x64 + 64x128 and C's 64x128 tile: 212 KB; 12 of
    64x64 + 64x64: 200 KB; 16 of 64x64 + 64x32: 196 KB). On the H200's Triton 3.6: 128 registers at launch, 24
    for the loader and 232 for the consumer after setmaxnreg; on this CPU's Triton 3.9 128 at launch for all
    three tiles. The 128x128 tile on two consumers (6 stages of 2 x 64x64 + 64x128 and C's two 64x128 tiles: 224
    KB): 168 at launch, 240 for each consumer, on Triton 3.9 and 3.6. The wide tiles, two boxes of B and C (gemm61),
    on the persistent grid (gemm62): 128x192 on 4 stages 213 KB, 128x160 on 5 225 KB, 168 at launch on Triton 3.6
    (.stage/gemm62_sass.py; one tile a program the same)."""
    g = _template("gemm")
    if g.gluon is None:
        pytest.skip("this Triton has no Gluon")
    cases = _compile_for_sm90("gemm", _GEMM_CASES, tmp_path)
    assert [c["case"] for c in cases] == [["bf16", 1024, 1024, 1024, 64, 128, 8],
                                          ["fp16", 1000, 3000, 1000, 64, 128, 8],
                                          ["bf16", 128, 4096, 4096, 64, 64, 12], ["fp16", 60, 3000, 1000, 64, 32, 16],
                                          ["bf16", 100, 3000, 1000, 64, 64, 12],
                                          ["fp16", 512, 4096, 4096, 128, 128, 6],
                                          ["bf16", 300, 4096, 1000, 128, 128, 6],
                                          ["fp16", 2048, 4608, 3584, 128, 192, 4],
                                          ["bf16", 2048, 5000, 4096, 128, 160, 5]]
    for case in cases:
        block_m, block_n, stages = case["case"][4:]
        ring_and_c = stages * (block_m * 64 + 64 * block_n) * 2 + block_m * block_n * 2
        assert ring_and_c <= case["shared"] <= 232448, case
        assert "STACK:0 " in case["usage"] and "LOCAL:0 " in case["usage"], case


def test_gemm_tail_launches_compile_for_hopper_without_spilling(tmp_path):
    """The split's two launches are gemm_tma_kernel at CONFIG's tile and at a tail tile's: each for sm_90, no
    stack, no spill, within the shared memory a block. On this CPU's Triton 3.9: CONFIG 163 registers and
    213,016 B; each tail tile 90-91 registers (its accumulator 64), 114,720 B (128x64, 64x128) and 163,872 B
    (128x128)."""
    cases = _compile_for_sm90("gemm", _GEMM_TAIL_CASES, tmp_path)
    assert [c["case"] for c in cases] == [[128, 256, 8], [128, 64, 4], [64, 128, 4], [128, 128, 8]]
    for case in cases:
        assert case["shared"] <= 232448, case
        assert "STACK:0 " in case["usage"] and "LOCAL:0 " in case["usage"], case
        if case["case"] != [128, 256, 8]:
            assert int(re.search(r"REG:(\d+) ", case["usage"]).group(1)) <= 128, case  # 64 accumulator + the rest


def test_gemm_c_ptr_compiles_for_hopper_to_whole_vectors_without_spilling(tmp_path):
    """C_PTR at rows of 10000 bytes (N=5000) stores 16 bytes a thread (st.global.v4.b32: the row stride and the
    mask known for multiples of 8 elements), at 8200 bytes (N=4100, with B_PAD's lined B) 8 (v2.b32); no stack, no
    spill, within the shared memory a block. Given as plain scalars the compiler left 2-byte stores
    (st.global.b16), 8x the store instructions. On this CPU's Triton 3.9: 178-200 registers, 180,248 B of shared
    memory."""
    cases = _compile_for_sm90("gemm", _GEMM_POINTER_CASES, tmp_path)
    assert [c["case"] for c in cases] == [[3000, 5000, 2000, "bfloat16", 8], [2048, 5000, 4096, "float16", 8],
                                          [4096, 4100, 4096, "bfloat16", 4]]
    for case, stores in zip(cases, [["st.global.v4.b32"], ["st.global.v4.b32"], ["st.global.v2.b32"]]):
        assert case["stores"] == stores, case
        assert case["shared"] <= 232448, case
        assert "STACK:0 " in case["usage"] and "LOCAL:0 " in case["usage"], case


def test_moe_gluon_kernel_compiles_for_hopper_without_spilling(tmp_path):
    """The fused-MoE template's Gluon GEMM, both uses (gate/up with the SwiGLU epilogue, down in two
    halves), at Mixtral's shape and a ragged one on two consumers (CONFIG: 4 stages of 128x64 A and 256x64
    W plus two 64x128 C buffers, 224 KB + barriers), and on the one consumer of streaming_config (5 stages
    of 64x64 A and 256x64 W plus one 64x128 C buffer, 216 KB; 128-row boxes, gate/up 64 wide or down 128: 8
    stages of 64x64 and 128x64 plus a 64x64 C buffer, 200 KB) at Mixtral's and DeepSeek-V2-Lite's shapes
    at 512 tokens, and its two (1024 tokens: gate/up 6 stages of 128x64 A and 128x64 W plus two 64x64 C
    buffers, 208 KB; down 4 of 128x64 and 256x64 plus two 64x128, 224 KB), for sm_90: no stack,
    no spill, within the H100 / H200's shared memory. On the H200's Triton 3.6 (two consumers): 168
    registers at launch, 240 a consumer and 24 the loader after setmaxnreg (the same with PDL, on this CPU's
    Triton 3.6 and 3.9). PDL 1: one launch_dependents, and the loader's one grid dependency wait after its
    first weight box is issued and before any box of A (the kernel before's output); PDL 0: neither.
    PAIRS_ONLY: the epilogue's store of a 64-row half, whole, or in 8-row boxes up to the rows that hold pairs,
    counted from the expert's pairs (expert_rows) with no cross-lane reduction."""
    m = _template("fused-moe")
    if m.gluon is None:
        pytest.skip("this Triton has no Gluon")
    cases = _compile_for_sm90("fused-moe", _MOE_CASES, tmp_path)
    assert [c["case"] for c in cases] == [
        ["bf16", 4096, 14336, 1, 2, 4, 256, 0], ["bf16", 4096, 14336, 0, 2, 4, 256, 0],
        ["bf16", 4096, 14336, 1, 2, 4, 256, 1], ["bf16", 4096, 14336, 0, 2, 4, 256, 1],
        ["fp16", 200, 360, 1, 2, 4, 256, 1], ["fp16", 200, 360, 0, 2, 4, 256, 1],
        ["bf16", 4096, 14336, 1, 1, 5, 256, 1], ["bf16", 4096, 14336, 0, 1, 8, 128, 1],
        ["fp16", 2048, 1408, 1, 1, 8, 128, 1], ["fp16", 2048, 1408, 0, 1, 5, 256, 1],
        ["bf16", 2048, 1408, 1, 2, 6, 128, 1], ["bf16", 2048, 1408, 0, 2, 4, 256, 1]]
    for case in cases:
        _, _, _, swiglu, consumers, stages, w_rows, pdl = case["case"]
        ring = stages * (consumers * 64 * 64 + w_rows * 64) * 2 + consumers * 64 * (w_rows // 2) * 2
        assert ring <= case["shared"] <= 232448, case
        assert "STACK:0 " in case["usage"] and "LOCAL:0 " in case["usage"], case
        assert (case["launch_dependents"], case["waits"]) == ((1, 1) if pdl else (0, 0)), case
        if pdl:
            assert 0 <= case["first_w_load"] < case["wait_at"] < case["first_a_load"], case
        # each consumer's code stores a tile in one TMA store (two halves: the down GEMM); PAIRS_ONLY adds one of 8
        # rows for each 8 of the 64
        assert case["stores"] == consumers * (1 if swiglu else 2) * (9 if pdl else 1), case
        # PAIRS_ONLY's rows of a half come from the expert's count by arithmetic: no cross-lane sum (moe56 summed
        # the half's sorted_ids below the sentinel, a butterfly and two barriers before each tile's mainloop)
        assert case["butterflies"] == 0, case


def test_moe_small_kernels_wait_for_the_kernel_before_them_under_pdl(tmp_path):
    """PDL 1 (the Gluon path's launches), compiled for sm_90: moe_route_kernel, moe_align_kernel and
    moe_gather_kernel wait for the kernel before them before their first load, then let the next launch (it
    waits for them); moe_sum_kernel waits for the down GEMM before its first load and launches nothing early.
    PDL 0: no grid dependency instruction."""
    cases = {tuple(c["case"]): c for c in _compile_for_sm90("fused-moe", _MOE_SMALL_CASES, tmp_path)}
    assert sorted(cases) == [(name, pdl) for name in ("align", "gather", "route", "sum") for pdl in (0, 1)]
    for (name, pdl), case in cases.items():
        assert (case["waits"], case["launch_dependents"]) == ((1, int(name != "sum")) if pdl else (0, 0)), case
        if pdl:
            assert 0 <= case["wait_at"] < case["first_load"], case


def test_attention_small_key_blocks():
    """BLOCK_N < BLOCK_M: the causal diagonal stage walks several masked key blocks."""
    fa = _template("flash-attention")
    q, k, v = (torch.randn(1, 2, 64, 16) for _ in range(3))
    for causal in (True, False):
        o = torch.full_like(q, float("nan"))
        fa.flash_attention(q, k, v, causal=causal, out=o, config={"BLOCK_M": 32, "BLOCK_N": 16})
        assert compare(o, fa.reference(q, k, v, causal), NORM["fp32"]) is None


def test_gemm_gluon_descriptors_carry_the_default_layout_made_once_a_box(monkeypatch):
    g = _template("gemm")
    if g.gluon is None:
        pytest.skip("this Triton has no Gluon")
    made, default_for = _count_default_layouts(g, monkeypatch)
    g._shared_layout.cache_clear()
    boxes = [[64, 64], [64, 128], [64, 128]]
    for dtype, gl_dtype in ((torch.float16, g.gl.float16), (torch.bfloat16, g.gl.bfloat16)):
        a, b, c = torch.empty(128, 256, dtype=dtype), torch.empty(256, 512, dtype=dtype), torch.empty(128, 512, dtype=dtype)
        for _ in range(3):  # every launch of a planned call builds its descriptors again
            descs = g._descriptors(a, b, c, boxes, gluon_layouts=True)
        assert [d.layout for d in descs] == [default_for(box, gl_dtype) for box in boxes]
        assert [d.block_shape for d in descs] == boxes
    # two boxes a dtype, each layout made once, however many launches
    assert sorted(made, key=str) == sorted([((64, 64), g.gl.float16), ((64, 128), g.gl.float16),
                                            ((64, 64), g.gl.bfloat16), ((64, 128), g.gl.bfloat16)], key=str)
