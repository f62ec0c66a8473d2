"""Softmax's pipelined loop on row bodies cut at 16-byte boundaries (PIPELINED_BODIES): each (warps, stages)
its rule weighs, launched directly, beside the launcher's own choice, main's launcher, torch and a device copy
of the same traffic, on synthetic 16-bit rows of 4097-32767 elements not in 16-element groups. None of these
is a shape of benchmarks/shapes.py (the tune half has none in this range; the held-out half's three are read
by held_out_bench.py only), so what the rule is next chosen on stays off the held-out half.

    python benchmarks/explore/pipelined_bodies.py MAIN_SOFTMAX.py [--json FILE]

Every output is checked against the float64 reference before it is timed; times are kgit's medians with the
L2 cleared, in two rounds of opposite order; the table shows their mean and each one's % of the measured
copy bandwidth, and against a copy of the shape's own traffic (x copy). HELD_OUT_DEADLINE skips the shapes
left when it passes. HELD_OUT_TINY=1 (with TRITON_INTERPRET=1 on a CPU) cuts every shape to
2 rows and checks this script's code paths, as held_out_bench.py's does.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench  # noqa: E402
from held_out_bench import DEADLINE, TINY, close, time_us  # noqa: E402
from kgit.harness import device  # noqa: E402

# (rows, width, dtype): an odd length puts each row's start at every offset into a 16-byte group; 4100 is
# whole 4-element groups only; 5000 whole 8-element groups, no edge (h100-row-dispatch/explore/ read it at
# 67.3% of copy on _softmax_row's 8 warps); the rows an SM run from 2 to 16 on 132 SMs
SHAPES = [(1536, 4100, "bf16"), (2048, 5000, "bf16"), (768, 8191, "bf16"), (1024, 6145, "fp16"),
          (512, 12289, "bf16"), (256, 16385, "fp16"), (1024, 20001, "bf16"), (1536, 30001, "fp16")]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def variants(m, x):
    """name -> a call that fills its y: the loop on each (warps, stages) the rule weighs, launched as
    _launch_pipelined launches it, named with that compiled loop's programs an SM (and spills)."""
    M, N = x.shape
    vec = 16 // x.element_size()
    block_n = 1 << (N // vec * vec - 1).bit_length()
    most = m._pipelined_stages(x.device, block_n * x.element_size())
    sms = m._sm_count(x.device)
    out = {}
    for warps in m.PIPELINED_BODY_WARPS:
        for stages in range(m.MIN_PIPELINED_STAGES, most + 1):
            consts = {"BLOCK_N": block_n, "ROWS": 1, "NUM_STAGES": stages, "EVEN": False, "UNIT": 1,
                      "ALIGNED": True, "VEC": vec}
            args = (x, x, M, N, x.stride(0), x.stride(0))  # y as x: the same strides and alignment
            occ, spills = m._fit(m._softmax_rows, args, consts, warps, stages, x.device)
            out[f"{warps}w{stages}s occ{occ}{' SPILLS' if spills else ''}"] = \
                lambda y, consts=consts, grid=(min(M, sms * occ),), warps=warps, stages=stages: m._softmax_rows[grid](
                    x, y, M, N, x.stride(0), y.stride(0), **consts, num_warps=warps, num_stages=stages)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old_file")
    ap.add_argument("--json")
    a = ap.parse_args()
    old, new = bench.kernel_module("softmax", a.old_file, "old"), bench.kernel_module("softmax", side="new")
    where = device.detect()["device"]
    copy = device.measured_copy_gbps(refresh=True) or float("nan")  # nan: no GPU (HELD_OUT_TINY's check)
    machine = bench.machine()
    print(f"softmax pipelined bodies on {machine['gpu']}, torch {machine['torch']}, triton {machine['triton']}, "
          f"copy {copy:.0f} GB/s")
    records = []
    for M, N, dt in SHAPES:
        if time.time() > DEADLINE:  # HELD_OUT_DEADLINE, as held_out_bench.py reads it
            print(f"\n{M}x{N} {dt}: skipped, out of time")
            continue
        x = (torch.randn(2 if TINY else M, N, device=where) * 3).to(DTYPES[dt])
        ref = new.softmax_ref(x)
        nbytes = 2 * x.numel() * x.element_size()
        calls = {"main": lambda y: old.softmax(x, out=y), "rule": lambda y: new.softmax(x, out=y),
                 "torch": lambda y: torch.softmax(x, dim=-1), **variants(new, x)}
        ys = {name: torch.full_like(x, float("nan")) for name in calls}
        for name, call in calls.items():
            out = call(ys[name])
            if name == "torch":  # its own output
                ys[name] = out
            if name == "rule":
                lc = new.last_config
                rule = f"{lc.get('kernel')} {lc.get('num_warps', '-')}w{lc.get('num_stages', '-')}s"
        ok = {name: close(y, ref) for name, y in ys.items()}
        src, dst = (torch.empty(nbytes // 8, device=where) for _ in range(2))
        timed = {**{name: lambda call=calls[name], y=ys[name]: call(y) for name in ys if ok[name]},
                 "copy": lambda: dst.copy_(src)}
        times = {name: [] for name in timed}
        for order in (list(timed), list(reversed(timed))):
            for name in order:
                times[name].append(time_us(timed[name]))
        us = {name: sum(ts) / len(ts) for name, ts in times.items()}
        print(f"\n{x.shape[0]}x{N} {dt} ({nbytes / 1e6:.1f} MB; the rule took {rule}; main: {old.last_config.get('kernel')})")
        for name in ys:
            if not ok[name]:
                print(f"  {name:22s} WRONG")
                continue
            print(f"  {name:22s} {us[name]:8.2f} us {100 * nbytes / (us[name] * 1e3) / copy:6.1f}% of copy "
                  f"x copy {us['copy'] / us[name]:5.3f}")
        print(f"  {'copy of this traffic':22s} {us['copy']:8.2f} us {100 * nbytes / (us['copy'] * 1e3) / copy:6.1f}%")
        records.append({"shape": f"{x.shape[0]}x{N}", "dtype": dt, "bytes": nbytes, "copy_gbps": copy, "rule": rule,
                        "ok": ok, "us": us, "us_rounds": times, "gpu": machine["gpu"]})
        del x, ref, ys, src, dst
        if device.on_gpu():
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
