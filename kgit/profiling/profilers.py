"""Runs a kernel's test under the vendor's profiler (through runner.run_command, like every process).

The test is run as `<python> <test_path> --profile` (a few launches at the headline shape, no checks,
no timing), under:
  NVIDIA  ncu --clock-control none --target-processes all --metrics <kgit's list>
              --nvtx --nvtx-include kgit-profile/ -o <report>
              [--kernel-name regex:^(<the kernel file's @triton.jit / @gluon.jit names>)$] ...
          then ncu --import <report>.ncu-rep --page raw --csv --print-units base
          kgit's harness launches the kernel once to compile and autotune, then in the NVTX range
          PROFILE_RANGE: an autotune's candidates (dozens of launches of other tiles or kernels) stay out of
          the profile. A test not on the harness has no such range: ncu is asked again without it.
  AMD     rocprofv3 --pmc <group> [--pmc <group> ...] --kernel-trace --output-format csv -d <dir> ...
The clocks are left alone (--clock-control none): a locked base clock would misstate a kernel's speed,
and this machine's rules forbid changing clocks.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kgit import machine, runner
from kgit.model.result import last_json_object
from kgit.profiling import PROFILE_RANGE, ncu, rocprof

NCU_PLACES = ["/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"]
ROCPROF_TOOLS = ["rocprofv3"]
MAX_METRIC_RETRIES = 8


@dataclass
class ProfilerRun:
    ok: bool
    tool: str
    reason: str | None = None  # one line: why no profile came back
    summary: dict | None = None
    raw_csv: str = ""
    dropped_metrics: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    output_tail: str = ""
    launch: dict | None = None  # the test's --profile JSON where it printed one (kgit's harness does)


def find_profiler(gpu: str) -> tuple[str | None, str | None, str]:
    """(tool, path, why-not): the profiler for this machine's GPU, or why there is none."""
    vendor = machine.vendor(gpu)
    if vendor == "cpu":
        return None, None, "no GPU on this machine (CPU only): no profiler can run"
    if vendor == "nvidia":
        path = shutil.which("ncu") or next(
            (p for pattern in NCU_PLACES for p in sorted(glob.glob(pattern), reverse=True) if os.access(p, os.X_OK)),
            None,
        )
        return ("ncu", path, "") if path else (None, None, "Nsight Compute (ncu) is not installed or not on PATH")
    path = next((shutil.which(t) for t in ROCPROF_TOOLS if shutil.which(t)), None)
    return ("rocprofv3", path, "") if path else (None, None, "rocprofv3 is not installed or not on PATH")


def run_ncu(ncu_path: str, test_path: str, cwd: Path, out_dir: Path, kernel_names: list[str],
            timeout_s: float, env: dict | None = None) -> ProfilerRun:
    """Profile the test's launches of the named kernels inside PROFILE_RANGE; retries without a metric ncu
    does not know, and, when nothing was profiled, without the range (where the test did not say it ran
    them in it: not a test on kgit's harness), else without the name filter."""
    metrics = ncu.metric_names()
    dropped: list[str] = []
    names = list(kernel_names)
    in_range = True
    report = out_dir / "report"
    for _ in range(MAX_METRIC_RETRIES):
        command = [ncu_path, "--clock-control", "none", "--target-processes", "all",
                   "--metrics", ",".join(metrics)]
        if in_range:
            command += ["--nvtx", "--nvtx-include", PROFILE_RANGE + "/"]
        command += ["-f", "-o", str(report)]
        if names:
            command += ["--kernel-name", "regex:^(" + "|".join(names) + ")$"]
        command += [sys.executable, test_path, "--profile"]
        code, output = _run(command, cwd, timeout_s, env)
        if code is None:
            return ProfilerRun(False, "ncu", f"ncu ran past its {timeout_s:g} s limit", command=command,
                               output_tail=output[-2000:])
        unknown = ncu.unknown_metric(output)
        if unknown:
            gone = [m for m in metrics if m.split(".")[0] == unknown]
            if not gone:
                break
            dropped += gone
            metrics = [m for m in metrics if m not in gone]
            continue
        if "No kernels were profiled" in output and (in_range or names):
            if in_range and ((profile_launch(output) or {}).get("range") != PROFILE_RANGE or not names):
                in_range = False  # the test launched nothing in the range (it has none)
            else:
                names = []  # the names in the kernel file did not match what ran: take all, filter later
            continue
        break
    why = _ncu_failure(code, output)
    if why:
        return ProfilerRun(False, "ncu", why, command=command, output_tail=output[-2000:], dropped_metrics=dropped)
    code, raw = _run([ncu_path, "--import", str(report) + ".ncu-rep", "--page", "raw", "--csv",
                      "--print-units", "base"], cwd, timeout_s, env)
    launches = ncu.parse_csv(raw or "")
    if code != 0 or not launches:
        return ProfilerRun(False, "ncu", "ncu wrote no readable report", command=command,
                           output_tail=(raw or "")[-2000:], dropped_metrics=dropped)
    summary = ncu.summarize(launches, kernel_names or None)
    if not summary["kernels"]:
        summary = ncu.summarize(launches, None)
    return ProfilerRun(True, "ncu", summary=summary, raw_csv=raw, dropped_metrics=dropped, command=command,
                       output_tail=output[-2000:], launch=profile_launch(output))


def _ncu_failure(code: int | None, output: str) -> str | None:
    """One line for a profiler run that gave nothing, from ncu's own words."""
    if "ERR_NVGPUCTRPERM" in output:
        return ("no permission to read the GPU's performance counters (ERR_NVGPUCTRPERM): run as root, or "
                "let users profile (NVreg_RestrictProfilingToAdminUsers=0)")
    if "LibraryNotLoaded" in output or "Failed to initialize the profiler" in output:
        return "ncu cannot read hardware counters on this machine (a virtualized GPU?): profiler failed to initialize"
    if "not supported" in output.lower() and "==ERROR==" in output:
        return "ncu: profiling is not supported on this device"
    if "No kernels were profiled" in output:
        return "ncu profiled no kernel launch: does the test's --profile mode launch the kernel?"
    if code != 0:
        last = next((line for line in reversed(output.splitlines()) if line.strip()), "")
        return f"ncu or the test failed (exit status {code}): {last[:200]}"
    return None


def run_rocprof(tool_path: str, test_path: str, cwd: Path, out_dir: Path, kernel_names: list[str],
                timeout_s: float, env: dict | None = None) -> ProfilerRun:
    command = [tool_path]
    for group in rocprof.PASSES:
        command += ["--pmc", *group]
    command += ["--kernel-trace", "--output-format", "csv", "-d", str(out_dir), "-o", "run"]
    if kernel_names:
        command += ["--kernel-include-regex", "^(" + "|".join(kernel_names) + ")"]
    command += ["--", sys.executable, test_path, "--profile"]
    code, output = _run(command, cwd, timeout_s, env)
    counters = sorted(out_dir.rglob("*counter_collection.csv"))
    traces = sorted(out_dir.rglob("*kernel_trace.csv"))
    if code is None:
        return ProfilerRun(False, "rocprofv3", f"rocprofv3 ran past its {timeout_s:g} s limit", command=command)
    if code != 0 or not counters:
        last = next((line for line in reversed(output.splitlines()) if line.strip()), "")
        return ProfilerRun(False, "rocprofv3", f"rocprofv3 gave no counters (exit status {code}): {last[:200]}",
                           command=command, output_tail=output[-2000:])
    raw = "\n".join(p.read_text() for p in counters)
    summary = rocprof.parse(counters[0].read_text(), traces[0].read_text() if traces else None, kernel_names or None)
    return ProfilerRun(bool(summary["kernels"]), "rocprofv3", None if summary["kernels"] else "no kernel matched",
                       summary=summary, raw_csv=raw, command=command, output_tail=output[-2000:],
                       launch=profile_launch(output))


def profile_launch(output: str) -> dict | None:
    """The test's --profile JSON (`"profile": true`, as kgit's harness prints it) where it is the last JSON
    object of the output, else None."""
    found = last_json_object(output)
    return found if found and found.get("profile") is True else None


def _run(command: list[str], cwd: Path, timeout_s: float, env: dict | None) -> tuple[int | None, str]:
    """(exit status or None on timeout, what it printed): runner's process-group handling."""
    done = runner.run_command(command, cwd, timeout_s, env or {})
    return done.returncode, done.stdout + done.stderr
