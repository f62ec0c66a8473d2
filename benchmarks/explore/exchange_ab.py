"""Issue 15: the fp32 split teams' exchange, flags (a git revision's templates) against stamped words
(this checkout's), in one process, alternated, twice.

    python benchmarks/explore/exchange_ab.py --flags DIR [--out DIR] [--kernels softmax,rmsnorm,layernorm]

DIR holds the flagged templates as <kernel>.py (`git show 4465263:skills/kernels/softmax/triton_template.py`
and so on: the device machine's copy of the checkout has no git history).

Why: the templates' sweep with stamped words (experiments/sweep-h200-session12/norms/) read rmsnorm
+6.6 to +10.9 points of copy at fp32 rows of 65536-262144, but softmax -10.1 at 262144 and layernorm
-6.7 / -7.2 at 65536 / 131072, against the sweep an hour earlier with flags, where
benchmarks/explore/stamped_split.py had read softmax's stamped team level with flags at 262144. Two
sweeps are two processes: this puts both exchanges on the same inputs, A B A B, to tell a real loss
from a team placement that differs between runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import templates  # noqa: E402  (beside this file)

SHAPES = [(2048, 65536), (1024, 131072), (512, 262144)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--flags", required=True, help="a folder of the templates that exchange by flags")
    p.add_argument("--out", default=".")
    p.add_argument("--kernels", default="softmax,rmsnorm,layernorm")
    args = p.parse_args()
    started = time.time()
    out, timer, copy, results = templates.begin(args.out)
    torch.manual_seed(0)
    for kernel in args.kernels.split(","):
        versions = {"flags": templates.load(kernel, Path(args.flags) / f"{kernel}.py", "flagged"),
                    "stamped": templates.load(kernel)}
        for M, N in SHAPES:
            x = torch.randn(M, N, device="cuda") * 3
            w, b = torch.rand(N, device="cuda") + 0.5, torch.randn(N, device="cuda")
            y = torch.empty_like(x)
            for round_ in (1, 2):
                for name, module in versions.items():
                    row = {"kernel": kernel, "shape": [M, N], "dtype": "fp32", "variant": name, "round": round_}
                    run, ref = templates.norm_call(kernel, module, x, w, b)
                    templates.check_and_time(row, run, y, ref, 2 * x.numel() * 4, timer, copy, True)
                    results["rows"].append(row)
                    print(f"{kernel} {M}x{N} fp32 {name} (round {round_}): {templates.figure(row)}", flush=True)
            (out / "exchange_ab.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
