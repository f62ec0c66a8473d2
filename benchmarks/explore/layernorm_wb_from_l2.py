"""Issue 15: layernorm's team on the longest rows, parts of 8192 with w and b read from L2 (session 17).

    python benchmarks/explore/layernorm_wb_from_l2.py [--out DIR]      (GPU, about a minute)

Why: 16-bit 512x262144 reads 78.1 / 76.3% of copy (fp16 / bf16; bar 80) where softmax's team reads 85-86.
At 262144 this team is 64 programs of 4096-element parts, each gathering 64 words a row; softmax's parts
are 8192 (32 words). Parts of 8192 with w and b in shared memory would take 64 KB a program (three an SM:
69.8-72.7% in session 11); read from L2 with every output chunk instead, session 11's sweep read 76.7-77.3
/ 80.6-81.5% at 65536-262144 (bf16 / fp16, before bf16's int32 pairs) against 74.6 / 77.0 for today's
parts at 262144. Offline for sm_90a (team_sass.py --n 262144): 96 registers in fp16, 118 in bf16 pairs
(five and four programs an SM), 80 under the cap with 72 bytes spilled.
Prediction: at 262144 +2-4 points (fp16 to 80-82, bf16 to 78-80), capped or not; at 131072 within a point.

Each variant runs the template's launcher with WB_FROM_L2_ABOVE set (0: every team row takes the L2
variant; the default: today's choice), the last one with the cap forced off, over two interleaved rounds,
checked first against an fp32 reference.
Outcome (experiments/sweep-h200-session17/call7-wb-from-l2/): falsified everywhere. At 512x262144 66.8 /
71.3% capped and 69.6 / 73.3 uncapped against today's 75.7 / 77.4 (bf16 / fp16); at 131072 and 65536
62.5-75.6 against 82.0-82.8.
Reading w and b from L2 with every output chunk costs more than the halved gather saves. The variant
(WB_SHARED, WB_FROM_L2_ABOVE) is in the template at commit 4e020a3 only; run this there.
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

SHAPES = [(512, 262144), (1024, 131072), (2048, 65536)]
VARIANTS = [("parts of 4096, w and b in shared memory", 1 << 40, None),
            ("parts of 8192, w and b from L2", 0, None),
            ("parts of 8192, w and b from L2, uncapped", 0, "uncapped")]
ROUNDS = 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    args = p.parse_args()
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    L = templates.load("layernorm")
    if not hasattr(L, "WB_FROM_L2_ABOVE"):
        raise SystemExit("the variant is not in this template: git checkout 4e020a3 -- skills/kernels/layernorm/")
    team = L._layernorm_smem_team
    torch.manual_seed(0)
    for M, N in SHAPES:
        for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            x = (torch.randn(M, N, device="cuda") * 2 + 0.5).to(dtype)
            w = (torch.rand(N, device="cuda") + 0.5).to(dtype)
            b = torch.randn(N, device="cuda").to(dtype)
            ref = L.layernorm_ref(x, w, b).float()
            y = torch.empty_like(x)
            for rnd in range(ROUNDS):
                for label, above, cap in VARIANTS:
                    L.WB_FROM_L2_ABOVE = above
                    L._layernorm_smem_team = templates.Overridden(team, maxnreg=None) if cap == "uncapped" else team
                    row = {"shape": [M, N], "dtype": name, "variant": label, "round": rnd}
                    templates.check_and_time_team(L, row, lambda y: L.layernorm(x, w, b, out=y), y, ref,
                                                  2 * x.numel() * 2, timer, copy)
                    results["rows"].append(row)
                    print(f"layernorm {M}x{N} {name} round {rnd} {label}: {templates.figure(row)}"
                          f" (err {row.get('max_rel_err', float('nan')):.2g})", flush=True)
            (out / "layernorm_wb_from_l2.json").write_text(json.dumps(results, indent=1))
    L._layernorm_smem_team = team
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
