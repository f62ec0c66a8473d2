"""kgit tune: the search, the rewrite of CONFIG, and whole tuning runs on a synthetic landscape."""

import pytest

from workspace import KERNEL, LANDSCAPE
from kgit.loop.tune import propose, read_tunables, write_config
from kgit.model.record import Status


def test_propose_steps_one_value_and_never_repeats():
    space = {"a": [1, 2, 3], "b": [10, 20]}
    first = propose({"a": 2, "b": 10}, space, [])
    assert first == {"a": 3, "b": 10}
    measured = [(first, {"a": 2, "b": 10}, False)]
    second = propose({"a": 2, "b": 10}, space, measured)
    assert second == {"a": 1, "b": 10}


def test_propose_follows_the_direction_that_paid_off():
    space = {"a": [1, 2, 3, 4], "b": [10, 20, 30]}
    measured = [({"a": 2, "b": 20}, {"a": 1, "b": 20}, True)]
    assert propose({"a": 2, "b": 20}, space, measured) == {"a": 3, "b": 20}


def test_propose_stops_when_every_neighbour_was_measured():
    space = {"a": [1, 2, 3]}
    measured = [({"a": 1}, {"a": 2}, False), ({"a": 3}, {"a": 2}, False)]
    assert propose({"a": 2}, space, measured) is None


@pytest.fixture
def landscape(ws):
    (ws.root / KERNEL).write_text(LANDSCAPE)
    ws.git("commit", "-qam", "a tunable kernel")
    return ws


def test_tune_finds_the_best_configuration(landscape):
    result = landscape.ok("tune", "fake", "--max-iterations", "20", "--json").json()
    # configurations remain, none worth a run: not an exhausted space
    assert result["stop_reason"] == "NO_EXPECTED_GAIN"
    assert 'CONFIG = {"BLOCK": 2048, "WARPS": 8}' in landscape.kernel_text()
    assert result["best"]["value"] == 1000.0
    statuses = [r["status"] for r in result["iterations"]]
    assert statuses[0] == "BASELINE" and "REGRESSED" in statuses
    found = next(r["iteration"] for r in result["iterations"] if r["value"] == 1000.0)
    # the best within 8 iterations (issue 16's bar); the search stops (nothing left worth a run) after 16 of
    # the space's 30 configurations: its prior's spread keeps the far corners worth a look until then
    assert found <= 8 and len(result["iterations"]) <= 20, (found, len(result["iterations"]))
    landscape.check_invariants()


def test_tune_never_measures_the_baseline_again(ws):
    # From the baseline a=1, the gain a 1->2 leaves the baseline as a neighbour of the best.
    (ws.root / KERNEL).write_text(LANDSCAPE.replace('"BLOCK": 256, "WARPS": 2', '"BLOCK": 1024, "WARPS": 8'))
    ws.git("commit", "-qam", "start next to the optimum")
    # coordinate descent (the search before the model, still selectable)
    result = ws.ok("tune", "fake", "--max-iterations", "20", "--json", env={"KGIT_TUNE_SEARCH": "descent"}).json()
    tried = [r["action"] for r in result["iterations"][1:]]
    assert tried[0] == "BLOCK 1024->2048" and "BLOCK 2048->1024" not in tried
    assert result["stop_reason"] == "NO_EXPECTED_GAIN"  # descent stops where no neighbour of the best gains


def test_tune_stops_at_max_iterations_on_the_best(landscape):
    result = landscape.ok("tune", "fake", "--max-iterations", "3", "--json").json()
    assert result["stop_reason"] == "MAX_ITERATIONS" and len(result["iterations"]) == 4
    best = max(r["value"] for r in result["iterations"] if r["status"] in ("BASELINE", "IMPROVED"))
    assert result["best"]["value"] == best
    landscape.check_invariants()
    # a second run goes on from where the first stopped, without repeating a configuration
    again = landscape.ok("tune", "--max-iterations", "6", "--json").json()
    assert [r["iteration"] for r in again["iterations"]] == [4, 5, 6]
    tried = [r["action"] for r in result["iterations"][1:] + again["iterations"]]
    assert len(tried) == len(set(tried))
    # a limit already reached: nothing to do, said as step says it (it exited 0 without a word)
    assert landscape.refused("tune", "--max-iterations", "6") == (
        "kgit: the loop for fake has stopped (MAX_ITERATIONS: 6 iterations of 6): give --max-iterations above 6 "
        "(the loop's total, not a number of more) or set max_iterations in kgit.yaml and commit it, to go on")


def test_tune_stops_at_the_target(landscape):
    result = landscape.ok("tune", "fake", "--target-value", "900", "--json").json()
    assert result["stop_reason"] == "TARGET_MET" and result["iterations"][-1]["status"] == "TARGET_MET"


def test_tune_refuses_a_kernel_without_tunables(ws):
    ws.ok("start", "fake")
    assert "no literal CONFIG" in ws.refused("tune")
    assert "as skills/kernels/softmax/softmax.py does" in ws.refused_json("tune")["hint"]  # how to add them
    ws.set_kernel(METRIC=120.0)
    ws.ok("step", "-m", "a change")
    # past its limit, the loop would stop at once: the kernel's having nothing to tune is still said first
    assert "no literal CONFIG" in ws.refused("tune", "--max-iterations", "1")


def test_tune_on_several_gpus_tests_in_parallel_worktrees(landscape):
    (landscape.root / KERNEL).write_text(LANDSCAPE + "SLEEP = 0.3\n")
    landscape.git("commit", "-qam", "slow enough to see the overlap")
    result = landscape.ok("tune", "fake", "--gpus", "0,1", "--max-iterations", "20", "--json").json()
    steps = result["iterations"][1:]
    assert [r["iteration"] for r in result["iterations"]] == list(range(len(result["iterations"])))
    assert 'CONFIG = {"BLOCK": 2048, "WARPS": 8}' in landscape.kernel_text()
    assert result["stop_reason"] == "NO_EXPECTED_GAIN"
    # a round: two proposals at once, on GPU 0 and GPU 1, in two worktrees, overlapping in time (after
    # a kept one, the rest of its round is measured again against the new best, on one GPU)
    rounds = [(a["test"], b["test"]) for a, b in zip(steps, steps[1:])
              if (a["test"]["visible_devices"], b["test"]["visible_devices"]) == ("0", "1")]
    assert rounds, [s["test"]["visible_devices"] for s in steps]
    first, second = rounds[0]
    assert first["cwd"] != second["cwd"] and str(landscape.root) != first["cwd"]
    assert first["t_start"] < second["t_end"] and second["t_start"] < first["t_end"]
    assert landscape.git("worktree", "list").count("\n") == 0  # the worktrees are gone
    landscape.check_invariants()


def test_bad_gpu_list(landscape):
    assert "--gpus" in landscape.refused("tune", "fake", "--gpus", "0,x")


def test_tests_left_running_by_a_killed_parallel_tune_are_stopped(landscape, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    # the baseline's configuration passes, every proposal hangs
    (landscape.root / KERNEL).write_text(LANDSCAPE.replace(
        'MODE = "ok"', 'MODE = "ok" if CONFIG == {"BLOCK": 256, "WARPS": 2} else "hang"'))
    landscape.git("commit", "-qam", "every proposal will hang")
    landscape.ok("start", "fake")
    output = tmp_path / "tune.out"
    with output.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kgit", "tune", "--gpus", "0,1"], cwd=landscape.root,
                                stdout=out, stderr=subprocess.STDOUT)
    running = landscape.root / ".git/kgit/running"
    deadline = time.monotonic() + 30
    while not (running.is_dir() and len(os.listdir(running)) == 2):
        # a rare CI failure here left no clue: say what tune printed and whether it still runs
        assert time.monotonic() < deadline, (f"the two tests never started (tune exit code {proc.poll()}, "
                                             f"running {os.listdir(running) if running.is_dir() else None}): "
                                             f"{output.read_text()[-2000:]}")
        time.sleep(0.05)
    pids = [int(name) for name in os.listdir(running)]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    landscape.ok("doctor", "--fix")
    time.sleep(0.2)
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    assert os.listdir(running) == []


# --- CONFIG_CONSTRAINTS: what fits, predicted before compiling (issue 16) ------------------------------

CONSTRAINED = LANDSCAPE.replace("CORRECT = True", 'CONFIG_CONSTRAINTS = ["BLOCK * WARPS <= 4096"]\nCORRECT = True')


@pytest.mark.parametrize("search", ["model", "descent"])
def test_tune_never_proposes_what_breaks_a_constraint(ws, search):
    # The bowl's best (2048 x 8) breaks the constraint: the best allowed is 1024 x 4 or 512 x 8.
    (ws.root / KERNEL).write_text(CONSTRAINED)
    ws.git("commit", "-qam", "a constrained tunable kernel")
    result = ws.ok("tune", "fake", "--max-iterations", "30", "--json", env={"KGIT_TUNE_SEARCH": search}).json()
    assert result["stop_reason"] == "NO_EXPECTED_GAIN"
    tried = [read_tunables(ws.git("show", f"{r['commit']}:{KERNEL}"), KERNEL, check_config=False).config
             for r in result["iterations"]]
    assert len(tried) >= 5 and all(c["BLOCK"] * c["WARPS"] <= 4096 for c in tried), tried


def test_tune_refuses_a_start_that_breaks_a_constraint_before_its_baseline(ws):
    (ws.root / KERNEL).write_text(CONSTRAINED.replace('"BLOCK": 256, "WARPS": 2', '"BLOCK": 2048, "WARPS": 4'))
    ws.git("commit", "-qam", "a start that does not fit")
    message = ws.refused("tune", "fake")
    assert "CONFIG breaks its constraint 'BLOCK * WARPS <= 4096' (BLOCK=2048, WARPS=4)" in message
    assert "opt/fake" not in ws.git("branch", "--list")  # no baseline was run


# --- the tier of each proposal: the tier that owns the technique of the keys it changes (issue 17) -----

def test_each_proposal_is_recorded_with_the_tier_of_the_keys_it_changes(landscape):
    skills = landscape.root / "skills"
    (skills / "tier4-scheduling").mkdir()
    (skills / "tier4-scheduling/SKILL.md").write_text(
        "---\nname: tier4-scheduling\ndescription: d\ntechniques:\n  widening: [wider blocks]\n---\n# 4\n")
    (skills / "tier2-memory-access").mkdir()
    (skills / "tier2-memory-access/SKILL.md").write_text(
        "---\nname: tier2-memory-access\ndescription: d\ntechniques:\n  warping: []\n---\n# 2\n")
    (skills / "kernels/fake/SKILL.md").write_text(  # BLOCK by an alias of its technique, WARPS by its name
        "---\nname: fake\ndescription: d\nbottleneck: memory\ntunables:\n  BLOCK: Wider blocks\n  WARPS: warping\n"
        "---\n# fake\n")
    landscape.git("add", "skills")
    landscape.git("commit", "-qm", "the fake kernel's skill and two tier skills")
    result = landscape.ok("tune", "fake", "--max-iterations", "12", "--json").json()
    tiers = {}
    for r in result["iterations"][1:]:
        changed = {part.split()[0] for part in r["action"].split(", ")}
        tiers[frozenset(changed)] = r["tier"]
        assert r["tier"] == (2 if "WARPS" in changed else 4), r
    assert {frozenset({"BLOCK"}), frozenset({"WARPS"})} <= set(tiers), tiers


def test_describe_change_names_every_key_and_why_several_change():
    from kgit.loop.tune import describe_change

    assert describe_change({"a": 1, "b": 2}, {"a": 2, "b": 2}, "ignored") == "a 1->2"
    assert describe_change({"a": 1, "b": 2}, {"a": 2, "b": 3}, "a and b interact") == (
        "a 1->2, b 2->3 (2 keys at once: a and b interact)")
    assert describe_change({"a": 1}, {"a": 1}) == "no change"


# BLOCK and WARPS on a ridge of constant BLOCK / WARPS, rising with WARPS: up the ridge is a move of both
COUPLED = LANDSCAPE.replace(
    'METRIC = 1000.0 - 20.0 * (math.log2(CONFIG["BLOCK"]) - 11) ** 2 - 40.0 * (math.log2(CONFIG["WARPS"]) - 3) ** 2',
    'METRIC = 1000.0 - 60.0 * (math.log2(CONFIG["BLOCK"] / CONFIG["WARPS"]) - 7) ** 2 + 15.0 * math.log2(CONFIG["WARPS"])')


def test_a_step_that_changes_two_keys_says_so_in_its_record(ws):
    # one key a step, unless the model reads two as coupled: then the action names both and why
    assert COUPLED != LANDSCAPE
    (ws.root / KERNEL).write_text(COUPLED)
    ws.git("commit", "-qam", "a kernel whose two tunables are coupled")
    result = ws.ok("tune", "fake", "--max-iterations", "4", "--json").json()
    actions = [r["action"] for r in result["iterations"][1:]]
    pairs = [a for a in actions if a.count("->") == 2]
    assert pairs and all(" (2 keys at once: BLOCK and WARPS interact: the model expects them together to gain "
                         in a for a in pairs), actions
    assert all(a.count("->") <= 2 for a in actions), actions
    assert [a for a in actions if a.count("->") == 1], actions


def test_a_proposal_without_a_skill_is_tier_1(landscape):
    result = landscape.ok("tune", "fake", "--max-iterations", "3", "--json").json()
    assert [r["tier"] for r in result["iterations"][1:]] == [1, 1, 1]


def test_tune_says_when_it_cannot_run_its_model_search(monkeypatch):
    import importlib.util

    from kgit.loop import tune

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "scipy" else real(name, *a))
    assert tune.model_search_missing().startswith("scipy not installed: kgit tune searches by coordinate descent")
    monkeypatch.setenv("KGIT_TUNE_SEARCH", "descent")  # asked for descent: nothing to say
    assert tune.model_search_missing() is None
    monkeypatch.undo()
    assert tune.model_search_missing() is None  # this suite installs the harness extra


@pytest.mark.parametrize("gpu, held", [("cpu", True), ("nvidia", False)])
def test_in_triton_s_interpreter_tune_holds_the_launch_options_it_cannot_time(ws, gpu, held):
    # num_warps and num_stages change nothing in the interpreter: a "gain" from one would be CPU noise
    (ws.root / KERNEL).write_text(LANDSCAPE.replace('"WARPS"', '"num_warps"').replace('CONFIG["WARPS"]',
                                                                                     'CONFIG["num_warps"]'))
    (ws.root / "kgit.yaml").write_text(f"fake:\n  gpu: {gpu}\n")
    ws.git("add", "-A")
    ws.git("commit", "-qm", "a tunable kernel with a launch option")
    run = ws.ok("tune", "fake", "--max-iterations", "6", "--json")
    tried = [ws.kernel_text(r["commit"]) for r in run.json()["iterations"][1:]]
    assert len(tried) >= 3  # held, the space is the 6 values of BLOCK: it may be measured before 6 steps
    assert all('"num_warps": 2' in text for text in tried) is held
    assert ("Triton's interpreter ignores num_warps: kgit tune holds num_warps=2 on this machine" in run.stderr) is held
    ws.check_invariants()


@pytest.mark.parametrize("search", ["model", "descent"])
def test_tune_stops_with_space_exhausted_only_once_every_configuration_it_may_run_was_measured(ws, search):
    # BLOCK 2048 breaks the constraint: the three others are the whole space it may run
    (ws.root / KERNEL).write_text(LANDSCAPE.replace(
        '"BLOCK": [128, 256, 512, 1024, 2048, 4096], "WARPS": [1, 2, 4, 8, 16]', '"BLOCK": [256, 512, 1024, 2048], "WARPS": [2]')
        .replace("CORRECT = True", 'CONFIG_CONSTRAINTS = ["BLOCK < 2048"]\nCORRECT = True'))
    ws.git("commit", "-qam", "a space of three")
    result = ws.ok("tune", "fake", "--max-iterations", "10", "--json", env={"KGIT_TUNE_SEARCH": search}).json()
    assert result["stop_reason"] == "SPACE_EXHAUSTED" and len(result["iterations"]) == 3


def _tune_proposing(ws, monkeypatch, config: dict) -> tuple:
    """kgit tune, in this process, with a search that proposes config once, then nothing."""
    from kgit.git.command import find_repo
    from kgit.loop import tune
    from kgit.loop.recovery import locked
    from kgit.model.search import Proposal

    proposals = [Proposal(config)]
    monkeypatch.setattr(tune, "propose_next", lambda *args, **kwargs: proposals.pop() if proposals else None)
    outcomes = []
    with locked(find_repo(ws.root)):
        stopped = tune.run(find_repo(ws.root), "fake", {}, None, outcomes.append)
    return stopped, outcomes


SMALL_GAIN = """CONFIG = {"BLOCK": 256}
CONFIG_SPACE = {"BLOCK": [256, 512]}
METRIC = {256: 1000.0, 512: 1006.0}[CONFIG["BLOCK"]]
CORRECT = True
SPREAD = 0.1
MODE = "ok"
"""


def test_tune_keeps_a_configuration_its_pairs_show_faster_where_a_step_needs_the_floor(ws, monkeypatch):
    # +0.6%, under the 1% floor, on a test that reports 0.1% spread: the same kernel as a step and as a tune
    (ws.root / KERNEL).write_text(SMALL_GAIN)
    ws.git("commit", "-qam", "a configuration 0.6% faster than the start")
    ws.ok("start", "fake")
    (ws.root / KERNEL).write_text(write_config(SMALL_GAIN, KERNEL, {"BLOCK": 512}))
    assert ws.ok("step", "-m", "BLOCK 256->512", "--json").json()["status"] == "WITHIN_NOISE"
    stopped, outcomes = _tune_proposing(ws, monkeypatch, {"BLOCK": 512})
    record = outcomes[0].record
    assert (record.status, record.repeats) == (Status.IMPROVED, 1) and stopped.value == "SPACE_EXHAUSTED"
    assert record.reason.startswith("+0.6% [+0.") and record.reason.endswith(
        "the whole interval is above zero, under the 1% floor: a tune keeps a configuration its pairs show faster")
    assert 'CONFIG = {"BLOCK": 512}' in ws.kernel_text()
    ws.check_invariants()


def test_a_proposal_whose_code_an_iteration_measured_is_measured_again_and_says_so(landscape, monkeypatch):
    landscape.ok("start", "fake")
    (landscape.root / KERNEL).write_text(write_config(LANDSCAPE, KERNEL, {"BLOCK": 128, "WARPS": 2}))
    assert landscape.ok("step", "-m", "BLOCK 256->128", "--json").json()["status"] == "REGRESSED"
    stopped, outcomes = _tune_proposing(landscape, monkeypatch, {"BLOCK": 128, "WARPS": 2})
    assert stopped.value == "NO_EXPECTED_GAIN"
    assert [(o.record.iteration, o.record.repeats) for o in outcomes] == [(2, 1)]
    landscape.check_invariants()


def test_a_proposal_whose_code_is_head_s_is_refused_and_the_kernel_put_back(ws, monkeypatch):
    from kgit.loop import steps

    (ws.root / KERNEL).write_text(LANDSCAPE.replace('{"BLOCK": 256, "WARPS": 2}', "{'BLOCK': 256, 'WARPS': 2}"))
    ws.git("commit", "-qam", "a tunable kernel, written with single quotes")
    ws.ok("start", "fake")
    with pytest.raises(steps.SameCode):  # HEAD's configuration, written as kgit writes it: the same code
        _tune_proposing(ws, monkeypatch, {"BLOCK": 256, "WARPS": 2})
    assert ws.git("status", "--porcelain") == "" and ws.ok("status", "--json").json()["iteration"] == 0


def test_a_tune_s_comparison_may_take_pairs_past_max_pairs_and_a_step_s_may_not(ws, monkeypatch):
    # the decision's rule lives in kgit.loop.paired.compare; a tune asks it to extend (decide.TUNE_EXTENDS),
    # a hand step does not: the person can step the change again, a tune never measures it again
    from kgit.git.command import find_repo
    from kgit.loop import paired, steps
    from kgit.loop.recovery import locked
    from kgit.model import decide

    asked, real = [], paired.compare
    monkeypatch.setattr(paired, "compare", lambda *args, **kwargs: asked.append(kwargs["extend"]) or real(*args, **kwargs))
    (ws.root / KERNEL).write_text(SMALL_GAIN)
    ws.git("commit", "-qam", "a configuration 0.6% faster than the start")
    ws.ok("start", "fake")
    (ws.root / KERNEL).write_text(write_config(SMALL_GAIN, KERNEL, {"BLOCK": 512}))
    with locked(find_repo(ws.root)):
        steps.step(find_repo(ws.root), "BLOCK 256->512", None, {})
    assert asked == [False]
    _tune_proposing(ws, monkeypatch, {"BLOCK": 512})
    assert asked == [False, True] and decide.TUNE_EXTENDS is True
    ws.check_invariants()
