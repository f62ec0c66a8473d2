"""Issue 15: the shared-memory teams gathering their siblings' words with plain loads instead of atomics.

    python benchmarks/explore/team_gather_loads.py [--out DIR]      (GPU, about two minutes; at commit 44bfefd)
    python benchmarks/explore/team_gather_loads.py --fp32 [--out DIR]  (the fp32 split teams, about a minute)
    python benchmarks/explore/team_gather_loads.py --compile-only   (sm_90 offline: does Gluon compile it)

Why: layernorm's team at 16-bit 512x262144 reads 76-78% of copy (bar 80), and its profile (experiments/
sweep-h200-session17/call5-profiles/) has the L2 80% busy at a DRAM throughput of 65%. Each of a row's P
programs gathers its P siblings' stamped 64-bit words with relaxed atomic adds of zero (gl.atomic_add), so
at 262144 (P = 64 parts of 4096) every word is an atomic target of 63 programs a row, polled again until
all carry the row's stamp: atomics on one address are serialized in the L2 slice that owns it. A 64-bit
aligned load is single-copy atomic too, so volatile loads (ld.volatile: relaxed, read at the L2) carry the
same stamped words without an atomic read-modify-write. Softmax's and rmsnorm's teams gather the same way
(P = 32 parts of 8192 at 262144).

Prediction: layernorm +1-3 points at 262144 and 131072 (P 64 and 32 words), less at 32768-65536; softmax
and rmsnorm +0-1 at 262144. Outcome (experiments/sweep-h200-session18/call4-team-gather/): confirmed at
262144 in every kernel and in fp16 at every layernorm shape; the templates took the volatile loads (commit
7eab6e5, after which the 16-bit mode has nothing left to substitute). Each variant is the template with its _gather's atomic adds replaced by
gl.load(volatile=True) (text substituted into a copy, imported apart), checked against torch, then timed
with the harness's Timer in two interleaved rounds beside the template (% of the copy measured at start).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)

ATOMIC_READ = 'gl.atomic_add(at, zeros.to(gl.int64), mask=ok, sem="relaxed")'
PLAIN_READ = "gl.load(at, mask=ok, other=0, volatile=True)"
SHAPES = {"layernorm": [(4096, 32768), (2048, 65536), (1024, 131072), (512, 262144)],
          "softmax": [(1024, 131072), (512, 262144)], "rmsnorm": [(512, 262144)]}
DTYPES = ("bf16", "fp16")
# --fp32: the fp32 split teams (Triton, not Gluon) of softmax and rmsnorm read their stamped words the same
# way in _stamped; run after the 16-bit teams took volatile loads (commit 7eab6e5)
ATOMIC_READ_FP32 = 'tl.atomic_add(words + at, 0, mask=ok, sem="relaxed")'
PLAIN_READ_FP32 = "tl.load(words + at, mask=ok, other=0, volatile=True)"
SHAPES_FP32 = {"softmax": [(2048, 65536), (1024, 131072), (512, 262144)],
               "rmsnorm": [(2048, 65536), (1024, 131072), (512, 262144)]}
ROUNDS = 2


def with_plain_reads(kernel: str, atomic_read: str = ATOMIC_READ, plain_read: str = PLAIN_READ):
    """The kernel's template with its team's word reads as volatile loads, imported under its own name."""
    text = (templates.ROOT / "skills" / "kernels" / kernel / "triton_template.py").read_text()
    assert text.count(atomic_read) == 2, f"{kernel}: the gather is not as this script expects"
    path = Path(tempfile.mkdtemp()) / f"{kernel}_plain_reads.py"
    path.write_text(text.replace(atomic_read, plain_read))
    return templates.load(kernel, path, "plain reads")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--compile-only", action="store_true")
    p.add_argument("--fp32", action="store_true", help="the fp32 split teams instead of the 16-bit ones")
    args = p.parse_args()
    if args.compile_only:
        import torch
        L = with_plain_reads("layernorm")
        x = torch.empty(512, 262144, dtype=torch.bfloat16)
        w, b = torch.empty(262144, dtype=torch.bfloat16), torch.empty(262144, dtype=torch.bfloat16)
        words, exits = torch.empty(4 * 64 * 8, dtype=torch.int64), torch.empty(64 * 8, dtype=torch.int32)
        k = templates.compile_sm90(L._layernorm_smem_team, (x, w, b, x, words, exits, 512, 262144, 262144, 262144,
                                                            1e-5),
                                   {"CHUNK": 4096, "NCH": 1, "P": 64, "P_POW2": 64, "SPIN": 1 << 20, "PAIRS": True},
                                   {"num_warps": 4, "maxnreg": 80})
        print(templates.resource_usage(k), "ld.volatile" in k.asm["ptx"], "atom.global" in k.asm["ptx"])
        return
    import torch
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    torch.manual_seed(0)
    reads = (ATOMIC_READ_FP32, PLAIN_READ_FP32) if args.fp32 else (ATOMIC_READ, PLAIN_READ)
    for kernel, shapes in (SHAPES_FP32 if args.fp32 else SHAPES).items():
        sides = {"atomic reads (template)": templates.load(kernel), "volatile loads": with_plain_reads(kernel, *reads)}
        for M, N in shapes:
            for dname in (("fp32",) if args.fp32 else DTYPES):
                templates.time_sides(kernel, sides, M, N, dname, ROUNDS, timer, copy, results)
                (out / "team_gather_loads.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
