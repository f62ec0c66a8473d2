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


def test_progress_shows_an_interval_only_once_it_means_something(capsys):
    """Early in the paired phase the interval is absurd ([-100.0, +4756706.8]): "measuring…" until it is
    finite and narrower than +-100%."""
    from kgit.cli.common import Progress
    from kgit.model.noise import Interval

    progress = Progress("step")
    progress.pair(1, 12, None)
    progress.pair(2, 12, Interval(gain_pct=35.0, low_pct=-100.0, high_pct=4756706.8, sd=1.0, df=1, pairs=2))
    progress.pair(3, 12, Interval(gain_pct=35.0, low_pct=float("-inf"), high_pct=40.0, sd=1.0, df=2, pairs=3))
    progress.pair(4, 12, Interval(gain_pct=35.0, low_pct=-90.0, high_pct=115.0, sd=1.0, df=3, pairs=4))
    progress.pair(5, 12, Interval(gain_pct=35.0, low_pct=20.2, high_pct=51.0, sd=0.1, df=4, pairs=5))
    lines = capsys.readouterr().err.splitlines()
    assert lines[:4] == [f"kgit: step: pair {k} of at most 12: measuring…" for k in range(1, 5)]
    assert lines[4] == "kgit: step: pair 5 of at most 12: +35.0% [+20.2, +51.0] so far"
