"""The kgit command: an unknown command, a refusal and Ctrl-C each end in one line on stderr, no traceback."""

import signal
import subprocess
import sys
import time

import pytest

from workspace import TEST


def one_line(run):
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kgit: ") and "Traceback" not in run.stderr, run.stderr
    return lines[0]


def test_an_unknown_command(ws):
    run = ws.kgit("frobnicate")
    assert run.returncode == 1 and run.stdout == ""
    assert "frobnicate" in one_line(run)


def test_a_kgit_error(ws, tmp_path):
    run = ws.kgit("-C", str(tmp_path / "nowhere"), "status")
    assert run.returncode == 1 and run.stdout == ""
    assert one_line(run) == f"kgit: no such directory: {tmp_path / 'nowhere'}"


def ctrl_c_as_a_terminal():
    """A run started in the background (nohup, &) inherits SIGINT ignored: give the child a terminal's."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c(ws):
    # 'kgit hooks pre-push' waits for git's lines on its standard input: interrupt it there
    proc = subprocess.Popen([sys.executable, "-m", "kgit", "hooks", "pre-push"], cwd=ws.root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_a_terminal)
    time.sleep(1.5)  # past the imports, into the read
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and out == ""
    # (click echoes a newline to stderr first, as it does on every Ctrl-C; the message is the one line)
    assert err.strip().splitlines() == ["kgit: interrupted"]


def test_help_and_version(ws):
    run = ws.ok("--help")
    assert "kgit start softmax" in run.stdout and run.stderr == ""
    assert ws.ok("--version").stdout.split(", version ")[1].strip()


def test_a_refusal_under_json_is_still_one_json_object_on_stdout(ws):
    import json

    run = ws.kgit("step", "-m", "x", "--json")  # not on an opt/ branch
    assert run.returncode == 1
    assert json.loads(run.stdout) == {"error": run.stderr.strip().splitlines()[-1].removeprefix("kgit: "),
                                      "hint": "run 'kgit start <kernel>' first"}  # no loop here yet
    assert ws.kgit("status").stdout == ""  # without --json, nothing on stdout
    usage = ws.kgit("step", "--no-such-option", "--json")
    assert usage.returncode == 1 and json.loads(usage.stdout)["hint"].endswith("lists a command's arguments and options")


@pytest.mark.parametrize("setup, args, hint", [
    (lambda w: None, ["log", "nosuch"], "the kernels with records here: fake; 'kgit start nosuch' begins a loop for nosuch"),
    (lambda w: None, ["step", "-m", "x"], "edit the kernel, then step"),
    (lambda w: w.set_kernel(METRIC=120.0), ["step", "-m", " "], "say in a few words what this iteration changes, or why"),
    (lambda w: (w.root / TEST).write_text("print('judge changed')\n"), ["step", "-m", "x"],
     f"put the rest back with git restore -- {TEST} (or git stash push -- {TEST} to keep it aside)"),
])
def test_a_refusal_an_agent_meets_carries_what_to_do_as_its_hint(started, setup, args, hint):
    import json

    setup(started)
    run = started.kgit(*args, "--json")
    assert run.returncode == 1
    found = json.loads(run.stdout)
    assert found["hint"] == hint and found["error"].endswith(": " + hint)


def test_ctrl_c_while_kgit_starts_is_one_line(monkeypatch, capsys):
    import types

    import pytest

    from kgit import __main__ as entry

    loading = types.ModuleType("kgit.cli.main")  # its import is where a Ctrl-C at start-up lands
    loading.__getattr__ = lambda name: (_ for _ in ()).throw(KeyboardInterrupt())
    monkeypatch.setitem(sys.modules, "kgit.cli.main", loading)
    with pytest.raises(SystemExit) as stopped:
        entry.main()
    assert stopped.value.code == 130 and capsys.readouterr().err == "kgit: interrupted\n"
