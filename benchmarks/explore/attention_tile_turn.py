"""Flash attention's persistent kernel (GLUON 2) with each tile's first block under the last P V of the tile
before it: the template before the change against the checkout's, beside the default SDPA, in one process.

    python benchmarks/explore/attention_tile_turn.py --before FILE [--out DIR] [--cases SPEC,...] [--rounds 3]

FILE is the template before the change (`git show REV:skills/kernels/flash-attention/triton_template.py`).

Why: the persistent kernel's consumers overlap S_j = Q K_j with P_{j-1} V_{j-1} inside a tile, but between
tiles each ran alone: the last P V waited for, the epilogue, the next tile's S_0 waited for and its
softmax done with no matrix product in flight. Both consumers reach a tile's end together (they share
the K/V ring), so the tensor cores idle there, about one key block's time in a tile of n blocks. Now
the next tile's S_0 is issued before the last P V and its softmax runs under it (_ws_block's NEW_TILE),
as inside a tile. Compiled for sm_90 (triton 3.6): the same 168 registers, no spills, the same shared
memory.

Prediction (bf16, x the default SDPA, against before in the same run): +5-8% where tiles are short (head
dim 64 S 1024 at 8 blocks a tile, causal S 1024-2048 at 4.5-8.5 on average; head dim 128 S 1024 and
causal S 1024-2048), +1-3% at causal S 4096-8192.

Cases: SPEC is `S[c]` at head dim 64 (c: causal), `S[c]@128` at head dim 128; B * S = 16384 and H 32 (64)
or 16 (128), the test's sweep shapes. Each side runs the same fresh inputs, checked against the fp32
reference with its output poisoned first, then timed in `--rounds` rounds of A B A B, each keeping its
best median, beside the default SDPA timed in the same rounds.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
import templates  # noqa: E402  (beside this file)
from attention_fma_exp import run_cases  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="the flash-attention template before the change")
    p.add_argument("--also", action="append", default=[], metavar="NAME=FILE[@CONSTANT=VALUE,...]",
                   help="another variant of the template, timed between before and after, with the template's "
                        "launch constants set (PERSISTENT_BUFFERS, WS_LOADER_REGS)")
    p.add_argument("--out", default=".")
    p.add_argument("--cases", default="1024,1024c,2048c,4096c,8192c,1024@128,1024c@128,2048c@128")
    p.add_argument("--gluon", default="2", help="the Gluon kernels to run (GLUON numbers: 1, 2, 3)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--budget-s", type=float, default=300.0)
    p.add_argument("--hang-s", type=float, default=120.0)
    args = p.parse_args()
    started = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    out_path = out / "attention_tile_turn.json"
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "rows": []}
    sides = {"before": templates.load("flash-attention", args.before, side="before")}
    for spec in args.also:  # NAME=FILE[@CONSTANT=VALUE,...]
        name, _, rest = spec.partition("=")
        path, _, settings = rest.partition("@")
        sides[name] = templates.load("flash-attention", path, side=name)
        for setting in filter(None, settings.split(",")):
            constant, _, value = setting.partition("=")
            setattr(sides[name], constant, int(value))
    sides["after"] = templates.load("flash-attention", side="after")
    templates.start_watchdog(args.hang_s)
    run_cases(args.cases, started + args.budget_s, sides, args.rounds, results, out_path,
              [int(g) for g in args.gluon.split(",")])
    print(f"done in {time.time() - started:.0f} s; rows in {out_path}", flush=True)


if __name__ == "__main__":
    main()
