"""The journal of the step in flight: saved and loaded back, and a damaged one refused in one line."""

import json

import pytest

from kgit.errors import KgitError
from kgit.git.command import find_repo
from kgit.model.record import Record, Status
from kgit.state import journal

SHA = "0123456789abcdef0123456789abcdef01234567"


def a_journal(**fields):
    record = Record("fake", 1, "faster", Status.IMPROVED, started="2030-01-01T00:00:00+00:00", value=120.0,
                    metric="gbps", correctness=True, test={"gbps": 120.0})
    base = dict(op="step", phase="decided", kernel="fake", iteration=1, action="faster", tier=1, base=SHA,
                started="2030-01-01T00:00:00+00:00", config={"max_iterations": 5}, candidate=SHA, record=record,
                final=None)
    return journal.Journal(**{**base, **fields})


def test_a_saved_journal_loads_back_equal(ws):
    repo = find_repo(ws.root)
    assert journal.load(repo) is None and not journal.pending(repo)
    for saved in (a_journal(), a_journal(phase="testing", record=None, candidate=None), a_journal(op="start")):
        journal.save(repo, saved)
        assert journal.load(repo) == saved
        assert journal.pending(repo)
    journal.clear(repo)
    assert journal.load(repo) is None and not journal.pending(repo)


def damaged_texts():
    good = json.loads(json.dumps({**a_journal().__dict__, "record": None, "phase": "testing"}))
    return {
        "not JSON": "{this is not json",
        "not an object": "[1, 2, 3]",
        "an unknown key": json.dumps({**good, "surprise": 1}),
        "a missing key": json.dumps({k: v for k, v in good.items() if k != "kernel"}),
        "an unknown phase": json.dumps({**good, "phase": "halfway"}),
        "an iteration of the wrong type": json.dumps({**good, "iteration": "1"}),
        "a config of the wrong type": json.dumps({**good, "config": []}),
        "a base that is no object id": json.dumps({**good, "base": "--all"}),
        "a candidate that is no object id": json.dumps({**good, "candidate": "HEAD"}),
        "a decided step without its record": json.dumps({**good, "phase": "decided"}),
        "an invalid record": json.dumps({**good, "phase": "decided", "record": {"kernel": "fake"}}),
        "not UTF-8": b"\xff\xfe\x00garbage",
    }


@pytest.mark.parametrize("kind", list(damaged_texts()))
def test_a_damaged_journal_is_one_line_that_says_how_to_set_it_aside(ws, kind):
    repo = find_repo(ws.root)
    repo.kgit_dir.mkdir()
    text = damaged_texts()[kind]
    path = repo.kgit_dir / "journal.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(KgitError) as caught:
        journal.load(repo)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"kgit's journal {path} is damaged (")
    assert message.endswith(f"set it aside with 'mv {path} {path}.damaged' and run 'kgit doctor'")


def test_kgit_commands_refuse_a_damaged_journal_with_that_line_and_change_nothing(started):
    path = started.root / ".git/kgit/journal.json"
    path.write_text('{"op": "step", "phase": "decided"')
    started.set_kernel(METRIC=120.0)
    for args in (["step", "-m", "x"], ["doctor", "--fix"], ["report"]):
        line = started.refused(*args)
        assert "journal" in line and "is damaged" in line and ".damaged" in line, line
    path.rename(path.with_name("journal.json.damaged"))  # as the message says
    assert started.ok("step", "-m", "x", "--json").json()["status"] == "IMPROVED"


def test_running_tests_are_registered_until_they_end(ws):
    repo = find_repo(ws.root)
    assert journal.registered_tests(repo) == {}
    journal.register_test(repo, 4242, "skills/kernels/fake/test_fake.py")
    assert journal.registered_tests(repo) == {4242: "skills/kernels/fake/test_fake.py"}
    assert journal.pending(repo)
    journal.unregister_test(repo, 4242)
    assert journal.registered_tests(repo) == {} and not journal.pending(repo)
