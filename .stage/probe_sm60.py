"""Device probe for sm60, step 2: softmax's shared-memory team with the first row written before the second is
reduced (ROW0_FIRST) and no reduce of a row past the last, against main's kernel.

    cd <worktree> && git show main:skills/kernels/softmax/softmax.py > .stage/old_softmax.py
    PYTHONPATH=$PWD python .stage/probe_sm60.py OUT [SECONDS]     (one H100, about 3 min with compiles)
    PYTHONPATH=$PWD python .stage/probe_sm60.py --compile-only    (CPU: the branch's and the tail-only team for sm_90)

For each shape: main's softmax (.stage/old_softmax.py), main with the tail change alone
(.stage/tail_only_softmax.py, committed: it tells the two changes' shares apart), the branch's, torch.softmax and a
torch copy of the same bytes; every output checked against float64 first (NaN-poisoned, twice, so that the words
the kernels leave behind are used once), then timed by kgit.harness.timing.gpu_median_ms (L2 cleared) in two
rounds of opposite order. Prints each one's us, % of the copy bandwidth (kgit.harness.device), the rounds (the
spread), the tail-only and the branch's time over main's with the predictions beside them. Writes probe_sm60.txt
and .jsonl under OUT line by line; shapes left when SECONDS (default 170) have passed are skipped and said so.
"""
import importlib.util
import itertools
import json
import os
import statistics
import sys
import time

import torch
import triton

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


new = _load(os.path.join(ROOT, "skills", "kernels", "softmax", "softmax.py"), "softmax_branch")
tail = _load(os.path.join(ROOT, ".stage", "tail_only_softmax.py"), "softmax_tail_only")
B, H = torch.bfloat16, torch.float16
# (M, N, dtype, predicted tail-only / main, predicted branch / main, why). Both changes are fixed terms of a
# launch (.stage/sm60_notes.md, step 2): no reduce of a row past the last takes ~2 us (the median of that reduce
# in the diagnostic) off each program's last row, about 1.5 us off the launch's tail; ROW0_FIRST issues the third
# row's reads about one reduce (~2 us) earlier, about 1 us off the ramp's dip. So ~2.5 us a launch of the team.
SHAPES = [  # the team's shapes first: the two that cannot change (not the team) last, where a deadline cuts
    (512, 50257, B, 0.965, 0.94, "team, rows cut: 43.4 us, ramp 1.9 and tail 6.2 us over the copy's pace"),
    (512, 128256, B, 0.985, 0.975, "team, whole rows, P=16: 93.9 us, the same ~2.5 us on a longer launch"),
    (2048, 50257, B, 0.99, 0.985, "team, rows cut, 22 rows a team: 153 us"),
    (512, 50257, H, 0.965, 0.94, "fp16, team, rows cut"),
    (512, 262144, B, 0.995, 0.99, "team, whole rows, P=32, 25-26 rows a team: must not lose"),
    (512, 32000, B, 1.00, 1.00, "pipelined loop (rows of 16-element groups), not the team: must not change"),
    (4096, 4096, B, 1.00, 1.00, "grouped rows, not the team: must not change"),
]


def compile_only():
    """Compile the branch's team for sm_90 as the launcher launches it (rows cut, y cut like x or not; whole rows at
    P = 4, 16, 32; fp16); print registers, stack and shared memory (no GPU needed). Nonzero exit on a failure or
    registers over the cap."""
    import re
    import subprocess
    import tempfile
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import native_specialize_impl
    st = new.SMEM_TEAM
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    ok = True
    for (N, dtype, cut, y_cut), (which, fn) in itertools.product(
            ((50257, B, True, True), (50257, B, True, False), (50257, H, True, True), (128256, B, False, False),
             (32000, B, False, False), (262144, B, False, False)),
            (("branch", new._softmax_smem_team), ("tail only", tail._softmax_smem_team))):
        vec = 8
        P = new._team_parts(N, st["CHUNK"] * st["NCH"], vec if cut else 1)
        x = torch.empty(4, N, dtype=dtype)
        values = dict(x_ptr=x, y_ptr=torch.empty_like(x), words=torch.empty(64, dtype=torch.int64),
                      exits=torch.empty(64, dtype=torch.int32), M=512, N=N, stride_x=N, stride_y=N, off_x=0, off_y=0)
        consts = dict(CHUNK=st["CHUNK"], NCH=st["NCH"], P=P, P_POW2=triton.next_power_of_2(P), SPIN=new.MAX_SPIN,
                      CUT=cut, Y_CUT=y_cut, VEC=vec)
        signature, attrs = {}, {}
        for i, name in enumerate(fn.arg_names):
            if name in consts:
                signature[name] = "constexpr"
            elif name in ("off_x", "off_y"):
                signature[name] = "i32"
            else:
                signature[name], s = native_specialize_impl(BaseBackend, values[name], False, True, True)
                if signature[name] == "constexpr":
                    consts[name] = s
                elif s == "D":
                    attrs[(i,)] = [["tt.divisibility", 16]]
        label = f"{which}: N={N} {dtype} cut={cut} y_cut={y_cut} P={P}"
        try:
            k = triton.compile(GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                               target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": st["num_warps"], "maxnreg": st["maxnreg"]})
        except Exception as e:
            print(f"{label}: does not compile: {type(e).__name__}: {e}", flush=True)
            ok = False
            continue
        with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
            fh.write(k.asm["cubin"])
            fh.flush()
            usage = subprocess.run([cuobjdump, "-res-usage", fh.name], capture_output=True, text=True,
                                   check=True).stdout
        regs, stack = (int(re.search(rf"{w}:(\d+)", usage).group(1)) for w in ("REG", "STACK"))
        print(f"{label}: {regs} registers, {stack} bytes of stack, {k.metadata.shared} bytes of shared memory",
              flush=True)
        ok &= regs <= st["maxnreg"]
    return 0 if ok else 1


def main():
    out_dir = sys.argv[1]
    deadline = time.time() + (float(sys.argv[2]) if len(sys.argv) > 2 else 170.0)
    t_start = time.time()
    os.makedirs(out_dir, exist_ok=True)
    txt = open(os.path.join(out_dir, "probe_sm60.txt"), "w")
    jsonl = open(os.path.join(out_dir, "probe_sm60.jsonl"), "w")

    def say(line):
        print(line, flush=True)
        txt.write(line + "\n")
        txt.flush()

    old = _load(os.path.join(ROOT, ".stage", "old_softmax.py"), "softmax_main")
    from kgit.harness import device
    from kgit.harness.timing import _l2_clear, gpu_median_ms
    copy_gbps = device.measured_copy_gbps(refresh=True)
    say(f"sm60 step 2 on {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; "
        f"copy {copy_gbps:.0f} GB/s; % below are of that")
    clear = _l2_clear()
    wrong = []
    for M, N, dtype, predicted_tail, predicted, why in SHAPES:
        label = f"{M}x{N} {str(dtype).replace('torch.', '')}"
        if time.time() > deadline:
            say(f"{label}: skipped, out of time")
            continue
        x = (torch.randn(M, N, device="cuda") * 3).to(dtype)
        x[0, N - 1] = x[0].float().max() + 1  # the max at the row's last element (the cut edge, P - 1's)
        x[1, 0] = x[1].float().max() + 1
        x[M - 1, N // 2] = x[M - 1].float().max() + 1  # the last row: the one whose reduce ahead is now skipped
        y = torch.empty_like(x)
        ref = new.softmax_ref(x)
        calls = {"main": lambda: old.softmax(x, out=y), "tail only": lambda: tail.softmax(x, out=y),
                 "branch": lambda: new.softmax(x, out=y), "torch": lambda: torch.softmax(x, dim=-1)}
        nbytes = 2 * x.numel() * x.element_size()
        src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        good, paths = {}, {}
        atol = 2.0 ** -24 if dtype == H else 2e-38  # fp16's subnormal step: its smallest outputs round to it
        for name, fn in calls.items():
            worst = 0.0
            for _ in range(2):
                y.fill_(float("nan"))
                got = fn()
                got = y if name != "torch" else got
                torch.cuda.synchronize()
                err = (got.double() - ref).abs() / (1e-2 * ref.abs() + atol)
                worst = max(worst, float(torch.nan_to_num(err, nan=float("inf")).max()))
            good[name] = worst <= 1
            if not good[name]:
                wrong.append(f"{label} {name}")
        for name, mod in (("main", old), ("tail only", tail), ("branch", new)):
            mod.last_config.clear()
            mod.softmax(x, out=y)
            paths[name] = dict(mod.last_config).get("kernel")
        calls["copy of bytes"] = lambda: dst.copy_(src)
        times = {name: [] for name in calls}
        for order in (list(calls), list(reversed(calls))):
            for name in order:
                times[name].append(gpu_median_ms(calls[name], 10, 40, clear) * 1e3)
        us = {n: statistics.fmean(t) for n, t in times.items()}
        ratio, ratio_tail = us["branch"] / us["main"], us["tail only"] / us["main"]
        say(f"{label} ({why}; kernels {paths}): {nbytes / 1e6:.1f} MB, {nbytes / copy_gbps / 1e3:.2f} us at copy's pace")
        say("    " + "  ".join(f"{n} {us[n]:.2f}us {100 * nbytes / (us[n] * 1e3) / copy_gbps:.1f}% "
                               f"(rounds {' / '.join(f'{v:.2f}' for v in times[n])})" for n in calls)
            + f"\n    tail only/main {ratio_tail:.3f} (predicted {predicted_tail:.3f}; saved "
              f"{us['main'] - us['tail only']:.2f} us)  branch/main {ratio:.3f} (predicted {predicted:.3f}; saved "
              f"{us['main'] - us['branch']:.2f} us)"
            + ("" if all(good.values()) else f"  WRONG: {[n for n, g in good.items() if not g]}"))
        jsonl.write(json.dumps({"M": M, "N": N, "dtype": str(dtype), "why": why, "paths": paths, "us": us,
                                "rounds": times, "bytes": nbytes, "copy_gbps": copy_gbps, "good": good,
                                "predicted": predicted, "ratio": ratio, "predicted_tail": predicted_tail,
                                "ratio_tail": ratio_tail}) + "\n")
        jsonl.flush()
        del x, y, ref, src, dst
        torch.cuda.empty_cache()
    say(f"done in {time.time() - t_start:.0f} s; " + ("WRONG: " + ", ".join(wrong) if wrong else "every output right"))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(compile_only() if sys.argv[1:2] == ["--compile-only"] else main())
