"""Which device the tests run on here: the one probe of the command line, by the vendors' device files.

kgit itself never imports torch (a command that runs no test must start in milliseconds), so it
looks for the drivers' files instead. The harness, on the torch side, asks torch (kgit.harness).
"""

from __future__ import annotations

from pathlib import Path


def vendor(choice: str = "auto") -> str:
    """'nvidia', 'amd' or 'cpu': the setting `gpu` of kgit.yaml (auto, nvidia, amd, cpu) on this machine."""
    if choice in ("nvidia", "amd", "cpu"):
        return choice
    if Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia").exists():
        return "nvidia"
    if Path("/dev/kfd").exists():
        return "amd"
    return "cpu"


def test_env(choice: str) -> tuple[dict, str | None]:
    """Environment for a kernel's test, and a plain-words note when it runs in Triton's interpreter."""
    if vendor(choice) != "cpu":
        return {}, None
    why = "gpu: cpu" if choice == "cpu" else "no GPU found"
    return {"TRITON_INTERPRET": "1"}, (
        f"{why}: running in Triton's interpreter mode on the CPU; timings are CPU timings, "
        "not comparable to any GPU"
    )
