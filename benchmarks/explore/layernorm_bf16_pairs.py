"""Issue 15: layernorm's shared-memory team reading bf16 chunks as int32 pairs (session 17).

    python benchmarks/explore/layernorm_bf16_pairs.py [--out DIR]      (GPU, about 2 minutes)

Why: the team reads 3-4 points less in bf16 than in fp16 at every shape (session 16: 80.9 / 84.2% of copy at
4096x32768, 79.7 / 83.1 at 2048x65536, 74.8 / 77.8 at 512x262144). Offline for sm_90a
(benchmarks/explore/team_sass.py), bf16 unpacks a value in 1.5 SASS instructions where fp16 takes one, and
the team converts each element five times. Read as int32 pairs, a bf16 is the high half of an fp32: one
shift or one mask a value (`_bf16_pairs`). Compiled at N 32768: 2328 instructions and 79 registers today,
2160 / 80 with pairs in the two statistics passes (PAIRS 1), 2056 / 96 with pairs in the output pass too
(PAIRS 2: five programs an SM instead of six), 2096 / 80 with PAIRS 2 capped at 80 registers; fp16 2144 / 72.
Prediction: PAIRS 2 under the cap closes most of the gap to fp16 (+2-4 points); uncapped it gains less, or
loses at 262144, for the program an SM it costs; PAIRS 1 half the gain.

Outcome (experiments/sweep-h200-session17/call2-bf16-pairs/, run at commit fa663b5, where the template's
BF16_PAIRS chose 0, 1 or 2): PAIRS 2 capped at 80 registers read 83.3 / 82.0% at 32768 / 65536 (today 80.2 /
79.0, fp16 83.2 / 82.0) and 75.8 at 262144 (74.0, fp16 77.7); at 131072, where pairs take 72 registers
uncapped and the cap spilled, uncapped 82.9 (79.0, fp16 82.7). PAIRS 1 +0.8-1.9 points, -2.7 at 262144.
The template kept pairs in every pass, and the cap where it fits more programs on an SM.

Each variant runs the template's launcher with the team's PAIRS and maxnreg forced (None: the launcher's
own choice), over two interleaved rounds, checked first against an fp32 reference and against the
unpaired output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import templates  # noqa: E402  (beside this file)

SHAPES = [(4096, 32768), (2048, 65536), (1024, 131072), (512, 262144)]
# (dtype, PAIRS, maxnreg: 0 uncapped); None for both: the template as shipped
VARIANTS = [("bf16", False, 0), ("bf16", True, 0), ("bf16", True, 80), ("bf16", None, None), ("fp16", None, None)]
ROUNDS = 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    args = p.parse_args()
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    L = templates.load("layernorm")
    team = L._layernorm_smem_team
    torch.manual_seed(0)
    for M, N in SHAPES:
        inputs = {}
        for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            x, w, b = templates.norm_inputs(M, N, dtype)
            inputs[name] = (x, w, b, L.layernorm_ref(x, w, b).float(), torch.empty_like(x))
        unpaired = {}
        for rnd in range(ROUNDS):
            for name, pairs, cap in VARIANTS:
                x, w, b, ref, y = inputs[name]
                L._layernorm_smem_team = (team if pairs is None else
                                          templates.Overridden(team, PAIRS=pairs, maxnreg=cap or None))
                row = {"shape": [M, N], "dtype": name, "pairs": pairs, "maxnreg": cap, "round": rnd}
                templates.check_and_time_team(L, row, lambda y: L.layernorm(x, w, b, out=y), y, ref,
                                              2 * x.numel() * 2, timer, copy)
                if "error" not in row:
                    L.layernorm(x, w, b, out=y)
                    unpaired.setdefault(name, y.clone())
                    row["max_abs_diff_vs_unpaired"] = (y.float() - unpaired[name].float()).abs().max().item()
                results["rows"].append(row)
                print(f"layernorm {M}x{N} {name} PAIRS {pairs} maxnreg {cap} round {rnd}: {templates.figure(row)}"
                      f" (err {row.get('max_rel_err', float('nan')):.2g},"
                      f" vs unpaired {row.get('max_abs_diff_vs_unpaired', float('nan')):.2g})", flush=True)
        (out / "layernorm_bf16_pairs.json").write_text(json.dumps(results, indent=1))
    L._layernorm_smem_team = team
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
