"""Measure every configuration of a kernel template's CONFIG_SPACE: the reference for kgit tune's bar.

    python benchmarks/tune/space.py skills/kernels/gemm/test_gemm.py --json space.json [--jobs 12] -- --quick

Each configuration is written into a copy of the kernel's folder exactly as kgit tune writes it
(kgit.loop.tune.write_config), the test is imported afresh from there, and its own entry point runs with
`--json` and the arguments after `--`: the same checks and the same headline number that kgit tune
decides on (give kgit tune the same arguments: kgit.yaml `test_args`). One process measures, one
configuration after the other, so the figures see the same machine.

--remeasure TABLE --within 0.85 --repeats 5 measures again, round after round, every configuration of an
earlier table within that fraction of its best, and writes each one's median (and every figure): the
reference for the bar, since a table's best is the largest of many single noisy figures.

--subspace KEY=V1,V2 ... measures only the configurations whose KEY takes one of those values (each value
one of CONFIG_SPACE's): a product of fewer values, whole, so that a table of it can be replayed where the
whole space takes too long to measure, or the representatives of a space whose keys matter only for
some values of another (benchmarks/tune/attention_space.py). Tables of several subspaces can share one
JSON file: the rows accumulate.

--jobs N first runs N worker processes that compile every configuration (and run it once, not timed)
to fill Triton's cache, which keys kernels by their source, not their file: compiling is most of the
time for a GEMM. The JSON is rewritten after each configuration, and a rerun skips the configurations
it already holds, so an interrupted sweep goes on where it stopped.
"""

import argparse
import contextlib
import io
import itertools
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench  # noqa: E402
from kgit import harness  # noqa: E402
from kgit.harness.timing import spread_pct  # noqa: E402
from kgit.loop import tune  # noqa: E402
from kgit.model import result as test_result  # noqa: E402


def configurations(tunables: tune.Tunables, space: dict | None = None) -> list[dict]:
    """Every point of the space (or of a subspace of it), each a full CONFIG (keys outside the space keep
    their shipped value)."""
    space = space or tunables.space
    return [{**tunables.config, **dict(zip(space, values))} for values in itertools.product(*space.values())]


def subspace(space: dict, narrowed: list[str]) -> dict:
    """The space with each KEY=V1,V2 of `narrowed` taking only those values (JSON literals, each in the space)."""
    space = dict(space)
    for item in narrowed:
        name, _, values = item.partition("=")
        if name not in space:
            raise SystemExit(f"--subspace {item}: {name!r} is not a key of CONFIG_SPACE ({', '.join(space)})")
        try:
            chosen = [json.loads(v) for v in values.split(",")]
        except ValueError:
            example = f"{name}={space[name][0]}"
            raise SystemExit(f"--subspace {item}: give the values as in CONFIG_SPACE, e.g. {example}") from None
        outside = [v for v in chosen if v not in space[name]]
        if outside or not chosen:
            raise SystemExit(f"--subspace {item}: {outside or 'nothing'} not among {name}'s values {space[name]}")
        space[name] = chosen
    return space


def measure(test_path: Path, workdir: Path, source: str, config: dict, test_args: list[str]) -> dict:
    """The test's result for one configuration, as kgit would read it (kgit.model.result.validate)."""
    kernel_path = workdir / bench.kernel_file(test_path).name
    kernel_path.write_text(tune.write_config(source, str(kernel_path), config))
    started = time.time()
    try:
        payload = _run_test(workdir / test_path.name, ["--json", *test_args])
        result = test_result.validate(payload, None, time.time() - started, "")
        row = {"correct": result.passed, "value": result.value if result.passed else None,
               "spread_pct": result.spread_pct if result.passed else None,
               "error": None if result.passed else (result.reason or "incorrect")}
    except Exception as e:  # a configuration the compiler or the GPU refuses is a result too
        row = {"correct": False, "value": None, "spread_pct": None, "error": f"{type(e).__name__}: {e}"[:300]}
    return {"config": config, **row, "seconds": round(time.time() - started, 1)}


def _run_test(path: Path, argv: list[str]) -> dict:
    # A fresh import each time, as a new test process would have: no kernel, autotune choice or
    # template module carried over from the previous configuration (compiled code comes from the cache).
    for name, module in list(sys.modules.items()):
        if Path(getattr(module, "__file__", None) or "/").parent == path.parent:
            del sys.modules[name]
    test = bench.load_module(path, f"space_{path.stem}")
    with contextlib.redirect_stdout(io.StringIO()):
        return harness.main(test.SPEC, argv)


def copy_kernel_folder(test_path: Path) -> Path:
    workdir = Path(tempfile.mkdtemp(prefix="kgit-space-"))
    shutil.copytree(test_path.parent, workdir, dirs_exist_ok=True)
    return workdir


def warm_cache(args, todo: list[dict], jobs: int) -> None:
    """Compile every configuration in `jobs` processes at once; their results are not kept."""
    if jobs <= 1 or not todo:
        return
    procs = []
    for k in range(jobs):
        cmd = [sys.executable, __file__, args.test_path, "--warm", json.dumps(todo[k::jobs]), "--", *args.test_args]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for proc in procs:
        proc.wait()


def summarize(test_path: str, test_args: list[str], rows: list[dict], tunables: tune.Tunables) -> dict:
    correct = sorted((r for r in rows if r["correct"]), key=lambda r: -r["value"])
    space_size = math.prod(len(values) for values in tunables.space.values())
    return {"test": test_path, "test_args": test_args, "space_size": space_size, "configurations": len(rows),
            "correct": len(correct),
            "best": correct[0] if correct else None,
            "shipped": next((r for r in rows if r["config"] == tunables.config), None), "rows": rows}


def remeasure(args, test_path: Path, workdir: Path, source: str) -> None:
    """Round after round over the leading configurations of an earlier table, in the same order each
    round, so that a drift of the machine reaches them all alike; each row's value is its median."""
    earlier = json.loads(Path(args.remeasure).read_text())
    top = earlier["best"]["value"]
    configs = [r["config"] for r in earlier["rows"] if r["correct"] and r["value"] >= args.within * top]
    print(f"{len(configs)} configurations within {args.within:.0%} of {top:.5g}, {args.repeats} rounds", flush=True)
    warm_cache(args, configs, args.jobs)
    figures = [[] for _ in configs]  # each configuration's, round after round
    for round_ in range(args.repeats):
        for config, values in zip(configs, figures):
            row = measure(test_path, workdir, source, config, args.test_args)
            values.append(row["value"] if row["correct"] else None)
        print(f"round {round_ + 1} of {args.repeats} done", flush=True)
    rows = []
    for config, measured in zip(configs, figures):
        values = [v for v in measured if v is not None]
        median = statistics.median(values) if values else None
        rows.append({"config": config, "correct": len(values) == args.repeats, "value": median,
                     "spread_pct": spread_pct(values) if values else None,
                     "error": None if len(values) == args.repeats else "failed in some rounds",
                     "values": values})
        print(f"{tune.describe_change(earlier['best']['config'], config)}: median {median} of "
              f"{[float(f'{v:.5g}') for v in values]}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"test": args.test_path, "test_args": args.test_args,
                                               "remeasured": args.remeasure, "within": args.within,
                                               "repeats": args.repeats, "rows": rows}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("test_path")
    parser.add_argument("--json", help="write (and resume from) this file")
    parser.add_argument("--jobs", type=int, default=1, help="processes that compile the configurations first")
    parser.add_argument("--limit", type=int, help="only the first N configurations (a smoke run)")
    parser.add_argument("--subspace", nargs="+", default=[], metavar="KEY=V1,V2",
                        help="only the configurations whose KEY takes one of these values")
    parser.add_argument("--remeasure", help="an earlier table: measure its leading configurations again")
    parser.add_argument("--within", type=float, default=0.85, help="with --remeasure: this fraction of its best")
    parser.add_argument("--repeats", type=int, default=5, help="with --remeasure: rounds over those configurations")
    parser.add_argument("--warm", help=argparse.SUPPRESS)  # a worker of --jobs: these configurations, untimed
    argv = sys.argv[1:]
    ours, test_args = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser.parse_args(ours)
    args.test_args = test_args  # after --: passed to the test after --json

    test_path = Path(args.test_path).resolve()
    template = bench.kernel_file(test_path)
    source = template.read_text()
    tunables = tune.read_tunables(source, str(template))
    space = subspace(tunables.space, args.subspace)  # refused before anything is measured or written
    workdir = copy_kernel_folder(test_path)
    try:
        if args.warm:
            for config in json.loads(args.warm):
                measure(test_path, workdir, source, config, args.test_args)
            return
        if args.remeasure:
            return remeasure(args, test_path, workdir, source)
        configs = configurations(tunables, space)[: args.limit]
        rows = json.loads(Path(args.json).read_text())["rows"] if args.json and Path(args.json).exists() else []
        done = [r["config"] for r in rows]
        todo = [c for c in configs if c not in done]
        print(f"{len(configs)} configurations, {len(configs) - len(todo)} already measured", flush=True)
        warm_cache(args, todo, args.jobs)
        for i, config in enumerate(todo, len(configs) - len(todo) + 1):
            row = measure(test_path, workdir, source, config, args.test_args)
            rows.append(row)
            changed = tune.describe_change(tunables.config, config)
            print(f"[{i}/{len(configs)}] {changed}: " + (f"{row['value']:.5g} (spread {row['spread_pct']:.1f}%)"
                  if row["correct"] else f"FAILED {row['error']}") + f" {row['seconds']} s", flush=True)
            if args.json:
                tmp = Path(args.json + ".tmp")
                tmp.write_text(json.dumps(summarize(args.test_path, args.test_args, rows, tunables), indent=1))
                tmp.replace(args.json)
        summary = summarize(args.test_path, args.test_args, rows, tunables)
        print(f"best of {summary['correct']} correct: {summary['best']}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
