"""Issue 15: layernorm's fp32 split team, register-bound: chunk, warps, a register cap, and w and b read
from L2 each row instead of held.

    python benchmarks/explore/layernorm_split_registers.py [--out DIR] [--compile-only]

Written in session 12 (--compile-only reads each variant's registers for sm_90), first run on the H200 in
session 29 (experiments/sweep-h200-session29/call1-gemm-pingpong/layernorm-split.log): every variant at or
under today's kernel (71.0-72.4% of copy): the prediction below is refuted.

Why: under ncu (experiments/sweep-h200-session12/worst-shapes/layernorm-512x262144-fp32-flags.txt) the
team (SPLIT: 8192-element chunks on 4 warps) holds 255 registers a thread and spills: each thread keeps
its w and b and two rows' chunks, 4 x 64 fp32 values. Two programs an SM, occupancy 12.5%, 71.9-73.7% of
copy at rows of 65536-262144, where rmsnorm's team (one row chunk fewer to keep: no b) reads 89-92%.
Registers a thread from --compile-only (Triton 3.9, sm_90; the device's 3.6 may differ): the template's
8192/4 warps 255 and 176 bytes of stack; 8192/8 195, no spill; 4096/8 104 (two programs of 8 warps an SM,
twice today's warps); 4096/8 capped at 64 spills 112 bytes. w and b read from L2 each row do not cut
registers as written (118 on 4096/8: loaded before the wait, they are live through it as the held ones
were). With the device's Triton 3.6 (session 28, --compile-only): 8192/4 255 and 128 bytes of stack (as ncu
read at 1024x131072 then: 74.9% of copy, occupancy 11.9%), 8192/8 186, 4096/8 112, 4096/8 capped at 64
spills 112 bytes; from L2, 8192/8 194, 4096/8 117, 4096/4 168.
Hypothesis: more warps an SM lift the team as they lifted softmax's. Prediction: 4096/8 reads
78-85% at rows of 65536-262144 (71.9-73.7 today); the L2 variants within a point of their held twins.
Each variant is checked against torch's layer_norm in fp32 first.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import templates  # noqa: E402  (beside this file)

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
SHAPES = [(2048, 65536), (1024, 131072), (512, 262144)]
# (BLOCK_N, num_warps, maxnreg, w and b from L2)
VARIANTS = [(8192, 8, None, False), (4096, 8, None, False), (4096, 8, 64, False),
            (8192, 8, None, True), (4096, 8, None, True), (4096, 4, None, True), (4096, 8, 64, True)]


@triton.jit
def _layernorm_split_wl2(x_ptr, w_ptr, b_ptr, y_ptr, ws_ptr, flag_ptr, M, N, stride_x, stride_y, eps,
                         BLOCK_N: tl.constexpr, P: tl.constexpr, P_POW2: tl.constexpr, MAX_SPIN: tl.constexpr):
    # The template's _layernorm_split (flags), with w and b loaded again each row, from L2, after the
    # next row's partial is published and before the wait: no w or b held across the loop.
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    team = pid // P
    part = pid % P
    n_teams = G // P
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = cols < N
    n_here = tl.minimum(N - part * BLOCK_N, BLOCK_N).to(tl.float32)
    slots = tl.arange(0, P_POW2)
    slot_ok = slots < P
    n_slot = tl.minimum(tl.maximum(N - slots * BLOCK_N, 0), BLOCK_N).to(tl.float32)
    my_flag = flag_ptr + pid
    team_flags = flag_ptr + team * P + slots
    exit_ptr = flag_ptr + G + team

    xf = tl.load(x_ptr + tl.cast(team, tl.int64) * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    cmean = tl.sum(xf, axis=0) / n_here
    cd = tl.where(ok, xf - cmean, 0.0)
    tl.store(ws_ptr + (team * 4 * P + part) * 2, cmean)
    tl.store(ws_ptr + (team * 4 * P + part) * 2 + 1, tl.sum(cd * cd, axis=0))
    tl.debug_barrier()
    tl.atomic_xchg(my_flag, 1, sem="release")
    it = 0
    for row in range(team, M, n_teams):
        nxt = tl.minimum(row + n_teams, M - 1)
        xn = tl.load(x_ptr + tl.cast(nxt, tl.int64) * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
        nmean = tl.sum(xn, axis=0) / n_here
        nd = tl.where(ok, xn - nmean, 0.0)
        nbuf = ws_ptr + ((team * 4 + (it + 1) % 4) * P + part) * 2
        tl.store(nbuf, nmean)
        tl.store(nbuf + 1, tl.sum(nd * nd, axis=0))
        tl.debug_barrier()
        tl.atomic_xchg(my_flag, it + 2, sem="release")
        w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        f = tl.where(slot_ok, tl.atomic_add(team_flags, 0, mask=slot_ok, sem="acquire"), it + 1)
        spins = 0
        while (tl.min(f, axis=0) < it + 1) & (spins < MAX_SPIN):
            f = tl.where(slot_ok, tl.atomic_add(team_flags, 0, mask=slot_ok, sem="acquire"), it + 1)
            spins += 1
        tl.debug_barrier()
        buf = ws_ptr + (team * 4 + it % 4) * P * 2
        pmean = tl.load(buf + slots * 2, mask=slot_ok, other=0.0, volatile=True)
        pm2 = tl.load(buf + slots * 2 + 1, mask=slot_ok, other=0.0, volatile=True)
        mean = tl.sum(pmean * n_slot, axis=0) / N
        dm = pmean - mean
        rstd = 1.0 / tl.sqrt(tl.sum(pm2 + n_slot * dm * dm, axis=0) / N + eps)
        tl.store(y_ptr + tl.cast(row, tl.int64) * stride_y + cols, ((xf - mean) * rstd * w + b).to(y_ptr.dtype.element_ty),
                 mask=ok)
        xf = xn
        it += 1
    done = tl.atomic_add(exit_ptr, 1, sem="acq_rel")
    if done == P - 1:
        tl.atomic_xchg(team_flags, tl.zeros([P_POW2], tl.int32), mask=slot_ok, sem="relaxed")
        tl.atomic_xchg(exit_ptr, 0, sem="release")


def launch(L, x, w, b, y, block, warps, maxnreg, w_from_l2):
    """A team as the template launches its own: as many teams as fit the GPU at once."""
    M, N = x.shape
    kernel = _layernorm_split_wl2 if w_from_l2 else L._layernorm_split
    sms = L._sm_count(x.device)
    ws, sync = L._sync_buffers(x.device, sms * 32)
    args = (x, w, b, y, ws, sync, M, N, x.stride(0), y.stride(0), L.EPS)
    P = triton.cdiv(N, block)
    consts = {"BLOCK_N": block, "P": P, "P_POW2": triton.next_power_of_2(P), "MAX_SPIN": L.MAX_SPIN}
    if maxnreg:
        consts["maxnreg"] = maxnreg
    occ = L._programs_per_sm(kernel, args, consts, warps, 1, x.device)
    teams = min(M, (sms * occ) // P)
    if teams < 1:
        raise RuntimeError(f"a team of {P} does not fit the GPU at once")
    kernel[(teams * P,)](*args, **consts, num_warps=warps, num_stages=1)
    return occ


def compile_only():
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    L = templates.load("layernorm")
    sig = {"x_ptr": "*fp32", "w_ptr": "*fp32", "b_ptr": "*fp32", "y_ptr": "*fp32", "ws_ptr": "*fp32",
           "flag_ptr": "*i32", "M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32", "eps": "fp32"}
    for block, warps, maxnreg, w_from_l2 in [(8192, 4, None, False)] + VARIANTS:
        consts = {"BLOCK_N": block, "P": 16, "P_POW2": 16, "MAX_SPIN": 1 << 20}
        fn = _layernorm_split_wl2 if w_from_l2 else L._layernorm_split
        src = ASTSource(fn=fn, signature={**sig, **{k: "constexpr" for k in consts}}, constexprs=consts,
                        attrs={(i,): [["tt.divisibility", 16]] for i, k in enumerate(sig) if k not in ("M", "eps")})
        options = {"num_warps": warps, **({"maxnreg": maxnreg} if maxnreg else {})}
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
        with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
            cubin.write(k.asm["cubin"])
            cubin.flush()
            usage = subprocess.run([str(CUOBJDUMP), "-res-usage", cubin.name], capture_output=True, text=True).stdout
        regs = " ".join(word for line in usage.splitlines() if "REG:" in line for word in line.split()[:2])
        print(f"{block}/{warps} maxnreg {maxnreg} w from L2 {w_from_l2}: {regs}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--compile-only", action="store_true")
    p.add_argument("--budget-s", type=float, default=150.0)
    args = p.parse_args()
    if args.compile_only:
        compile_only()
        return
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    L = templates.load("layernorm")
    torch.manual_seed(0)
    for M, N in SHAPES:
        x = torch.randn(M, N, device="cuda") * 3
        w, b = torch.rand(N, device="cuda") + 0.5, torch.randn(N, device="cuda")
        ref = torch.nn.functional.layer_norm(x, (N,), w, b, L.EPS)
        y = torch.empty_like(x)
        variants = [("today", lambda y: L.layernorm(x, w, b, out=y))]
        variants += [(f"{blk}/{wp}{f' maxnreg {mr}' if mr else ''}{' w,b from L2' if l2 else ''}",
                      lambda y, blk=blk, wp=wp, mr=mr, l2=l2: launch(L, x, w, b, y, blk, wp, mr, l2))
                     for blk, wp, mr, l2 in VARIANTS]
        for name, run in variants:
            if time.time() - started > args.budget_s:
                break
            row = {"shape": [M, N], "dtype": "fp32", "variant": name}
            templates.check_and_time(row, run, y, ref, 2 * x.numel() * 4, timer, copy, True)
            if name != "today" and "error" not in row:
                row["programs_per_sm"] = run(y)
            results["rows"].append(row)
            pps = f" ({row['programs_per_sm']} an SM)" if "programs_per_sm" in row else ""
            print(f"layernorm {M}x{N} fp32 {name}{pps}: {templates.figure(row)}", flush=True)
        (out / "layernorm_split_registers.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
