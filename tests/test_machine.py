"""Where a kernel's test runs here: the gpu setting of kgit.yaml (kgit.machine.vendor), and the interpreter's note
on the CPU (kgit.loop.testing.test_env)."""

import pytest

from kgit import machine
from kgit.loop import testing


def test_cpu_runs_in_the_interpreter_and_says_so():
    env, note = testing.test_env(machine.vendor("cpu"), "cpu")
    assert env == {"TRITON_INTERPRET": "1"}
    assert note.startswith("gpu: cpu: running in Triton's interpreter mode on the CPU")
    assert "not comparable to any GPU" in note


@pytest.mark.parametrize("choice", ["nvidia", "amd"])
def test_an_explicit_vendor_is_respected_even_without_its_driver(choice):
    assert machine.vendor(choice) == choice
    assert testing.test_env(machine.vendor(choice), choice) == ({}, None)


def test_auto_looks_for_the_drivers_files(monkeypatch):
    present = set()
    monkeypatch.setattr(machine.Path, "exists", lambda self: str(self) in present)
    assert machine.vendor("auto") == "cpu"
    env, note = testing.test_env(machine.vendor("auto"), "auto")
    assert env == {"TRITON_INTERPRET": "1"} and note.startswith("no GPU found: running in Triton's interpreter")
    present.add("/dev/kfd")
    assert machine.vendor("auto") == "amd" and testing.test_env(machine.vendor("auto"), "auto") == ({}, None)
    present.add("/dev/nvidiactl")
    assert machine.vendor("auto") == "nvidia"
    assert machine.vendor("cpu") == "cpu"  # a choice beats what is installed
