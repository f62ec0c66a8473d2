"""kgit context (everything the next change needs, on one screen) and the diagnosis it and kgit
diagnose build: from --metrics FILE, else the last profile, else the benchmark."""

import json
import os
import subprocess
import sys
from pathlib import Path

from kgit.profiling import diagnose
from kgit.profiling.skillfiles import KGIT_CHECKOUT

DATA = Path(__file__).parents[1] / "data"


def test_diagnose_a_metrics_file_outside_any_repository(tmp_path):
    env = {**os.environ}
    for name, bound in (("ncu_softmax_synthetic.csv", "memory"), ("ncu_tiny_synthetic.csv", "latency")):
        proc = subprocess.run([sys.executable, "-m", "kgit", "diagnose", "--metrics", str(DATA / name), "--json"],
                              cwd=tmp_path, capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        diag = json.loads(proc.stdout)
        assert diag["bound"] == bound and diag["next_tier"] == diagnose.TIER_ORDER[bound][0]
    proc = subprocess.run([sys.executable, "-m", "kgit", "diagnose", "--metrics", str(tmp_path / "none.json")],
                          cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and proc.stderr.startswith("kgit: --metrics: file") and "Traceback" not in proc.stderr


def test_diagnose_reads_a_saved_metrics_json(started, tmp_path):
    saved = tmp_path / "metrics.json"
    saved.write_text(json.dumps({"source": "profiler", "tool": "ncu", "metrics": {"dram_pct": 5.0, "sm_pct": 88.0},
                                 "stalls": []}))
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "fast math", "--tier", "3")
    diag = started.ok("diagnose", "--metrics", str(saved), "--json").json()
    assert diag["bound"] == "compute" and diag["tried_tiers"] == [3] and diag["next_tier"] == 1
    human = started.ok("diagnose", "--metrics", str(saved)).stdout
    assert human.splitlines()[0].startswith("fake: compute-bound: SM at 88% of peak")
    assert "next tier: T1 block tiling" in human


def test_context_lists_what_was_tried_and_what_comes_next(started):
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "BLOCK 1024->2048", "--tier", "1")
    started.set_kernel(METRIC=60.0)
    started.ok("step", "-m", "vector loads", "--tier", "2")
    ctx = started.ok("context", "--json").json()
    assert ctx["kernel"] == "fake" and ctx["files"]["kernel"] == "skills/kernels/fake/fake.py"
    assert ctx["best"]["iteration"] == 1 and ctx["best"]["value"] == 120.0
    assert [(t["iteration"], t["tier"], t["status"], t["kept"]) for t in ctx["tried"]] == [
        (1, 1, "IMPROVED", True), (2, 2, "REGRESSED", False)]
    assert ctx["diagnosis"]["bound"] == "memory"  # no profile, no declared bottleneck: the gbps metric
    # no profiler: tier 1 first; a tier closes on a kept change, never on one loss (it may be the noise's)
    assert ctx["diagnosis"]["tier_order"] == [1, 2, 3]
    assert ctx["diagnosis"]["tried_tiers"] == [1] and ctx["diagnosis"]["next_tier"] == 2
    # this repository has no skills/ of its own: kgit names its own copies, which an agent can open
    assert ctx["skills"][0] == str(KGIT_CHECKOUT / "skills/optimize-loop/SKILL.md")
    assert str(KGIT_CHECKOUT / "skills/tier2-memory-access/SKILL.md") in ctx["skills"]
    assert all(Path(p).is_file() for p in ctx["skills"])
    (started.root / "skills/optimize-loop").mkdir()  # a repository's own copy comes first
    (started.root / "skills/optimize-loop/SKILL.md").write_text("---\nname: optimize-loop\n---\nours\n")
    assert started.ok("context", "--json").json()["skills"][0] == "skills/optimize-loop/SKILL.md"
    (started.root / "skills/optimize-loop/SKILL.md").unlink()
    assert "no profiler can run" in started.ok("diagnose", "--json").json()["profile_why"]
    assert "--tier 2" in ctx["next_step"]
    # no GPU here: no profiler is asked for, and the context says what the interpreter cannot show
    assert ctx["platform"]["device"] == "cpu" and ctx["platform"]["profiler"] is False
    assert "no profiler can run" in ctx["profile"]["why"] and "kgit profile" not in ctx["profile"]["why"]
    assert "num_warps" in ctx["platform"]["note"] and ctx["profile_stale"] is None
    human = started.ok("context").stdout
    assert "already tried (never repeat a REGRESSED change" in human and "vector loads" in human and "REGRESSED" in human
    assert "next: edit skills/kernels/fake/fake.py: ONE change from tier 2" in human
    assert len(human.splitlines()) <= 25  # one screen
    started.check_invariants()


def test_context_says_when_the_profile_is_of_an_older_iteration(started, tmp_path):
    profiles = started.root / ".git/kgit/profiles/fake"
    profiles.mkdir(parents=True)
    (profiles / "latest.json").write_text(json.dumps({
        "source": "profiler", "tool": "ncu", "iteration": 0, "primary": "k",
        "metrics": {"dram_pct": 1.0, "sm_pct": 2.0}, "stalls": []}))
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "bigger blocks", "--tier", "4")
    ctx = started.ok("context", "--json").json()
    assert ctx["diagnosis"]["bound"] == "latency" and ctx["diagnosis"]["next_tier"] == 3
    assert "iteration 0" in ctx["profile_stale"] and "no profiler can run here" in ctx["profile_stale"]


def test_diagnose_without_a_profile_says_what_it_used(started):
    # the fake kernel declares no bottleneck: the note must not claim one
    run = started.ok("diagnose")
    note = [line for line in run.stderr.splitlines() if line.startswith("kgit: no profile: ")]
    assert len(note) == 1 and "declared bottleneck" not in note[0]
    assert "  from no profiler and no declared bottleneck: the test's metric" in run.stdout.splitlines()


def test_context_reports_the_templates_config_its_space_and_the_tier_of_each_key(ws):
    from workspace import KERNEL, LANDSCAPE

    template = LANDSCAPE.replace('"WARPS": 2}', '"WARPS": 2, "PERSISTENT": 0}')
    (ws.root / KERNEL).write_text(template.replace('16]}', '16], "PERSISTENT": [0, 1]}'))
    # the kernel skill maps a key to a technique, whose tier skill (kgit's own here) owns it
    (ws.root / "skills/kernels/fake/SKILL.md").write_text(
        "---\nname: fake\ntunables:\n  BLOCK: block size\n  PERSISTENT: persistent kernel\n---\n")
    ws.git("add", "-A")
    ws.git("commit", "-qm", "a tunable template")
    ws.ok("start", "fake")
    tunables = ws.ok("context", "--json").json()["tunables"]
    # WARPS, which the skill does not map, is tier 1, as kgit tune records it
    assert tunables == {"config": {"BLOCK": 256, "WARPS": 2, "PERSISTENT": 0},
                        "space": {"BLOCK": [128, 256, 512, 1024, 2048, 4096], "WARPS": [1, 2, 4, 8, 16],
                                  "PERSISTENT": [0, 1]},
                        "constraints": [], "tiers": {"BLOCK": 1, "WARPS": 1, "PERSISTENT": 4}}
    assert "  PERSISTENT = 0 (T4; 0, 1)" in ws.ok("context").stdout.splitlines()
    # a CONFIG outside its space, as an edit left it: the context still answers, and says what a step would refuse
    ws.set_kernel(CONFIG={"BLOCK": 256, "WARPS": 3, "PERSISTENT": 0})
    broken = ws.ok("context", "--json").json()["tunables"]
    assert broken == {"error": f"{KERNEL}: CONFIG['WARPS'] = 3 is not in CONFIG_SPACE['WARPS'] (1, 2, 4, 8, 16)"}


def test_context_reports_no_tunables_for_a_kernel_without_config_dicts(started):
    assert started.ok("context", "--json").json()["tunables"] is None
    assert "CONFIG" not in started.ok("context").stdout
