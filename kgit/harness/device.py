"""The one torch-side probe of the device kernels run on, and its measured copy bandwidth.

(kgit.model.peaks holds the datasheet table; it never imports torch, so the command line stays fast.)
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from pathlib import Path


def interpreting() -> bool:
    """TRITON_INTERPRET=1: Triton runs kernels on the CPU with numpy."""
    return os.environ.get("TRITON_INTERPRET", "") not in ("", "0")


def _arch_family(vendor: str, capability: str | None) -> str | None:
    if not capability:
        return None
    if vendor == "amd":
        for prefix, family in (("gfx95", "cdna4"), ("gfx94", "cdna3"), ("gfx90a", "cdna2"), ("gfx908", "cdna1"),
                               ("gfx12", "rdna4"), ("gfx11", "rdna3"), ("gfx10", "rdna2")):
            if capability.startswith(prefix):
                return family
        return None
    major, minor = (int(p) for p in capability.split(".")[:2])
    if major >= 10:
        return "blackwell"
    return {(7, 0): "volta", (7, 2): "volta", (7, 5): "turing", (8, 0): "ampere", (8, 6): "ampere",
            (8, 7): "ampere", (8, 9): "ada", (9, 0): "hopper"}.get((major, minor))


@functools.cache
def _detect() -> dict:
    import torch

    info = {"vendor": "cpu", "backend": "cpu", "name": "cpu", "capability": None, "sm_count": None,
            "memory_gb": None, "arch": None, "device": "cpu"}
    if interpreting():
        info.update(vendor="interpreter", backend="interpreter", name="triton-interpreter (CPU)")
    elif torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        if getattr(torch.version, "hip", None):
            info.update(vendor="amd", backend="hip", capability=getattr(props, "gcnArchName", "").split(":")[0] or None)
        else:
            info.update(vendor="nvidia", backend="cuda", capability=f"{props.major}.{props.minor}")
        info.update(name=props.name, sm_count=props.multi_processor_count,
                    memory_gb=round(props.total_memory / 2**30, 1), device="cuda")
        info["arch"] = _arch_family(info["vendor"], info["capability"])
    return info


def detect() -> dict:
    """vendor, backend ("cuda", "hip", "interpreter" or "cpu"), name, capability, sm_count, memory_gb,
    arch and device ("cuda" or "cpu", where tensors go); probed once per process."""
    return dict(_detect())


def on_gpu() -> bool:
    return detect()["backend"] in ("cuda", "hip")


def sync() -> None:
    if on_gpu():
        import torch

        torch.cuda.synchronize()


@contextlib.contextmanager
def profiled_range(name: str):
    """An NVTX range named `name` around what a profiler should read (`ncu --nvtx --nvtx-include name/`);
    on other devices a plain block."""
    nvtx = detect()["backend"] == "cuda"
    if nvtx:
        import torch

        torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        if nvtx:
            torch.cuda.nvtx.range_pop()


def _cache_file() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "kgit" / "copy_bandwidth.json"


def measured_copy_gbps(refresh: bool = False, nbytes: int = 1 << 30) -> float | None:
    """Device-to-device copy bandwidth in GB/s (bytes read + bytes written), None without a GPU.

    The ceiling a memory-bound kernel is judged against: a 1 GiB buffer copied into another, timed as
    the kernels are (timing.gpu_median_ms: the median over calls, the L2 cleared before each). Cached
    per GPU name in ~/.cache/kgit/copy_bandwidth.json, so a test does not pay for it on every run;
    refresh=True measures again (a sweep does, at its start and end).
    """
    if not on_gpu():
        return None
    name = detect()["name"]
    path = _cache_file()
    try:
        cache = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        cache = {}
    if name in cache and not refresh:
        return float(cache[name]["gbps"])
    import torch

    from kgit.harness.timing import gpu_median_ms

    src = torch.randn(nbytes // 4, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    ms = gpu_median_ms(lambda src=src, dst=dst: dst.copy_(src), warmup_ms=25, rep_ms=200)
    gbps = 2 * nbytes / (ms * 1e-3) / 1e9
    del src, dst
    torch.cuda.empty_cache()
    cache[name] = {"gbps": round(gbps, 1), "bytes": nbytes, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cache, indent=1))
    except OSError:
        pass  # a read-only home is no reason to fail a benchmark
    return gbps
