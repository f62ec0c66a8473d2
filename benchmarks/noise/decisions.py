"""kgit's keep-or-revert decisions on a test that reports no spread (the H200 experiment of the noise
issue): 20 steps that change nothing measurable, and 20 real 3% traffic cuts.

    python benchmarks/noise/decisions.py noop --steps 20 --out DIR
    python benchmarks/noise/decisions.py cut --steps 20 --out DIR
    python benchmarks/noise/decisions.py probe --steps 8 --out DIR

Builds a scratch repository with benchmarks/noise/scale/ (a test in the collection's style: perf_counter
around a loop, no warm-up, no spread), runs `kgit start scale`, then:
  noop   appends an unused constant to the kernel and steps, STEPS times on one branch (a comment
         alone is refused: its code is the same);
  cut    STEPS times, on one branch: a step (with --again) that cuts the 3% extra read; when it is kept, a
         `git reset --hard` back to the kernel with the extra read (kgit then judges against that
         again), so that every trial starts from the same best, with the noise of earlier ones known;
  probe  runs the test alone STEPS times with 100 and with 1000 launches in its timed loop, alternately:
         how much its figure moves from run to run.
Each step's record (status, gain and interval, runs, wall time) is appended to DIR/<series>.jsonl as
it is decided, so a run cut short still leaves what it measured. SCALE_N and SCALE_ITERS (the test's
size and launches) pass through to the test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNEL = "skills/kernels/scale/triton_template.py"


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def kgit(root: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "kgit", *args, "--json"], cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"kgit {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def make_repo(root: Path) -> None:
    shutil.copytree(HERE / "scale", root / "skills/kernels/scale")
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "bench@example.com")
    git(root, "config", "user.name", "bench")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a small kernel and its collection-style test")


def summary(record: dict, wall: float) -> dict:
    found = record.get("measurement") or {}
    return {"iteration": record["iteration"], "action": record["action"], "status": record["status"],
            "gain_pct": record.get("delta_pct"), "interval_pct": found.get("interval_pct"),
            "pairs": found.get("pairs"), "runs": found.get("runs"), "best": found.get("best"),
            "candidate": found.get("candidate"), "reason": record.get("reason"), "wall_s": round(wall, 1)}


def step(root: Path, message: str, out) -> dict:
    t0 = time.monotonic()
    # --again: the cut series measures one kernel code many times on purpose (kgit refuses a repeat otherwise)
    record = kgit(root, "step", "-m", message, "--again")
    line = summary(record, time.monotonic() - t0)
    write_line(out, line)
    return line


def write_line(out, line: dict) -> None:
    out.write(json.dumps(line) + "\n")
    out.flush()
    print(json.dumps(line), flush=True)


def probe(root: Path, runs: int, out) -> None:
    test = root / "skills/kernels/scale/test_scale.py"
    for i in range(runs):
        for iterations in (100, 1000):
            done = subprocess.run([sys.executable, str(test), "--json"], cwd=test.parent, capture_output=True,
                                  text=True, env={**os.environ, "SCALE_ITERS": str(iterations)}, check=True)
            write_line(out, {"run": i, "iterations": iterations, **json.loads(done.stdout.splitlines()[-1])})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("series", choices=["noop", "cut", "probe"])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, open(args.out / f"{args.series}.jsonl", "a") as out:
        root = Path(tmp) / "repo"
        root.mkdir()
        make_repo(root)
        kernel = root / KERNEL
        if args.series == "probe":
            return probe(root, args.steps, out)
        if args.series == "noop":
            kgit(root, "start", "scale", "--max-iterations", str(args.steps + 1))
            for i in range(1, args.steps + 1):
                # an assignment nothing reads: kgit step refuses a change of comments alone
                kernel.write_text(kernel.read_text() + f"NO_OP_{i} = {i}\n")
                step(root, f"no-op {i}: an unused constant", out)
        else:
            kgit(root, "start", "scale", "--max-iterations", str(args.steps + 1))
            with_extra_read = git(root, "rev-parse", "HEAD")
            for i in range(1, args.steps + 1):
                kernel.write_text(kernel.read_text().replace("EXTRA = 0.06", "EXTRA = 0.0"))
                if step(root, f"trial {i}: cut the 3% extra read", out)["status"] == "IMPROVED":
                    git(root, "reset", "-q", "--hard", with_extra_read)
        (args.out / f"{args.series}-log.txt").write_text(git(root, "log", "--oneline", "--all", "-n", "200"))
        subprocess.run([sys.executable, "-m", "kgit", "log", "scale"], cwd=root,
                       stdout=open(args.out / f"{args.series}-kgit-log.txt", "w"), stderr=subprocess.STDOUT)


if __name__ == "__main__":
    main()
