"""Runs a kernel's test in its own process and turns what it prints into a validated result.

The test contract: `<python> <test_path> --json` prints, as its last JSON object on stdout, something like
  {"kernel": "softmax", "gpu": "NVIDIA H200", "correctness": true, "latency_us": 26.4,
   "gbps": 1270.1, "speedup": 1.071, "status": "pass"}
("tflops" instead of "gbps" for compute-bound kernels). The object may also be printed indented over
several lines, as some existing tests do after a `--- JSON ---` line. Optional fields kgit uses when
present: spread_pct (the metric's measured spread, in %) and pct_of_peak.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TAIL_CHARS = 2000


@dataclass
class TestResult:
    ok: bool  # the test ran and printed a valid result; says nothing yet about correctness
    correctness: bool
    reason: str | None  # why it is not ok, or why correctness failed
    metric: str | None  # "gbps" or "tflops"
    value: float | None
    spread_pct: float
    payload: dict | None  # the test's JSON, unchanged
    duration_s: float
    output_tail: str

    @property
    def passed(self) -> bool:
        return self.ok and self.correctness


def device_env(gpu: str) -> tuple[dict, str | None]:
    """Environment for the test, and a plain-words note when kgit falls back to Triton's interpreter.

    Looks for the vendors' device files instead of importing torch: kgit itself never loads torch.
    """
    has_nvidia = Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia").exists()
    has_amd = Path("/dev/kfd").exists()
    if gpu == "cpu" or (gpu == "auto" and not (has_nvidia or has_amd)):
        why = "gpu: cpu" if gpu == "cpu" else "no GPU found"
        return {"TRITON_INTERPRET": "1"}, (
            f"{why}: running in Triton's interpreter mode on the CPU; timings are CPU timings, "
            "not comparable to any GPU"
        )
    return {}, None


@dataclass
class Finished:
    """How a command ended: returncode is None when it ran out of time and was killed."""

    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float

    def failure(self, timeout_s: float) -> str | None:
        """Why it failed, in a few words, or None when it exited with status 0."""
        if self.returncode is None:
            return f"timeout: no result after {timeout_s:g} s"
        if self.returncode < 0:
            return f"crashed: killed by signal {signal.Signals(-self.returncode).name}"
        if self.returncode != 0:
            return f"crashed: exit status {self.returncode}" + self._last_error_line()
        return None

    def _last_error_line(self) -> str:
        # A Python traceback ends with the exception: the one line that says why (OutOfResources, ...).
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return f": {lines[-1][:200]}" if lines else ""


def run_command(args: list[str], cwd: Path, timeout_s: float, env: dict, stdin_text: str | None = None,
                on_tick=None, on_spawn=None) -> Finished:
    """Run a command in its own process group; kill the whole group on timeout or interruption."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as stdin:
        stdin.write((stdin_text or "").encode())
        stdin.seek(0)
        proc = subprocess.Popen(
            args, cwd=cwd, stdout=out, stderr=err, stdin=stdin,
            env={**os.environ, **env}, start_new_session=True,
        )
        try:
            if on_spawn:
                on_spawn(proc.pid)
            timed_out = _wait(proc, timeout_s, started, on_tick)
        except BaseException:  # Ctrl-C or kgit being stopped: never leave the command running
            _kill_group(proc)
            raise
        out.seek(0)
        err.seek(0)
        return Finished(
            None if timed_out else proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            time.monotonic() - started,
        )


def run_test(
    test_path: str,
    cwd: Path,
    timeout_s: float,
    env: dict,
    preferred_metric: str | None = None,
    on_tick=None,
    on_spawn=None,
    test_args: tuple[str, ...] = (),
) -> TestResult:
    """Run a kernel's test by the contract and validate what it prints."""
    args = [sys.executable, test_path, "--json", *test_args]
    done = run_command(args, cwd, timeout_s, env, None, on_tick, on_spawn)
    output = tail(done)
    reason = done.failure(timeout_s)
    payload = None if reason else last_json_object(done.stdout)
    if reason is None and payload is None:
        reason = "no JSON object on stdout"
    if reason:
        return TestResult(False, False, reason, None, None, 0.0, None, done.duration_s, output)
    return validate(payload, preferred_metric, done.duration_s, output)


def validate(payload: dict, preferred_metric: str | None, duration: float, tail: str) -> TestResult:
    def failed(reason: str) -> TestResult:
        return TestResult(False, False, reason, None, None, 0.0, payload, duration, tail)

    correctness = payload.get("correctness")
    if not isinstance(correctness, bool):
        return failed("invalid JSON: 'correctness' must be true or false")
    if not correctness or payload.get("status") == "fail":
        reason = payload.get("error") or payload.get("reason") or "the test reports incorrect results"
        return TestResult(True, False, f"correctness: {reason}", None, None, 0.0, payload, duration, tail)

    candidates = [preferred_metric] if preferred_metric else ["gbps", "tflops"]
    metric = next((m for m in candidates if m in payload), None)
    if metric is None:
        return failed(f"invalid JSON: no {' or '.join(candidates)} field")
    value = payload[metric]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return failed(f"invalid metric: {metric} = {value!r}")
    spread = payload.get("spread_pct", 0.0)
    if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not math.isfinite(spread) or spread < 0:
        return failed(f"invalid JSON: spread_pct = {spread!r}")
    return TestResult(True, True, None, metric, float(value), float(spread), payload, duration, tail)


def last_json_object(stdout: str) -> dict | None:
    """The last JSON object that starts at the beginning of a line (one line or indented over several)."""
    decoder = json.JSONDecoder()
    lines = stdout.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    # Nested objects of an indented dump start after whitespace, so only column-0 braces are candidates.
    for i in range(len(lines) - 1, -1, -1):
        if not lines[i].startswith("{"):
            continue
        try:
            obj, _ = decoder.raw_decode(stdout, offsets[i])
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def _wait(proc: subprocess.Popen, timeout_s: float, started: float, on_tick) -> bool:
    """Wait for the test; True when it ran out of time (and was killed)."""
    while True:
        elapsed = time.monotonic() - started
        if elapsed >= timeout_s:
            _kill_group(proc)
            return True
        try:
            proc.wait(timeout=min(1.0, timeout_s - elapsed))
            return False
        except subprocess.TimeoutExpired:
            if on_tick:
                on_tick(time.monotonic() - started)


def stop_orphaned_test(pid: int, test_path: str) -> None:
    """Kill the process group of a test left running by a kgit that was killed.

    Only if that pid still runs this test: a pid can be reused by an unrelated process.
    """
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return
    if test_path.encode() in cmdline:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def tail(done: Finished) -> str:
    """The end of what a command printed, stderr after stdout."""
    text = done.stdout + ("\n--- stderr ---\n" + done.stderr if done.stderr.strip() else "")
    return text[-TAIL_CHARS:]


def not_run(reason: str, output_tail: str = "") -> TestResult:
    """The result of a test that never ran or never finished."""
    return TestResult(False, False, reason, None, None, 0.0, None, 0.0, output_tail)
