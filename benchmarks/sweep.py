"""Every kernel under skills/kernels/ against torch, in one process, in one table.

    python benchmarks/sweep.py [--kernels softmax,gemm] [--out DIR] [--set softmax.BLOCK_SIZE=16384]
                               [--repeats 3] [--quick]

A kernel is every folder of skills/kernels/ with a test_*.py whose SPEC is a kgit.harness.Spec. Each
is checked and timed by its own test's harness run with --sweep (headline and sweep shapes), one
after the other, so torch, the kernels and the device copy (measured at the start and at the end)
see the same machine. Prints the table and writes DIR/sweep.md and DIR/sweep.json (the table's rows,
the machine, and each kernel's whole test result). In Triton's interpreter the figures are CPU
figures of tiny shapes: the table says so, and has no % columns.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402
from bench import ROOT  # noqa: E402
from kgit import harness  # noqa: E402
from kgit.harness import device  # noqa: E402

COLUMNS = ["kernel", "shape", "dtype", "role", "kgit", "torch", "unit", "speedup", "% of copy", "% of peak",
           "spread %", "torch spread %", "ran"]


def discover(root: Path = ROOT) -> dict[str, Path]:
    """kernel folder name -> its test file, for every skills/kernels/<name>/ holding a test_*.py."""
    found = {}
    for folder in sorted((root / "skills" / "kernels").iterdir()):
        tests = sorted(folder.glob("test_*.py"))
        if folder.is_dir() and tests:
            found[folder.name] = tests[0]
    return found


def parse_sets(items) -> dict:
    """["softmax.BLOCK_SIZE=16384", ...] -> {"softmax": {"BLOCK_SIZE": 16384}}"""
    out: dict = {}
    for item in items or []:
        key, _, value = item.partition("=")
        kernel, _, name = key.partition(".")
        try:
            value = json.loads(value)
        except ValueError:
            pass  # a string
        out.setdefault(kernel, {})[name] = value
    return out


def _fmt(value, form=".1f") -> str:
    return "-" if value is None else format(value, form)


def ran(config: dict | None, base: dict) -> str:
    """What served a timed shape: the kernel, where the template names the one its launcher chose by shape
    (the memory-bound ones), and the keys of its launch's configuration that differ from the template's
    CONFIG ("CONFIG" where neither is said), "-" where the test does not say (Spec.launched)."""
    if config is None:
        return "-"
    kernel = [config["kernel"]] if "kernel" in config else []
    return " ".join(kernel + [f"{k}={v}" for k, v in config.items() if k in base and base[k] != v]) or "CONFIG"


def rows_of(kernel: str, metric: str, result: dict, base_config: dict | None = None) -> list[dict]:
    """One table row per timed entry; one row saying why when the kernel failed."""
    if result["status"] != "pass":
        return [{**dict.fromkeys(COLUMNS, ""), "kernel": kernel, "shape": "FAIL", "kgit": result.get("reason", "")}]
    unit = "GB/s" if metric == "gbps" else "TFLOP/s"
    figure = ".3g" if result["cpu_timing"] else ".1f"  # interpreter figures are tiny
    return [{"kernel": kernel, "shape": e["label"], "dtype": e["dtype"], "role": e["role"],
             "kgit": _fmt(e[metric], figure), "torch": _fmt(e.get(f"torch_{metric}"), figure), "unit": unit,
             "speedup": _fmt(e.get("speedup"), ".3g"), "% of copy": _fmt(e.get("pct_of_copy")),
             "% of peak": _fmt(e.get("pct_of_peak")), "spread %": _fmt(e["spread_pct"]),
             "torch spread %": _fmt(e.get("torch_spread_pct")), "ran": ran(e.get("config"), base_config or {})}
            for e in result["shapes"]]


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [f"# Sweep on {m['gpu']}", "",
             f"{m['time']}; torch {m['torch']}, triton {m['triton']}; measured copy "
             f"{_fmt(m['copy_gbps_start'], '.0f')} GB/s at the start, {_fmt(m['copy_gbps_end'], '.0f')} at the end. "
             f"Figures: median over calls (L2 cleared by a read before each), {m['repeats']} repeats; spread = 100 * (max - min) / median of them. "
             "% of copy: of the measured device copy (memory-bound); % of peak: of the datasheet (kgit.model.peaks).", ""]
    if m["cpu_timing"]:
        lines += ["Triton interpreter: CPU figures of tiny shapes, not comparable to a GPU.", ""]
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(row[c]) for c in COLUMNS) + " |" for row in report["rows"]]
    return "\n".join(lines) + "\n"


def save(out: Path, report: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.md").write_text(markdown(report))
    (out / "sweep.json").write_text(json.dumps(report, indent=1))


def sweep(kernels: list[str] | None, sets: dict, timer: harness.Timer, quick: bool, out: Path | None = None) -> dict:
    """The report; with `out`, also saved there after each kernel, so that a run cut short by a
    time limit keeps the kernels it finished (the end copy bandwidth then reads "-")."""
    tests = discover()
    unknown = sorted(set(kernels or []) - set(tests))
    if unknown:
        raise SystemExit(f"no kernel test for {', '.join(unknown)} (found: {', '.join(tests)})")
    machine = {**bench.machine(), "repeats": timer.repeats,
               "copy_gbps_start": device.measured_copy_gbps(refresh=True), "copy_gbps_end": None}
    rows, results = [], {}
    report = {"machine": machine, "columns": COLUMNS, "rows": rows, "results": results}
    for name in kernels or list(tests):
        spec, config = bench.load_test(tests[name])
        if name in sets:  # for this run only
            config.update(sets[name])
        started = time.time()
        result = harness.run(spec, quick=quick, sweep=True, timer=timer)
        result["wall_s"] = round(time.time() - started, 1)
        results[name] = result
        rows += rows_of(name, spec.metric, result, config)
        print(f"# {name}: {result['status']} in {result['wall_s']} s", flush=True)
        if out:
            save(out, report)
    machine["copy_gbps_end"] = device.measured_copy_gbps(refresh=True)
    if out:
        save(out, report)
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", help="comma-separated folder names under skills/kernels/ (default: all)")
    p.add_argument("--out", help="write sweep.md and sweep.json into this folder")
    p.add_argument("--set", action="append", help="KERNEL.KEY=VALUE: override an entry of a template's CONFIG")
    p.add_argument("--repeats", type=int, default=harness.Timer.repeats)
    p.add_argument("--quick", action="store_true", help="the tests' --quick (fewer checks and shapes, no torch)")
    args = p.parse_args(argv)
    kernels = [k.strip() for k in args.kernels.split(",")] if args.kernels else None
    report = sweep(kernels, parse_sets(args.set), harness.Timer(repeats=args.repeats), args.quick,
                   Path(args.out) if args.out else None)
    print(markdown(report))
    return 0 if all(r["status"] == "pass" for r in report["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
