"""The pre-push hook on real pushes: it refuses a tip with no valid record, answers fast from git
alone, and reads the ref that the pre-commit framework passes in variables."""

import json
import os
import subprocess
import sys
import time

from workspace import a_session, git_run, remote_refs


def test_hook_refuses_a_tip_with_no_record(remote, ws):
    a_session(ws)
    ws.ok("hooks", "install")
    ws.set_kernel(METRIC=500.0)
    ws.git("commit", "-qam", "tuned by hand")  # a kernel change kgit never measured
    before = remote_refs(remote)
    run = git_run(ws, "push", "origin", "opt/fake")
    assert run.returncode == 1
    refusal = [line for line in run.stderr.splitlines() if line.startswith("kgit:")]
    assert len(refusal) == 1 and "refusing to push opt/fake" in refusal[0] and "has no kgit record" in refusal[0]
    assert "--no-verify" in refusal[0]
    assert remote_refs(remote) == before
    refusal = ws.refused("push")  # kgit push refuses first, touching nothing
    assert "refusing to push opt/fake" in refusal and "--no-verify" not in refusal  # it has no such option
    assert remote_refs(remote) == before
    assert git_run(ws, "push", "--no-verify", "origin", "opt/fake").returncode == 0


def test_a_configuration_commit_on_the_branch_does_not_block_sharing(remote, ws):
    a_session(ws)
    ws.ok("hooks", "install")
    (ws.root / "kgit.yaml").write_text("fake:\n  max_iterations: 20\n")  # as kgit's own messages suggest
    ws.git("add", "kgit.yaml")
    ws.git("commit", "-qm", "raise the limit")
    assert git_run(ws, "push", "origin", "opt/fake").returncode == 0
    ws.ok("push")
    assert remote_refs(remote)["refs/heads/opt/fake"] == ws.git("rev-parse", "opt/fake")


def test_hook_refuses_a_failed_verification_and_a_missing_revert_record(remote, ws):
    a_session(ws)
    ws.ok("hooks", "install")
    attempt = ws.git("rev-parse", "refs/kgit/attempts/fake/2")
    ws.git("notes", "--ref=refs/notes/kgit", "remove", attempt)  # the revert's record is gone
    run = git_run(ws, "push", "origin", "opt/fake")
    assert run.returncode == 1 and "logs iteration 2 as reverted, but that iteration has no record" in run.stderr

    kept = ws.git("rev-parse", "HEAD~1")
    record = json.loads(ws.git("notes", "--ref=refs/notes/kgit", "show", kept))
    record["correctness"] = False
    ws.git("notes", "--ref=refs/notes/kgit", "add", "-f", "-m", json.dumps(record), kept)
    ws.git("reset", "-q", "--hard", "HEAD~1")  # the tip is now the kept commit whose record failed
    run = git_run(ws, "push", "origin", "opt/fake")
    assert run.returncode == 1 and "failed verification" in run.stderr


def test_hook_answers_fast_and_reads_only_git(remote, ws):
    a_session(ws)
    tip = ws.git("rev-parse", "opt/fake")
    line = f"refs/heads/opt/fake {tip} refs/heads/opt/fake {'0' * 40}\n"
    ws.set_kernel(MODE="hang")  # were the hook to run the kernel's test, it would hang
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kgit", "hooks", "pre-push", "origin", str(remote)],
                          cwd=ws.root, input=line, capture_output=True, text=True, timeout=10)
    elapsed = time.perf_counter() - started
    assert proc.returncode == 0 and "fake" in proc.stderr
    assert elapsed < 1.0, f"the hook took {elapsed:.2f} s"


def test_pre_commit_framework_passes_the_ref_in_variables(ws):
    a_session(ws)
    ws.set_kernel(METRIC=500.0)
    ws.git("commit", "-qam", "by hand")
    env = {"PRE_COMMIT_REMOTE_NAME": "origin", "PRE_COMMIT_LOCAL_BRANCH": "refs/heads/opt/fake",
           "PRE_COMMIT_TO_REF": ws.git("rev-parse", "HEAD"), "PRE_COMMIT_REMOTE_BRANCH": "refs/heads/opt/fake",
           "PRE_COMMIT_FROM_REF": "0" * 40}
    proc = subprocess.run([sys.executable, "-m", "kgit", "hooks", "pre-push"], cwd=ws.root, input="",
                          capture_output=True, text=True, env={**os.environ, **env})
    assert proc.returncode == 1 and "refusing to push opt/fake" in proc.stderr


def test_garbage_on_the_hooks_input_is_one_line_not_a_traceback(started):
    run = started.kgit("hooks", "pre-push", "origin", input_text="this is not git's input\n")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("kgit: the pre-push hook's input is not git's")


def test_without_kgit_on_path_the_hook_stops_only_a_push_of_kgits_refs(started, tmp_path):
    import os
    import shutil
    import subprocess

    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    started.git("remote", "add", "origin", str(bare))
    started.ok("hooks", "install")
    path = os.pathsep.join([os.path.dirname(shutil.which("git")), "/bin"])
    assert shutil.which("kgit", path=path) is None
    env = {**os.environ, "PATH": path}

    def push(*args, **more):
        return subprocess.run(["git", "push", "origin", *args], cwd=started.root, capture_output=True, text=True,
                              env={**env, **more})

    # the hook runs the kgit that installed it, on PATH or not
    checked = push("opt/fake")
    assert checked.returncode == 0 and "fake" in checked.stderr + checked.stdout
    # that kgit gone (its virtual environment deleted), and none on PATH:
    from kgit.share import hooks
    (started.root / ".git/hooks/pre-push").write_text(hooks.pre_push_script(str(tmp_path / "gone/bin/python")))
    assert push("main").returncode == 0  # carries no kgit ref: nothing to check, nothing stopped
    started.git("tag", "-f", "best/fake", "opt/fake~1")  # the first push's hook sent best/fake: move it
    refused = push("--force", "best/fake")  # opt/fake is there already
    assert refused.returncode != 0 and "carries refs/tags/best/fake and kgit is not on PATH" in refused.stderr
    assert push("--force", "best/fake", KGIT_PUSH="1").returncode == 0  # what 'kgit push' runs, having checked it
