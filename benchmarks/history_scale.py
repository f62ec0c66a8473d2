"""Whether a loop's commands slow down as the records pile up (a benchmark, not a test).

    python benchmarks/history_scale.py                    # 10 and 10,000 records, 100 kernels
    python benchmarks/history_scale.py --records 10 10000 --kernels 100 --runs 5

For each N, builds a throwaway repository holding N records: a live loop of tests/fake (started
by `kgit start`, its other iterations written as reverted attempts), and the other records spread over
other kernels, each on its own opt/ branch (benchmarks/cli_speed.py's records). All notes go in
through one `git fast-import` stream, as kgit.git.write.write_notes writes them; `kgit report` then
commits the full rendering of experiments/README.md, as a loop that reached N records would have it.
Then times, on the fake kernel's branch: `kgit step` (a new kernel each run, kept and reverted in
turn), `kgit status`, `kgit context` and `kgit log`: min, median and max over --runs runs, in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cli_speed import ENV, build_repo  # noqa: E402

FAKE = Path(__file__).parent.parent / "tests" / "fake"
KERNEL = "skills/kernels/fake/fake.py"


def git(root: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          input=stdin).stdout.strip()


def kgit(root: Path, *args: str) -> None:
    run = subprocess.run([sys.executable, "-m", "kgit", *args], cwd=root, capture_output=True, text=True, env=ENV)
    if run.returncode != 0:
        raise SystemExit(f"kgit {' '.join(args)} failed:\n{run.stdout}{run.stderr}")


def set_metric(root: Path, value: float) -> None:
    path = root / KERNEL
    lines = [f"METRIC = {value!r}" if line.startswith("METRIC = ") else line for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")


def build(root: Path, records: int, kernels: int) -> int:
    """N records: the fake kernel's loop, and the rest over other kernels. The fake kernel's count."""
    others = max(kernels - 1, 0)
    own = max(records // kernels, 1) if others else records
    if others:
        build_repo(root, records - own, others)  # leaves main unborn: the fake kernel is its first commit
    else:
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "bench@example.com")
    git(root, "config", "user.name", "kgit bench")
    (root / KERNEL).parent.mkdir(parents=True, exist_ok=True)
    for name in ("fake.py", "test_fake.py"):
        shutil.copy(FAKE / name, root / "skills/kernels/fake" / name)
    git(root, "add", "skills/kernels/fake")
    git(root, "commit", "-qm", "fake kernel")
    kgit(root, "start", "fake", "--max-iterations", "1000000")
    # The loop's earlier iterations, as reverted attempts: each a commit beside the branch (its attempt)
    # whose note copies the baseline's record, as kgit step leaves them.
    tip = git(root, "rev-parse", "HEAD")
    baseline = json.loads(git(root, "notes", "--ref=refs/notes/kgit", "show", tip))
    stream = []
    for i in range(1, own):
        text = (FAKE / "fake.py").read_text().replace("METRIC = 100.0", f"METRIC = {50 + i / 1000!r}")
        message = f"fake: iter {i}: attempt {i}"
        stream.append(f"commit refs/kgit/bench\nmark :{i}\ncommitter kgit <kgit@example.com> {1700000000 + i} +0000\n"
                      f"data {len(message)}\n{message}\nfrom {tip}\n"
                      f"M 100644 inline {KERNEL}\ndata {len(text.encode())}\n{text}\n\n")
    notes = []
    for i in range(1, own):
        record = {**baseline, "iteration": i, "action": f"attempt {i}", "status": "WITHIN_NOISE", "tier": 1 + i % 5,
                  "value": baseline["value"] * 0.999, "delta_pct": -0.1, "best_before": baseline["value"],
                  "started": baseline["started"].replace("+00:00", f"{i}+00:00"), "options": None,
                  "reason": "within noise", "target": None}
        note = json.dumps(record)
        notes.append(f"N inline :{i}\ndata {len(note.encode())}\n{note}\n")
    if notes:
        stream.append("commit refs/notes/kgit\ncommitter kgit <kgit@example.com> 1700000000 +0000\ndata 5\nnote\n"
                      "from refs/notes/kgit^0\n")
        stream += notes
        subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input="".join(stream).encode(), check=True)
        git(root, "update-ref", "-d", "refs/kgit/bench")  # the notes keep the attempts reachable
    kgit(root, "report")  # the full rendering, committed: what the loop's branch holds by now
    return own


def timed(root: Path, args: list[str], before=None) -> float:
    if before:
        before()
    t0 = time.perf_counter()
    kgit(root, *args)
    return time.perf_counter() - t0


def figures(times: list[float]) -> str:
    return f"{min(times):6.2f} {statistics.median(times):6.2f} {max(times):6.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[10, 10_000])
    parser.add_argument("--kernels", type=int, default=100, help="kernels the records are spread over")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"seconds per command, min median max of {args.runs} runs; {os.cpu_count()} CPUs")
    for records in args.records:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "repo"
            t0 = time.perf_counter()
            own = build(root, records, min(args.kernels, records))
            size = (root / "experiments/README.md").stat().st_size
            print(f"{records} records ({own} of the stepped kernel), README {size / 1e6:.2f} MB, "
                  f"built in {time.perf_counter() - t0:.0f} s")
            kgit(root, "--help")  # compiles kgit's modules once, as an install does
            best = 100.0
            steps = []
            for run in range(args.runs):
                # kept (5% faster) and reverted (10% slower) in turn; each a kernel not run before
                value = round(best * (1.05 if run % 2 == 0 else 0.9), 6)
                steps.append(timed(root, ["step", "-m", f"bench {run}"], lambda v=value: set_metric(root, v)))
                best = value if run % 2 == 0 else best
            print(f"  kgit step     {figures(steps)}")
            for command in (["status"], ["context"], ["log"]):
                times = [timed(root, command) for _ in range(args.runs)]
                print(f"  kgit {' '.join(command):<8} {figures(times)}")


if __name__ == "__main__":
    main()
