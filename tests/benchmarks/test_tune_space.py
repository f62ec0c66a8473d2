"""The reference for kgit tune's bar: measuring a whole CONFIG_SPACE, and replaying the search on it."""

import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _load(name):
    spec = importlib.util.spec_from_file_location(f"benchmarks_tune_{name}", os.path.join(ROOT, "benchmarks", "tune", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_space_measures_each_configuration_with_the_tests_objective_and_resumes(tmp_path):
    out = tmp_path / "space.json"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "tune", "space.py"),
           os.path.join(ROOT, "skills", "kernels", "softmax", "test_softmax.py"), "--json", str(out), "--limit", "2",
           "--jobs", "2", "--", "--quick"]  # two processes compile first, as on the device
    env = dict(os.environ, TRITON_INTERPRET="1")
    first = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    table = json.loads(out.read_text())
    assert table["test_args"] == ["--quick"] and table["configurations"] == 2
    configs = [row["config"] for row in table["rows"]]
    assert configs[0] != configs[1] and {c["BLOCK_SIZE"] for c in configs} == {2048}  # the first of the space
    assert all(row["correct"] and row["value"] > 0 for row in table["rows"]), table["rows"]

    cmd[cmd.index("2")] = "3"
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "3 configurations, 2 already measured" in again.stdout
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 3 and [row["config"] for row in rows][:2] == configs  # the first two were not measured again


def test_a_configuration_that_fails_is_a_row_not_a_crash(tmp_path):
    space = _load("space")
    folder = tmp_path / "kernel"
    folder.mkdir()
    (folder / "test_broken.py").write_text(
        "import os, sys\nsys.path.insert(0, os.path.dirname(__file__))\n"
        "import kernel\nraise RuntimeError('does not compile')\n")
    source = 'CONFIG = {"A": 1}\nCONFIG_SPACE = {"A": [1, 2]}\n'
    row = space.measure(folder / "test_broken.py", folder, source, {"A": 2}, [])
    assert row["correct"] is False and "does not compile" in row["error"]
    assert 'CONFIG = {"A": 2}' in (folder / "kernel.py").read_text()


def _bowl_table(spread_pct=0.5, flat=False):
    # best at BLOCK=2048, WARPS=8, a neighbour 2% or more below it; the search starts far from it (flat: every
    # configuration the same figure)
    space = {"BLOCK": [128, 256, 512, 1024, 2048, 4096], "WARPS": [1, 2, 4, 8, 16]}
    rows = {}
    for block, warps in itertools.product(*space.values()):
        value = 1000.0 - (0.0 if flat else 20.0 * (math.log2(block) - 11) ** 2 + 40.0 * (math.log2(warps) - 3) ** 2)
        config = {"BLOCK": block, "WARPS": warps}
        rows[json.dumps(config, sort_keys=True)] = {"config": config, "correct": True, "value": value,
                                                    "spread_pct": spread_pct, "error": None}
    return space, rows


def test_replay_follows_kgit_tune_to_the_best():
    replay = _load("replay")
    space, table = _bowl_table()
    trail = replay.replay(table, space, {"BLOCK": 256, "WARPS": 2}, iterations=8, min_gain_pct=1.0)
    assert trail[0]["value"] < trail[-1]["value"] == 1000.0
    assert len(trail) <= 9  # the baseline and at most 8 iterations


def _keeps_from_every_start(table, space):
    """(decisions, keeps, keeps of a configuration no better than the best it replaced) over 8 iterations from
    each configuration of the space."""
    replay = _load("replay")
    decisions = keeps = worse = 0
    for values in itertools.product(*space.values()):
        trail = replay.replay(table, space, dict(zip(space, values)), iterations=8, min_gain_pct=1.0)
        steps = list(zip(trail, trail[1:]))
        decisions += len(steps)
        keeps += sum(after is not before for before, after in steps)
        worse += sum(after is not before and after["value"] <= before["value"] for before, after in steps)
    return decisions, keeps, worse


def test_replay_keeps_nothing_inside_the_noise():
    # a spread of 200% (runs from a third to three times the figure): on a flat table every keep would be noise
    # taken for a gain, and kgit's paired decision (the whole interval above the floor) keeps none in 240
    # decisions; on the bowl a step's gain (15-18%) hides in that noise: a few keeps, each a real gain (a keep
    # on the pairs' median alone keeps about half the flat table's candidates)
    space, table = _bowl_table(spread_pct=200.0, flat=True)
    decisions, keeps, _ = _keeps_from_every_start(table, space)
    assert decisions == 240 and keeps == 0
    space, table = _bowl_table(spread_pct=200.0)
    decisions, keeps, worse = _keeps_from_every_start(table, space)
    assert keeps <= 0.05 * decisions and worse == 0


def test_a_reference_replaces_the_leaders_figures_and_the_best(tmp_path):
    # the table's best is its luckiest single draw; the re-measured medians decide what "the best" is
    replay = _load("replay")
    rows = [{"config": {"A": a}, "correct": True, "value": v, "spread_pct": 1.0, "error": None}
            for a, v in [(1, 100.0), (2, 104.0), (3, 60.0)]]
    table = tmp_path / "space.json"
    table.write_text(json.dumps({"test": "t.py", "best": rows[1], "rows": rows}))
    again = tmp_path / "again.json"
    again.write_text(json.dumps({"rows": [{"config": {"A": 1}, "correct": True, "value": 101.0},
                                          {"config": {"A": 2}, "correct": True, "value": 97.0}]}))
    measured, by_config, _ = replay.load(str(table), str(again))
    assert measured["best"]["config"] == {"A": 1} and measured["best"]["value"] == 101.0
    assert [by_config[replay.key({"A": a})]["value"] for a in (1, 2, 3)] == [101.0, 97.0, 60.0]


def test_a_subspace_is_the_product_of_the_values_named():
    space = _load("space")
    whole = {"A": [1, 2, 3], "B": [4, 5], "C": [6, 7]}
    narrowed = space.subspace(whole, ["A=1,3", "C=7"])
    assert narrowed == {"A": [1, 3], "B": [4, 5], "C": [7]} and whole["A"] == [1, 2, 3]
    tunables = space.tune.Tunables({"A": 2, "B": 4, "C": 6, "D": 0}, whole)
    configs = space.configurations(tunables, narrowed)
    assert len(configs) == 4 and all(c["C"] == 7 and c["A"] in (1, 3) and c["D"] == 0 for c in configs)


def test_a_subspace_outside_the_space_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "space.json"
    test = os.path.join(ROOT, "skills", "kernels", "cross-entropy", "test_cross_entropy.py")
    for narrowed, said in [("CHUNK=7", "[7] not among CHUNK's values"), ("WARPS=1", "'WARPS' is not a key"),
                           ("CHUNK=x", "give the values as in CONFIG_SPACE"), ("CHUNK=", "give the values")]:
        cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "tune", "space.py"), test, "--json", str(out),
               "--subspace", narrowed, "--", "--quick"]
        got = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert got.returncode == 1 and said in got.stderr and "Traceback" not in got.stderr, got.stderr
        assert not out.exists()
