"""Profile, diagnosis and context as one screen each, for a person."""

from kgit.render import analysis


def test_a_profile_from_the_profiler():
    prof = {"source": "profiler", "tool": "ncu", "kernel": "softmax", "iteration": 2, "primary": "softmax_kernel",
            "launches_selected": 3, "launches_profiled": 5, "noted": True, "saved_to": ".git/kgit/profiles/x",
            "metrics": {"duration_us": 277.216, "dram_pct": 86.2, "registers_per_thread": 32.0, "sm_pct": None},
            "stalls": [{"reason": "long_scoreboard", "cycles_per_issue": 4.5}],
            "kernels": [{"name": "softmax_kernel"}, {"name": "fill"}], "dropped_metrics": ["lts__x.pct"]}
    lines = analysis.profile_text(prof).splitlines()
    assert lines[0] == "softmax (iteration 2): ncu, kernel softmax_kernel (3 of 5 launches)"
    table = [line.split("  ")[0].strip() + "|" + line.split("  ")[-1].strip() for line in lines[1:5]]
    assert table == ["duration|277.2 us", "DRAM throughput|86.2% of peak", "registers per thread|32",
                     "stall: long_scoreboard|4.50 cycles/issue"]
    assert "SM throughput" not in analysis.profile_text(prof)  # a metric not measured is left out
    assert lines[5:] == ["other kernels: fill", "metrics this ncu does not know (left out): lts__x.pct",
                         "saved: .git/kgit/profiles/x/metrics.json; in the iteration's note"]
    unnoted = analysis.profile_text({**prof, "iteration": None, "noted": False, "note_why": "uncommitted edits"})
    assert unnoted.startswith("softmax (the working tree): ") and unnoted.endswith("; no note: uncommitted edits")


def test_a_profile_without_a_profiler_says_why_first():
    prof = {"source": "benchmark", "why": "no GPU on this machine", "kernel": "softmax", "iteration": 0,
            "metric": "gbps", "value": 100.0, "pct_of_peak": 10.0, "pct_of_copy": None,
            "declared_bottleneck": "memory", "declared_why": "declared in skills/kernels/softmax/SKILL.md"}
    assert analysis.profile_text(prof).splitlines() == [
        "kgit: no profiler: no GPU on this machine",
        "softmax (iteration 0): falling back to the benchmark's numbers and the declared bottleneck",
        "benchmark: 100 GBps (10% of peak)",
        "bottleneck: memory (declared in skills/kernels/softmax/SKILL.md)",
    ]


def diagnosis(**fields):
    return {"kernel": "softmax", "bound": "memory", "why": "DRAM at 86% of peak", "how": "ncu", "tier_order": [2, 1, 3],
            "tried_tiers": [2], "next_tier": 1, "next_tier_name": "block tiling",
            "hints": [{"tier": 2, "finding": "loads are not coalesced"}, {"tier": None, "finding": "few waves"}],
            "skills": ["skills/a/SKILL.md", "skills/b/SKILL.md"], **fields}


def test_a_diagnosis_with_a_next_tier_and_with_none_left():
    assert analysis.diagnosis_text(diagnosis()).splitlines() == [
        "softmax: memory-bound: DRAM at 86% of peak", "  from ncu", "tier order: T2, T1, T3; tried: T2",
        "next tier: T1 block tiling", "  - T2: loads are not coalesced", "  - few waves",
        "read: skills/a/SKILL.md, skills/b/SKILL.md"]
    done = analysis.diagnosis_text(diagnosis(bound=None, tried_tiers=[], next_tier=None, hints=[])).splitlines()
    assert done[0] == "softmax: unknown-bound: DRAM at 86% of peak"
    assert done[2] == "tier order: T2, T1, T3; tried: none"
    assert done[3] == "next tier: none left (every tier of the order was tried)"


def test_a_context_on_one_screen():
    ctx = {"kernel": "softmax", "gpu": None, "branch": "opt/softmax", "metric": "gbps", "target": 150.0,
           "files": {"kernel": "k.py", "test": "t.py", "kernel_skill": None},
           "best": {"iteration": 1, "value": 120.0}, "gap": 30.0, "gap_pct": 20.0, "iteration": 2,
           "max_iterations": 5, "stopped": None,
           "tried": [{"iteration": 1, "action": "BLOCK up", "tier": 1, "status": "IMPROVED", "reason": None,
                      "value": 120.0, "metric": "gbps", "delta_pct": 20.0},
                     {"iteration": 2, "action": "vector loads", "tier": None, "status": "FAILED",
                      "reason": "crashed", "value": None, "metric": None, "delta_pct": None}],
           "profile": {"source": "benchmark", "tool": None, "why": "no GPU"}, "profile_stale": None,
           "platform": {"device": "cpu", "profiler": False, "note": "no GPU: knobs do nothing"},
           "diagnosis": diagnosis(), "next_step": "edit k.py", "skills": ["skills/optimize-loop/SKILL.md"],
           "tunables": None}
    text = analysis.context_text(ctx)
    lines = text.splitlines()
    assert lines[:4] == ["kernel softmax on an unknown device (branch opt/softmax)", "files: k.py, test t.py",
                         "target: 150 GBps; best: 120 GBps (iteration 1); gap 30.0 GBps (20.0%)", "iteration 2 of 5"]
    assert lines[4].startswith("already tried (never repeat a REGRESSED change")
    assert "FAILED (crashed)" in text and "BLOCK up" in text
    assert "diagnosis: memory-bound (DRAM at 86% of peak), from no profiler (no GPU)" in lines
    assert lines[-2:] == ["next: edit k.py", "read: skills/optimize-loop/SKILL.md"]
    fresh = analysis.context_text({**ctx, "tried": [], "target": None, "best": None, "gap": None,
                                   "stopped": "MAX_ITERATIONS"}).splitlines()
    assert fresh[2] == "target: none set; best: -" and fresh[3] == "iteration 2 of 5; stopped: MAX_ITERATIONS"
    assert fresh[4] == "already tried: nothing yet"
    tuned = analysis.context_text({**ctx, "tunables": {
        "config": {"BLOCK": 256, "PERSISTENT": 0}, "space": {"BLOCK": [256, 512], "PERSISTENT": [0, 1]},
        "constraints": [], "tiers": {"BLOCK": 1, "PERSISTENT": 4}}}).splitlines()
    assert tuned[-5:-2] == ["CONFIG (tier; CONFIG_SPACE):", "  BLOCK = 256 (T1; 256, 512)", "  PERSISTENT = 0 (T4; 0, 1)"]
    broken = analysis.context_text({**ctx, "tunables": {"error": "k.py: CONFIG['BLOCK'] = 3 is not in CONFIG_SPACE"}})
    assert "CONFIG: k.py: CONFIG['BLOCK'] = 3 is not in CONFIG_SPACE" in broken.splitlines()
