"""Timing-only exploration of template CONFIGs on the GPU (no correctness
checks: the chosen CONFIG is verified by `python benchmarks/sweep.py`).

    python benchmarks/explore/memory_configs.py [--json out.json]
"""
import argparse
import json
import os
import sys
import time

sys.path[:0] = [os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")),
                os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))]
import sweep  # noqa: E402  (benchmarks/sweep.py: finds and loads the kernel tests)
from kgit import harness  # noqa: E402
from kgit.harness import device  # noqa: E402

LONG = [(131072, 1024), (32768, 4096), (4096, 32768), (1024, 131072), (512, 262144)]
PLAN = {
    "softmax": ([{"BLOCK_SIZE": 4096, "num_warps": 4}, {"BLOCK_SIZE": 4096, "num_warps": 4, "PERSISTENT": 0},
                 {"BLOCK_SIZE": 8192, "num_warps": 8}, {"BLOCK_SIZE": 8192, "num_warps": 8, "PERSISTENT": 0},
                 {"BLOCK_SIZE": 8192, "num_warps": 4}, {"BLOCK_SIZE": 16384, "num_warps": 8},
                 {"BLOCK_SIZE": 16384, "num_warps": 16}, {"BLOCK_SIZE": 2048, "num_warps": 4}], LONG),
    "rmsnorm": ([{"BLOCK_SIZE": 4096, "num_warps": 4, "PERSISTENT": 0}, {"BLOCK_SIZE": 8192, "num_warps": 8},
                 {"BLOCK_SIZE": 16384, "num_warps": 16}], LONG),
    "cross-entropy": ([{"BLOCK_SIZE": 4096, "num_warps": 4}, {"BLOCK_SIZE": 8192, "num_warps": 4},
                       {"BLOCK_SIZE": 8192, "num_warps": 8}, {"BLOCK_SIZE": 16384, "num_warps": 8},
                       {"BLOCK_SIZE": 16384, "num_warps": 16}, {"BLOCK_SIZE": 4096, "num_warps": 8},
                       {"BLOCK_SIZE": 2048, "num_warps": 4}, {"BLOCK_SIZE": 8192, "num_warps": 8, "num_stages": 2},
                       {"BLOCK_SIZE": 4096, "num_warps": 4, "num_stages": 2}],
                      [(131072, 1024), (32768, 4096), (8192, 16384), (8192, 128256)]),
    "layernorm": ([{"BLOCK_SIZE": 4096, "num_warps": 4, "PERSISTENT": 0}, {"BLOCK_SIZE": 4096, "num_warps": 8, "PERSISTENT": 0},
                   {"BLOCK_SIZE": 4096, "num_warps": 4, "PERSISTENT": 1, "num_stages": 2},
                   {"BLOCK_SIZE": 8192, "num_warps": 8, "PERSISTENT": 1, "num_stages": 2},
                   {"BLOCK_SIZE": 8192, "num_warps": 8, "PERSISTENT": 0}, {"BLOCK_SIZE": 4096, "num_warps": 16, "PERSISTENT": 0},
                   {"BLOCK_SIZE": 8192, "num_warps": 4, "PERSISTENT": 1, "num_stages": 3}],
                  [(131072, 1024), (32768, 4096)]),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("--kernels")
    p.add_argument("--warm", action="store_true", help="compile only (tiny timing), to fill the cache")
    args = p.parse_args()
    copy = None if args.warm else device.measured_copy_gbps(refresh=True)
    out = {"copy_gbps": copy, "runs": []}
    for name, path in sweep.discover().items():
        if name not in PLAN or (args.kernels and name not in args.kernels.split(",")):
            continue
        configs, shapes = PLAN[name]
        spec = sweep.load_spec(path)
        tmpl = sys.modules["triton_template"]
        base = dict(tmpl.CONFIG)
        for cfg in configs:
            tmpl.CONFIG.clear()
            tmpl.CONFIG.update(base, **cfg)
            t0 = time.time()
            try:
                timer = harness.Timer(repeats=1, warmup_ms=1 if args.warm else 10,
                                      rewarm_ms=1 if args.warm else 10, rep_ms=1 if args.warm else 30)
                res = harness.run(spec, check=False, timer=timer, time_torch=False,
                                  time_shapes=[(s, d) for s in shapes for d in ("fp32", "bf16")])
            except Exception as e:  # a config that does not compile is a result too
                print(f"{name} {cfg}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            line = "  ".join(f"{'x'.join(map(str, r['shape']))}/{r['dtype']}:{r['pct_of_copy']:.0f}%"
                             for r in res["shapes"])
            print(f"{name} {cfg} ({time.time() - t0:.0f}s): {line}", flush=True)
            out["runs"].append({"kernel": name, "config": dict(tmpl.CONFIG), "shapes": res["shapes"]})
        occ = getattr(tmpl, "_OCCUPANCY", None)
        if occ:
            print(f"{name} occupancy: {[(k[0], k[1], k[2], v) for k, v in occ.items()][:12]}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
