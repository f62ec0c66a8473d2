"""Issue 15: layernorm's team in bf16 at 512x262144 under other register caps (session 18).

    python benchmarks/explore/layernorm_team_caps.py [--out DIR]      (GPU, under a minute)

After the gather by volatile loads (call 4 of experiments/sweep-h200-session18/), bf16 512x262144 reads
78.6-78.9% of copy against fp16's 79.7-80.0 (bar 80). The bf16 team reads x, w and b as int32 pairs
(PAIRS) under an 80-register cap (six programs an SM; uncapped it holds 80-86). Variants: the cap at 72, 80
(today), 88 and none, PAIRS on and off, beside fp16 as shipped. Prediction: no variant gains more than a
point; a cap under 80 spills. Each variant is checked against an fp32 reference, then timed in two
interleaved rounds (the harness's Timer, % of the copy measured at the start).

Outcome (experiments/sweep-h200-session18/call6-layernorm-caps/), % of copy in two rounds: as shipped 78.8 /
78.6 (pairs, capped at 80); pairs capped at 72 76.1, at 88 73.1-73.3, uncapped 78.9 / 78.5; without pairs
74.3-74.7 capped, 71.5-75.1 uncapped; fp16 79.7. Confirmed: nothing gains; the template stays as it is.
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

M, N = 512, 262144
# (dtype, PAIRS, maxnreg); None, None: the template as shipped
VARIANTS = [("bf16", None, None), ("bf16", True, 72), ("bf16", True, 88), ("bf16", True, 0), ("bf16", False, 80),
            ("bf16", False, 0), ("fp16", None, None)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    args = p.parse_args()
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    L = templates.load("layernorm")
    team = L._layernorm_smem_team
    torch.manual_seed(0)
    inputs = {}
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        x, w, b = templates.norm_inputs(M, N, dtype)
        inputs[name] = (x, w, b, L.layernorm_ref(x, w, b).float(), torch.empty_like(x))
    for rnd in range(2):
        for name, pairs, cap in VARIANTS:
            x, w, b, ref, y = inputs[name]
            L._layernorm_smem_team = (team if pairs is None else
                                      templates.Overridden(team, PAIRS=pairs, maxnreg=cap or None))
            row = {"shape": [M, N], "dtype": name, "pairs": pairs, "maxnreg": cap, "round": rnd}
            templates.check_and_time_team(L, row, lambda y: L.layernorm(x, w, b, out=y), y, ref, 2 * x.numel() * 2,
                                          timer, copy)
            results["rows"].append(row)
            print(f"layernorm {M}x{N} {name} PAIRS {pairs} maxnreg {cap} round {rnd}: {templates.figure(row)}",
                  flush=True)
    L._layernorm_smem_team = team
    (out / "layernorm_team_caps.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
