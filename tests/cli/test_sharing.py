"""push, pull, the hook and doctor as commands: where their answers go, and their refusals."""

import json
import subprocess
import sys

from workspace import a_session


def test_the_hook_speaks_on_stderr_only(ws):
    a_session(ws)
    tip = ws.git("rev-parse", "opt/fake")
    line = f"refs/heads/opt/fake {tip} refs/heads/opt/fake {'0' * 40}\n"
    # git push --porcelain keeps the hook's stdout to itself: the summary must be on stderr
    proc = subprocess.run([sys.executable, "-m", "kgit", "hooks", "pre-push", "elsewhere"], cwd=ws.root, input=line,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr.startswith("kgit: this push to elsewhere carries:\n")
    assert "the records stay here: elsewhere is not a named remote; 'kgit push REMOTE' sends them" in proc.stderr
    nothing = subprocess.run([sys.executable, "-m", "kgit", "hooks", "pre-push", "origin"], cwd=ws.root, input="",
                             capture_output=True, text=True)
    assert (nothing.returncode, nothing.stdout, nothing.stderr) == (0, "", "")


def test_doctor_answers_in_text_or_one_json_object(started):
    assert started.ok("doctor").stdout == "no problems found\n"
    out = started.doctor().stdout
    assert out.count("\n") == 1 and json.loads(out) == {"fixed": [], "problems": []}
    started.git("tag", "-d", "best/fake")
    problems = json.loads(started.doctor().stdout)["problems"]
    assert [p["problem"] for p in problems] == ["best/fake is missing"]
    run = started.kgit("doctor")
    assert run.returncode == 1 and run.stdout.endswith("run 'kgit doctor --fix' to repair\n")


def test_push_and_pull_refuse_an_unknown_remote(started):
    assert "no remote named 'nowhere'" in started.refused("push", "nowhere")
    assert "no remote named 'nowhere'" in started.refused("pull", "nowhere")


def test_push_and_pull_answer_in_one_json_object(ws, tmp_path):
    from workspace import clone

    a_session(ws)
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    ws.git("remote", "add", "origin", str(bare))
    out = ws.ok("push", "origin", "--json").stdout
    pushed = json.loads(out)
    assert out.count("\n") == 1 and pushed["remote"] == "origin"
    # data, not display strings: numbers and names
    assert [(k["kernel"], k["gpu"], k["iterations"], k["reverted"], k["baseline"], k["best"], k["best_iteration"],
             k["metric"], k["target_met"]) for k in pushed["kernels"]] == \
        [("fake", "Fake GPU", 2, 1, 100.0, 120.0, 1, "gbps", False)]
    assert {"opt/fake", "best/fake", "refs/notes/kgit"} <= set(pushed["sent"]) and pushed["attempts"] == 1
    assert (pushed["records_merged"], pushed["records_held"], pushed["records_refused"]) == (0, 0, [])
    other = clone(bare, tmp_path / "other")
    out = other.ok("pull", "origin", "--json").stdout
    pulled = json.loads(out)
    assert out.count("\n") == 1 and pulled["remote"] == "origin" and pulled["done"]
    assert other.refused_json("pull", "nowhere")["error"].startswith("no remote named 'nowhere'")
