"""Issue 15: rmsnorm's rows of 32768 split over two programs, as layernorm's (_layernorm_half_rows).

    python benchmarks/explore/rmsnorm_half_rows.py [--out DIR] [--rounds 2] [--shapes 4096x32768,...]
    python benchmarks/explore/rmsnorm_half_rows.py --compile-only   # registers for sm_90, no GPU

Why: rmsnorm's rows of 32768 are one program a whole row on 16 warps (_rmsnorm_row), one program an SM:
4096x32768 read 90.5 / 92.1 / 90.6% of copy in fp32 / fp16 / bf16 in session 20's sweep (89.0-89.7 in
bf16 before), a point or two over the bar, while its rows of 16384 read 95.8-97.8. Layernorm's 16-bit
rows of 32768 went from 88.6 to 90-92 split in halves that trade their statistics in one 64-bit word
(experiments/sweep-h200-session21/call2-relaxed/). Rmsnorm needs no pairs for that: a half row of 32768
is a row of 16384, which the whole-row kernel reads at 96%; the halves trade one sum of squares (its
fp32 bits in the low half of the word, so never the -1 of an empty one) and merge nothing else.
Prediction: 4096x32768 93-95% in every dtype; 2048x32768 over today's.
Call 7 (experiments/sweep-h200-session21/call7-rmsnorm/): fp32 halves on 8 warps 95.5-95.6 at 4096x32768
(the whole row 92.2), 94.3-94.5 at 2048 (89.7-90.1), 96.5-96.6 at 8192 (94.2), 89.9-90.0 at 1024
(83.6-84.2); on 16 or 32 warps 75-79 (one program an SM). 16-bit halves converted lost everywhere
(80-85 against 87-94): 88 registers on 8 warps. Predicted for fp32, falsified for 16-bit as written.
Call 8 (call8-rmsnorm-pairs/): 16-bit halves held as loaded, pairs (as layernorm's), 8 warps (70
registers, three programs an SM): 4096x32768 92.7-92.9 / 94.4-94.6 (bf16 / fp16; the whole row 90.8 /
92.6), 2048 89.7-89.9 / 89.6-89.9 (87.3-87.4 / 89.2-89.3), 8192 94.7 / 95.2-95.3 (92.3-92.4 / 94.0), 1024
82.9-83.2 / 82.4-83.0 (81.1-82.3 / 83.2-83.3); 16 warps within a point. The template's _rmsnorm_half_rows
came of calls 7 and 8.

Each variant is checked against torch in fp32 (output poisoned first), then timed, A B A B.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)

RMSNORM = templates.load("rmsnorm")
SHAPES = [(4096, 32768), (2048, 32768), (8192, 32768), (1024, 32768)]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
SPIN = 1 << 20
SETTINGS = {"halves 8w": 8, "halves 16w": 16, "halves 32w": 32}  # label -> num_warps
PAIRED_SETTINGS = {"halves in pairs 8w": 8, "halves in pairs 16w": 16}  # 16-bit rows only
# The kernels as they ran are the template's _rmsnorm_half_rows, PAIRS 0 (calls 7) and 1 (call 8), which
# came of them line for line.
_rmsnorm_half_rows = RMSNORM._rmsnorm_half_rows


_WORDS = {}


def variants(x, w, eps, labels):
    M, N = x.shape
    if _WORDS.get(x.device) is None or _WORDS[x.device].numel() < 2 * M:
        _WORDS[x.device] = torch.full((2 * M,), -1, device=x.device, dtype=torch.int64)
    words = _WORDS[x.device]
    def launcher(warps, pairs):
        return lambda out: _rmsnorm_half_rows[(2 * M,)](x, w, out, words, N, x.stride(0), out.stride(0), eps, 0,
                                                       HALF=N // 2, SPIN=SPIN, PAIRS=pairs, num_warps=warps)
    plain = {label: launcher(SETTINGS[label], False) for label in labels if label in SETTINGS}
    paired = {label: launcher(PAIRED_SETTINGS[label], True) for label in labels
              if label in PAIRED_SETTINGS and x.element_size() == 2}
    return {**plain, **paired}


def compile_only():
    for dname, pairs, settings in (("fp32", False, SETTINGS), ("bf16", False, SETTINGS), ("bf16", True, PAIRED_SETTINGS)):
        x = torch.empty(16, 32768, dtype=DTYPES[dname])
        args = (x, x[0], x, torch.empty(32, dtype=torch.int64), 32768, 32768, 32768, 1e-6, 0)
        for label, warps in settings.items():
            k = templates.compile_sm90(_rmsnorm_half_rows, args, {"HALF": 16384, "SPIN": SPIN, "PAIRS": pairs},
                                       {"num_warps": warps})
            print(dname, label, templates.resource_usage(k), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--shapes", default=",".join(f"{m}x{n}" for m, n in SHAPES))
    p.add_argument("--dtypes", default=",".join(DTYPES))
    p.add_argument("--variants", default=",".join([*SETTINGS, *PAIRED_SETTINGS]),
                   help="labels of SETTINGS and PAIRED_SETTINGS to time")
    p.add_argument("--compile-only", action="store_true")
    args = p.parse_args()
    if args.compile_only:
        return compile_only()
    from kgit.harness import device

    out, timer, copy, results = templates.begin(args.out)
    for shape in args.shapes.split(","):
        M, N = (int(n) for n in shape.split("x"))
        for dname in args.dtypes.split(","):
            x, w, _ = templates.norm_inputs(M, N, DTYPES[dname])
            y = torch.empty_like(x)
            run, ref = templates.norm_call("rmsnorm", RMSNORM, x, w, None)
            runs = {"template": run, **variants(x, w, RMSNORM.EPS, args.variants.split(","))}
            templates.time_variants("rmsnorm", runs, y, ref, M, N, dname, args.rounds, timer, copy, results)
            results.setdefault("words_left_as_found", []).append(bool(_WORDS[x.device].eq(-1).all().item()))
    results["copy_gbps_end"] = device.measured_copy_gbps(refresh=True)
    (out / "rmsnorm_half_rows.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
