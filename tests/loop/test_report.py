"""The log a step commits, rendered by kgit.loop.report: over a log that is up to date (kgit.state.rendered)
from its own kernel's records alone, and the same text as a rendering of every record."""

import json

from kgit.git import notes
from kgit.git.command import find_repo
from kgit.loop import report
from kgit.model.record import from_json
from kgit.render.readme import render_readme

OTHER = {"kernel": "other", "iteration": 0, "action": "baseline", "status": "BASELINE", "gpu": "Fake GPU",
         "metric": "gbps", "value": 5.0, "correctness": True, "started": "2026-11-30T08:00:00+00:00"}


def next_record(ws):
    return from_json({**OTHER, "kernel": "fake", "iteration": 9, "action": "next", "status": "IMPROVED",
                      "value": 300.0, "started": "2026-12-01T08:00:00+00:00"})


def full_rendering(ws, extra):
    repo = find_repo(ws.root)
    records = [r for _, r in notes.records_with_commits(repo, notes.read_notes(repo))] + [extra]
    return render_readme(records, ws.git("show", "HEAD:experiments/README.md"))


def test_a_step_over_an_up_to_date_log_reads_its_kernels_records_alone(started, monkeypatch):
    started.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", json.dumps(OTHER), "main")
    started.ok("report")  # the log renders every record now, and kgit knows it
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")  # its log too: rendered from the fake kernel's records alone
    extra = next_record(started)
    expected = full_rendering(started, extra)

    def every_note(*args, **kwargs):
        raise AssertionError("a step read every note")

    monkeypatch.setattr(notes, "read_notes", every_note)
    text, rendered_from = report.readme_text(find_repo(started.root), "experiments/README.md", "HEAD", extra)
    assert text == expected and "## Optimization: other on Fake GPU" in text
    assert rendered_from == started.git("rev-parse", "refs/notes/kgit")


def test_a_record_whose_note_is_written_already_is_rendered_once(started):
    """After a crash between a step's note and its branch's move, recovery renders the record it holds
    in its journal: the copy in the notes gives way to it, never a second row."""
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")
    repo = find_repo(started.root)
    record = notes.kernel_history(repo, "fake").records[-1]
    text, rendered_from = report.readme_text(repo, "experiments/README.md", "HEAD~1", record.replace(action="again"))
    assert text.count("| again ") == 1 and "| faster " not in text
    assert rendered_from is None  # that run has a note: the rendering is not of every note as it stands
