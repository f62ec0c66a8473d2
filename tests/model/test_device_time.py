"""Which functions of a kernel file are kernels, and the device time of theirs in a recording."""

import json

import pytest

from kgit.model.device_time import from_recording, kernel_names

KERNEL_FILE = '''
import triton
import triton.language as tl
from triton import jit


@triton.jit
def _forward(x_ptr):
    pass


@triton.autotune(configs=[], key=["n"])
@triton.jit
def _tuned(x_ptr, n):
    pass


@jit
def _bare(x_ptr):
    pass


class Ops:
    @staticmethod
    @triton.jit
    def _inside(x_ptr):
        pass


def launcher(x):
    return _forward[(1,)](x)


@functools.lru_cache
def helper():
    pass
'''


def test_the_kernels_are_the_functions_decorated_as_triton_kernels_at_any_depth():
    assert kernel_names(KERNEL_FILE) == {"_forward", "_tuned", "_bare", "_inside"}


def test_a_file_that_does_not_parse_defines_no_kernel():
    assert kernel_names("def broken(:\n") == set()
    assert kernel_names("x = 1\n") == set()


def line(source="cupti", *groups):
    return json.dumps({"pid": 1, "source": source, "groups": list(groups)})


def group(name, launches, median, grid=(8, 1, 1)):
    return {"name": name, "grid": list(grid), "block": [128, 1, 1], "launches": launches, "median_us": median,
            "min_us": median, "max_us": median}


def test_the_figure_sums_each_groups_launches_times_its_median_over_the_kernel_files_kernels_only():
    text = "\n".join([
        line("cupti", group("_forward", 250, 10.0), group("_forward", 5, 2.0, grid=(1, 1, 1)),
             group("softmax_kernel_from_torch", 250, 9.0)),
        line("cupti", group("_tuned", 4, 100.0)),  # a second process of the test
        '{"pid": 3, "source": "cupti", "gro',  # a process killed mid-write
    ])
    found = from_recording(text, {"_forward", "_tuned"})
    assert found.total_us == pytest.approx(250 * 10.0 + 5 * 2.0 + 4 * 100.0)
    assert found.launches == 259 and found.kernels == ("_forward", "_tuned") and found.source == "cupti"
    assert found.median_launch_us == 10.0  # the most launched group's median: one call's device time


def test_no_launch_of_the_kernels_is_no_figure():
    assert from_recording("", {"_forward"}) is None
    assert from_recording(line("cupti", group("other", 10, 1.0)), {"_forward"}) is None
    assert from_recording(line("interpreter"), {"_forward"}) is None


@pytest.mark.parametrize("bad", [
    {"launches": 0}, {"launches": True}, {"median_us": 0.0}, {"median_us": float("inf")}, {"median_us": "1"},
])
def test_groups_with_impossible_counts_or_durations_are_left_out(bad):
    text = line("interpreter", {**group("_forward", 3, 5.0), **bad}, group("_forward", 2, 1.0, grid=(2, 1, 1)))
    found = from_recording(text, {"_forward"})
    assert found.total_us == 2.0 and found.source == "interpreter"
