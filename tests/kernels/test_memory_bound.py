"""Each memory-bound kernel's test passes on Triton's interpreter (tiny shapes),
through the same command kgit runs: `python <test> --json`, last JSON line."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTS = {
    "softmax": "skills/kernels/softmax/test_softmax.py",
    "layernorm": "skills/kernels/layernorm/test_layernorm.py",
    "rmsnorm": "skills/kernels/rmsnorm/test_rmsnorm.py",
    "cross-entropy": "skills/kernels/cross-entropy/test_cross_entropy.py",
    "rotary-embedding": "skills/kernels/rotary-embedding/test_rotary_embedding.py",
}


def last_json(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError("no JSON line in:\n" + stdout[-2000:])


@pytest.mark.parametrize("name", sorted(TESTS))
def test_kernel_test_passes_on_interpreter(name, tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=ROOT, HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, TESTS[name]), "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = last_json(proc.stdout)
    assert res["kernel"] == name
    assert res["status"] == "pass" and res["correctness"] is True, res["errors"]
    assert res["backend"] == "interpreter" and res["cpu_timing"] is True
    assert res["checks"] > 10
    assert res["gbps"] > 0 and res["latency_us"] > 0


def test_template_configs_are_literals():
    import ast
    for path in TESTS.values():
        src = open(os.path.join(ROOT, os.path.dirname(path), "triton_template.py")).read()
        found = {}
        for node in ast.parse(src).body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                if node.targets[0].id in ("CONFIG", "CONFIG_SPACE"):
                    found[node.targets[0].id] = ast.literal_eval(node.value)
        assert set(found) == {"CONFIG", "CONFIG_SPACE"}, path
        for key, value in found["CONFIG"].items():
            assert value in found["CONFIG_SPACE"][key], (path, key)


def _template(name):
    path = os.path.join(ROOT, os.path.dirname(TESTS[name]), "triton_template.py")
    spec = importlib.util.spec_from_file_location(f"tmpl_{name.replace('-', '_')}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cross_entropy_split_path_with_last_arriver_combine():
    # chunks of 64 columns: 5 programs per row combine their partials
    ce = _template("cross-entropy")
    x = torch.randn(3, 300)
    t = torch.tensor([5, -100, 299])
    loss = ce.cross_entropy(x, t, config={"CHUNK": 64, "BLOCK_SIZE": 32})
    torch.testing.assert_close(loss.double(), ce.cross_entropy_ref(x, t), rtol=1e-5, atol=1e-6)
    loss2 = ce.cross_entropy(x, t, config={"CHUNK": 64, "BLOCK_SIZE": 32})  # counters were reset
    assert torch.equal(loss, loss2)


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "layernorm"])
def test_looped_fallback_for_rows_longer_than_block(name):
    # on the interpreter a split row takes the looped two-pass path
    m = _template(name)
    x = torch.randn(3, 300)
    w, b = torch.rand(300) + 0.5, torch.randn(300)
    cfg = {"BLOCK_SIZE": 64}
    if name == "softmax":
        out, ref = m.softmax(x, config=cfg), m.softmax_ref(x)
    elif name == "rmsnorm":
        out, ref = m.rmsnorm(x, w, config=cfg), m.rmsnorm_ref(x, w)
    else:
        out, ref = m.layernorm(x, w, b, config=cfg), m.layernorm_ref(x, w, b)
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-5)
