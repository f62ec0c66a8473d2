"""Issue 15: the split team on larger chunks and more warps, for 16-bit rows over 32768.

    python benchmarks/explore/team_chunks.py [--out DIR] [--kernels softmax,rmsnorm] [--dtypes bf16,fp32]

The split team (_softmax_split, _rmsnorm_split: a row over P co-resident programs that each keep a
chunk in registers and exchange partial statistics) reads a row once, where the streamed kernel reads
it twice. In 16 bits it lost to the streamed kernel (softmax 44-48% of copy against 54-60% at rows of
65536-262144), and ncu put it at 25% occupancy and 39% of DRAM bandwidth, latency-bound
(experiments/worst-shapes-h200/). It only ever ran CONFIG's chunk: 4096 elements on 4 warps, 8 KB of
16-bit row a program. Hypothesis: chunks of 8192-16384 on 8-32 warps put 2-4x the bytes in flight per
SM, and the one-read team passes the two-read streamed kernel in 16 bits too (rmsnorm's fp32 team reads
74-84%). Predicted: 16-bit rows of 65536-262144 at 70-80% of copy.

Call 2 added layernorm, whose fp32 rows over 32768 went to the streamed kernel (61-66% of copy): its
split team had been deleted from the template (commit 01227bd) when it read 57-61% on CONFIG's 4 warps,
and was timed here as it was then. It read 72-74% on 8192-element chunks and 4 warps, and is back in the
template (_layernorm_split, SPLIT), which this script now runs.

Each variant runs the template's split kernel with the launcher's own sizing (teams = programs that
fit the GPU at once / P), beside the launcher ("today") and torch, on the same fresh random inputs.
Outputs are checked against an fp32 torch reference before timing (benchmarks/explore/templates.py).
Writes DIR/team_chunks.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from kgit.harness import device  # noqa: E402
from kgit.harness.timing import Timer  # noqa: E402
import templates  # noqa: E402  (beside this file)

SHAPES = [(4096, 32768), (2048, 65536), (1024, 131072), (512, 262144)]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# (BLOCK_N, num_warps): CONFIG's first
CHUNKS = [(4096, 4), (4096, 8), (8192, 8), (8192, 16), (16384, 16), (16384, 32), (8192, 4)]


def team_call(kernel: str, T, x, w, y):
    """run(y, BLOCK_N, warps) for the template's split kernel, sized as its launcher sizes it."""
    M, N = x.shape
    sms = T._sm_count(x.device)
    b = torch.randn(N, device=x.device).to(x.dtype)

    def run(y, block, warps):
        P = triton.cdiv(N, block)
        ws, sync = T._sync_buffers(x.device, sms * 32)
        if kernel == "softmax":
            fn, args = T._softmax_split, (x, y, ws, sync, M, N, x.stride(0), y.stride(0))
        elif kernel == "rmsnorm":
            fn, args = T._rmsnorm_split, (x, w, y, ws, sync, M, N, x.stride(0), y.stride(0), T.EPS)
        else:
            fn, args = T._layernorm_split, (x, w, b, y, ws, sync, M, N, x.stride(0), y.stride(0), T.EPS)
        consts = {"BLOCK_N": block, "P": P, "P_POW2": triton.next_power_of_2(P), "MAX_SPIN": T.MAX_SPIN}
        teams = min(M, (sms * T._programs_per_sm(fn, args, consts, warps, 1, x.device)) // P)
        if teams < 1:
            raise RuntimeError(f"a team of {P} does not fit the GPU at once")
        fn[(teams * P,)](*args, **consts, num_warps=warps, num_stages=1)

    return run, b


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--kernels", default="softmax,rmsnorm")
    p.add_argument("--dtypes", default="bf16,fp32")
    p.add_argument("--budget-s", type=float, default=200.0, help="stop timing new variants after this")
    args = p.parse_args()
    started = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    timer = Timer(repeats=3, warmup_ms=10, rewarm_ms=5, rep_ms=15)
    copy = device.measured_copy_gbps(refresh=True)
    results = {"copy_gbps_start": copy, "device": device.detect(), "torch": torch.__version__,
               "triton": triton.__version__, "rows": [], "skipped": []}
    print(f"copy {copy:.0f} GB/s", flush=True)
    torch.manual_seed(0)
    for kernel in args.kernels.split(","):
        T = templates.load(kernel)
        for dname in args.dtypes.split(","):
            for M, N in SHAPES:
                x = (torch.randn(M, N, device=dev) * 3).to(DTYPES[dname])
                w = torch.rand(N, device=dev).to(x.dtype) + 0.5
                y = torch.empty_like(x)
                team, b = team_call(kernel, T, x, w, y)
                if kernel == "softmax":
                    ref = torch.softmax(x.float(), -1)
                    today, torch_impl = (lambda y: T.softmax(x, out=y)), (lambda y: y.copy_(torch.softmax(x, -1)))
                elif kernel == "rmsnorm":
                    ref = T.rmsnorm_ref(x, w).float()
                    today = lambda y: T.rmsnorm(x, w, out=y)  # noqa: E731
                    torch_impl = lambda y: y.copy_(torch.nn.functional.rms_norm(x, (N,), w, T.EPS))  # noqa: E731
                else:
                    ref = T.layernorm_ref(x, w, b).float()
                    today = lambda y: T.layernorm(x, w, b, out=y)  # noqa: E731
                    torch_impl = lambda y: y.copy_(torch.nn.functional.layer_norm(x, (N,), w, b, T.EPS))  # noqa: E731
                variants = [("today", today), ("torch", torch_impl)]
                variants += [(f"team {b}/{wp}", lambda y, b=b, wp=wp: team(y, b, wp)) for b, wp in CHUNKS]
                for name, run in variants:
                    row = {"kernel": kernel, "shape": [M, N], "dtype": dname, "variant": name}
                    if time.time() - started > args.budget_s:
                        results["skipped"].append(row)
                        continue
                    templates.check_and_time(row, run, y, ref, 2 * x.numel() * x.element_size(), timer, copy, True)
                    results["rows"].append(row)
                    print(f"{kernel} {M}x{N} {dname} {name}: {templates.figure(row)}", flush=True)
                del x, w, b, y, ref
                (out / "team_chunks.json").write_text(json.dumps(results, indent=1))
    results["copy_gbps_end"] = device.measured_copy_gbps(refresh=True)
    results["wall_s"] = time.time() - started
    (out / "team_chunks.json").write_text(json.dumps(results, indent=1))
    print(f"copy at the end {results['copy_gbps_end']:.0f} GB/s; {len(results['skipped'])} skipped; "
          f"{results['wall_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
