"""Every process kgit starts but git: its own process group, a timeout, and how it ended in a few words."""

import signal
import sys
import time

import pytest

from kgit import runner
from workspace import alive

# A command that starts a grandchild (through a shell) that would outlive it, then hangs.
FAMILY = """
import subprocess, sys, time
child = subprocess.Popen(["/bin/sh", "-c", "sleep 300 & echo $! > %s; wait"])
time.sleep(300)
"""


def test_a_command_that_times_out_is_killed_with_its_whole_group(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    started = time.monotonic()
    done = runner.run_command([sys.executable, "-c", FAMILY % pidfile], tmp_path, timeout_s=1.5, env={})
    assert time.monotonic() - started < 10
    assert done.returncode is None and done.failure(1.5) == "timeout: no result after 1.5 s"
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "the grandchild outlived the timeout"


# A command that starts a daemon in a session of its own (setsid), outside the command's process group.
ESCAPE = """
import subprocess, sys, time
daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
open(%r, "w").write(str(daemon.pid))
time.sleep(float(sys.argv[1]))
"""


def gone_soon(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_a_daemon_that_left_the_group_dies_when_its_command_ends_or_times_out(tmp_path):
    for seconds, timeout_s in ((0.0, 30.0), (300.0, 1.5)):
        pidfile = tmp_path / f"daemon-{timeout_s}.pid"
        runner.run_command([sys.executable, "-c", ESCAPE % str(pidfile), str(seconds)], tmp_path, timeout_s, env={})
        assert gone_soon(int(pidfile.read_text())), f"the daemon outlived its command (timeout {timeout_s} s)"


def test_output_exit_status_and_the_failure_in_a_few_words(tmp_path):
    done = runner.run_command([sys.executable, "-c", "import sys; print('out'); print('why', file=sys.stderr)"],
                              tmp_path, 30, {})
    assert (done.returncode, done.stdout, done.stderr, done.failure(30)) == (0, "out\n", "why\n", None)
    crash = runner.run_command(
        [sys.executable, "-c", "import sys; print('Traceback ...\\nOutOfResources: shared memory', file=sys.stderr); "
                               "sys.exit(3)"], tmp_path, 30, {})
    assert crash.failure(30) == "crashed: exit status 3: OutOfResources: shared memory"
    killed = runner.run_command([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
                                tmp_path, 30, {})
    assert killed.failure(30) == "crashed: killed by signal SIGSEGV"
    assert runner.tail(crash).endswith("--- stderr ---\nTraceback ...\nOutOfResources: shared memory\n")


@pytest.mark.parametrize("stdout, tail", [
    ("short\n", "short\n"),  # whole
    ("a" * 30 + "\nline two is long\n", "line two is long\n"),  # from the first line that starts in it
    ("x" * 40 + "\n", "[...] " + "x" * 14 + "\n"),  # inside one long line: marked
])
def test_a_tail_starts_at_a_line_or_says_where_it_cuts_one(stdout, tail):
    assert runner.tail(runner.Finished(0, stdout, "", 0.1), chars=21) == tail


def test_the_environment_stdin_and_the_spawn_callback(tmp_path):
    spawned = []
    done = runner.run_command(
        [sys.executable, "-c", "import os, sys; print(os.environ['KGIT_X'], sys.stdin.read(), os.getpgid(0) == os.getpid())"],
        tmp_path, 30, {"KGIT_X": "set"}, stdin_text="piped", on_spawn=spawned.append)
    assert done.stdout.split() == ["set", "piped", "True"]  # in a process group of its own
    assert len(spawned) == 1


def test_an_orphaned_test_is_stopped_only_if_its_pid_still_runs_that_test(tmp_path):
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "my_test.py"],
                            start_new_session=True)
    try:
        runner.stop_orphaned_test(proc.pid, "another_test.py")  # a reused pid: left alone
        time.sleep(0.1)
        assert proc.poll() is None
        runner.stop_orphaned_test(proc.pid, "my_test.py")
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
