"""The trust boundary of kgit pull: forged records, tags and branch names from a remote or a bundle are
refused (kept under refs/kgit/quarantine/<remote>), said in one line each, and kgit doctor lists them."""

import json

from workspace import a_session, clone


def forger(remote, tmp_path):
    """A plain git clone of the remote with its kgit refs, where notes are edited by hand."""
    f = clone(remote, tmp_path / "forger")
    f.git("fetch", "-q", "origin", "refs/notes/kgit:refs/notes/kgit", "refs/heads/opt/*:refs/heads/opt/*",
          "refs/tags/*:refs/tags/*")
    return f


def forge(w, rev, **changes):
    record = {**json.loads(w.git("notes", "--ref=refs/notes/kgit", "show", rev)), **changes}
    (w.root.parent / "note.json").write_text(json.dumps(record, indent=2))
    w.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-F", str(w.root.parent / "note.json"), rev)


def pull_refusing(b, *args):
    """kgit pull that refuses something: exit 1, a 'refused:' line per thing, one line on stderr."""
    run = b.kgit("pull", *args)
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert run.stderr.strip().startswith("kgit: the pull is incomplete") and len(run.stderr.strip().splitlines()) == 1
    return [line for line in run.stdout.splitlines() if line.startswith("refused:")]


def test_a_forged_figure_is_refused_kept_aside_and_listed_by_doctor(remote, ws, tmp_path):
    a_session(ws)
    ws.ok("push")
    f = forger(remote, tmp_path)
    tip = f.git("rev-parse", "best/fake")
    forge(f, "best/fake", value=1e9)  # the best iteration's figure, on its own commit
    f.git("push", "-q", "origin", "refs/notes/kgit")
    b = clone(remote, tmp_path / "b")
    refused = pull_refusing(b)
    assert "fake iteration 1 on" in refused[0] and "its figure 1e+09 is over 10 times its GPU's peak" in refused[0]
    # the branch's kernel is then that of a commit with no record here: not taken
    assert refused[1].startswith("refused: origin's opt/fake") and "iteration 1 of a kgit step" in refused[1]
    assert "refs/heads/opt/fake" not in b.git("for-each-ref")
    assert b.ok("best", "fake", "--json").json()["value"] == 100.0  # the baseline: the forged one is no best
    problems = [p["problem"] for p in b.doctor().json()["problems"]]
    assert any("refused by kgit pull (refs/kgit/quarantine/origin): fake iteration 1" in p for p in problems)
    assert json.loads(b.git("show", f"refs/kgit/quarantine/origin:{tip}"))["value"] == 1e9
    again = b.kgit("pull")  # the branch is still not taken (exit 1); the record's refusal is not said again
    assert again.returncode == 1 and "fake iteration 1 on" not in again.stdout and "opt/fake" in again.stdout


def test_a_forged_iteration_does_not_stop_the_loop(remote, ws, tmp_path):
    a_session(ws)
    ws.ok("push")
    f = forger(remote, tmp_path)
    forge(f, "best/fake", iteration=1_000_000)
    f.git("push", "-q", "origin", "refs/notes/kgit")
    b = clone(remote, tmp_path / "b")
    refused = pull_refusing(b)
    assert "iteration 1000000 is past what the history of opt/fake holds (at most 7)" in refused[0]
    status = b.ok("status", "fake", "--json").json()
    assert "MAX_ITERATIONS" not in json.dumps(status)
    assert max(r["iteration"] for r in b.ok("log", "fake", "--json").json()["iterations"]) == 2


def test_a_forged_best_on_the_branch_is_refused_when_the_tag_names_another(remote, ws, tmp_path):
    a_session(ws)
    ws.ok("push")
    f = forger(remote, tmp_path)
    tip = f.git("rev-parse", "opt/fake")  # iteration 2's log commit: a forged kept iteration 3 on it
    record = {**json.loads(f.git("notes", "--ref=refs/notes/kgit", "show", "best/fake")), "iteration": 3,
              "value": 90.0, "started": "2031-01-01T00:00:00+00:00"}
    f.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", json.dumps(record), tip)
    f.git("push", "-q", "origin", "refs/notes/kgit")
    b = clone(remote, tmp_path / "b")
    refused = pull_refusing(b)
    assert len(refused) == 1 and "it would be the best, but origin's best/fake is on" in refused[0]
    assert b.ok("best", "fake", "--json").json()["iteration"] == 1  # the worse kernel is not the best


def test_a_bundles_tag_off_its_branch_is_not_adopted(ws, tmp_path):
    a_session(ws)
    ws.git("tag", "-f", "best/fake", "main")  # the tag on a commit off opt/fake
    bundle = tmp_path / "run.bundle"
    ws.git("bundle", "create", "-q", str(bundle), "opt/fake", "best/fake", "refs/notes/kgit", "refs/kgit/attempts/fake/2")
    ws.git("checkout", "-q", "main")
    b = clone(ws.root, tmp_path / "b")
    b.git("tag", "-d", "best/fake")  # git clone copies tags
    refused = pull_refusing(b, str(bundle))
    best = ws.git("rev-parse", "opt/fake~1")  # iteration 1
    assert refused == [f"refused: bundle-run's best/fake ({ws.git('rev-parse', 'main')[:10]}), it is not the best kept "
                       "iteration of its opt/fake by the records: best/fake here follows this clone's records"]
    assert b.git("rev-parse", "best/fake") == best


def test_branch_names_that_name_no_kernel_are_not_created(ws, tmp_path):
    a_session(ws)
    for name in ("opt/a/b", "opt/-rf", "opt/" + "x" * 100):
        ws.git("branch", "-f", name, "opt/fake")
    bundle = tmp_path / "names.bundle"
    ws.git("bundle", "create", "-q", str(bundle), "--branches=opt/*", "best/fake", "refs/notes/kgit",
           "refs/kgit/attempts/fake/2")
    ws.git("checkout", "-q", "main")
    b = clone(ws.root, tmp_path / "b")
    refused = pull_refusing(b, str(bundle))
    assert len(refused) == 3 and all("it names no valid kernel" in line for line in refused)
    assert b.git("for-each-ref", "--format=%(refname)", "refs/heads/opt/", "refs/remotes/bundle-names/") \
        == "refs/heads/opt/fake\nrefs/remotes/bundle-names/opt/fake"


def test_a_field_of_megabytes_is_refused_and_never_rendered(remote, ws, tmp_path):
    a_session(ws)
    ws.ok("push")
    f = forger(remote, tmp_path)
    forge(f, "opt/fake~1", reason="x" * 5_000_000)
    f.git("push", "-q", "origin", "refs/notes/kgit")
    b = clone(remote, tmp_path / "b")
    refused = pull_refusing(b)
    assert "the note on" in refused[0] and "over 256000" in refused[0] and len(refused[0]) < 400
    b.git("checkout", "-q", "opt/fake")
    b.ok("report")
    assert (b.root / "experiments/README.md").stat().st_size < 100_000
    assert len(b.ok("log", "fake").stdout) < 100_000
