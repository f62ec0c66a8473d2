"""What every command shares: one JSON object under --json, text otherwise."""

import json


def test_json_output_is_one_object(started):
    started.set_kernel(METRIC=120.0)
    for args in (["step", "-m", "x", "--json"], ["best", "--json"], ["log", "--json"], ["status", "--json"],
                 ["show", "1", "--json"]):
        out = started.ok(*args).stdout
        assert out.count("\n") == 1 and isinstance(json.loads(out), dict)


def test_emit_builds_only_what_is_asked_and_prints_one_json_object(capsys):
    from kgit.cli.common import emit

    def never():
        raise AssertionError("built although not asked for")

    emit(True, lambda: {"kernel": "fake", "nested": {"values": [1, 2.5, None]}, "when": object.__name__}, never)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and json.loads(out) == {"kernel": "fake", "nested": {"values": [1, 2.5, None]},
                                                         "when": "object"}
    emit(False, never, lambda: "a table\nfor a person")
    assert capsys.readouterr().out == "a table\nfor a person\n"


def test_progress_and_notes_go_to_stderr(started):
    started.set_kernel(METRIC=120.0)
    run = started.ok("step", "-m", "faster", "--json")
    assert json.loads(run.stdout)["status"] == "IMPROVED"
    assert "kgit: step: running skills/kernels/fake/test_fake.py ..." in run.stderr.splitlines()
    assert all(line.startswith("kgit: ") for line in run.stderr.splitlines())


def test_progress_gives_the_device_note_once_per_command(capsys):
    from kgit.cli.common import Progress

    progress = Progress("tune")
    for _ in range(3):
        progress.begin("t.py", "no GPU found: running in Triton's interpreter mode")
    err = capsys.readouterr().err
    assert err.count("no GPU found") == 1 and err.count("kgit: tune: running t.py") == 3
