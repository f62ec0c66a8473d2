"""Which device the tests run on here (by the vendors' device files), and the environment of a measurement.

kgit itself never imports torch (a command that runs no test must start in milliseconds), so it
looks for the drivers' files instead. The harness, on the torch side, asks torch (kgit.harness).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from kgit.model.record import Environment


def vendor(choice: str = "auto") -> str:
    """'nvidia', 'amd' or 'cpu': the setting `gpu` of kgit.yaml (auto, nvidia, amd, cpu) on this machine."""
    if choice in ("nvidia", "amd", "cpu"):
        return choice
    if Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia").exists():
        return "nvidia"
    if Path("/dev/kfd").exists():
        return "amd"
    return "cpu"


def environment(choice: str = "auto", gpu: str | None = None) -> Environment:
    """Where a measurement is taken: host, device, GPU name and UUID, driver, clocks, torch and triton.

    Versions are read from the installed packages' metadata (the tests run on this interpreter), so
    kgit still imports neither torch nor triton.
    """
    kind = vendor(choice)
    env = {"host": platform.node(), "device": kind, "python": platform.python_version(),
           "torch": _version("torch"), "triton": _version("triton")}
    if kind == "nvidia":
        env.update(_nvidia(gpu))
    elif kind == "cpu":
        env["cpu"] = platform.processor() or platform.machine()
    return Environment(**env)


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


_NVIDIA_FIELDS = ("name", "uuid", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem",
                  "clocks_event_reasons.active")
_NVIDIA_KEYS = ("gpu", "gpu_uuid", "driver", "clock_sm_mhz", "clock_sm_max_mhz", "clock_mem_mhz", "clock_events")


def _nvidia(gpu: str | None) -> dict:
    """The GPU a test sees first (gpu, else the first visible one), as nvidia-smi reports it; what it
    cannot read stays out."""
    from kgit import runner

    visible = gpu if gpu is not None else os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    args = ["nvidia-smi", f"--query-gpu={','.join(_NVIDIA_FIELDS)}", "--format=csv,noheader,nounits"]
    if visible:
        args.append(f"--id={visible}")
    try:
        done = runner.run_command(args, Path.cwd(), 20.0, {})
    except OSError:
        return {}
    lines = done.stdout.strip().splitlines() if done.returncode == 0 else []
    if not lines:
        return {}
    values = [v.strip() for v in lines[0].split(",")]
    return {k: v for k, v in zip(_NVIDIA_KEYS, values) if v and "N/A" not in v and "not supported" not in v.lower()}
