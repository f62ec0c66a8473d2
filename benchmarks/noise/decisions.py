"""kgit's keep-or-revert decisions on a test that times itself with perf_counter around a loop: steps
that change nothing measurable must never be kept, a real gain must be.

    python benchmarks/noise/decisions.py noop --steps 20 --out DIR [--peer FOLDER]
    python benchmarks/noise/decisions.py gain --steps 20 --out DIR [--peer FOLDER]
    python benchmarks/noise/decisions.py probe --steps 4 --out DIR [--peer FOLDER]

The kernel under test, in a scratch repository at skills/kernels/<name>/ (so that no kgit.yaml is needed):
  default   benchmarks/noise/scale/ (y = 2x with an extra read of EXTRA of the traffic; gain: EXTRA
            0.06 -> 0.0, a 3% traffic cut).
  --peer F  a folder holding a collection's softmax, triton_template.py and test_softmax.py, unchanged
            (the awesome-kernel-skills collection's: its test times 200 launches with perf_counter).
            For the gain series the template gets a knob, EXTRA = 0.024: the first 2.4% of the rows
            also add a row of zeros read from DRAM (same values, so the test passes); the gain step
            sets it to 0.0. On an H100, in the test's own back-to-back launches (its input warm in
            the L2), EXTRA = 0.16 cost 24% of device time (do_bench, L2 cleared, saw 3% for 0.1):
            0.033, that scaled to ~5%, cost 6.5-7.8%; 0.024 is scaled from that
            (experiments/noise-decisions/h100-collection-softmax/call7-gain.jsonl). An earlier knob (an extra
            program per 20 rows, rewriting a row already done) cost only 0.4% on an H100: the L2
            served it (experiments/noise-decisions/h100-collection-softmax/). Calibrate EXTRA with
            the probe series, which prints the gain do_bench sees, before a series.
Series:
  noop   STEPS steps, each renaming a local variable of the kernel to a new name: a change of the
         code (not refused as a comment-only change, never the same code twice) that compiles to the
         same machine code.
  gain   STEPS trials on one branch: the step that removes the extra work; when it is kept, a
         `git reset --hard` back to the slow kernel, so that every trial starts from the same best,
         with the noise of the earlier ones known (repeats are stepped with --again).
  probe  `kgit start` only, then times the fast kernel and the slow one at several sizes of its extra
         work with triton.testing.do_bench (median of 5, L2 cleared): the gain the trials look for.
Each step's record (status, gain and interval, which figure decided, runs, wall time) is appended to
DIR/<series>.jsonl as it is decided, so a run cut short still leaves what it measured.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCALE = {"name": "scale", "folder": HERE / "scale", "kernel": "scale.py", "rename": "offsets",
         "slow": "EXTRA = 0.06", "fast": "EXTRA = 0.0"}
PEER = {"name": "softmax", "kernel": "triton_template.py", "rename": "row_max",  # the collection's file name
        "slow": "EXTRA = 0.024", "fast": "EXTRA = 0.0"}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def kgit(root: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "kgit", *args, "--json"], cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"kgit {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def with_extra_read(source: str) -> str:
    """The collection's softmax template with EXTRA: the first EXTRA of the rows also add a row of a side
    array of zeros (the results do not change), EXTRA of the input's bytes more to read. Each call reads
    the next of SLICES slices of the zeros, 24 of them, so that the extra read comes from DRAM rather
    than from the L2 (which holds the test's own input and output between its launches)."""
    edits = [
        ("    input_ptr, output_ptr,\n", "    input_ptr, output_ptr, pad_ptr, n_pad,\n"),
        ("        row = tl.load(in_ptr + col_offsets, mask=load_mask, other=float(\"-inf\")).to(tl.float32)\n",
         "        row = tl.load(in_ptr + col_offsets, mask=load_mask, other=float(\"-inf\")).to(tl.float32)\n"
         "        pad_offsets = row_idx * n_cols + col_offsets\n"
         "        row += tl.load(pad_ptr + pad_offsets, mask=load_mask & (pad_offsets < n_pad), other=0.0)\n"),
        ("        x, output,\n", "        x, output, pad[start:], n_pad,\n"),
        ("    grid = (triton.cdiv(n_rows, ROWS_PER_PROG),)\n",
         "    grid = (triton.cdiv(n_rows, ROWS_PER_PROG),)\n"
         "    n_pad = int(x.numel() * EXTRA)\n"
         "    pad = _zeros(max(n_pad, 1) * SLICES, x.device)\n"
         "    start = (_calls[0] % SLICES) * max(n_pad, 1)\n"
         "    _calls[0] += 1\n"),
        ("\n\n@triton.jit\n", "\n\nEXTRA = 0.024\nSLICES = 24\n_pads, _calls = {}, [0]\n\n\n"
         "def _zeros(n, device):\n    if (n, device) not in _pads:\n"
         "        _pads[(n, device)] = torch.zeros(n, device=device)\n    return _pads[(n, device)]\n\n\n"
         "@triton.jit\n"),
    ]
    for old, new in edits:
        if source.count(old) != 1:
            raise SystemExit(f"the template does not read as the collection's softmax: {old.strip()!r}")
        source = source.replace(old, new)
    return source


def make_repo(root: Path, case: dict, series: str) -> Path:
    folder = root / "skills/kernels" / case["name"]
    shutil.copytree(case["folder"], folder, ignore=shutil.ignore_patterns("__pycache__"))
    kernel = folder / case["kernel"]
    if case is not SCALE and series != "noop":
        kernel.write_text(with_extra_read(kernel.read_text()))
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "bench@example.com")
    git(root, "config", "user.name", "bench")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a kernel and its collection-style test")
    return kernel


def summary(record: dict, wall: float) -> dict:
    found = record.get("measurement") or {}
    return {"iteration": record["iteration"], "action": record["action"], "status": record["status"],
            "gain_pct": record.get("delta_pct"), "interval_pct": found.get("interval_pct"),
            "decided_on": found.get("decided_on"), "pairs": found.get("pairs"), "runs": found.get("runs"),
            "best": found.get("best"), "candidate": found.get("candidate"), "device_us": found.get("device_us"),
            "reason": record.get("reason"), "wall_s": round(wall, 1)}


def step(root: Path, message: str, out, *extra: str) -> dict:
    t0 = time.monotonic()
    record = kgit(root, "step", "-m", message, *extra)
    line = summary(record, time.monotonic() - t0)
    write_line(out, line)
    return line


def write_line(out, line: dict) -> None:
    out.write(json.dumps(line) + "\n")
    out.flush()
    print(json.dumps(line), flush=True)


def start(root: Path, case: dict, steps: int, out) -> None:
    t0 = time.monotonic()
    record = kgit(root, "start", case["name"], "--max-iterations", str(steps + 1))
    spread = (record.get("measurement") or {}).get("spread")
    write_line(out, {"start": record["value"], "metric": record["metric"], "spread": spread,
                     "wall_s": round(time.monotonic() - t0, 1)})


def probe(kernel: Path, case: dict, out) -> None:
    """do_bench's median of the fast kernel and of the slow one at several sizes of its extra work, in
    this process, beside each other: the gain each size would give the trials."""
    import importlib.util

    import torch
    import triton.testing

    knob = case["slow"].split("=")[0]  # "EXTRA "
    sizes = {"fast": case["fast"], "slow": case["slow"],
             **{f"{knob}= {size}": f"{knob}= {size}" for size in (0.05, 0.2, 0.3)}}
    medians = {}
    for side, setting in sizes.items():
        source = kernel.read_text().replace(case["slow"], setting)
        path = kernel.with_name(f"probe_{len(medians)}.py")
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if case is SCALE:
            x = torch.randn(12 * 1024 * 1024, device="cuda")
            out_tensor = torch.empty_like(x)
            call = lambda m=module: m.scale(x, out_tensor)  # noqa: E731
        else:
            x = torch.randn(2048, 4096, device="cuda", dtype=torch.float16)
            call = lambda m=module: m.softmax(x)  # noqa: E731
        times = [triton.testing.do_bench(call, warmup=50, rep=300, return_mode="median") for _ in range(5)]
        medians[side] = sorted(times)[2]
        gain = (medians[side] / medians["fast"] - 1) * 100
        write_line(out, {"probe": setting, "do_bench_median_ms": times, "gain_over_fast_pct": round(gain, 2)})
        path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("series", choices=["noop", "gain", "probe"])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--peer", type=Path, help="a folder with a collection's softmax template and test")
    args = parser.parse_args()
    case = {**PEER, "folder": args.peer} if args.peer else SCALE
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, open(args.out / f"{args.series}.jsonl", "a") as out:
        root = Path(tmp) / "repo"
        root.mkdir()
        kernel = make_repo(root, case, args.series)
        start(root, case, args.steps, out)
        if args.series == "probe":
            return probe(kernel, case, out)
        original = kernel.read_text()
        if args.series == "noop":
            for i in range(1, args.steps + 1):
                kernel.write_text(re.sub(rf"\b{case['rename']}\b", f"{case['rename']}_{i}", original))
                step(root, f"no-op {i}: rename {case['rename']}", out)
        else:
            slow = git(root, "rev-parse", "HEAD")
            for i in range(1, args.steps + 1):
                kernel.write_text(original.replace(case["slow"], case["fast"]))
                repeat = ("--again",) if i > 1 else ()  # the same code as trial 1: measured again
                if step(root, f"trial {i}: {case['slow']} -> {case['fast']}", out, *repeat)["status"] == "IMPROVED":
                    git(root, "reset", "-q", "--hard", slow)
        (args.out / f"{args.series}-log.txt").write_text(git(root, "log", "--oneline", "--all", "-n", "200"))
        subprocess.run([sys.executable, "-m", "kgit", "log", case["name"]], cwd=root,
                       stdout=open(args.out / f"{args.series}-kgit-log.txt", "w"), stderr=subprocess.STDOUT)


if __name__ == "__main__":
    main()
