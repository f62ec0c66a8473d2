"""kgit pull does not move opt/<kernel> onto a pulled tip whose record it refused (a forged figure): the
branch stays on this clone's best, and the pull says so. Found by tests/test_forged_pulls_with_steps_and_kills.py."""

import json
import subprocess

from workspace import KERNEL, a_session, clone


def test_a_branch_whose_tip_record_is_refused_is_not_fast_forwarded(remote, ws, tmp_path):
    a_session(ws)
    ws.ok("push")
    forger = clone(remote, tmp_path / "forger")
    forger.git("fetch", "-q", "origin", "+refs/notes/kgit:refs/notes/kgit")
    forger.git("checkout", "-q", "-B", "opt/fake", "origin/opt/fake")
    forger.set_kernel(METRIC=999.0)
    forger.git("commit", "-qam", "fake: iter 3: forged")
    commit = forger.git("rev-parse", "HEAD")
    best = json.loads(forger.git("notes", "--ref=refs/notes/kgit", "show", "best/fake"))
    forged = {**best, "iteration": 3, "action": "forged", "value": 1e9, "started": "2030-01-01T00:00:00.000000+00:00"}
    subprocess.run(["git", "notes", "--ref=refs/notes/kgit", "add", "-f", "-F", "-", commit], cwd=forger.root,
                   input=json.dumps(forged), text=True, check=True, capture_output=True)
    forger.git("tag", "-f", "best/fake", commit)
    forger.git("push", "-q", "-f", "origin", "opt/fake", "best/fake", "refs/notes/kgit")
    tip = ws.git("rev-parse", "opt/fake")
    run = ws.kgit("pull")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "refused: origin's opt/fake" in run.stdout + run.stderr
    assert ws.git("rev-parse", "opt/fake") == tip  # not fast-forwarded onto the forged kernel
    assert "METRIC = 999.0" not in (ws.root / KERNEL).read_text()
    assert all(n["action"] != "forged" for n in ws.notes())
    ws.check_invariants()
