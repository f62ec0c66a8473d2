"""Profiles already taken, read back: a metrics file, the latest profile of a kernel, HEAD's record,
and the benchmark's numbers when no profiler ran."""

import json
from pathlib import Path

import pytest

from kgit.errors import KgitError
from kgit.git import notes
from kgit.git.command import find_repo
from kgit.profiling import saved

DATA = Path(__file__).parents[1] / "data"


def test_a_metrics_file_is_kgits_json_or_an_ncu_csv(tmp_path):
    from_csv = saved.load_metrics_file(DATA / "ncu_softmax_synthetic.csv")
    assert from_csv["primary"] == "softmax_kernel" and from_csv["metrics"]["dram_pct"] == pytest.approx(86.2)
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"metrics": {"dram_pct": 5.0}}))
    assert saved.load_metrics_file(metrics) == {"metrics": {"dram_pct": 5.0}, "source": "profiler"}
    for name, text, why in (("other.json", "[1, 2]", "is not a kgit metrics.json"),
                            ("words.txt", "neither JSON nor CSV", "is neither kgit's metrics.json nor an ncu CSV")):
        (tmp_path / name).write_text(text)
        with pytest.raises(KgitError, match=why):
            saved.load_metrics_file(tmp_path / name)
    with pytest.raises(KgitError, match="does not exist"):
        saved.load_metrics_file(tmp_path / "none.json")


def test_the_latest_profile_file_else_the_newest_note(started):
    repo = find_repo(started.root)
    assert saved.latest(repo, "fake") is None
    head = started.git("rev-parse", "HEAD")
    note = json.loads(started.git("notes", "--ref=refs/notes/kgit", "show", head))
    note["profile"] = {"source": "profiler", "tool": "ncu", "iteration": 0, "metrics": {"dram_pct": 1.0}}
    started.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", json.dumps(note), head)
    assert saved.latest(repo, "fake")["metrics"] == {"dram_pct": 1.0}
    folder = saved.profile_dir(repo, "fake")
    folder.mkdir(parents=True)
    (folder / "latest.json").write_text(json.dumps({"source": "profiler", "metrics": {"dram_pct": 2.0}}))
    assert saved.latest(repo, "fake")["metrics"] == {"dram_pct": 2.0}
    (folder / "latest.json").write_text("{damaged")
    assert saved.latest(repo, "fake")["metrics"] == {"dram_pct": 1.0}  # a damaged file: the note's


def test_head_record_after_a_revert_is_the_last_kept_iteration(started):
    repo = find_repo(started.root)
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "faster")
    started.set_kernel(METRIC=90.0)
    started.ok("step", "-m", "slower")  # HEAD is now a log-only commit
    records = dict(notes.kernel_history(repo, "fake").pairs)
    sha, record = saved.head_record(repo, records)
    assert record.iteration == 1 and sha == started.git("rev-parse", "HEAD~1")
    started.git("checkout", "-q", "main")
    assert saved.head_record(repo, records) == (None, None)


def test_the_benchmark_fallback(tmp_path, started):
    repo = find_repo(started.root)
    record = notes.kernel_history(repo, "fake").records[0]
    prof = saved.benchmark_fallback("no GPU", record, started.root, "fake")
    assert prof["source"] == "benchmark" and prof["tool"] is None and prof["why"] == "no GPU"
    assert (prof["metric"], prof["value"], prof["pct_of_peak"], prof["iteration"]) == ("gbps", 100.0, 10.0, 0)
    assert prof["declared_bottleneck"] is None and "does not exist" in prof["declared_why"]
    nothing = saved.benchmark_fallback("no GPU", None, tmp_path, "fake")
    assert nothing["value"] is None and nothing["iteration"] is None and nothing["metrics"] == {}
