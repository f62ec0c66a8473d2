"""The device time of a kernel file's kernels in one run of its test, from kgit's own recording.

kgit.harness.device_timing records every kernel launch of the test's processes, grouped by kernel
name, grid and block, each group with its launch count and median duration. This module keeps the
groups whose kernel is defined in the kernel file and sums them into one figure:

    device_us = sum over groups of launches * median_us

the time the kernel file's kernels spent on the device in that run, with each group's outliers (a
first launch, a preempted one) replaced by its median. It falls as the kernel gets faster, and unlike
a test's own perf_counter around a loop it holds no Python or launch overhead, so on a launch-bound
test it is far steadier (kgit.loop.spread tells which of the two figures decides).
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass

# A decorator that makes a function a kernel: @triton.jit, @jit, @triton.autotune(...) on top of one...
_KERNEL_DECORATORS = ("jit", "autotune", "heuristics")


@dataclass(frozen=True)
class DeviceTime:
    total_us: float  # the figure: sum of launches * median_us over the kernel file's groups
    launches: int
    kernels: tuple[str, ...]  # the kernel file's kernels that were launched
    source: str  # "cupti" (the GPU's own timestamps) or "interpreter" (a CPU timing)
    median_launch_us: float  # the median duration of the most launched group: one launch's device time

    def as_json(self) -> dict:
        return {"total_us": self.total_us, "launches": self.launches, "kernels": list(self.kernels),
                "source": self.source, "median_launch_us": self.median_launch_us}


def kernel_names(source: str) -> set[str]:
    """The names of the functions a kernel file defines as Triton kernels (decorated with triton.jit,
    triton.autotune or triton.heuristics, at any depth of the module); empty for a file that does not
    parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    return {node.name for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and any(is_kernel_decorator(d) for d in node.decorator_list)}


def is_kernel_decorator(node: ast.expr) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name in _KERNEL_DECORATORS


def from_recording(text: str, kernels: set[str]) -> DeviceTime | None:
    """The device time of these kernels from the recording's lines (one per process); None when no
    launch of them was recorded (the test launched none, or ran no Python that imported triton)."""
    groups, sources = [], set()
    for line in text.splitlines():
        try:
            process = json.loads(line)
        except json.JSONDecodeError:  # a process killed mid-write: its line is lost, the others count
            continue
        if not isinstance(process, dict):
            continue
        sources.add(process.get("source"))
        groups += [g for g in process.get("groups") or [] if isinstance(g, dict) and g.get("name") in kernels
                   and is_positive_number(g.get("median_us")) and type(g.get("launches")) is int and g["launches"] > 0]
    if not groups:
        return None
    most = max(groups, key=lambda g: g["launches"])
    return DeviceTime(
        total_us=sum(g["launches"] * g["median_us"] for g in groups),
        launches=sum(g["launches"] for g in groups),
        kernels=tuple(sorted({g["name"] for g in groups})),
        source="cupti" if "cupti" in sources else "interpreter",
        median_launch_us=most["median_us"],
    )


def is_number(value) -> bool:
    """A JSON number kgit can compute with: an int a float can hold (a 400-digit integer is none); what a
    test or its recording prints is read with it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


def is_positive_number(value) -> bool:
    """A number kgit can divide by and take the log of: finite and above 0."""
    return is_number(value) and math.isfinite(value) and value > 0
