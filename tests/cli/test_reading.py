"""Read-only commands: they change nothing and do not even import the code that writes."""

import json
import shutil
import subprocess
import sys

import pytest

# (kgit.state.lock is not one: doctor probes whether a kgit is running, and a probe takes nothing)
WRITERS = {
    "kgit.git.write", "kgit.state.transaction", "kgit.loop.steps", "kgit.loop.testing",
    "kgit.loop.tune", "kgit.loop.agent", "kgit.runner", "kgit.share.sync", "kgit.share.repair",
    "kgit.share.hook_install", "kgit.loop.profile",
}
HEAVY = {"torch", "triton", "numpy"}

# Runs one command in-process and prints the modules it loaded.
PROBE = """
import json, sys
from kgit.cli.main import cli
try:
    cli.main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("kgit") or m.split(".")[0] in %r)))
""" % sorted(HEAVY)

READ_ONLY = [["log"], ["best"], ["status"], ["show", "0"], ["diff", "0", "0"], ["context"], ["diagnose"], ["doctor"]]


def loaded_modules(ws, args):
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ws.root, capture_output=True, text=True)
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: a[0])
def test_a_read_only_command_imports_no_writer_and_changes_nothing(started, args):
    before = started.snapshot()
    modules = loaded_modules(started, args)
    assert "kgit.loop.history" in modules or args == ["doctor"]  # the probe really ran the command
    assert not modules & WRITERS, f"{args[0]} imports {sorted(modules & WRITERS)}"
    assert not modules & HEAVY
    assert started.snapshot() == before


def test_the_hook_imports_no_writer(started):
    modules = loaded_modules(started, ["hooks", "pre-push", "origin"])
    assert "kgit.share.hooks" in modules and not modules & WRITERS


def test_the_probe_sees_a_writer_when_there_is_one(started):
    started.set_kernel(METRIC=150.0)
    assert "kgit.git.write" in loaded_modules(started, ["step", "-m", "faster"])


def test_with_several_kernels_and_none_named_the_refusal_says_how_to_name_one(started):
    started.git("checkout", "-q", "main")
    shutil.copytree(started.root / "skills/kernels/fake", started.root / "skills/kernels/other")
    (started.root / "skills/kernels/other/test_fake.py").rename(started.root / "skills/kernels/other/test_other.py")
    (started.root / "skills/kernels/other/fake.py").rename(started.root / "skills/kernels/other/other.py")
    started.git("add", "-A")
    started.git("commit", "-qm", "another kernel")
    started.ok("start", "other")
    started.git("checkout", "-q", "main")
    message = started.refused("log")
    assert message == ("kgit: several kernels have records (fake, other): name one after the command "
                       "(e.g. 'kgit log fake') or check out its branch (git checkout opt/fake)")
    loops = started.ok("status", "--json").json()["kernels"]  # status gives the overview of every loop instead
    assert [(loop["kernel"], loop["branch"], loop["iterations"], loop["best"]["value"]) for loop in loops] == \
        [("fake", "opt/fake", 0, 100.0), ("other", "opt/other", 0, 100.0)]
    text = started.ok("status").stdout
    assert text.splitlines()[2].split()[:4] == ["fake", "opt/fake", "0", "0"] and "'kgit log KERNEL'" in text
    assert started.ok("log", "other", "--json").json()["kernel"] == "other"  # the advice works from here
    started.git("checkout", "-q", "opt/fake")  # and on the branch
    assert started.ok("status", "--json").json()["kernel"] == "fake"
    assert started.ok("log", "other", "--json").json()["kernel"] == "other"


def test_status_on_a_checkout_that_does_not_define_the_one_loop_gives_its_overview(started):
    """A teammate on main, where the loop's kernel is not defined (its kgit.yaml entry and files are on
    opt/fake only): kgit status reads the records alone, as for several loops, instead of refusing."""
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "faster")
    started.git("checkout", "-q", "main")
    assert started.ok("status", "--json").json()["kernel"] == "fake"  # defined here: the loop's own status
    started.git("rm", "-q", "-r", "skills/kernels/fake")
    started.git("commit", "-qm", "main no longer holds the kernel")
    loops = started.ok("status", "--json").json()["kernels"]
    assert [(loop["kernel"], loop["branch"], loop["iterations"], loop["best"]["value"]) for loop in loops] == \
        [("fake", "opt/fake", 1, 120.0)]
    assert "does not define fake" in started.refused("status", "fake")  # named: the checkout it needs is said
    assert "'kgit log KERNEL'" in started.ok("status").stdout  # what the overview advises works here
    assert started.ok("log", "fake", "--json").json()["kernel"] == "fake"


def test_context_diagnose_and_profile_take_the_kernel_as_start_does(started):
    """A positional KERNEL, as start and log take it (--kernel still works); two that disagree are refused."""
    started.git("checkout", "-q", "main")
    shutil.copytree(started.root / "skills/kernels/fake", started.root / "skills/kernels/other")
    (started.root / "skills/kernels/other/test_fake.py").rename(started.root / "skills/kernels/other/test_other.py")
    (started.root / "skills/kernels/other/fake.py").rename(started.root / "skills/kernels/other/other.py")
    started.git("add", "-A")
    started.git("commit", "-qm", "another kernel")
    started.ok("start", "other")
    started.git("checkout", "-q", "main")
    assert "name one after the command" in started.refused("context")  # which context now takes
    assert started.ok("context", "other", "--json").json()["kernel"] == "other"
    assert started.ok("context", "--kernel", "fake", "--json").json()["kernel"] == "fake"
    assert started.ok("diagnose", "other", "--json").json()["kernel"] == "other"
    assert started.refused("diagnose", "other", "--kernel", "fake") == \
        "kgit: two kernels named: other and --kernel fake: name one"
    assert "no kernel 'nope'" in started.refused("profile", "nope")


def test_log_counts_each_device_apart(started):
    started.set_kernel(METRIC=120.0, MODE="h200")  # the change's runs name another GPU than the baseline's
    started.ok("step", "-m", "on another device")
    data = started.ok("log", "--json").json()
    assert [(run["gpu"], run["iterations"], run["reverted"]) for run in data["runs"]] == \
        [("Fake GPU", [0], 0), ("NVIDIA H200", [1], 0)]
    text = started.ok("log").stdout
    assert text.count("Final: ") == 2 and "fake on NVIDIA H200, started " in text
    started.set_kernel(METRIC=50.0, MODE="ok")  # a loss measured on the first device
    started.ok("step", "-m", "slower, back on the first device")
    assert [(run["gpu"], run["iterations"], run["reverted"]) for run in started.ok("log", "--json").json()["runs"]] \
        == [("Fake GPU", [0, 2], 1), ("NVIDIA H200", [1], 0)]
    status = started.ok("status", "--json").json()  # the loop's counts are its best's device's
    assert (status["iteration"], status["reverted"], status["elsewhere"]) == (2, 0, 2)
    assert "2 of 5 (0 reverted); 2 records of runs on other devices, apart in 'kgit log'" in started.ok("status").stdout


def test_diff_sets_two_iterations_side_by_side(started):
    from workspace import KERNEL

    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "better", "--tier", "1")
    started.set_kernel(METRIC=90.0)
    started.ok("step", "-m", "worse", "--tier", "2")
    found = started.ok("diff", "1", "2", "--json").json()
    assert (found["a"]["iteration"], found["a"]["value"], found["a"]["status"]) == (1, 120.0, "IMPROVED")
    assert (found["b"]["iteration"], found["b"]["value"], found["b"]["status"]) == (2, 90.0, "REGRESSED")
    assert found["b"]["measurement"]["interval_pct"] and found["b"]["gpu"] == "Fake GPU"
    assert found["path"] == KERNEL and found["same_environment"] and found["better"] == "higher"
    assert "-METRIC = 120.0" in found["diff"] and "+METRIC = 90.0" in found["diff"] and "README" not in found["diff"]
    attempt = started.git("rev-parse", "refs/kgit/attempts/fake/2")  # a reverted iteration, by its commit
    assert started.ok("diff", "0", attempt, "--json").json()["b"]["iteration"] == 2
    text = started.ok("diff", "1", "2").stdout.splitlines()
    assert text[0].split() == ["iteration", "1", "iteration", "2"]
    assert text[3].startswith("value") and "120 GBps (12% of peak)" in text[3] and text[3].endswith("90.0 GBps (9% of peak)")
    assert text[4].startswith("vs its best") and "+20.0% [" in text[4] and "-25.0% [" in text[4]
    assert "improved" in text[5] and text[5].endswith("regressed, reverted")
    assert text[6].split() == ["device", "Fake", "GPU", "Fake", "GPU"]
    assert f"{KERNEL}, iteration 1 -> 2:" in text and "+METRIC = 90.0" in text
    assert started.refused("diff", "1", "9") == "kgit: fake has no iteration 9: its iterations are 0 to 2: 'kgit log' lists them"
    assert "no record of fake is on a commit named 'main'" in started.refused("diff", "main", "1")
    assert "Missing argument 'B'" in started.refused("diff", "1")
