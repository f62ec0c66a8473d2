"""A kernel test's entry point: parse its flags, check, time, print the contract's JSON.

    python skills/kernels/<name>/test_<name>.py [--json] [--quick] [--sweep] [--profile]
                                                [--check-only] [--no-torch] [--repeats N]

On a GPU the Spec's gpu Plan runs; in Triton's interpreter (TRITON_INTERPRET=1) or without a GPU, its
interpreter Plan (tiny shapes; CPU timings). Timing starts only when every check passed.

When kgit re-measures a commit whose checks it has seen pass (KGIT_TIMING_ONLY=1), the checks are
skipped: only the timed outputs are verified, as they always are.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from kgit.harness import checks, contract, device
from kgit.harness.inputs import seed_everything
from kgit.harness.measure import time_entry
from kgit.harness.spec import Plan, Spec, torch_dtype
from kgit.harness.timing import Timer
from kgit.profiling import PROFILE_RANGE


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="kernel test (kgit harness)")
    p.add_argument("--json", action="store_true", help="print only the JSON object (the kgit contract)")
    p.add_argument("--quick", action="store_true",
                   help="for a tuner: fewer checks, in the headline's dtype; a few headline shapes; no torch timing")
    p.add_argument("--sweep", action="store_true", help="also time the plan's sweep shapes (not in the headline)")
    p.add_argument("--profile", action="store_true",
                   help="run the kernel at the first headline shape, then 3 times in an NVTX range, and exit (for ncu)")
    p.add_argument("--check-only", action="store_true", help="correctness only, no timing")
    p.add_argument("--no-torch", action="store_true", help="do not time the torch baseline")
    p.add_argument("--repeats", type=int, default=Timer.repeats, help="timed figures per entry (for the spread)")
    return p.parse_args(argv)


def plan_of(spec: Spec) -> Plan:
    return spec.gpu if device.on_gpu() else spec.interpreter


def check_plan(spec: Spec, plan: Plan, quick: bool) -> list[tuple]:
    """(shape, dtype, case) to check: check_shapes in normal values, extreme_shapes in every other case."""
    shapes, extreme, dtypes = list(plan.check_shapes), list(plan.extreme_shapes), list(plan.dtypes)
    if quick:
        shapes, extreme, dtypes = shapes[:3], extreme[:1], [plan.headline_dtypes()[0]]
    return ([(s, d, "normal") for s in shapes for d in dtypes]
            + [(s, d, c) for s in extreme for d in dtypes for c in spec.cases if c != "normal"])


def time_plan(plan: Plan, quick: bool, sweep: bool) -> list[tuple]:
    """(shape, dtype, role) to time. --quick: the first, a middle and the last headline shape, one dtype."""
    shapes, dtypes = list(plan.time_shapes), list(plan.headline_dtypes())
    if quick:
        shapes, dtypes = [shapes[i] for i in sorted({0, len(shapes) // 2, len(shapes) - 1})], dtypes[:1]
    entries = [(s, d, "headline") for s in shapes for d in dtypes]
    if sweep:
        entries += [(s, d, "sweep") for s in plan.sweep_shapes for d in plan.swept_dtypes()
                    if (s, d, "headline") not in entries]
    return entries


def run(spec: Spec, quick: bool = False, sweep: bool = False, timer: Timer = Timer(), time_torch: bool = True,
        check: bool = True, timing: bool = True, seed: int | None = None) -> dict:
    """Check, then time; returns the contract's JSON object (does not print it)."""
    seed = seed_everything(seed)
    plan = plan_of(spec)
    copy_gbps = device.measured_copy_gbps() if spec.metric == "gbps" and timing else None
    started = time.time()
    to_check = check_plan(spec, plan, quick) if check else []
    failures = checks.run_checks(spec, to_check)
    check_s = time.time() - started
    entries = []
    if timing and not failures:
        entries = [time_entry(spec, shape, dtype, role, timer, time_torch and not quick, copy_gbps)
                   for shape, dtype, role in time_plan(plan, quick, sweep)]
    return contract.build(spec, device.detect(), seed, len(to_check), check_s, failures, entries, copy_gbps)


def profile(spec: Spec, launches: int = 3) -> dict:
    """Launch the kernel at the first headline shape and dtype, unchecked and untimed, for a profiler: once
    to compile (and autotune: its candidates' launches are not what the benchmark ran), then `launches`
    times inside the NVTX range PROFILE_RANGE, the launches kgit's ncu run reads. `config`: what they ran."""
    info = device.detect()
    plan = plan_of(spec)
    shape, dtype = plan.time_shapes[0], plan.headline_dtypes()[0]
    seed_everything()
    inputs = spec.make_inputs(shape, torch_dtype(dtype), info["device"], "normal")
    outputs = spec.make_outputs(inputs)
    spec.kernel(inputs, outputs)
    device.sync()
    with device.profiled_range(PROFILE_RANGE):
        for _ in range(launches):
            spec.kernel(inputs, outputs)
        device.sync()
    result = {"kernel": spec.name, "gpu": info["name"], "profile": True, "launches": launches,
              "range": PROFILE_RANGE, "shape": list(shape), "dtype": dtype, "status": "profiled"}
    if spec.launched is not None:
        result["config"] = dict(spec.launched())
    return result


def main(spec: Spec, argv=None) -> dict:
    """Entry point of a test_<name>.py: parse its flags, run, print (the JSON object last). Run as a
    script (argv None), a wrong result then exits with status 1."""
    if argv is None:
        _interpret_where_no_gpu()
    args = parse_args(argv)
    if args.profile:
        result = profile(spec)
    else:
        timing_only = os.environ.get("KGIT_TIMING_ONLY") == "1" and not args.check_only
        result = run(spec, quick=args.quick, sweep=args.sweep, timer=Timer(repeats=args.repeats),
                     time_torch=not args.no_torch, check=not timing_only, timing=not args.check_only)
    contract.emit(result, spec.metric, human_text=not args.json and not args.profile)
    if argv is None and result.get("correctness") is False:
        sys.exit(1)  # run as a script, a wrong result fails like any test (kgit reads the JSON either way)
    return result


def _interpret_where_no_gpu() -> None:
    """A test run by hand on a machine without a GPU (`python test_x.py`, as kgit init's hint says)
    would fail every check: Triton finds no driver. kgit sets TRITON_INTERPRET=1 there itself; run
    directly, the test starts again the same way, and says so. TRITON_INTERPRET set to anything, 0
    included, is left as it is."""
    if "TRITON_INTERPRET" in os.environ or device.detect()["vendor"] != "cpu":
        return
    print("kgit harness: no GPU found: running again in Triton's interpreter (TRITON_INTERPRET=1); "
          "timings are CPU timings", file=sys.stderr, flush=True)
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], {**os.environ, "TRITON_INTERPRET": "1"})
