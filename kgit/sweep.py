"""Side-by-side sweep of a suite of kernels against torch and the measured copy.

    python -m kgit.sweep memory [--md table.md] [--json raw.json] [--kernels softmax,rmsnorm]
                                [--set softmax.BLOCK_SIZE=16384] [--repeats 3] [--no-check]
    python -m kgit.sweep compute [--only gemm] [--out DIR]     (kgit.sweep_compute: GEMM, attention, MoE)

Every kernel of the suite is checked (the same checks as its test) and timed
in ONE process, so torch, the kernels and the device-copy bandwidth (measured
at the start and again at the end of the run) see the same machine state.
Prints a table and optionally writes it (markdown) and the raw per-shape
records (JSON).

The memory suite is a list of kernel tests, each exposing SPEC (a kgit.bench.Spec).
The compute suite has its own harness and bars (kgit.sweep_compute).

The bar (issue 3, memory-bound kernels): at every shape whose traffic is at
least 256 MB, >= 90% of the measured copy bandwidth and not slower than torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

from kgit import bench, gpu

BAR_MIN_BYTES = 256 * 10**6
BAR_PCT_OF_COPY = 90.0

MEMORY_KERNELS = [  # (name, test path relative to the repository root)
    ("softmax", "skills/kernels/softmax/test_softmax.py"),
    ("layernorm", "skills/kernels/layernorm/test_layernorm.py"),
    ("rmsnorm", "skills/kernels/rmsnorm/test_rmsnorm.py"),
    ("cross-entropy", "skills/kernels/cross-entropy/test_cross_entropy.py"),
    ("rotary-embedding", "skills/kernels/rotary-embedding/test_rotary_embedding.py"),
]


def repo_root() -> str:
    return os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def load_test(name: str, test_path: str):
    """Import a test module by path; returns (module, its triton_template module)."""
    path = test_path if os.path.isabs(test_path) else os.path.join(repo_root(), test_path)
    # every kernel directory has its own `triton_template`: forget the previous one
    sys.modules.pop("triton_template", None)
    spec = importlib.util.spec_from_file_location(f"kgit_test_{name.replace('-', '_')}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, sys.modules.get("triton_template")


def _parse_sets(items) -> dict:
    """["softmax.BLOCK_SIZE=16384", ...] -> {"softmax": {"BLOCK_SIZE": 16384}}"""
    out: dict = {}
    for item in items or []:
        key, _, value = item.partition("=")
        kernel, _, field = key.partition(".")
        try:
            value = json.loads(value)
        except ValueError:
            pass
        out.setdefault(kernel, {})[field] = value
    return out


def bar_row(rec: dict, copy_gbps: float | None) -> str:
    if rec["bytes"] < BAR_MIN_BYTES or not copy_gbps:
        return "-"
    ok = rec["gbps"] >= BAR_PCT_OF_COPY / 100 * copy_gbps and rec.get("speedup", 1.0) >= 1.0
    return "yes" if ok else "NO"


def table_rows(results: dict, copy_gbps: float | None) -> list:
    rows = []
    for name, res in results.items():
        if res["status"] != "pass":
            first = res["errors"][0] if res["errors"] else {"error": "?"}
            rows.append([name, "FAIL", "", "", "", "", "", "", "", "", str(first)[:80]])
            continue
        for r in res["shapes"]:
            rows.append([
                name, r["dtype"], "x".join(str(s) for s in r["shape"]), round(r["bytes"] / 1e6),
                f"{r['latency_us']:.1f}", f"{r['gbps']:.0f} ±{r['spread_pct']:.1f}%",
                f"{r.get('pct_of_copy', float('nan')):.1f}",
                f"{r['torch_gbps']:.0f}" if "torch_gbps" in r else "",
                f"{r['speedup']:.2f}" if "speedup" in r else "",
                f"{r['pct_of_peak']:.1f}" if r.get("pct_of_peak") else "",
                bar_row(r, copy_gbps),
            ])
    return rows


HEADERS = ["kernel", "dtype", "shape", "MB", "us", "GB/s", "% copy", "torch GB/s", "speedup",
           "% datasheet", "bar"]


def run_suite(kernels=None, sets=None, repeats=bench.REPEATS, check=True,
              warmup=bench.WARMUP_MS, rep=bench.REP_MS) -> dict:
    info = gpu.detect()
    copy_start = gpu.measured_copy_gbps(refresh=True)
    results, configs = {}, {}
    for name, path in MEMORY_KERNELS:
        if kernels and name not in kernels:
            continue
        mod, tmpl = load_test(name, path)
        if tmpl is not None and sets and name in sets:
            tmpl.CONFIG.update(sets[name])
        configs[name] = dict(getattr(tmpl, "CONFIG", {}) or {})
        t0 = time.time()
        res = bench.run(mod.SPEC, repeats=repeats, warmup=warmup, rep=rep, check=check)
        res["wall_s"] = round(time.time() - t0, 1)
        res["config"] = configs[name]
        results[name] = res
        print(f"# {name}: {res['status']} in {res['wall_s']} s, config {configs[name]}", flush=True)
        for e in res["errors"][:5]:
            print(f"#   {e}", flush=True)
    copy_end = gpu.measured_copy_gbps(refresh=True)
    return {"suite": suite, "gpu": info, "copy_gbps_start": copy_start, "copy_gbps_end": copy_end,
            "bar": {"min_bytes": BAR_MIN_BYTES, "pct_of_copy": BAR_PCT_OF_COPY},
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "results": results}


def render(report: dict) -> str:
    from tabulate import tabulate
    copy = report["copy_gbps_start"]
    lines = [f"GPU: {report['gpu']['name']}; measured copy {copy and round(copy)} GB/s at start, "
             f"{report['copy_gbps_end'] and round(report['copy_gbps_end'])} GB/s at end; "
             f"bar: >= {BAR_PCT_OF_COPY:.0f}% of copy and speedup >= 1 where traffic >= 256 MB", ""]
    lines.append(tabulate(table_rows(report["results"], copy), headers=HEADERS, tablefmt="github"))
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compute"]:
        from kgit import sweep_compute

        return sweep_compute.main(argv[1:])
    p = argparse.ArgumentParser(prog="python -m kgit.sweep", description=__doc__.split("\n")[0])
    p.add_argument("suite", choices=["memory", "compute"])
    p.add_argument("--kernels", help="comma-separated subset")
    p.add_argument("--set", action="append", help="KERNEL.KEY=VALUE: override a template CONFIG entry")
    p.add_argument("--repeats", type=int, default=bench.REPEATS)
    p.add_argument("--warmup", type=int, default=bench.WARMUP_MS)
    p.add_argument("--rep", type=int, default=bench.REP_MS)
    p.add_argument("--no-check", action="store_true", help="skip correctness (timing only)")
    p.add_argument("--md", help="write the table here (markdown)")
    p.add_argument("--json", help="write the raw report here")
    args = p.parse_args(argv)
    report = run_suite(args.kernels.split(",") if args.kernels else None, _parse_sets(args.set),
                       args.repeats, not args.no_check, args.warmup, args.rep)
    text = render(report)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if all(r["status"] == "pass" for r in report["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
