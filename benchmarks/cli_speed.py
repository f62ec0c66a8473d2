"""kgit's own speed (a benchmark, not a test): start-up, and one kernel's commands over many records.

    python benchmarks/cli_speed.py                         # 1,000 records of one kernel
    python benchmarks/cli_speed.py --records 100000 --kernels 100

Builds a throwaway repository through one `git fast-import` stream: each kernel's opt/<kernel>
branch carries its kept iterations, and one notes commit holds every record. Then times `kgit --help`
and, for one kernel, `kgit status`, `kgit best`, `kgit log` and `kgit log --json` (median of repeated
runs, spread = max - min). The first command after the records arrive builds kgit's note index
(.git/kgit/note-index): its time is printed apart, as "first read".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def record(kernel: str, i: int, iterations: int) -> dict:
    return {
        "kgit": 1, "kernel": kernel, "iteration": i, "action": "baseline" if i == 0 else f"change {i}",
        "tier": None if i == 0 else 1 + i % 5, "gpu": "NVIDIA H200", "cpu_timing": False, "correctness": True,
        "metric": "gbps", "value": 1000.0 + i, "spread_pct": 0.5, "peak": 4800.0,
        "pct_of_peak": (1000.0 + i) / 48, "best_before": None if i == 0 else 999.0 + i,
        "delta_pct": None if i == 0 else 0.1, "status": "BASELINE" if i == 0 else "IMPROVED",
        "reason": None, "stop_reason": None, "test": {"gbps": 1000.0 + i}, "output_tail": None,
        "base": None, "started": f"2026-11-30T00:00:{i % 60:02d}.000000+00:00", "duration_s": 1.0,
        "options": {"max_iterations": iterations + 1} if i == 0 else None, "target": None,
    }


def build_repo(root: Path, records: int, kernels: int) -> list[str]:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    names = [f"k{n:03d}" for n in range(kernels)]
    per_kernel = records // kernels
    stream, notes, mark = [], [], 0
    for kernel in names:
        path = f"skills/kernels/{kernel}/{kernel}.py"
        test = f"skills/kernels/{kernel}/test_{kernel}.py"
        for i in range(per_kernel):
            mark += 1
            message = f"{kernel}: iter {i}: {'baseline' if i == 0 else f'change {i}'}"
            stream.append(f"commit refs/heads/opt/{kernel}\nmark :{mark}\n"
                          f"committer kgit <kgit@example.com> {1700000000 + mark} +0000\n"
                          f"data {len(message)}\n{message}\n")
            if i > 0:
                stream.append(f"from :{mark - 1}\n")
            files = [(path, f"BLOCK = {i}\n")] + ([(test, "print('{}')\n")] if i == 0 else [])
            for name, text in files:
                stream.append(f"M 100644 inline {name}\ndata {len(text.encode())}\n{text}\n")
            stream.append("\n")
            note = json.dumps(record(kernel, i, per_kernel))
            notes.append(f"N inline :{mark}\ndata {len(note.encode())}\n{note}\n")
    stream.append("commit refs/notes/kgit\ncommitter kgit <kgit@example.com> 1700000000 +0000\ndata 5\nnote\n")
    stream += notes
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input="".join(stream).encode(), check=True)
    return names


# As installed: Python caches compiled modules (this machine's environment turns that off).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def time_command(args: list[str], cwd: Path, runs: int) -> tuple[float, float, float]:
    """(median, min, max) in ms."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(args, cwd=cwd, check=True, capture_output=True, env=ENV)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), min(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--kernels", type=int, default=1)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        t0 = time.perf_counter()
        names = build_repo(root, args.records, args.kernels)
        kernel = names[len(names) // 2]
        subprocess.run(["git", "checkout", "-q", f"opt/{kernel}"], cwd=root, check=True)
        print(f"{args.records} records over {args.kernels} kernels (built in {time.perf_counter() - t0:.1f} s); "
              f"commands for {kernel}; median of {args.runs} runs [min, max]")
        kgit = [sys.executable, "-m", "kgit"]
        time_command(kgit + ["--help"], root, 1)  # compiles kgit's modules once, as an install does
        first, _, _ = time_command(kgit + ["status"], root, 1)
        print(f"  first read (builds the note index)  {first:8.0f} ms")
        for command in (["--help"], ["status"], ["best"], ["log"], ["log", "--json"]):
            median, low, high = time_command(kgit + command, root, args.runs)
            print(f"  kgit {' '.join(command):<12} {median:8.0f} ms  [{low:.0f}, {high:.0f}]")


if __name__ == "__main__":
    main()
