"""From a profile to a bottleneck, a tier order, the next tier to try and the skill files to read.

The thresholds live here and nowhere else in the code; skills/bottleneck-diagnosis/SKILL.md mirrors
them (a test checks that it does).

  busiest memory unit = max(DRAM, L2, L1) throughput, % of its peak
  compute             = max(SM throughput, tensor pipe), % of peak
  memory-bound        busiest memory unit >= busy_pct and above compute
  compute-bound       compute >= busy_pct and at or above the memory unit
  latency-bound       both below busy_pct: neither unit is near its roof, so the time goes into
                      waiting (too few warps or bytes in flight, a grid smaller than the GPU, launches)
busy_pct is 60, the level Nsight Compute's own speed-of-light rule uses: below 60% of peak on both,
a kernel "typically" has latency issues.
"""

from __future__ import annotations

from kgit.model.record import Record, Status
from kgit.model.result import unit_of

# A tier counts as tried once a change in it was kept, or after this many attempts that kept nothing
# (regressed, within the noise, or failed): noise alone never closes a tier, and a tier whose every idea
# breaks or loses is given up in the end. A loss is one idea's verdict, not the tier's, and it can be the
# noise's: a regression decided with a prior from a loaded machine (-41% [-65, -0.4]) turned within the
# noise when measured again, so one REGRESSED counts as one attempt.
TIER_ATTEMPTS = 3
KEPT = {Status.IMPROVED, Status.TARGET_MET, Status.KEPT_ANYWAY}

MEMORY, COMPUTE, LATENCY = "memory", "compute", "latency"

THRESHOLDS = {
    "busy_pct": 60.0,  # a unit at or above this % of its peak is the limiter
    "low_occupancy_pct": 25.0,  # achieved occupancy below this: too few warps to hide latency
    "low_ld_efficiency_pct": 50.0,  # under half of each fetched 32-byte sector used: uncoalesced loads
    "spill_bytes": 0.0,  # any local-memory traffic from spills is worth removing
    "min_waves": 1.0,  # a grid under one wave leaves SMs idle
    "tiny_launch_us": 10.0,  # a launch this short is dominated by launch overhead and ramp-up
}

TIER_ORDER = {MEMORY: [2, 1, 3], COMPUTE: [3, 1, 5], LATENCY: [4, 3]}
# A bound nobody can tell (no profile, no declared bottleneck, a metric such as time_ms): every tier,
# the cheapest first, so that one tried tier never reads as "all tried: stop".
UNKNOWN_ORDER = [1, 2, 3, 4, 5]

TIER_NAMES = {
    1: "block tiling (BLOCK sizes, num_warps, num_stages, grouped order)",
    2: "memory access (coalescing, vector width, bank conflicts, L2 reuse)",
    3: "compute and fusion (epilogues, fast math, accumulator types)",
    4: "scheduling (persistent kernels, split-K, stream-K)",
    5: "architecture (Hopper TMA / wgmma / warp specialization; AMD MFMA / waves_per_eu / LDS)",
}

TIER_SKILLS = {
    1: "skills/tier1-block-tiling/SKILL.md",
    2: "skills/tier2-memory-access/SKILL.md",
    3: "skills/tier3-compute-fusion/SKILL.md",
    4: "skills/tier4-scheduling/SKILL.md",
}
TIER5_SKILLS = {"nvidia": "skills/tier5-arch-nvidia/SKILL.md", "amd": "skills/tier5-arch-amd-rocm/SKILL.md"}
DIAGNOSIS_SKILL = "skills/bottleneck-diagnosis/SKILL.md"
PROFILING_SKILL = "skills/profiling/SKILL.md"


def tier_skill(tier: int, vendor: str) -> str:
    return TIER_SKILLS.get(tier) or TIER5_SKILLS["amd" if vendor == "amd" else "nvidia"]


def _max(*values) -> tuple[float | None, str | None]:
    """The largest value and its unit's name; on a tie the first named (the more specific unit)."""
    present = [(v, name) for v, name in values if v is not None]
    return max(present, key=lambda item: item[0], default=(None, None))


def classify(metrics: dict) -> dict:
    """memory / compute / latency from profiler metrics; None when the metrics cannot tell."""
    mem, unit = _max((metrics.get("dram_pct"), "DRAM"), (metrics.get("l2_pct"), "L2"), (metrics.get("l1_pct"), "L1"),
                     (metrics.get("memory_pct"), "memory"))
    comp, cunit = _max((metrics.get("sm_pct"), "SM"), (metrics.get("tensor_pipe_pct"), "tensor pipe"),
                       (metrics.get("compute_pct"), "VALU"))
    if mem is None and comp is None:
        return {"bound": None, "why": "the profile has no throughput figures", "memory_pct": None, "compute_pct": None}
    busy = THRESHOLDS["busy_pct"]
    mem_v, comp_v = mem or 0.0, comp or 0.0
    if mem_v >= busy and mem_v > comp_v:
        bound, why = MEMORY, f"{unit} at {mem_v:.0f}% of peak (>= {busy:.0f}%), above {cunit or 'compute'} at {comp_v:.0f}%"
    elif comp_v >= busy:
        bound, why = COMPUTE, f"{cunit} at {comp_v:.0f}% of peak (>= {busy:.0f}%), memory at {mem_v:.0f}%"
    else:
        bound, why = LATENCY, (f"no unit near its roof: memory {mem_v:.0f}% ({unit or '-'}), compute {comp_v:.0f}% "
                               f"({cunit or '-'}), both < {busy:.0f}%")
    return {"bound": bound, "why": why, "memory_pct": mem, "memory_unit": unit, "compute_pct": comp,
            "compute_unit": cunit}


def hints(metrics: dict, stalls: list[dict]) -> list[dict]:
    """Findings that point at a tier whatever the class: each with the tier it suggests and why."""
    t = THRESHOLDS
    found = []
    spill = metrics.get("local_spill_bytes")
    if spill is not None and spill > t["spill_bytes"]:
        found.append({"tier": 1, "finding": f"register spills: {spill:.0f} bytes of local-memory traffic "
                      f"({metrics.get('registers_per_thread') or '?'} registers/thread): smaller tiles or more warps"})
    eff = metrics.get("global_ld_efficiency_pct")
    # 0% means no global load went through the load units at all (TMA bulk copies are not counted
    # there: the H200 GEMM reads everything that way), not that every load wasted its sector.
    if eff is not None and 0 < eff < t["low_ld_efficiency_pct"]:
        found.append({"tier": 2, "finding": f"global loads use {eff:.0f}% of each fetched sector: uncoalesced or strided"})
    occ = metrics.get("achieved_occupancy_pct")
    if occ is not None and occ < t["low_occupancy_pct"]:
        found.append({"tier": 1, "finding": f"achieved occupancy {occ:.0f}%: registers or shared memory per block "
                      "limit the warps per SM"})
    waves = metrics.get("waves_per_sm")
    if waves is not None and waves < t["min_waves"]:
        found.append({"tier": 4, "finding": f"{waves:.2f} waves: the grid does not fill the GPU (split the work, "
                      "split-K, or more programs)"})
    dur = metrics.get("duration_us")
    if dur is not None and dur < t["tiny_launch_us"]:
        found.append({"tier": 4, "finding": f"{dur:.1f} us per launch: launch overhead and ramp-up dominate "
                      "(fuse launches, persistent kernel, CUDA graphs)"})
    if stalls:
        top = stalls[0]
        found.append({"tier": None, "finding": f"top stall: {top['reason']} ({top['cycles_per_issue']:.1f} cycles "
                      f"per issued instruction): {top.get('meaning', '')}"})
    return found


def tried_tiers(records: list[Record]) -> list[int]:
    """Tiers tried by the evidence: a change in them kept, or TIER_ATTEMPTS attempts."""
    attempts: dict[int, int] = {}
    kept = set()
    for r in records:
        if r.tier is None or r.iteration == 0:
            continue
        attempts[r.tier] = attempts.get(r.tier, 0) + 1
        if r.status in KEPT:
            kept.add(r.tier)
    return sorted(kept | {tier for tier, n in attempts.items() if n >= TIER_ATTEMPTS})


def next_tier(order: list[int], records: list[Record]) -> int | None:
    """The first tier of the order not tried yet; None when all were tried (the tiers are exhausted)."""
    tried = set(tried_tiers(records))
    return next((tier for tier in order if tier not in tried), None)


def vendor_of(profile: dict | None, gpu_name: str | None) -> str:
    """'amd', 'nvidia' or 'cpu': from the profiler, else the measured GPU's name, else this machine."""
    from kgit import machine

    if profile and profile.get("tool") in ("rocprofv3", "ncu"):
        return "amd" if profile["tool"] == "rocprofv3" else "nvidia"
    name = (gpu_name or "").lower()
    if any(w in name for w in ("amd", "instinct", "mi300", "mi250", "radeon")):
        return "amd"
    if any(w in name for w in ("nvidia", "geforce", "tesla", "h100", "h200", "a100", "l40")):
        return "nvidia"
    return machine.vendor()


def diagnose(profile: dict, records: list[Record], kernel: str, gpu_name: str | None = None,
             kernel_skill: str | None = None) -> dict:
    """The diagnosis of one profile (from a profiler, or kgit's benchmark fallback)."""
    if profile.get("source") == "profiler":
        result = classify(profile.get("metrics") or {})
        found = hints(profile.get("metrics") or {}, profile.get("stalls") or [])
        how = f"{profile.get('tool')} counters"
    else:
        result = {"bound": profile.get("declared_bottleneck"), "why": profile.get("declared_why") or "",
                  "memory_pct": None, "compute_pct": None}
        found = []
        how = "no profiler: the kernel's declared bottleneck and the benchmark's numbers"
        if result["bound"] is None:
            metric = profile.get("metric")
            guess = {"gbps": MEMORY, "tflops": COMPUTE}.get(unit_of(metric) or "")  # "GB/s" is gbps too
            how = "no profiler and no declared bottleneck: the test's metric"
            why = (f"guessed from the test's metric ({metric})" if guess else
                   f"unknown: the test's metric ({metric}) does not tell")
            if profile.get("declared_why"):
                why += f"; {profile['declared_why']}"
            result.update(bound=guess, why=why)
        pct = profile.get("pct_of_peak")
        if result["bound"] == MEMORY and pct is not None and pct < THRESHOLDS["busy_pct"]:
            found.append({"tier": None, "finding": f"at {pct:.0f}% of peak bandwidth a memory-bound kernel is likely "
                          "latency-limited too (too few bytes in flight): profile it where ncu works to tell"})
    vendor = vendor_of(profile, gpu_name)
    order = TIER_ORDER.get(result["bound"], UNKNOWN_ORDER)
    if profile.get("source") != "profiler":  # a bound no counter confirmed: the safest change first
        order = [1] + [tier for tier in order if tier != 1]
    nxt = next_tier(order, records)
    skills = [DIAGNOSIS_SKILL]
    if nxt is not None:
        skills.append(tier_skill(nxt, vendor))
    if kernel_skill:
        skills.append(kernel_skill)
    if (5 in order or nxt == 5) and vendor in TIER5_SKILLS:  # a CPU has no architecture tier of its own
        skills.append(TIER5_SKILLS[vendor])
    return {
        "kernel": kernel,
        "bound": result["bound"],
        "why": result["why"],
        "how": how,
        "memory_pct": result.get("memory_pct"),
        "compute_pct": result.get("compute_pct"),
        "thresholds": THRESHOLDS,
        "tier_order": order,
        "tried_tiers": tried_tiers(records),
        "next_tier": nxt,
        "next_tier_name": TIER_NAMES.get(nxt) if nxt else None,
        "tiers_exhausted": nxt is None,
        "hints": found,
        "skills": list(dict.fromkeys(skills)),
        "vendor": vendor,
    }
