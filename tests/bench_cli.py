"""Benchmark of kgit's own speed (not a test): start-up, and reading 1,000 iterations.

    python tests/bench_cli.py

Builds a throwaway repository whose opt/bench branch carries 1,000 kept iterations, each with its
note, through one `git fast-import` stream, then times `kgit --help`, `kgit status` and `kgit log`
over it (median of repeated runs) and checks that none of them imports torch or triton.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ITERATIONS = 1000
RUNS = 15


def build_repo(root: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    kernel = "skills/kernels/bench/triton_template.py"
    test = "skills/kernels/bench/test_bench.py"
    (root / kernel).parent.mkdir(parents=True)
    stream = []
    mark = 0
    for i in range(ITERATIONS + 1):
        mark += 1
        kernel_text = f"BLOCK = {i}\n"
        record = {
            "kgit": 1, "kernel": "bench", "iteration": i, "action": "baseline" if i == 0 else f"change {i}",
            "tier": None if i == 0 else 1 + i % 5, "gpu": "NVIDIA H200", "cpu_timing": False, "correctness": True,
            "metric": "gbps", "value": 1000.0 + i, "spread_pct": 0.5, "peak": 4800.0,
            "pct_of_peak": (1000.0 + i) / 48, "best_before": None if i == 0 else 999.0 + i,
            "delta_pct": None if i == 0 else 0.1, "status": "BASELINE" if i == 0 else "IMPROVED",
            "reason": None, "stop_reason": None, "test": {"gbps": 1000.0 + i}, "output_tail": None,
            "base": None, "started": f"2026-11-30T00:00:{i % 60:02d}+00:00", "duration_s": 1.0,
            "options": {"max_iterations": ITERATIONS + 1} if i == 0 else None, "target": None,
        }
        note = json.dumps(record)
        message = f"bench: iter {i}: {record['action']}"
        files = [(kernel, kernel_text)] + ([(test, "print('{}')\n")] if i == 0 else [])
        stream.append(f"commit refs/heads/opt/bench\nmark :{mark}\n"
                      f"committer kgit <kgit@example.com> {1700000000 + i} +0000\n"
                      f"data {len(message)}\n{message}\n")
        if i > 0:
            stream.append(f"from :{mark - 1}\n")
        for path, text in files:
            stream.append(f"M 100644 inline {path}\ndata {len(text.encode())}\n{text}\n")
        stream.append("\n")
        stream.append(f"commit refs/notes/kgit\ncommitter kgit <kgit@example.com> {1700000000 + i} +0000\n"
                      f"data 5\nnote\nN inline :{mark}\ndata {len(note.encode())}\n{note}\n\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input="".join(stream).encode(), check=True)
    subprocess.run(["git", "checkout", "-q", "opt/bench"], cwd=root, check=True)


def time_command(args: list[str], cwd: Path) -> tuple[float, float]:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(args, cwd=cwd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000, (max(times) - min(times)) * 1000


def heavy_imports(args: list[str], cwd: Path) -> list[str]:
    code = ("import sys, runpy; sys.argv = ['kgit'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('kgit', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print([m for m in ('torch', 'triton') if m in sys.modules], file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True)
    return json.loads(proc.stderr.strip().splitlines()[-1].replace("'", '"'))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        build_repo(root)
        kgit = [sys.executable, "-m", "kgit"]
        print(f"{ITERATIONS} iterations in the repository; median of {RUNS} runs, spread = max - min")
        for args in (["--help"], ["status"], ["best"], ["log"], ["log", "--json"]):
            median, spread = time_command(kgit + args, root)
            print(f"  kgit {' '.join(args):<12} {median:7.1f} ms  (spread {spread:.1f} ms)  "
                  f"imports torch/triton: {heavy_imports(args, root) or 'no'}")
        lines = subprocess.run(kgit + ["log"], cwd=root, capture_output=True, text=True).stdout.count("\n")
        print(f"  kgit log printed {lines} lines")


if __name__ == "__main__":
    main()
