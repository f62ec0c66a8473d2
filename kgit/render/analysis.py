"""Profile, diagnosis and context as one screen each; --json prints the objects as they are."""

from __future__ import annotations

from kgit.render.text import delta, metric

# (key, label, format) of the profile's headline metrics, in the order a reader asks the questions
PROFILE_ROWS = [
    ("duration_us", "duration", "{:.1f} us"),
    ("dram_pct", "DRAM throughput", "{:.1f}% of peak"),
    ("l2_pct", "L2 throughput", "{:.1f}% of peak"),
    ("l1_pct", "L1 throughput", "{:.1f}% of peak"),
    ("sm_pct", "SM throughput", "{:.1f}% of peak"),
    ("tensor_pipe_pct", "tensor pipe", "{:.1f}% of peak"),
    ("memory_pct", "memory (busiest unit)", "{:.1f}% of peak"),
    ("compute_pct", "VALU busy", "{:.1f}%"),
    ("achieved_gbps", "DRAM bandwidth", "{:.0f} GB/s"),
    ("cuda_core_gflops", "CUDA-core FLOP rate", "{:.1f} GFLOP/s"),
    ("achieved_occupancy_pct", "achieved occupancy", "{:.1f}%"),
    ("theoretical_occupancy_pct", "theoretical occupancy", "{:.1f}%"),
    ("warps_active_per_sm", "warps active per SM", "{:.1f}"),
    ("registers_per_thread", "registers per thread", "{:.0f}"),
    ("local_spill_bytes", "local (spill) traffic", "{:.0f} bytes"),
    ("global_ld_sectors_per_request", "sectors per global load", "{:.2f}"),
    ("global_ld_bytes_per_sector", "bytes used per sector", "{:.1f} of 32"),
    ("l2_hit_pct", "L2 hit rate", "{:.1f}%"),
    ("waves_per_sm", "waves per SM", "{:.2f}"),
]


def profile_text(prof: dict) -> str:
    from tabulate import tabulate

    where = f"iteration {prof['iteration']}" if prof.get("iteration") is not None else "the working tree"
    if prof.get("source") != "profiler":
        lines = [f"kgit: no profiler: {prof['why']}",
                 f"{prof['kernel']} ({where}): falling back to the benchmark's numbers and the declared bottleneck"]
        bench = metric(prof.get("value"), prof.get("metric"), prof.get("cpu_timing", False))
        extra = [f"{prof[k]:.0f}% of {w}" for k, w in (("pct_of_peak", "peak"), ("pct_of_copy", "copy"))
                 if prof.get(k) is not None]
        lines.append(f"benchmark: {bench}" + (f" ({', '.join(extra)})" if extra else ""))
        lines.append(f"bottleneck: {prof.get('declared_bottleneck') or 'not declared'} ({prof.get('declared_why')})")
        return "\n".join(lines)
    metrics = prof.get("metrics") or {}
    rows = [[label, fmt.format(metrics[key])] for key, label, fmt in PROFILE_ROWS if metrics.get(key) is not None]
    for stall in prof.get("stalls") or []:
        rows.append([f"stall: {stall['reason']}", f"{stall['cycles_per_issue']:.2f} cycles/issue"])
    head = (f"{prof['kernel']} ({where}): {prof['tool']}, kernel {prof.get('primary')} "
            f"({prof.get('launches_selected', '?')} of {prof.get('launches_profiled', '?')} launches)")
    lines = [head] + ([f"kgit: {prof['config_mismatch']}"] if prof.get("config_mismatch") else [])
    lines.append(tabulate(rows, tablefmt="plain"))
    others = [k["name"] for k in prof.get("kernels", [])[1:]]
    if others:
        lines.append(f"other kernels: {', '.join(others)}")
    if prof.get("dropped_metrics"):
        lines.append(f"metrics this ncu does not know (left out): {', '.join(prof['dropped_metrics'])}")
    lines.append(f"saved: {prof.get('saved_to')}/metrics.json"
                 + ("; in the iteration's note" if prof.get("noted") else f"; no note: {prof.get('note_why')}"))
    return "\n".join(lines)


def diagnosis_text(diag: dict) -> str:
    lines = [f"{diag['kernel']}: {diag['bound'] or 'unknown'}-bound: {diag['why']}", f"  from {diag['how']}"]
    order = ", ".join(f"T{t}" for t in diag["tier_order"])
    tried = ", ".join(f"T{t}" for t in diag["tried_tiers"]) or "none"
    lines.append(f"tier order: {order}; tried: {tried}")
    if diag["next_tier"] is None:
        lines.append("next tier: none left (every tier of the order was tried)")
    else:
        lines.append(f"next tier: T{diag['next_tier']} {diag['next_tier_name']}")
    for hint in diag["hints"]:
        tier = f"T{hint['tier']}: " if hint.get("tier") else ""
        lines.append(f"  - {tier}{hint['finding']}")
    lines.append("read: " + ", ".join(diag["skills"]))
    return "\n".join(lines)


def context_text(ctx: dict) -> str:
    from tabulate import tabulate

    unit = ctx["metric"]
    best = ctx["best"]
    lines = [
        f"kernel {ctx['kernel']} on {ctx['gpu'] or 'an unknown device'} (branch {ctx['branch']})",
        f"files: {ctx['files']['kernel']}, test {ctx['files']['test']}"
        + (f", notes {ctx['files']['kernel_skill']}" if ctx["files"]["kernel_skill"] else ""),
        f"target: {metric(ctx['target'], unit) if ctx['target'] else 'none set'}; best: "
        + (f"{metric(best['value'], unit)} (iteration {best['iteration']})" if best else "-")
        + (f"; gap {metric(ctx['gap'], unit)} ({ctx['gap_pct']:.1f}%)"
           if ctx["gap"] is not None and ctx["gap"] > 0 else ""),
        f"iteration {ctx['iteration']} of {ctx['max_iterations']}" + (f"; stopped: {ctx['stopped']}" if ctx["stopped"] else ""),
    ]
    if ctx["tried"]:
        rows = [[str(t["iteration"]), t["action"], f"T{t['tier']}" if t["tier"] else "-",
                 t["status"] + (f" ({t['reason']})" if t["reason"] else ""),
                 metric(t["value"], t["metric"]), delta(t["delta_pct"])]
                for t in ctx["tried"]]
        lines += ["already tried (never repeat a REGRESSED change; a WITHIN_NOISE one may return in another form):",
                  # text cells, said so: tabulate's guess of each cell's type cost 1.1 s at 10,000 rows
                  tabulate(rows, ["Iter", "Change", "Tier", "Result", "Metric", "Delta"], disable_numparse=True,
                           colalign=["right"] + ["left"] * 5)]
    else:
        lines.append("already tried: nothing yet")
    diag = ctx["diagnosis"]
    prof = ctx["profile"]
    source = prof["tool"] if prof["source"] == "profiler" else f"no profiler ({prof['why']})"
    lines.append(f"diagnosis: {diag['bound'] or 'unknown'}-bound ({diag['why']}), from {source}")
    if ctx["profile_stale"]:
        lines.append(f"  note: {ctx['profile_stale']}")
    if ctx["platform"]["note"]:
        lines.append(f"platform: {ctx['platform']['note']}")
    for hint in diag["hints"]:
        lines.append(f"  - {hint['finding']}")
    lines.append(f"tiers: order {', '.join(f'T{t}' for t in diag['tier_order'])}; tried "
                 f"{', '.join(f'T{t}' for t in diag['tried_tiers']) or 'none'}")
    tunables = ctx["tunables"]
    if tunables and "error" in tunables:
        lines.append(f"CONFIG: {tunables['error']}")
    elif tunables:
        lines.append("CONFIG (tier; CONFIG_SPACE):")
        lines += [f"  {key} = {value!r} (T{tunables['tiers'][key]}; "
                  f"{', '.join(map(repr, tunables['space'].get(key, [value])))})"
                  for key, value in tunables["config"].items()]
    lines.append(f"next: {ctx['next_step']}")
    lines.append("read: " + ", ".join(ctx["skills"]))
    return "\n".join(lines)
