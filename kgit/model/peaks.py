"""A table of datasheet peaks, and its lookups by the names drivers report.

Import-light on purpose: the kgit CLI imports this module (for % of peak in
status/report), so it never imports torch or triton. The torch-side probe of
the device and its measured copy bandwidth are in kgit.harness.device.

Public API (stable):
    peak_for(gpu_name, metric, dtype=None) -> float | None
                                     datasheet peak for "gbps" (DRAM GB/s) or
                                     "tflops" (dense, per dtype); None if unknown
    peaks_for(gpu_name) -> dict | None   the whole table row
    canonical_gpu(gpu_name) -> str | None   the PEAKS key of a reported name

A datasheet number is a lead; the measured copy is the ceiling a memory-bound
kernel is judged against.
"""

from __future__ import annotations

# Dense (no structured sparsity) peaks from the vendors' datasheets.
# gbps: DRAM bandwidth in GB/s (1e9 bytes/s). tflops: dense rate per dtype, in
# TFLOP/s; "fp32" is the plain (non-tensor-core) FP32 rate on NVIDIA and the
# vector FP32 rate on AMD; "tf32" is the tensor-core/matrix-core rate (None where
# the chip has no such mode). The sparse figures the datasheets headline are
# twice these and never reachable by a dense kernel.
PEAKS = {
    "NVIDIA H100 SXM": {"gbps": 3350, "fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
    "NVIDIA H100 PCIe": {"gbps": 2000, "fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0},
    "NVIDIA H100 NVL": {"gbps": 3900, "fp32": 60.0, "tf32": 417.5, "bf16": 835.0, "fp16": 835.0},
    "NVIDIA H200": {"gbps": 4800, "fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
    "NVIDIA H200 NVL": {"gbps": 4800, "fp32": 60.0, "tf32": 417.5, "bf16": 835.0, "fp16": 835.0},
    "NVIDIA A100 SXM 80GB": {"gbps": 2039, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    "NVIDIA A100 SXM 40GB": {"gbps": 1555, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    "NVIDIA A100 PCIe 80GB": {"gbps": 1935, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    "NVIDIA A100 PCIe 40GB": {"gbps": 1555, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    # GeForce: tensor rates with FP32 accumulation (the FP16-accumulate rate is 2x).
    "NVIDIA GeForce RTX 4090": {"gbps": 1008, "fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2},
    "NVIDIA L40S": {"gbps": 864, "fp32": 91.6, "tf32": 183.0, "bf16": 366.0, "fp16": 366.0},
    "AMD Instinct MI300X": {"gbps": 5300, "fp32": 81.7, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4},
    "AMD Instinct MI250X": {"gbps": 3277, "fp32": 47.9, "tf32": None, "bf16": 383.0, "fp16": 383.0},
    "AMD Instinct MI250": {"gbps": 3277, "fp32": 45.3, "tf32": None, "bf16": 362.1, "fp16": 362.1},
}

# How the names that drivers report map onto PEAKS: the first rule whose words
# all appear (lower-cased) in the reported name, and none of whose "unless"
# words do, wins. Order matters (NVL and PCIe before the plain SXM part).
_NAME_RULES = [
    (("h200", "nvl"), (), "NVIDIA H200 NVL"),
    (("h200",), (), "NVIDIA H200"),
    (("h100", "pcie"), (), "NVIDIA H100 PCIe"),
    (("h100", "nvl"), (), "NVIDIA H100 NVL"),
    (("h100",), (), "NVIDIA H100 SXM"),
    (("a100", "pcie", "80"), (), "NVIDIA A100 PCIe 80GB"),
    (("a100", "pcie"), (), "NVIDIA A100 PCIe 40GB"),
    (("a100", "80"), (), "NVIDIA A100 SXM 80GB"),
    (("a100",), (), "NVIDIA A100 SXM 40GB"),
    (("4090",), (), "NVIDIA GeForce RTX 4090"),
    (("l40s",), (), "NVIDIA L40S"),
    (("mi300x",), (), "AMD Instinct MI300X"),
    (("gfx942",), (), "AMD Instinct MI300X"),
    (("mi250x",), (), "AMD Instinct MI250X"),
    (("mi250",), (), "AMD Instinct MI250"),
    (("gfx90a",), (), "AMD Instinct MI250X"),
]

_DTYPE_ALIASES = {
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "torch.float32": "fp32",
    "tf32": "tf32",
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "torch.float16": "fp16",
}


def canonical_gpu(gpu_name: str | None) -> str | None:
    """The PEAKS key for a name a driver reports, or None if not in the table."""
    if not gpu_name:
        return None
    if gpu_name in PEAKS:
        return gpu_name
    low = gpu_name.lower()
    for words, unless, key in _NAME_RULES:
        if all(w in low for w in words) and not any(u in low for u in unless):
            return key
    return None


def peaks_for(gpu_name: str | None) -> dict | None:
    key = canonical_gpu(gpu_name)
    return dict(PEAKS[key], name=key) if key else None


def peak_for(gpu_name: str | None, metric: str, dtype: str | None = None) -> float | None:
    """Datasheet peak of `gpu_name` for `metric` ("gbps" or "tflops").

    For "tflops", `dtype` picks the rate (fp32, tf32, bf16, fp16; torch dtype
    names accepted); without one, bf16 (the dense matrix rate). Returns None for
    an unknown GPU, the interpreter/cpu, or a rate the chip lacks.
    """
    row = peaks_for(gpu_name)
    if row is None:
        return None
    if metric == "gbps":
        return float(row["gbps"])
    if metric == "tflops":
        key = _DTYPE_ALIASES.get(str(dtype).lower() if dtype is not None else "bf16")
        value = row.get(key) if key else None
        return float(value) if value is not None else None
    raise ValueError(f"unknown metric {metric!r} (expected 'gbps' or 'tflops')")
