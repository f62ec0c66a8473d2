"""Device probe for sm62: softmax's shared-memory team with the rows past each team's first two dealt by progress
from a launch counter (DEAL, see DEAL_ROWS in softmax.py), against main's kernel (rows dealt statically).

    cd <worktree> && git show main:skills/kernels/softmax/softmax.py > .stage/old_softmax.py
    PYTHONPATH=$PWD python .stage/probe_sm62.py OUT [SECONDS]     (one H100, about 2.5 min with compiles)
    PYTHONPATH=$PWD python .stage/probe_sm62.py --compile-only    (CPU: main's and the branch's team for sm_90)

For each shape: main's softmax (.stage/old_softmax.py), the branch with its deal forced static ("static": the
branch's source with `deal = M > 2 * teams` replaced by False, so the restructured loop and the rest of the branch
are timed apart from the deal), the branch, torch.softmax and a torch copy of the same bytes; every output checked
against float64 first (NaN-poisoned, three launches in a row, so that the row counter and words each launch leaves
behind are used twice), then timed by kgit.harness.timing.gpu_median_ms (L2 cleared) in two rounds of opposite
order. Prints each one's us, % of the copy bandwidth (kgit.harness.device), the rounds (the spread), static/main and
branch/main with the predictions beside them (.stage/sm62_notes.md says where they come from). Writes probe_sm62.txt
and .jsonl under OUT line by line; shapes left when SECONDS (default 150) have passed are skipped and said so.
"""
import importlib.util
import itertools
import json
import os
import statistics
import sys
import time
import types

import torch
import triton

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
BRANCH = os.path.join(ROOT, "skills", "kernels", "softmax", "softmax.py")


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _static_branch():
    """The branch's module with the deal forced off (every team's rows team, team + n_teams, ... as on main)."""
    src = open(BRANCH).read()
    assert src.count("deal = M > 2 * teams") == 1, "the branch's deal rule moved: update the probe"
    mod = types.ModuleType("softmax_static")
    mod.__file__ = BRANCH  # Triton's JIT reads each kernel's source from its file: the kernels are the branch's
    exec(compile(src.replace("deal = M > 2 * teams", "deal = False"), BRANCH, "exec"), mod.__dict__)
    return mod


new = _load(BRANCH, "softmax_branch")
B, H = torch.bfloat16, torch.float16
# (M, N, dtype, predicted branch / main, why). The model (.stage/sm62_model.py, fitted to sm60's diagnostic) puts
# the gain in the launch's tail: a team that is slow takes fewer rows, so the last exit comes ~r/2 + lookahead x
# the teams' rate spread after the mean exit instead of the static deal's 5-11 us. static / main: 1.00 everywhere
# (the same rows; one more compare a row).
SHAPES = [  # the team's shapes first; a team shape of many rows a team, then the two that are not the team, last
    (512, 50257, B, 0.965, "team, rows cut, P=7, 94 teams of 5-6 rows: 41.9 us, exits spread over ~11 us"),
    (512, 50257, H, 0.965, "fp16, team, rows cut"),
    (512, 128256, B, 0.97, "team, whole rows, P=16, 41 teams of 12-13 rows: 92.0 us"),
    (2048, 50257, B, 0.955, "team, rows cut, 94 teams of 21-22 rows: 151.9 us, exits spread over ~13 us"),
    (512, 262144, B, 0.985, "team, whole rows, P=32, 20 teams of 25-26 rows: 186 us, no diagnostic there"),
    (512, 32000, B, 1.00, "pipelined loop (rows of 16-element groups), not the team: must not change"),
    (4096, 4096, B, 1.00, "grouped rows, not the team: must not change"),
    (4096, 65536, B, 0.985, "team, whole rows, P=8, 82 teams of 49-50 rows: the deal's cost a row, if any"),
]


def compile_only():
    """Compile main's and the branch's team for sm_90 as the launcher launches them (rows cut, y cut like x or not;
    whole rows at P = 4, 8, 16, 32; fp16; the branch with and without its deal); print registers, stack and shared
    memory (no GPU needed). Nonzero exit on a failure, a stack, or registers over the cap."""
    import re
    import subprocess
    import tempfile
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import native_specialize_impl
    old = _load(os.path.join(ROOT, ".stage", "old_softmax.py"), "softmax_main")
    st = new.SMEM_TEAM
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    ok = True
    for (N, dtype, cut, y_cut), (which, fn, deal) in itertools.product(
            ((50257, B, True, True), (50257, B, True, False), (50257, H, True, True), (65537, H, True, False),
             (128256, B, False, False), (32000, B, False, False), (65536, B, False, False),
             (262144, B, False, False)),
            (("main", old._softmax_smem_team, None), ("branch, dealt", new._softmax_smem_team, True),
             ("branch, static", new._softmax_smem_team, False))):
        vec = 8
        P = new._team_parts(N, st["CHUNK"] * st["NCH"], vec if cut else 1)
        x = torch.empty(4, N, dtype=dtype)
        values = dict(x_ptr=x, y_ptr=torch.empty_like(x), words=torch.empty(64, dtype=torch.int64),
                      exits=torch.empty(64, dtype=torch.int32), deal=torch.empty(1, dtype=torch.int32), M=512, N=N,
                      stride_x=N, stride_y=N)
        consts = dict(CHUNK=st["CHUNK"], NCH=st["NCH"], P=P, P_POW2=triton.next_power_of_2(P),
                      SPIN=new.MAX_SPIN, CUT=cut, Y_CUT=y_cut, VEC=vec)
        if deal is not None:
            consts["DEAL"] = deal
        signature, attrs = {}, {}
        for i, name in enumerate(fn.arg_names):
            if name in consts:
                signature[name] = "constexpr"
            elif name in ("off_x", "off_y"):  # not specialized (do_not_specialize)
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
        ok &= regs <= st["maxnreg"] and (stack == 0 or which == "main")
    print(f"triton {triton.__version__}: " + ("every branch kernel within its registers, no stack" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    out_dir = sys.argv[1]
    deadline = time.time() + (float(sys.argv[2]) if len(sys.argv) > 2 else 150.0)
    t_start = time.time()
    os.makedirs(out_dir, exist_ok=True)
    txt = open(os.path.join(out_dir, "probe_sm62.txt"), "w")
    jsonl = open(os.path.join(out_dir, "probe_sm62.jsonl"), "w")

    def say(line):
        print(line, flush=True)
        txt.write(line + "\n")
        txt.flush()

    old = _load(os.path.join(ROOT, ".stage", "old_softmax.py"), "softmax_main")
    static = _static_branch()
    from kgit.harness import device
    from kgit.harness.timing import _l2_clear, gpu_median_ms
    copy_gbps = device.measured_copy_gbps(refresh=True)
    say(f"sm62 on {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; "
        f"copy {copy_gbps:.0f} GB/s; % below are of that")
    clear = _l2_clear()
    wrong = []
    for M, N, dtype, predicted, why in SHAPES:
        label = f"{M}x{N} {str(dtype).replace('torch.', '')}"
        if time.time() > deadline:
            say(f"{label}: skipped, out of time")
            continue
        x = (torch.randn(M, N, device="cuda") * 3).to(dtype)
        x[0, N - 1] = x[0].float().max() + 1  # the max at the row's last element (the cut edge, P - 1's)
        x[1, 0] = x[1].float().max() + 1
        x[M - 1, N // 2] = x[M - 1].float().max() + 1  # the last row: a dealt one, the launch's last claim's
        y = torch.empty_like(x)
        ref = new.softmax_ref(x)
        calls = {"main": lambda: old.softmax(x, out=y), "static": lambda: static.softmax(x, out=y),
                 "branch": lambda: new.softmax(x, out=y), "torch": lambda: torch.softmax(x, dim=-1)}
        nbytes = 2 * x.numel() * x.element_size()
        src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        good, paths = {}, {}
        atol = 2.0 ** -24 if dtype == H else 2e-38  # fp16's subnormal step: its smallest outputs round to it
        for name, fn in calls.items():
            worst = 0.0
            for _ in range(3):  # a row counter or word left wrong by one launch shows in the next
                y.fill_(float("nan"))
                got = fn()
                got = y if name != "torch" else got
                torch.cuda.synchronize()
                err = (got.double() - ref).abs() / (1e-2 * ref.abs() + atol)
                worst = max(worst, float(torch.nan_to_num(err, nan=float("inf")).max()))
            good[name] = worst <= 1
            if not good[name]:
                wrong.append(f"{label} {name}")
        for name, mod in (("main", old), ("static", static), ("branch", new)):
            mod.last_config.clear()
            mod.softmax(x, out=y)
            paths[name] = dict(mod.last_config)
        calls["copy of bytes"] = lambda: dst.copy_(src)
        times = {name: [] for name in calls}
        for order in (list(calls), list(reversed(calls))):
            for name in order:
                times[name].append(gpu_median_ms(calls[name], 10, 40, clear) * 1e3)
        us = {n: statistics.fmean(t) for n, t in times.items()}
        ratio, ratio_static = us["branch"] / us["main"], us["static"] / us["main"]
        say(f"{label} ({why}; branch path {paths['branch']}): {nbytes / 1e6:.1f} MB, "
            f"{nbytes / copy_gbps / 1e3:.2f} us at copy's pace")
        say("    " + "  ".join(f"{n} {us[n]:.2f}us {100 * nbytes / (us[n] * 1e3) / copy_gbps:.1f}% "
                               f"(rounds {' / '.join(f'{v:.2f}' for v in times[n])})" for n in calls)
            + f"\n    static/main {ratio_static:.3f} (predicted 1.000)  branch/main {ratio:.3f} (predicted "
              f"{predicted:.3f}; saved {us['main'] - us['branch']:.2f} us)"
            + ("" if all(good.values()) else f"  WRONG: {[n for n, g in good.items() if not g]}"))
        jsonl.write(json.dumps({"M": M, "N": N, "dtype": str(dtype), "why": why, "paths": paths, "us": us,
                                "rounds": times, "bytes": nbytes, "copy_gbps": copy_gbps, "good": good,
                                "predicted": predicted, "ratio": ratio, "ratio_static": ratio_static}) + "\n")
        jsonl.flush()
        del x, y, ref, src, dst
        torch.cuda.empty_cache()
    say(f"done in {time.time() - t_start:.0f} s; " + ("WRONG: " + ", ".join(wrong) if wrong else "every output right"))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(compile_only() if sys.argv[1:2] == ["--compile-only"] else main())
