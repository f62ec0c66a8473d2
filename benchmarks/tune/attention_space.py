"""The whole flash-attention CONFIG_SPACE (576 configurations) from the few that decide its figures.

    python benchmarks/tune/attention_space.py MEASURED.json --json WHOLE.json

skills/kernels/flash-attention's keys matter only for some values of the others, at the shapes its quick
test runs on a Hopper GPU (headline B4 H16 S4096 D128 bf16, which every Gluon kernel takes; checks at S
1000 and 257, which only the Triton kernel takes, and at S 1024 D128):
- GLUON 0, AUTOTUNE 0: the Triton kernel's keys (BLOCK_M, BLOCK_N, num_warps, num_stages) decide;
  NUM_BUFFERS is read by the Gluon kernel alone.
- GLUON 1-3, AUTOTUNE 0: the Gluon kernel times the headline (GLUON 3, FlashAttention-3's head-dim-64
  tile, runs GLUON 1 at head dim 128; GLUON 2 ignores NUM_BUFFERS); the Triton keys only decide whether
  the checks the Triton kernel takes pass: a configuration whose GLUON 0 twin fails them fails too.
- AUTOTUNE 1: the template times its candidates (this configuration and AUTOTUNE_CONFIGS, a failing one
  dropped) and keeps the fastest, the Gluon kernels where they run: the Triton keys do not decide.

space.py measures the representatives (the first case whole, the others at the shipped Triton keys:
benchmarks/device/spaces_h100.sh) into MEASURED; every other configuration takes its representative's
row, marked "from" it. A configuration measured itself (to check the rule) keeps its own row.
"""

import argparse
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from kgit.loop import tune  # noqa: E402

TEMPLATE = ROOT / "skills" / "kernels" / "flash-attention" / "flash_attention.py"
TRITON_KEYS = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")


def key(config: dict) -> str:
    return json.dumps(config, sort_keys=True)


def representative(config: dict, shipped: dict) -> dict:
    """The configuration whose measured figure stands for config's."""
    if not config["GLUON"] and not config["AUTOTUNE"]:
        return {**config, "NUM_BUFFERS": shipped["NUM_BUFFERS"]}
    return {**config, **{k: shipped[k] for k in TRITON_KEYS}}


def triton_twin(config: dict, shipped: dict) -> dict:
    """The Triton kernel's configuration with config's Triton keys: what the checks the Gluon kernels do
    not take run."""
    return {**config, "GLUON": 0, "AUTOTUNE": 0, "NUM_BUFFERS": shipped["NUM_BUFFERS"]}


def whole(rows: list[dict], space: dict, shipped: dict) -> list[dict]:
    """A row for every configuration of space: measured, or its representative's."""
    measured = {key(r["config"]): r for r in rows}
    missing = {key(representative(c, shipped)) for c in _points(space, shipped)} - measured.keys()
    if missing:
        raise SystemExit(f"{len(missing)} representatives not measured, e.g. {sorted(missing)[0]}")
    out = []
    for config in _points(space, shipped):
        if key(config) in measured:
            out.append(measured[key(config)])
            continue
        rep = measured[key(representative(config, shipped))]
        twin = measured[key(triton_twin(config, shipped))]
        row = {**rep, "config": config, "from": rep["config"]}
        if not config["AUTOTUNE"] and not twin["correct"]:
            why = f"as its Triton twin (GLUON 0) at the checks the Gluon kernel does not take: {twin['error']}"
            row.update(correct=False, value=None, spread_pct=None, error=why)
        out.append(row)
    return out


def _points(space: dict, shipped: dict) -> list[dict]:
    return [{**shipped, **dict(zip(space, values))} for values in itertools.product(*space.values())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measured", help="space.py's table of the representatives (and any others)")
    parser.add_argument("--json", required=True, help="write the whole space's table here")
    args = parser.parse_args()
    tunables = tune.read_tunables(TEMPLATE.read_text(), str(TEMPLATE))
    table = json.loads(Path(args.measured).read_text())
    rows = whole(table["rows"], tunables.space, tunables.config)
    correct = sorted((r for r in rows if r["correct"]), key=lambda r: -r["value"])
    Path(args.json).write_text(json.dumps({**table, "configurations": len(rows), "correct": len(correct),
                                           "measured": len(table["rows"]), "best": correct[0] if correct else None,
                                           "rows": rows}, indent=1))
    print(f"{len(rows)} configurations from {len(table['rows'])} measured; {len(correct)} correct")


if __name__ == "__main__":
    main()
