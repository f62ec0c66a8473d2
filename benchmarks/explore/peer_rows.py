"""Issue 15's bar "never below the simplest one-program-per-row kernel", checked again (session 29): softmax,
rmsnorm and layernorm at every row length of their sweeps up to 32768, in every dtype, against that peer.

    python benchmarks/explore/peer_rows.py [--out DIR] [--rounds 2] [--kernels a,b] [--shapes MxN,..] [--dtypes fp32,..]

The peer is the kernel of Triton's fused-softmax tutorial and of the kernel-skill collections: one program
per row, the whole row in registers (BLOCK = the row's next power of two), num_warps as the tutorial picks
them; rmsnorm and layernorm written the same way (layernorm's variance about the mean, in registers). It was
last measured beside the templates in experiments/sweep-h200/ (session 7), where it led softmax fp16
8192x16384 by 2.6%; the templates have changed at every row length since. Rows over 32768 are left out:
there a whole row in one program's registers spills (a 65536-element fp32 row is 256 KB), which is why
the templates split them.
Each side is checked against the fp32 reference first (templates.check_and_time), then timed as kgit
times, peer and template alternated for --rounds rounds; a row per shape and dtype with both figures.
Prediction: the templates at or over the peer everywhere (they read 91-98% of copy in session 29's sweep;
the peer read at most 89% in session 7).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)
from whole_rows import _peer_rmsnorm, _peer_softmax  # noqa: E402  (session 7's peer kernels, beside this file)

SHAPES = [(131072, 1024), (32768, 4096), (8192, 16384), (4096, 32768)]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@triton.jit
def _peer_layernorm(x_ptr, w_ptr, b_ptr, y_ptr, N, stride, eps, BLOCK: tl.constexpr):
    # written as whole_rows.py's two peers are: one program a row, the whole row in registers
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    centred = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (centred * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def peer_run(kernel: str, T, x, w, b):
    """The peer's run(out) for one kernel's inputs."""
    M, N = x.shape
    block = triton.next_power_of_2(N)
    warps = 16 if block >= 4096 else 8 if block >= 2048 else 4  # the tutorial's choice
    if kernel == "softmax":
        return lambda y: _peer_softmax[(M,)](x, y, N, x.stride(0), BLOCK=block, num_warps=warps)
    if kernel == "rmsnorm":
        return lambda y: _peer_rmsnorm[(M,)](x, w, y, N, x.stride(0), T.EPS, BLOCK=block, num_warps=warps)
    return lambda y: _peer_layernorm[(M,)](x, w, b, y, N, x.stride(0), T.EPS, BLOCK=block, num_warps=warps)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--kernels", default="softmax,rmsnorm,layernorm")
    p.add_argument("--shapes", default=",".join(f"{M}x{N}" for M, N in SHAPES), help="e.g. 8192x16384,32768x4096")
    p.add_argument("--dtypes", default=",".join(DTYPES))
    args = p.parse_args()
    shapes = [tuple(int(n) for n in shape.split("x")) for shape in args.shapes.split(",")]
    out, timer, copy, results = templates.begin(args.out)
    for kernel in args.kernels.split(","):
        T = templates.load(kernel)
        for (M, N), dname in ((shape, d) for shape in shapes for d in args.dtypes.split(",")):
            dtype = DTYPES[dname]
            torch.manual_seed(0)
            x, w, b = templates.norm_inputs(M, N, dtype)
            y = torch.empty_like(x)
            template_run, ref = templates.norm_call(kernel, T, x, w, b)
            sides = {"peer": peer_run(kernel, T, x, w, b), "kgit": template_run}
            nbytes = 2 * x.numel() * x.element_size()
            gbps = {name: [] for name in sides}
            for _ in range(args.rounds):
                for name, run in sides.items():
                    row = templates.check_and_time({}, run, y, ref, nbytes, timer, copy, True)
                    gbps[name].append(row.get("gbps", float("nan")))
                    if "error" in row:
                        gbps[name + " error"] = row["error"]
            row = {"kernel": kernel, "shape": [M, N], "dtype": dname,
                   **{name: statistics.median(v) if isinstance(v, list) else v for name, v in gbps.items()}}
            row["kgit_over_peer"] = row["kgit"] / row["peer"]
            spreads = {name: 100 * (max(v) - min(v)) / statistics.median(v) for name, v in gbps.items()
                       if isinstance(v, list) and len(v) > 1}
            row.update({f"{name}_spread_pct": spread for name, spread in spreads.items()})
            results["rows"].append(row)
            errors = "".join(f"  {k}: {v}" for k, v in row.items() if k.endswith("error"))
            print(f"{kernel:10s} {M}x{N} {dname}: peer {row['peer']:.0f} GB/s ({100 * row['peer'] / copy:.1f}%)  "
                  f"kgit {row['kgit']:.0f} GB/s ({100 * row['kgit'] / copy:.1f}%)  x{row['kgit_over_peer']:.3f}"
                  + "".join(f"  {name} spread {spread:.1f}%" for name, spread in spreads.items()) + errors, flush=True)
        (out / "peer_rows.json").write_text(json.dumps(results, indent=1))
    below = [r for r in results["rows"] if not r["kgit_over_peer"] >= 1.0]
    print(f"kgit under the peer at {len(below)} of {len(results['rows'])}: "
          + ", ".join(f"{r['kernel']} {r['shape'][0]}x{r['shape'][1]} {r['dtype']} x{r['kgit_over_peer']:.3f}"
                      for r in below), flush=True)


if __name__ == "__main__":
    main()
