"""Nsight Compute (ncu) metrics: which ones kgit asks for, and how it reads ncu's CSV back.

kgit asks ncu for named metrics (one replay set, no --set full: that takes minutes per launch) and
reads `ncu --import <report> --page raw --csv --print-units base`. The parser also takes the
auto-scaled units ncu prints without --print-units base, the long "details" CSV (Metric Name, Metric
Unit, Metric Value), and ncu's messages or the program's output around the table, so a report
captured by hand can be dropped into tests/data/ and read the same way.

Each summary key maps to the metric names that give it, the first one present wins (names differ
between ncu versions).
"""

from __future__ import annotations

import csv
import io
import re
import statistics

# key -> ncu metric names, first present wins. Percentages are of the unit's sustained peak.
METRICS = {
    "duration_us": ["gpu__time_duration.sum"],
    "dram_pct": ["dram__throughput.avg.pct_of_peak_sustained_elapsed",
                 "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"],
    "memory_pct": ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"],
    "sm_pct": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "l1_pct": ["l1tex__throughput.avg.pct_of_peak_sustained_active"],
    "l2_pct": ["lts__throughput.avg.pct_of_peak_sustained_elapsed"],
    "tensor_pipe_pct": ["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"],
    "achieved_occupancy_pct": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "theoretical_occupancy_pct": ["sm__maximum_warps_per_active_cycle_pct"],
    "warps_active_per_sm": ["sm__warps_active.avg.per_cycle_active"],
    "registers_per_thread": ["launch__registers_per_thread"],
    "waves_per_sm": ["launch__waves_per_multiprocessor"],
    "local_load_bytes": ["l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"],
    "local_store_bytes": ["l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"],
    "global_ld_sectors_per_request": ["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"],
    "global_ld_efficiency_pct": ["smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"],
    "global_st_efficiency_pct": ["smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct"],
    "l2_hit_pct": ["lts__t_sector_hit_rate.pct"],
    "l1_hit_pct": ["l1tex__t_sector_hit_rate.pct"],
    "dram_bytes": ["dram__bytes.sum"],
    "dram_bytes_per_s": ["dram__bytes.sum.per_second"],
    # CUDA-core floating-point instructions, per thread (an FMA is two FLOPs)
    "ffma": ["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"],
    "fadd": ["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"],
    "fmul": ["smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"],
    "hfma": ["smsp__sass_thread_inst_executed_op_hfma_pred_on.sum"],
    "hadd": ["smsp__sass_thread_inst_executed_op_hadd_pred_on.sum"],
    "hmul": ["smsp__sass_thread_inst_executed_op_hmul_pred_on.sum"],
}

# Warp stall reasons, as stall cycles per issued instruction: the larger, the more that reason holds
# warps back. "selected" is not a stall (the warp issued).
STALL_REASONS = [
    "long_scoreboard", "short_scoreboard", "wait", "math_pipe_throttle", "mio_throttle", "lg_throttle",
    "barrier", "membar", "not_selected", "no_instruction", "branch_resolving", "dispatch_stall",
    "drain", "imc_miss", "sleeping", "tex_throttle", "misc",
]
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"

# What each stall reason usually means, for the human output and the skills.
STALL_MEANING = {
    "long_scoreboard": "waiting on global/local memory (L1TEX): memory latency or bandwidth",
    "short_scoreboard": "waiting on shared memory or special math (MIO)",
    "wait": "fixed-latency dependency between instructions",
    "math_pipe_throttle": "a math pipe is saturated: compute-bound",
    "mio_throttle": "shared-memory / special-function queue full",
    "lg_throttle": "global/local memory instruction queue full: too many small memory instructions",
    "barrier": "waiting at a barrier for other warps of the block",
    "membar": "waiting on a memory fence",
    "not_selected": "eligible but another warp issued: plenty of parallelism",
    "no_instruction": "instruction cache miss or branch target not fetched",
    "branch_resolving": "waiting for a branch target",
    "dispatch_stall": "dispatch conflict in the pipeline",
    "drain": "waiting for memory stores to drain at exit",
    "imc_miss": "immediate constant cache miss",
    "sleeping": "warp sleeping (nanosleep / yield)",
    "tex_throttle": "texture unit queue full",
    "misc": "other",
}

TOP_STALLS = 3

# Kernels kgit never reports as the kernel under test when it cannot name it: torch's own kernels,
# cuBLAS/CUTLASS, copies and fills (used only when the kernel file's @triton.jit names are unknown).
_LIBRARY_KERNEL = re.compile(
    r"at::|at_cuda_detail|native::|elementwise|distribution_|cublas|cutlass|nvjet|xmma|cub::|"
    r"CUDAFunctor|reduce_kernel|Memset|memcpy|fill_kernel",
    re.I,
)


def metric_names() -> list[str]:
    names = [name for options in METRICS.values() for name in options]
    return names + [STALL_METRIC.format(r) for r in STALL_REASONS]


# --- units ---------------------------------------------------------------------------------------

_PREFIX = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME_SYMBOLS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_BASES = ("second", "byte", "cycle", "inst", "sector", "request", "warp", "thread", "block", "hz", "Hz")


def _scale(unit: str) -> tuple[float, str]:
    """The factor to the base unit, and the base unit, of one unit word such as 'usecond'."""
    unit = unit.strip()
    if unit in _TIME_SYMBOLS:  # ncu 2025 writes 'ns' even with --print-units base
        return _TIME_SYMBOLS[unit], "second"
    if unit in _BASES:
        return 1.0, unit
    if len(unit) > 1 and unit[0] in _PREFIX and unit[1:] in _BASES:
        return _PREFIX[unit[0]], unit[1:]
    return 1.0, unit


def to_base(value: float, unit: str) -> float:
    """value in unit, converted to the base unit: 12.5 'usecond' -> 1.25e-05, 3 'Tbyte/second' -> 3e12."""
    if not unit or unit == "%":
        return value
    top, _, bottom = unit.partition("/")
    factor, _ = _scale(top)
    if bottom:
        below, _ = _scale(bottom)
        factor /= below
    return value * factor


_NUMBER = re.compile(r"[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d*)?([eE][-+]?\d+)?")


def parse_number(text: str) -> float | None:
    """'1,234.5' -> 1234.5; 'n/a' or '' -> None (ncu prints thousands separators in some versions)."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    return float(text.replace(",", ""))


# --- the CSV ---------------------------------------------------------------------------------------


def parse_csv(text: str) -> list[dict]:
    """Every profiled launch in ncu's CSV: [{'id', 'name', 'block', 'grid', 'values': {metric: base}}]."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    if "Metric Name" in header:
        return _parse_long(header, rows[1:])
    return _parse_wide(header, rows[1:])


def kernel_base_name(name: str) -> str:
    """'void softmax_kernel(float*, int)' -> 'softmax_kernel'."""
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    return name.split("(")[0].split("<")[0].strip()


def _parse_wide(header: list[str], rows: list[list[str]]) -> list[dict]:
    col = {name: i for i, name in enumerate(header)}
    units = [""] * len(header)
    launches = []
    for row in rows:
        if len(row) != len(header):
            continue  # a message line that happened to be valid CSV
        if not row[col["ID"]].strip():
            units = row  # the units row under the header
            continue
        launch = _launch(row[col["ID"]], row[col.get("Kernel Name", 0)],
                         row[col["Block Size"]] if "Block Size" in col else "",
                         row[col["Grid Size"]] if "Grid Size" in col else "")
        for name, i in col.items():
            if "__" not in name:
                continue  # the descriptive columns: ID, Process, Kernel Name, ...
            value = parse_number(row[i])
            if value is not None:
                launch["values"][name] = to_base(value, units[i])
        launches.append(launch)
    return launches


def _parse_long(header: list[str], rows: list[list[str]]) -> list[dict]:
    col = {name: i for i, name in enumerate(header)}
    by_id: dict[str, dict] = {}
    for row in rows:
        if len(row) != len(header):
            continue
        key = row[col["ID"]]
        if key not in by_id:
            by_id[key] = _launch(key, row[col["Kernel Name"]],
                                 row[col["Block Size"]] if "Block Size" in col else "",
                                 row[col["Grid Size"]] if "Grid Size" in col else "")
        value = parse_number(row[col["Metric Value"]])
        if value is not None:
            unit = row[col["Metric Unit"]] if "Metric Unit" in col else ""
            by_id[key]["values"][row[col["Metric Name"]]] = to_base(value, unit)
    return list(by_id.values())


def _launch(launch_id: str, name: str, block: str, grid: str) -> dict:
    return {"id": launch_id, "name": kernel_base_name(name), "block": block.strip(), "grid": grid.strip(),
            "values": {}}


# --- from launches to metrics.json -----------------------------------------------------------------


def select(launches: list[dict], names: list[str] | None) -> list[dict]:
    """The launches of the kernel under test: those named, else all but library kernels."""
    if names:
        wanted = set(names)
        return [launch for launch in launches if launch["name"] in wanted]
    return [launch for launch in launches if not _LIBRARY_KERNEL.search(launch["name"])]


def summarize(launches: list[dict], names: list[str] | None = None) -> dict:
    """metrics.json: per kernel, the median of each metric over its launches; the primary kernel is the
    one with the most GPU time, and its metrics are the profile's headline."""
    chosen = select(launches, names)
    groups: dict[str, list[dict]] = {}
    for launch in chosen:
        groups.setdefault(launch["name"], []).append(launch)
    kernels = [_kernel_summary(name, group) for name, group in groups.items()]
    kernels.sort(key=lambda k: -(k["total_us"] or 0.0))
    primary = kernels[0] if kernels else None
    return {
        "tool": "ncu",
        "source": "profiler",
        "launches_profiled": len(launches),
        "launches_selected": len(chosen),
        "primary": primary["name"] if primary else None,
        "metrics": primary["metrics"] if primary else {},
        "stalls": primary["stalls"] if primary else [],
        "kernels": kernels,
    }


def _kernel_summary(name: str, launches: list[dict]) -> dict:
    medians: dict[str, float] = {}
    for metric in {m for launch in launches for m in launch["values"]}:
        values = [launch["values"][metric] for launch in launches if metric in launch["values"]]
        medians[metric] = statistics.median(values)
    metrics = derive(medians)
    stalls = top_stalls(medians)
    durations = [launch["values"].get("gpu__time_duration.sum") for launch in launches]
    total = sum(d for d in durations if d is not None) * 1e6 if any(d is not None for d in durations) else None
    return {"name": name, "launches": len(launches), "block": launches[-1]["block"], "grid": launches[-1]["grid"],
            "total_us": total, "metrics": metrics, "stalls": stalls}


def _first(values: dict, key: str) -> float | None:
    return next((values[name] for name in METRICS[key] if name in values), None)


def derive(values: dict) -> dict:
    """The summary keys from one launch's (or the median launch's) raw metric values, in base units."""
    out = {key: _first(values, key) for key in METRICS}
    if out["duration_us"] is not None:
        out["duration_us"] *= 1e6  # seconds -> microseconds
    local = [out.pop("local_load_bytes"), out.pop("local_store_bytes")]
    out["local_spill_bytes"] = sum(v for v in local if v is not None) if any(v is not None for v in local) else None
    # bytes per sector from the efficiency percentage: a 32-byte sector fully used is 100%
    eff = out["global_ld_efficiency_pct"]
    out["global_ld_bytes_per_sector"] = eff * 32.0 / 100.0 if eff is not None else None
    seconds = out["duration_us"] / 1e6 if out["duration_us"] else None
    rate = out.pop("dram_bytes_per_s")
    if rate is None and out["dram_bytes"] is not None and seconds:
        rate = out["dram_bytes"] / seconds
    out["achieved_gbps"] = rate / 1e9 if rate is not None else None
    counts = {k: out.pop(k) for k in ("ffma", "fadd", "fmul", "hfma", "hadd", "hmul")}
    if any(v is not None for v in counts.values()) and seconds:
        flops = sum((2.0 if k.endswith("fma") else 1.0) * (v or 0.0) for k, v in counts.items())
        out["cuda_core_gflops"] = flops / seconds / 1e9
    else:
        out["cuda_core_gflops"] = None
    return out


def top_stalls(values: dict, n: int = TOP_STALLS) -> list[dict]:
    found = []
    for reason in STALL_REASONS:
        value = values.get(STALL_METRIC.format(reason))
        if value is not None and value > 0:
            found.append({"reason": reason, "cycles_per_issue": value, "meaning": STALL_MEANING[reason]})
    found.sort(key=lambda s: -s["cycles_per_issue"])
    return found[:n]


def unknown_metric(output: str) -> str | None:
    """The base name of a metric ncu says it does not know, from its error message, or None."""
    match = re.search(r"Failed to find metric\s+(?:regex:)?\^?([A-Za-z0-9_]+)", output)
    return match.group(1) if match else None
