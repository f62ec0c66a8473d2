"""AMD: rocprofv3 counters that answer the same questions as kgit's ncu metrics, and their CSV.

rocprofv3 collects a few counters per pass (about four on CDNA), so kgit asks for several passes,
one --pmc group each. It reads <name>_counter_collection.csv (one row per dispatch and counter:
Kernel_Name, Counter_Name, Counter_Value, ...) and, for the duration, <name>_kernel_trace.csv
(Start_Timestamp, End_Timestamp in ns). Not yet run on an AMD GPU by kgit's authors: the counter
names follow AMD's MI300 counter reference; a machine that lacks one fails the pass, and kgit says so.
"""

from __future__ import annotations

import csv
import io
import statistics

# One rocprofv3 pass per group.
PASSES = [
    ["GPUBusy", "MemUnitBusy", "VALUBusy", "L2CacheHit"],
    ["FETCH_SIZE", "WRITE_SIZE", "SQ_INSTS_VALU", "SQ_INSTS_MFMA"],
    ["MemUnitStalled", "SQ_WAVES", "SQ_BUSY_CYCLES", "SQ_WAVE_CYCLES"],
]

# summary key -> counter (all percentages but the sizes, which rocprof reports in KB)
KEYS = {
    "memory_pct": "MemUnitBusy",
    "valu_busy_pct": "VALUBusy",
    "gpu_busy_pct": "GPUBusy",
    "l2_hit_pct": "L2CacheHit",
    "mem_unit_stalled_pct": "MemUnitStalled",
}


def parse(counters_csv: str, trace_csv: str | None = None, names: list[str] | None = None) -> dict:
    """metrics.json from rocprofv3's CSV files (same layout as the ncu summary)."""
    per_kernel: dict[str, dict[str, list[float]]] = {}
    for row in csv.DictReader(io.StringIO(counters_csv)):
        name = (row.get("Kernel_Name") or "").split("(")[0].strip()
        if names and name not in names:
            continue
        try:
            value = float(row["Counter_Value"])
        except (KeyError, TypeError, ValueError):
            continue
        per_kernel.setdefault(name, {}).setdefault(row.get("Counter_Name", ""), []).append(value)
    durations: dict[str, list[float]] = {}
    for row in csv.DictReader(io.StringIO(trace_csv or "")):
        name = (row.get("Kernel_Name") or "").split("(")[0].strip()
        try:
            durations.setdefault(name, []).append((float(row["End_Timestamp"]) - float(row["Start_Timestamp"])) / 1e3)
        except (KeyError, TypeError, ValueError):
            continue
    kernels = []
    for name, counters in per_kernel.items():
        med = {c: statistics.median(v) for c, v in counters.items()}
        kernels.append({"name": name, "launches": max(len(v) for v in counters.values()),
                        "total_us": sum(durations.get(name, [])) or None, "metrics": derive(med, durations.get(name))})
    kernels.sort(key=lambda k: -(k["total_us"] or 0.0))
    primary = kernels[0] if kernels else None
    return {"tool": "rocprofv3", "source": "profiler", "primary": primary["name"] if primary else None,
            "metrics": primary["metrics"] if primary else {}, "stalls": [], "kernels": kernels}


def derive(med: dict, durations: list[float] | None) -> dict:
    out = {key: med.get(counter) for key, counter in KEYS.items()}
    out["duration_us"] = statistics.median(durations) if durations else None
    # MFMA instructions present means the matrix cores do the work: VALUBusy alone understates compute
    out["mfma_insts"] = med.get("SQ_INSTS_MFMA")
    out["compute_pct"] = out["valu_busy_pct"]
    sizes = [med.get("FETCH_SIZE"), med.get("WRITE_SIZE")]
    if out["duration_us"] and all(s is not None for s in sizes):
        out["achieved_gbps"] = sum(sizes) * 1024 / (out["duration_us"] * 1e-6) / 1e9
    else:
        out["achieved_gbps"] = None
    return out
