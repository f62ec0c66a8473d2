"""Every process kgit starts other than git: a kernel's test, an agent, a profiler.

Each runs in its own process group with a timeout, and the whole group dies with it (timeout,
Ctrl-C, kgit being stopped). A descendant that left the group (setsid, a daemon) still carries the
run's tag in its environment, and dies too when the command ends (on Linux, where /proc shows it).
What a test prints is read by kgit.model.result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from kgit.config import KernelConfig
from kgit.model import device_time, result
from kgit.model.result import TestResult

TAIL_CHARS = 2000
CUT = "[...] "  # where a tail begins inside a line
RUN_TAG = "KGIT_RUN_TAG"  # inherited by every descendant of a command kgit runs
# Set for a run of a commit whose correctness kgit has already seen pass: a test may then skip its slow
# checks and only time (the bundled harness does, and still verifies the outputs it timed).
TIMING_ONLY = "KGIT_TIMING_ONLY"
# kgit's device timing (kgit.harness.device_timing): a folder first on the test's PYTHONPATH whose
# sitecustomize records kernel launches into the file named by DEVICE_TIMES.
DEVICE_TIMING = Path(__file__).resolve().parent / "harness" / "device_timing"
DEVICE_TIMES = "KGIT_DEVICE_TIMES"
# kgit's own switches to the commands it runs: only kgit sets them, never the environment it was started
# in (a KGIT_TIMING_ONLY=1 left exported would let every run skip the correctness checks).
INTERNAL = (RUN_TAG, TIMING_ONLY, DEVICE_TIMES)


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
    tag = uuid.uuid4().hex
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as stdin:
        stdin.write((stdin_text or "").encode())
        stdin.seek(0)
        proc = subprocess.Popen(
            args, cwd=cwd, stdout=out, stderr=err, stdin=stdin,
            # no __pycache__ folders in the user's working tree: a kernel's test imports its template
            env={**inherited(), "PYTHONDONTWRITEBYTECODE": "1", **env, RUN_TAG: tag}, start_new_session=True,
        )
        try:
            if on_spawn:
                on_spawn(proc.pid)
            timed_out = _wait(proc, timeout_s, started, on_tick)
        except BaseException:  # Ctrl-C or kgit being stopped: never leave the command running
            _kill_group(proc)
            raise
        finally:
            _kill_tagged(tag)
        out.seek(0)
        err.seek(0)
        return Finished(
            None if timed_out else proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            time.monotonic() - started,
        )


def inherited() -> dict:
    """The environment kgit was started in, less kgit's own switches."""
    return {key: value for key, value in os.environ.items() if key not in INTERNAL}


def run_test(cfg: KernelConfig, cwd: Path, timeout_s: float, env: dict, on_tick=None, on_spawn=None) -> TestResult:
    """Run a kernel's test (by the contract, or its test_command) in cwd with kgit's device timing of the
    kernels that cwd's kernel file defines (its device time counts, not a library's), and read what it
    prints."""
    if cfg.test_command:
        args = ["/bin/sh", "-c", cfg.test_command]
    else:
        args = [sys.executable, cfg.test_path, "--json", *cfg.test_args]
    with tempfile.TemporaryDirectory(prefix="kgit-device-times-") as folder:
        recording = Path(folder) / "launches.jsonl"
        python_path = os.pathsep.join(filter(None, [str(DEVICE_TIMING), env.get("PYTHONPATH",
                                                                                 os.environ.get("PYTHONPATH"))]))
        timed_env = {**env, "PYTHONPATH": python_path, DEVICE_TIMES: str(recording)}
        done = run_command(args, cwd, timeout_s, timed_env, None, on_tick, on_spawn)
        text = recording.read_text(errors="replace") if recording.exists() else ""
    failure, output_tail = done.failure(timeout_s), tail(done)
    kernel_file = cwd / cfg.kernel_path
    kernels = device_time.kernel_names(kernel_file.read_text(errors="replace")) if kernel_file.is_file() else set()
    device = device_time.from_recording(text, kernels)
    return result.from_output(done.stdout, failure, cfg.reading, done.duration_s, output_tail, device)


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


def _kill_tagged(tag: str) -> None:
    """Kill every process whose environment carries this run's tag: what escaped the group."""
    mark = f"{RUN_TAG}={tag}".encode()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if mark in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):  # gone meanwhile, another user's, or no /proc here
            continue


def tail(done: Finished, chars: int = TAIL_CHARS) -> str:
    """The end of what a command printed, stderr after stdout, at most chars long: from a line's start
    when one begins in the first half of it, else marked where it cuts a line (a long JSON line, say)."""
    text = done.stdout + ("\n--- stderr ---\n" + done.stderr if done.stderr.strip() else "")
    if len(text) <= chars:
        return text
    end = text[-chars:]
    newline = end.find("\n")
    return end[newline + 1:] if 0 <= newline < chars // 2 else CUT + end[len(CUT):]
