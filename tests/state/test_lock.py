"""The repository's lock: one writing kgit at a time, never stale after a kill."""

import subprocess
import sys
import time

import pytest

from kgit.errors import KgitError
from kgit.git.command import find_repo
from kgit.state import lock

HOLD = """
import sys, time
from pathlib import Path
from kgit.git.command import find_repo
from kgit.state import lock
lock.acquire(find_repo(Path(sys.argv[1])))
print("held", flush=True)
time.sleep(60)
"""


def doctor(ws):
    return ws.doctor().json()["problems"]


def test_another_process_holding_the_lock_is_named_and_its_death_frees_it(ws, tmp_path):
    repo = find_repo(ws.root)
    assert lock.holder(repo) is None
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(ws.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert lock.holder(repo) == holder.pid
        with pytest.raises(KgitError) as refused:
            lock.acquire(repo)
        assert str(refused.value) == (f"another kgit process (pid {holder.pid}) is working in this repository: "
                                      "wait for it to finish")
        assert "another kgit process" in ws.refused("start", "fake")
    finally:
        holder.kill()  # as kill -9: the kernel releases the lock
        holder.wait()
    assert lock.holder(repo) is None
    lock.acquire(repo)
    lock.release(repo)


def test_the_lock_is_reentrant_within_a_process(ws):
    repo = find_repo(ws.root)
    lock.acquire(repo)
    try:
        lock.acquire(repo)  # a tuning run holds it, and each step inside takes it again
        lock.release(repo)
        probe = subprocess.run([sys.executable, "-c", HOLD.replace("time.sleep(60)", ""), str(ws.root)],
                               capture_output=True, text=True)
        assert probe.returncode == 1 and "another kgit process" in probe.stderr  # still held after one release
    finally:
        lock.release(repo)
    assert lock.holder(repo) is None


def test_a_lock_left_by_a_dead_kgit_holds_nothing(started):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (started.root / ".git/kgit/lock").write_text(str(dead.pid))  # what a kgit killed with -9 leaves
    assert doctor(started) == []
    started.set_kernel(METRIC=120.0)
    assert started.ok("step", "-m", "x", "--json").json()["status"] == "IMPROVED"


LOCKER = """
import sys, time
from pathlib import Path
from kgit.errors import KgitError
from kgit.git.command import find_repo
from kgit.state import lock
repo = find_repo(Path(sys.argv[1]))
time.sleep(float(sys.argv[2]) - time.time())  # every process tries at the same instant
try:
    lock.acquire(repo)
except KgitError:
    sys.exit(0)
start = time.time()
time.sleep(0.3)
print(start, time.time())
lock.release(repo)
"""


def test_the_lock_admits_one_process_at_a_time(started, tmp_path):
    script = tmp_path / "locker.py"
    script.write_text(LOCKER)
    for _ in range(3):
        at = str(time.time() + 1.0)
        procs = [subprocess.Popen([sys.executable, str(script), str(started.root), at], stdout=subprocess.PIPE,
                                  text=True) for _ in range(8)]
        held = [tuple(map(float, p.communicate()[0].split())) for p in procs]
        held = sorted(h for h in held if h)
        assert held, "someone got the lock"
        assert all(a[1] <= b[0] for a, b in zip(held, held[1:])), f"two holders at once: {held}"


def test_one_lock_for_every_worktree_of_the_repository(started, tmp_path):
    # a step in a linked worktree and one in the main checkout would each see the other's notes move
    linked = tmp_path / "linked"
    started.git("worktree", "add", "-q", "--detach", str(linked))
    main, other = find_repo(started.root), find_repo(linked)
    assert other.git_dir != main.git_dir and other.shared_kgit_dir == main.shared_kgit_dir
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(linked)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert lock.holder(main) == holder.pid
        started.set_kernel(METRIC=150.0)
        assert "another kgit process" in started.refused("step", "-m", "while the linked worktree works")
    finally:
        holder.kill()
        holder.wait()
    assert started.ok("step", "-m", "after it", "--json").json()["status"] == "IMPROVED"


def test_deleting_the_lock_file_lets_no_second_kgit_in(started):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(started.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        (started.root / ".git/kgit/lock").unlink()  # what a user (or an agent) might try
        started.set_kernel(METRIC=150.0)
        assert "another kgit process" in started.refused("step", "-m", "past a deleted lock file")
    finally:
        holder.kill()
        holder.wait()
