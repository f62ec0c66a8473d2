"""Flash attention's exponentials partly on the FMA pipe (FlashAttention-4's trick), in the template's Gluon
kernels on Hopper.

    python benchmarks/explore/attention_fma_exp.py --compile-only [--variants a,b]
    python benchmarks/explore/attention_fma_exp.py --out DIR [--variants a,b] [--cases SPEC,...] [--rounds 2]

Why: at head dim 64 an exponential costs about as much as its score's matrix products (the SKILL.md's
arithmetic: 4 * 64 = 256 tensor flop a score at ~4096 flop a clock an SM, against 16 exponentials a clock
an SM on the special-function unit: 1/16 clock each way). The template's Gluon kernels sit at 0.94-0.98x
the default SDPA at head dim 64 for S 1024-2048 and causal S 1024-8192, where the tensor pipe reads 40-46%
busy (experiments/sweep-h200-session14/call9-profile-d64/): as if the exponentials and the matrix products
took turns. A cubic 2^f on the FMA pipe (x = n + f by the 1.5 * 2^23 rounding trick, n added into the
exponent field; 8 instructions, relative error 7.5e-5, under a 16-bit P's rounding) runs beside the
special-function unit instead of queueing on it.

Variants (each a copy of the template whose `_ws_softmax`, the one softmax step of all three Gluon
kernels, computes P so; the running max's rescale alpha stays on the special-function unit):
  mufu      the template as it is: every exponential on the special-function unit.
  fma_all   every exponential of P on the FMA pipe.
  fma_half  every other key column (the odd one of each thread's pair) on the FMA pipe.
  fma_qtr   one column in four on the FMA pipe.
  no_exp    P = 1 + x / 64 (one FMA, wrong output: not checked): the bound with no exponential at all.

Hypothesis: the special-function unit paces the head-dim-64 kernels. Prediction (against mufu in the same
run, bf16, head dim 64): no_exp +15-30%; fma_qtr +5-10% at S >= 2048 and causal; fma_half between
fma_qtr and fma_all; fma_all slower than mufu (8 issue slots an exponential); at head dim 128 the
gains are half as large.

Outcome (experiments/sweep-h200-session22/call1-attention-fma-exp/): falsified. no_exp gains 3-11% (G2 at
S 1024 401 -> 446 TFLOP/s, G3 at S 16384 497 -> 544), and every split but one (fma_qtr on G2 at S 1024,
within its spread) is slower than mufu: the FMA-pipe exponential costs more issue slots than it frees, and
the special-function unit is not what holds head dim 64 under the default SDPA.

Cases: SPEC is `S[c]` at head dim 64 (c: causal), `S[c]@128` at head dim 128; B * S = 16384 and H 32
(64) or 16 (128), the test's sweep shapes. Each kernel (GLUON 1, 2, 3; 3 at head dim 64 only) runs
every variant on the same fresh inputs, checked against the fp32 reference, timed in `--rounds` rounds
of A B A B, each variant's best median kept, beside the default SDPA timed in the same rounds.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import templates  # noqa: E402  (beside this file)

# 2^f on [-1/2, 1/2], a near-minimax cubic in relative error (fitted on 2000 Chebyshev nodes): 7.5e-5 at
# most, evaluated in fp32
P0, P1, P2, P3 = gl.constexpr(0.9999280571937561), gl.constexpr(0.6932609677314758), \
    gl.constexpr(0.2426111102104187), gl.constexpr(0.05517160892486572)
ROUND = gl.constexpr(12582912.0)  # 1.5 * 2^23: x + ROUND holds round(x) in its low mantissa bits


@gluon.jit
def _exp2_fma(x):
    # 2^x for x <= 0 without the special-function unit. Below -125 the result is under 2^-125, where P
    # (rounded to 16 bits) is 0 anyway; the clamp keeps n + the cubic's exponent a normal float's.
    x = gl.maximum(x, -125.0)
    j = x + ROUND
    f = x - (j - ROUND)
    p = ((P3 * f + P2) * f + P1) * f + P0
    # j's low bits hold n (two's complement): shifted by 23 they are n * 2^23, the exponent's n
    return (p.to(gl.int32, bitcast=True) + (j.to(gl.int32, bitcast=True) << 23)).to(gl.float32, bitcast=True)


@gluon.jit
def _exp2_half(x, M: gl.constexpr, N: gl.constexpr):
    # The wgmma accumulator gives each thread pairs of adjacent columns: the pair's second on the FMA pipe
    a, b = gl.split(gl.reshape(x, [M, N // 2, 2]))
    return gl.reshape(gl.join(gl.exp2(a), _exp2_fma(b)), [M, N])


@gluon.jit
def _exp2_quarter(x, M: gl.constexpr, N: gl.constexpr):
    # A thread's pairs sit 8 columns apart: of each two of its pairs (16 columns), the second pair's second
    # column on the FMA pipe
    a, b = gl.split(gl.reshape(x, [M, N // 2, 2]))                       # b: odd columns, i = 8u + 4w + r
    b0, b1 = gl.split(gl.permute(gl.reshape(b, [M, N // 16, 2, 4]), (0, 1, 3, 2)))
    b = gl.reshape(gl.permute(gl.join(gl.exp2(b0), _exp2_fma(b1)), (0, 1, 3, 2)), [M, N // 2])
    # the same registers as a's, under another name of the layout
    return gl.reshape(gl.join(gl.exp2(a), gl.convert_layout(b, a.type.layout)), [M, N])


@gluon.jit
def _p_of(x, M: gl.constexpr, N: gl.constexpr, MODE: gl.constexpr):
    # P = 2^x of the variant: 1 fma_all, 2 fma_half, 3 fma_qtr, 4 no_exp
    if MODE == 1:
        p = _exp2_fma(x)
    elif MODE == 2:
        p = _exp2_half(x, M, N)
    elif MODE == 3:
        p = _exp2_quarter(x, M, N)
    else:
        p = x * 0.015625 + 1.0
    return p


@gluon.jit
def _softmax_step(s, m_i, l_i, j, q_row, qk_scale, s_layout: gl.constexpr, M: gl.constexpr,
                  BLOCK_N: gl.constexpr, MASK: gl.constexpr, MODE: gl.constexpr):
    # The template's _ws_softmax with P from _p_of
    if MASK:
        offs_m = q_row + gl.arange(0, M, layout=gl.SliceLayout(1, s_layout))
        offs_n = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        keep = gl.expand_dims(offs_m, 1) >= gl.expand_dims(offs_n, 0)
        s = gl.where(keep, s, gl.full([M, BLOCK_N], float("-inf"), gl.float32, s_layout))
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
    p = gl.convert_layout(_p_of(s * qk_scale - gl.expand_dims(m_new, 1), M, BLOCK_N, MODE), s_layout)
    alpha = gl.exp2(m_i - m_new)
    return p, alpha, m_new, l_i * alpha + gl.sum(p, axis=1)


@gluon.jit
def _softmax_fma_all(s, m_i, l_i, j, q_row, qk_scale, s_layout: gl.constexpr, M: gl.constexpr,
                     BLOCK_N: gl.constexpr, MASK: gl.constexpr):
    return _softmax_step(s, m_i, l_i, j, q_row, qk_scale, s_layout, M, BLOCK_N, MASK, 1)


@gluon.jit
def _softmax_fma_half(s, m_i, l_i, j, q_row, qk_scale, s_layout: gl.constexpr, M: gl.constexpr,
                      BLOCK_N: gl.constexpr, MASK: gl.constexpr):
    return _softmax_step(s, m_i, l_i, j, q_row, qk_scale, s_layout, M, BLOCK_N, MASK, 2)


@gluon.jit
def _softmax_fma_qtr(s, m_i, l_i, j, q_row, qk_scale, s_layout: gl.constexpr, M: gl.constexpr,
                     BLOCK_N: gl.constexpr, MASK: gl.constexpr):
    return _softmax_step(s, m_i, l_i, j, q_row, qk_scale, s_layout, M, BLOCK_N, MASK, 3)


@gluon.jit
def _softmax_no_exp(s, m_i, l_i, j, q_row, qk_scale, s_layout: gl.constexpr, M: gl.constexpr,
                    BLOCK_N: gl.constexpr, MASK: gl.constexpr):
    return _softmax_step(s, m_i, l_i, j, q_row, qk_scale, s_layout, M, BLOCK_N, MASK, 4)


# each variant's _ws_softmax (None: the template's own)
VARIANTS = {"mufu": None, "fma_all": _softmax_fma_all, "fma_half": _softmax_fma_half, "fma_qtr": _softmax_fma_qtr,
            "no_exp": _softmax_no_exp}
UNCHECKED = {"no_exp"}


def variant_template(name):
    """The template, loaded as a module of its own, with `_ws_softmax` replaced for this variant (its Gluon
    kernels look the helper up in their module's globals when they compile)."""
    T = templates.load("flash-attention", side=f"fma_exp_{name}")
    if VARIANTS[name] is not None:
        T._ws_softmax = VARIANTS[name]
    return T


def launch_args(T, q, k, v, o, causal, gluon_kernel):
    """(kernel, grid, arguments, constexprs) of the template's Gluon kernel number gluon_kernel, as
    its _launch_gluon builds them."""
    B, H, S, D = q.shape
    gdt = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16

    def desc(t, rows):
        layout = gl.NVMMASharedLayout.get_default_for([rows, D], gdt)
        return T.GluonDescriptor(t.view(B * H * S, D), [B * H * S, D], [D, 1], [rows, D], layout)

    scale = T.LOG2E / math.sqrt(D)
    consts = dict(BLOCK_M=T.WS_BLOCK_M, BLOCK_N=T.WS_BLOCK_N, CAUSAL=causal, LOADER_REGS=T.WS_LOADER_REGS,
                  CONSUMER_REGS=T.WS_CONSUMER_REGS)
    if gluon_kernel == 3:
        descs = (desc(q, T.WS3_BLOCK_M // 3), desc(k, T.WS_BLOCK_N), desc(v, T.WS_BLOCK_N), desc(o, T.WS3_BLOCK_M // 3))
        consts.update(BLOCK_M=T.WS3_BLOCK_M, CONSUMER_REGS=T.WS3_CONSUMER_REGS, NUM_BUFFERS=2)
        return T._attn_fwd_ws3, (triton.cdiv(S, T.WS3_BLOCK_M), B * H), [*descs, S, scale], consts
    descs = (desc(q, T.WS_BLOCK_M // 2), desc(k, T.WS_BLOCK_N), desc(v, T.WS_BLOCK_N), desc(o, T.WS_BLOCK_M // 2))
    if gluon_kernel == 2:
        n_tiles = S // T.WS_BLOCK_M * B * H
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 132
        consts.update(NUM_BUFFERS=T.PERSISTENT_BUFFERS)
        return T._attn_fwd_persist, (min(sms, n_tiles), ), [*descs, S, n_tiles, scale], consts
    consts.update(NUM_BUFFERS=2)
    return T._attn_fwd_ws, (S // T.WS_BLOCK_M, B * H), [*descs, S, scale], consts


def compile_only(variants):
    for name in variants:
        T = variant_template(name)
        for D, kernels in ((64, (1, 2, 3)), (128, (1, 2))):
            for g in kernels:
                for causal in (False, True):
                    q, k, v, o = (torch.empty(1, 2, 1024, D, dtype=torch.bfloat16) for _ in range(4))
                    kernel, _, args, consts = launch_args(T, q, k, v, o, causal, g)
                    tag = f"{name:9s} D{D:<3d} G{g} causal={causal!s:5s}"
                    try:
                        t0 = time.time()
                        c = templates.compile_sm90(kernel, args, consts, {"num_warps": 4})
                        u = templates.resource_usage(c)
                        print(f"{tag}: regs {u['regs']} spills {u['spill_bytes']} B setmaxnreg {u['setmaxnreg']} "
                              f"ex2 in PTX {c.asm['ptx'].count('ex2.approx')} compile {time.time() - t0:.1f} s"
                              + (f" WARNINGS {u['ptxas_warnings']}" if u["ptxas_warnings"] else ""), flush=True)
                    except Exception as e:  # one variant's failure is a result, the others go on
                        print(f"{tag}: ERROR {templates.last_lines(e)}", flush=True)


def run_case(S, D, causal, variants, rounds, results, out_path, kernels=None):
    """Time each variant's Gluon kernels (`kernels`, GLUON numbers; all that run at head dim D by default)
    beside the default SDPA on one shape, each checked first; print and append a results row each."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    H = 32 if D == 64 else 16
    B = max(1, 16384 // S)
    torch.manual_seed(S + D + causal)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):  # fp32 without S x S scores in memory
        ref = torch.nn.functional.scaled_dot_product_attention(q[:2].float(), k[:2].float(), v[:2].float(),
                                                               is_causal=causal)
    flops = 4 * B * H * S * S * D * (0.5 if causal else 1.0)
    label = f"B{B} H{H} S{S} D{D} bf16{' causal' if causal else ''}"
    o = torch.empty_like(q)
    runs = {"sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)}
    for g in kernels or ((1, 2, 3) if D == 64 else (1, 2)):
        for name, T in variants.items():
            kernel, grid, args, consts = launch_args(T, q, k, v, o, causal, g)
            run = (lambda kernel=kernel, grid=grid, args=args, consts=consts:
                   kernel[grid](*args, **consts, num_warps=4))
            o.fill_(float("nan"))
            try:
                run()
                torch.cuda.synchronize()
            except Exception as e:
                print(f"{label} G{g} {name}: ERROR {templates.last_lines(e)}", flush=True)
                continue
            err = (o[:2].float() - ref).abs().max().item()
            if name not in UNCHECKED and not err < 2e-2:  # NaN fails too
                print(f"{label} G{g} {name}: WRONG max abs error {err:.3g}", flush=True)
                continue
            runs[f"G{g} {name}"] = run
            results["rows"].append(dict(S=S, D=D, causal=causal, B=B, H=H, run=f"G{g} {name}", max_abs_err=err))
    best = {label_: float("inf") for label_ in runs}
    spread = {}
    for _ in range(rounds):
        for key, run in runs.items():
            times = triton.testing.do_bench(run, warmup=10, rep=40, return_mode="all")
            med = statistics.median(times)
            if med < best[key]:
                best[key], spread[key] = med, 100 * (statistics.quantiles(times, n=10)[-1] - min(times)) / med
    sdpa_tflops = flops / best["sdpa"] * 1e-9
    for key in runs:
        tflops = flops / best[key] * 1e-9
        row = dict(S=S, D=D, causal=causal, B=B, H=H, run=key, ms=best[key], tflops=tflops,
                   spread_pct=spread[key], vs_sdpa=tflops / sdpa_tflops)
        results["rows"].append(row)
        print(f"{label} {key:12s} {tflops:6.1f} TFLOP/s {best[key]:.3f} ms ±{spread[key]:.1f}% "
              f"x{row['vs_sdpa']:.3f} of sdpa", flush=True)
    out_path.write_text(json.dumps(results, indent=1))
    templates.row_done()


def run_cases(cases, deadline, variants, rounds, results, out_path, kernels=None):
    """run_case on each of `cases` (comma-separated SPECs, see the module docstring) until time.time()
    passes `deadline`."""
    for spec in cases.split(","):
        if time.time() > deadline:
            print(f"budget spent: skipping {spec} and later", flush=True)
            break
        seq, _, head_dim = spec.partition("@")
        run_case(int(seq.rstrip("c")), int(head_dim or 64), seq.endswith("c"), variants, rounds, results, out_path,
                 kernels)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=".")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--cases", default="1024,1024c,2048,4096c,16384,4096@128")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--budget-s", type=float, default=300.0)
    p.add_argument("--hang-s", type=float, default=120.0)
    p.add_argument("--compile-only", action="store_true")
    args = p.parse_args()
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    if args.compile_only:
        compile_only(names)
        return
    started = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    out_path = out / "attention_fma_exp.json"
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "rows": []}
    variants = {name: variant_template(name) for name in names}
    templates.start_watchdog(args.hang_s)
    run_cases(args.cases, started + args.budget_s, variants, args.rounds, results, out_path)
    print(f"done in {time.time() - started:.0f} s; rows in {out_path}", flush=True)


if __name__ == "__main__":
    main()
