"""kgit.yaml: load, validate, apply defaults and command-line overrides.

kgit.yaml maps kernel names to their loop settings, for example:

    softmax:
      target_metric: gbps
      target_pct_of_peak: 0.9
      max_iterations: 8
    gemm:
      metric: benchmarks.triton_tflops    # where the figure is in the test's JSON (kgit.model.result)
    rmsnorm:
      kernel_path: ops/rmsnorm.py
      test_path: tests/test_rmsnorm.py
      test_command: python -m pytest -q tests/test_rmsnorm.py   # any command; run by sh in the checkout
      verdict: exit_status                # or {key: passed, pass: true}; default: the JSON's correctness
      metric: device_us                   # kgit's own device time of ops/rmsnorm.py's kernels

A kernel without an entry is looked up at skills/kernels/<name>/: its kernel file is named for it, with '-' as
'_' (skills/kernels/fused-moe/fused_moe.py), beside its one test_*.py.
One top-level key is not a kernel: `report_path`, where kgit renders its log (experiments/README.md).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from kgit.errors import KgitError
from kgit.model import kernel_name
from kgit.model.kernel_config import KernelConfig
from kgit.model.result import DEVICE_METRIC, unit_of

CONFIG_FILE = "kgit.yaml"
KERNELS_DIR = "skills/kernels"
# What kernel files were called before they were named for their kernel: a repository laid out that way
# still finds its kernel without a kgit.yaml entry.
OLD_KERNEL_FILE = "triton_template.py"
REPORT_PATH = "experiments/README.md"

METRICS = ("gbps", "tflops")
GPU_CHOICES = ("auto", "nvidia", "amd", "cpu")


# key -> (accepted Python types, description used in error messages)
_KEY_TYPES = {
    "kernel_path": ((str,), "a path"),
    "test_path": ((str,), "a path"),
    "target_metric": ((str,), "gbps or tflops"),
    "metric": ((str,), "a dotted path to a number in the test's JSON, such as benchmarks.triton_tflops or GB/s"),
    "better": ((str,), "higher or lower"),
    "target_value": ((int, float), "a number"),
    "target_pct_of_peak": ((int, float), "a fraction between 0 and 1"),
    "max_iterations": ((int,), "an integer"),
    "gpu": ((str,), "one of auto, nvidia, amd, cpu"),
    "test_timeout_s": ((int, float), "a number of seconds"),
    "min_gain_pct": ((int, float), "a percentage"),
    "max_pairs": ((int,), "an integer from 1 to 100"),
    "test_args": ((list,), "a list of strings"),
    "test_command": ((str,), "a shell command that runs the test"),
    "verdict": ((str, dict), "exit_status, or a mapping {key: <the JSON key>, pass: <the value that means pass>}"),
    "metric_pattern": ((str,), "a regular expression whose first group is the figure"),
    "decide_on": ((str,), "auto, test or device"),
}
DECIDE_ON = ("auto", "test", "device")


def load(root: Path, name: str, overrides: dict | None = None) -> KernelConfig:
    """The settings of one kernel: defaults, then kgit.yaml, then command-line overrides."""
    kernel_name.check(name)
    entry = dict(read_file(root).get(name) or {})
    settings = dict(entry)
    for key, value in settings.items():
        _check_value(key, value, where=f"{CONFIG_FILE}: {name}")
    for key, value in (overrides or {}).items():
        if value is not None:
            _check_value(key, value, where="option")
            settings[key] = value
    if "test_path" not in settings and settings.get("test_command"):
        named = _file_of_command(root, settings["test_command"])
        if named:
            settings["test_path"] = named
    if "kernel_path" not in settings or "test_path" not in settings:
        if entry and not (root / KERNELS_DIR / name).is_dir():  # an entry, short of a path
            missing = " and ".join(key for key in ("kernel_path", "test_path") if key not in settings)
            raise KgitError(f"{CONFIG_FILE}: {name} has no {missing}, and {KERNELS_DIR}/{name}/ does not exist to "
                            "find it in", f"add {missing} to its entry (test_path: the file the test runs, whose "
                                          "changes kgit watches)")
        found_kernel, found_test = _default_paths(root, name)
        settings.setdefault("kernel_path", found_kernel)
        settings.setdefault("test_path", found_test)
    for key in ("kernel_path", "test_path"):
        settings[key] = check_path(root, settings[key], key)
    settings["test_args"] = tuple(settings.get("test_args", ()))
    _check_combination(settings, where=f"{CONFIG_FILE}: {name}")
    return KernelConfig(name=name, **settings)


def _check_combination(settings: dict, where: str) -> None:
    """Settings that are valid alone but not together; the figure kgit's device time gets its direction."""
    if settings.get("test_command") and settings.get("test_args"):
        raise KgitError(f"{where}: test_args go with kgit's own 'python <test_path> --json'; with test_command, "
                        "write the arguments into the command")
    if settings.get("better") == "lower" and unit_of(settings.get("metric") or settings.get("target_metric")):
        raise KgitError(f"{where}: better: lower with a throughput ({settings.get('metric') or settings['target_metric']}"
                        "), which rises as the kernel gets faster; 'better: lower' is for a time")
    if settings.get("metric") == DEVICE_METRIC:
        if settings.setdefault("better", "lower") != "lower":
            raise KgitError(f"{where}: metric {DEVICE_METRIC} is a time: it falls as the kernel gets faster "
                            "(better: lower)")
        if settings.get("metric_pattern"):
            raise KgitError(f"{where}: metric {DEVICE_METRIC} and metric_pattern name two figures; keep one")


def for_loop(root: Path, kernel: str, remembered: dict | None, overrides: dict) -> KernelConfig:
    """A loop's settings: kgit.yaml, then the options its records remember (given to 'kgit start' and
    to later steps), then this command's."""
    return load(root, kernel, {**(remembered or {}), **overrides})


def report_path(root: Path) -> str:
    """Where kgit renders its log: kgit.yaml's top-level report_path, else experiments/README.md."""
    path = read_file(root).get("report_path", REPORT_PATH)
    if not isinstance(path, str) or not path.endswith(".md"):
        raise KgitError(f"{CONFIG_FILE}: report_path must be the path of a .md file, not {path!r}")
    relative = inside(root, path, "report_path")
    if ".git" in relative.split("/"):  # git's own files: the log is committed, and git tracks nothing there
        raise KgitError(f"{CONFIG_FILE}: report_path {path!r} lies inside .git, where git tracks nothing")
    return relative


def read_file(root: Path) -> dict:
    """kgit.yaml as a mapping (empty when there is none), checked: a one-line error for a bad one."""
    path = root / CONFIG_FILE
    if not path.exists():
        return {}
    import yaml  # only commands that need the config pay for the import

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise KgitError(f"{CONFIG_FILE}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        line = f" line {where.line + 1}" if where else ""
        raise KgitError(f"{CONFIG_FILE}{line}: not valid YAML") from None
    except RecursionError:
        raise KgitError(f"{CONFIG_FILE}: nested too deep to be settings") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KgitError(f"{CONFIG_FILE}: expected a mapping of kernel names to settings")
    for kernel, entry in data.items():
        if kernel in kernel_name.RESERVED:
            continue
        if not isinstance(entry, dict) and entry is not None:
            raise KgitError(f"{CONFIG_FILE}: {kernel}: expected a mapping of settings")
        for key in entry or {}:
            if key not in _KEY_TYPES:
                known = ", ".join(_KEY_TYPES)
                raise KgitError(f"{CONFIG_FILE}: {kernel}: unknown key {key!r} (known: {known})")
    return data


def _check_value(key: str, value, where: str) -> None:
    types, description = _KEY_TYPES[key]
    # bool is an int in Python; 'max_iterations: yes' is still a mistake.
    if isinstance(value, bool) or not isinstance(value, types):
        raise KgitError(f"{where}: {key} must be {description}, not {value!r}")
    bad = (
        (isinstance(value, float) and not math.isfinite(value))  # .nan and .inf are YAML floats too
        or (key == "target_metric" and value not in METRICS)
        or (key == "better" and value not in ("higher", "lower"))
        or (key == "metric" and not re.fullmatch(r"[^.\s]+([ .][^.\s]+)*", value))
        or (key == "gpu" and value not in GPU_CHOICES)
        or (key == "target_pct_of_peak" and not 0 < value <= 1)
        or (key in ("target_value", "test_timeout_s") and not value > 0)
        or (key == "max_iterations" and value < 1)
        or (key == "max_pairs" and not 1 <= value <= 100)
        or (key == "min_gain_pct" and value < 0)
        or (key == "test_args" and not all(isinstance(arg, str) for arg in value))
        or (key == "test_command" and not value.strip())
        or (key == "verdict" and not _valid_verdict(value))
        or (key == "metric_pattern" and not _valid_pattern(value))
        or (key == "decide_on" and value not in DECIDE_ON)
    )
    if bad:
        raise KgitError(f"{where}: {key} must be {description}, not {value!r}")


def _valid_verdict(value) -> bool:
    if isinstance(value, str):
        return value == "exit_status"
    return (set(value) == {"key", "pass"} and isinstance(value["key"], str) and bool(value["key"])
            and isinstance(value["pass"], (str, bool, int, float)))


def _valid_pattern(value: str) -> bool:
    try:
        return re.compile(value).groups >= 1
    except re.error:
        return False


def _file_of_command(root: Path, command: str) -> str | None:
    """The first word of a test_command that names a file of the checkout (tests/test_ops.py in
    'python -m pytest -q tests/test_ops.py'): the test_path it runs, when kgit.yaml names none."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote: check_value's problem to report, not this guess's
        return None
    for word in words:
        # the checkout's own files only: an interpreter named by its path (/usr/bin/python3) is no test
        if not word.startswith("-") and not Path(word).is_absolute() and ".." not in Path(word).parts \
                and (root / word).is_file():
            return word
    return None


def _default_paths(root: Path, name: str) -> tuple[str, str]:
    folder = root / KERNELS_DIR / name
    if not folder.is_dir():
        raise KgitError(f"no kernel {name!r}: {KERNELS_DIR}/{name}/ does not exist and {CONFIG_FILE} has no entry for it",
                        f"name its kernel_path and test_path there, or run: kgit init {name} --kernel PATH")
    tests = sorted(folder.glob("test_*.py"))
    if len(tests) != 1:
        found = ", ".join(p.name for p in tests) or "none"
        raise KgitError(f"{KERNELS_DIR}/{name}/: expected one test_*.py, found {found}; set test_path in {CONFIG_FILE}")
    kernel = kernel_file(name)
    if not (folder / kernel).is_file() and (folder / OLD_KERNEL_FILE).is_file():
        kernel = OLD_KERNEL_FILE
    return f"{KERNELS_DIR}/{name}/{kernel}", f"{KERNELS_DIR}/{name}/{tests[0].name}"


def kernel_file(name: str) -> str:
    """The file name of kernel `name` in its folder of skills/kernels/: fused-moe's is fused_moe.py, a name
    Python can import."""
    return f"{name.replace('-', '_')}.py"


def check_path(root: Path, value: str, key: str) -> str:
    """value as a path relative to the root, of a file inside the repository; refused otherwise."""
    relative = inside(root, value, key)
    if not (root / relative).is_file():
        raise KgitError(f"{key}: file {value!r} does not exist")
    return relative


def inside(root: Path, value: str, key: str) -> str:
    """value as a path relative to the repository root, with forward slashes; refused outside it."""
    path = (root / value).resolve()
    if not path.is_relative_to(root.resolve()) or path == root.resolve():
        raise KgitError(f"{key} {value!r} lies outside the repository")
    return path.relative_to(root.resolve()).as_posix()

