"""kgit.yaml: every mistake is named in one line, and nothing changes."""

import sys

import pytest

from workspace import KERNEL, TEST


def write_config(ws, text):
    (ws.root / "kgit.yaml").write_text(text)
    ws.git("add", "kgit.yaml")
    ws.git("commit", "-qm", "config")


@pytest.mark.parametrize("text, named", [
    ("fake:\n  max_iteration: 3\n", "unknown key 'max_iteration'"),
    ("fake:\n  max_iterations: three\n", "max_iterations must be an integer"),
    ("fake:\n  max_iterations: true\n", "max_iterations must be an integer"),
    ("fake:\n  target_metric: fps\n", "target_metric must be gbps or tflops"),
    ("fake:\n  gpu: tpu\n", "gpu must be one of auto, nvidia, amd, cpu"),
    ("fake:\n  target_pct_of_peak: 70\n", "target_pct_of_peak must be a fraction"),
    ("fake:\n  test_timeout_s: -1\n", "test_timeout_s must be"),
    ("fake:\n  test_args: --quick\n", "test_args must be a list of strings"),
    ("fake:\n  test_args: [1]\n", "test_args must be a list of strings"),
    ("fake:\n  kernel_path: missing.py\n", "kernel_path: file 'missing.py' does not exist"),
    ("fake:\n  test_path: ../../etc/passwd\n", "lies outside the repository"),
    ("fake: [1, 2]\n", "expected a mapping of settings"),
    ("- fake\n", "expected a mapping of kernel names"),
    ("fake:\n  max_iterations: [\n", "not valid YAML"),
    ("fake:\n  max_iterations: 0\n", "max_iterations must be an integer"),
    ("fake:\n  min_gain_pct: .nan\n", "min_gain_pct must be a percentage"),
    ("fake:\n  min_gain_pct: -0.5\n", "min_gain_pct must be a percentage"),
    ("fake:\n  target_value: .inf\n", "target_value must be a number"),
    ("fake:\n  metric: benchmarks..tflops\n", "metric must be a dotted path"),
    ("fake:\n  metric: 3\n", "metric must be a dotted path"),
    ("fake:\n  metric: '.gbps'\n", "metric must be a dotted path"),
    ("fake:\n  metric: 'GB/s '\n", "metric must be a dotted path"),
    ("report_path: notes.txt\n", "report_path must be the path of a .md file"),
    ("report_path: ../../outside.md\n", "report_path '../../outside.md' lies outside the repository"),
    ("fake:\n  test_command: ' '\n", "test_command must be a shell command"),
    ("fake:\n  test_command: [pytest]\n", "test_command must be a shell command"),
    ("fake:\n  test_command: pytest -q\n  test_args: [--quick]\n", "with test_command, write the arguments into the command"),
    ("fake:\n  verdict: exit-code\n", "verdict must be exit_status, or a mapping"),
    ("fake:\n  verdict: {key: passed}\n", "verdict must be exit_status, or a mapping"),
    ("fake:\n  verdict: {key: passed, pass: true, also: 1}\n", "verdict must be exit_status, or a mapping"),
    ("fake:\n  verdict: {key: passed, pass: [true]}\n", "verdict must be exit_status, or a mapping"),
    ("fake:\n  metric_pattern: 'GB/s'\n", "metric_pattern must be a regular expression whose first group"),
    ("fake:\n  metric_pattern: '(['\n", "metric_pattern must be a regular expression whose first group"),
    ("fake:\n  decide_on: fastest\n", "decide_on must be auto, test or device"),
    ("fake:\n  metric: device_us\n  better: higher\n", "metric device_us is a time"),
    ("fake:\n  better: lower\n  metric: GB/s\n", "better: lower with a throughput (GB/s)"),
    ("fake:\n  better: lower\n  target_metric: tflops\n", "better: lower with a throughput (tflops)"),
    ("fake:\n  test_args: " + "[" * 20000 + "]" * 20000 + "\n", "kgit.yaml: nested too deep to be settings"),
    ("report_path: .git/kgit.md\n", "report_path '.git/kgit.md' lies inside .git"),
    ("report_path: docs/../.git/x.md\n", "report_path 'docs/../.git/x.md' lies inside .git"),
    ("fake:\n  metric: device_us\n  metric_pattern: '([0-9]+)'\n", "name two figures"),
])
def test_config_errors(ws, text, named):
    write_config(ws, text)
    assert named in ws.refused("start", "fake")


def test_a_metric_named_as_other_tests_print_it_passes_the_check(ws):
    # "GB/s" is a field name, not a path of two: the config accepts it and the test's JSON is searched
    write_config(ws, "fake:\n  metric: GB/s\n")
    assert "kgit: baseline failed (invalid JSON: no number at GB/s)" in ws.refused("start", "fake")


def test_explicit_paths(ws):
    write_config(ws, f"mine:\n  kernel_path: {KERNEL}\n  test_path: {TEST}\n  max_iterations: 2\n")
    record = ws.ok("start", "mine", "--json").json()
    assert record["kernel"] == "mine" and ws.git("symbolic-ref", "--short", "HEAD") == "opt/mine"
    assert ws.ok("status", "--json").json()["max_iterations"] == 2


def test_timeout_from_config_kills_the_test(ws):
    write_config(ws, "fake:\n  test_timeout_s: 2\n")
    ws.ok("start", "fake")
    ws.set_kernel(MODE="hang")
    record = ws.ok("step", "-m", "hangs", "--json").json()
    assert record["status"] == "FAILED" and record["reason"] == "timeout: no result after 2 s"


def test_test_args_reach_the_test(ws):
    write_config(ws, "fake:\n  test_args: [--quick, --repeats, '2']\n")
    record = ws.ok("start", "fake", "--json").json()
    assert record["test"]["argv"] == ["--json", "--quick", "--repeats", "2"]


def test_a_config_that_is_not_utf8_is_one_line(ws):
    (ws.root / "kgit.yaml").write_bytes(b"fake:\n  max_iterations: 3 # caf\xe9\n")
    assert "kgit.yaml: not UTF-8 text" in ws.refused("start", "fake")


def test_device_us_falls_as_the_kernel_gets_faster_without_being_told(ws):
    from kgit import config

    write_config(ws, "fake:\n  metric: device_us\n  verdict: {key: ok, pass: true}\n  decide_on: device\n")
    cfg = config.load(ws.root, "fake")
    assert cfg.lower_is_better and cfg.reading.figure == "device_us" and cfg.decide_on == "device"
    assert cfg.reading.verdict == {"key": "ok", "pass": True}


def test_a_kernel_without_an_entry_is_the_file_named_for_it(ws):
    from kgit import config

    (ws.root / "skills/kernels/fake-two").mkdir()
    for name, copy in (("fake.py", "fake_two.py"), ("test_fake.py", "test_fake_two.py")):
        (ws.root / "skills/kernels/fake-two" / copy).write_text((ws.root / "skills/kernels/fake" / name).read_text())
    assert config.load(ws.root, "fake-two").kernel_path == "skills/kernels/fake-two/fake_two.py"


def test_an_older_layouts_triton_template_is_found_when_the_named_file_is_absent(ws):
    from kgit import config

    ws.git("mv", KERNEL, "skills/kernels/fake/triton_template.py")
    ws.git("commit", "-qm", "the kernel file as repositories named it before")
    assert config.load(ws.root, "fake").kernel_path == "skills/kernels/fake/triton_template.py"
    (ws.root / KERNEL).write_text("METRIC = 1.0\n")  # both: the file named for the kernel wins
    assert config.load(ws.root, "fake").kernel_path == KERNEL


def test_a_kernel_folder_with_neither_file_names_the_file_it_looked_for(ws):
    ws.git("rm", "-q", KERNEL)
    ws.git("commit", "-qm", "no kernel file")
    assert "kernel_path: file 'skills/kernels/fake/fake.py' does not exist" in ws.refused("start", "fake")


def test_an_entry_without_test_path_takes_the_file_its_test_command_runs(ws):
    from kgit import config

    write_config(ws, f"mine:\n  kernel_path: {KERNEL}\n  test_command: python -m pytest -q '{TEST}' -x\n")
    assert config.load(ws.root, "mine").test_path == TEST
    # an interpreter named by its path is a file too, but not the checkout's
    write_config(ws, f"mine:\n  kernel_path: {KERNEL}\n  test_command: {sys.executable} -m pytest -q {TEST}\n")
    assert config.load(ws.root, "mine").test_path == TEST


@pytest.mark.parametrize("entry, missing", [
    (f"  kernel_path: {KERNEL}\n  test_command: make bench\n", "has no test_path,"),  # no file in the command
    (f"  test_path: {TEST}\n", "has no kernel_path,"),
    ("  max_iterations: 3\n", "has no kernel_path and test_path,"),
])
def test_an_entry_short_of_a_path_names_what_it_lacks(ws, entry, missing):
    # the entry exists: "no entry for it" would send the user looking for a typo in its name
    write_config(ws, "mine:\n" + entry)
    said = ws.refused("start", "mine")
    assert f"kgit.yaml: mine {missing} and skills/kernels/mine/ does not exist" in said and "no entry" not in said
    assert ws.git("symbolic-ref", "--short", "HEAD") != "opt/mine"


def test_options_without_an_entry_are_not_taken_for_one(ws):
    # --max-iterations on a kernel kgit.yaml does not name: the entry is missing, not short of a path
    said = ws.refused("start", "mine", "--max-iterations", "3")
    assert "kgit.yaml has no entry for it" in said and "has no kernel_path" not in said
