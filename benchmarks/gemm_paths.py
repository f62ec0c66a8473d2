"""Where gemm()'s time goes at a decode-sized M (128x4096x4096), a ragged shape (3000x5000x2000) and one whose
CONFIG tiles leave its last wave a fifth full (2048x4608x3584), bf16 and fp16, against torch.matmul
(cuBLAS): experiments/gemm-h100/small-m-host/, experiments/gemm-h100/wave-fill/.

    python benchmarks/gemm_paths.py      (PROBE_CPU=1 TRITON_INTERPRET=1: tiny shapes, a check of the script)

Prints, per (shape, dtype): the path gemm's autotune took (kernel, tiles, grid, stages, warps); the host
time of a call (300 back to back); three medians (kgit's timer, the L2 cleared before each call) of gemm's default path, whose
readings grow where the host's time outlasts the L2 clear; then torch.matmul and config overrides, each
checked against an fp32 reference first (outputs poisoned with NaN). PROBE_BUDGET_S (default 100) skips
what is left after it; PROBE_SHAPES (e.g. "wave,ragged") times those shapes alone."""
import os
import sys
import time
import warnings

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from kgit.harness.timing import gpu_median_ms  # noqa: E402

G = bench.kernel_module("gemm")
CPU = os.environ.get("PROBE_CPU", "") not in ("", "0") or not torch.cuda.is_available()
DEV = "cpu" if CPU else "cuda"
T0 = time.time()
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "100"))  # skip what is left after this
warnings.simplefilter("always")

SMALL, LARGE, FILL = G.SMALL_OUTPUT_CONFIGS, G.LARGE_OUTPUT_CONFIGS, G.WAVE_FILL_CONFIGS
OVERRIDES = {  # label -> config passed as gemm(..., config=...) (skips the autotune; {} is CONFIG itself)
    "decode": {
        "CONFIG 128x256 tma-persistent": {},
        "gluon 64x128 s8 (SMALL[0])": SMALL[0],
        "tma 64x128 s8 (SMALL[0] w/o gluon)": {**SMALL[0], "GLUON": 0},
        "ptr 64x128 s5 (SMALL[1])": SMALL[1],
        "ptr 64x64 s4 (SMALL[4])": SMALL[4],
        "gluon 64x64 s8": {**SMALL[0], "BLOCK_N": 64},
        "gluon 64x64 s12": {**SMALL[0], "BLOCK_N": 64, "num_stages": 12},
    },
    "ragged": {
        "CONFIG 128x256 tma-persistent": {},
        "LARGE[0] gm4 s4 subtile": LARGE[0],
        "128x128 w8 s4 persistent": {"BLOCK_N": 128, "num_stages": 4},
        "128x256 non-persistent": {"PERSISTENT": 0},
        "128x(128+64) w8 s4 persistent (FILL[0])": FILL[0],
    },
    "wave": {  # 288 CONFIG tiles on 132 SMs: 2.18 waves run as 3; 384 of 128x192: 2.91 as 3
        "CONFIG 128x256 tma-persistent": {},
        "128x(128+64) w8 s4 persistent (FILL[0])": FILL[0],
        "128x(128+64) w8 s3 persistent": {**FILL[0], "num_stages": 3},
        "128x128 w8 s4 persistent": {"BLOCK_N": 128, "num_stages": 4},
    },
}
SHAPES = {"decode": (128, 4096, 4096), "ragged": (3000, 5000, 2000), "wave": (2048, 4608, 3584)}
DTYPES = [torch.bfloat16, torch.float16]
if os.environ.get("PROBE_SHAPES"):
    SHAPES = {name: SHAPES[name] for name in os.environ["PROBE_SHAPES"].split(",")}
if CPU:  # interpreter smoke test: tiny shapes, fp16 only (the interpreter has no bf16 arithmetic)
    SHAPES = {name: {"decode": (16, 64, 64), "ragged": (33, 70, 40), "wave": (40, 96, 24)}[name] for name in SHAPES}
    DTYPES = [torch.float16]
    OVERRIDES = {k: {"CONFIG 128x256 tma-persistent": {}} for k in OVERRIDES}


def path_of(cfg, a, b, c):
    M, K = a.shape
    N = b.shape[1]
    BM, BN = cfg["BLOCK_M"], cfg["BLOCK_N"] + cfg["BLOCK_N2"]
    tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    if cfg.get("GLUON"):
        kern, grid = "gluon-ws", tiles
    elif cfg["USE_TMA"] and G._tma_ok(a, b, c):
        kern = "tma-" + ("persistent" if cfg["PERSISTENT"] else "tiles")
        grid = G.persistent_programs(tiles, G._num_sms(a.device)) if cfg["PERSISTENT"] else tiles
    else:
        kern, grid = "ptr", tiles
    return (f"{kern} {BM}x{BN}x{cfg['BLOCK_K']} w{cfg['num_warps']} s{cfg['num_stages']} GM{cfg['GROUP_M']} "
            f"sub{cfg['EPILOGUE_SUBTILE']} grid={grid} tiles={tiles}")


def check(fn, a, b, ref, out):
    out.fill_(float("nan"))
    fn(a, b, out)
    if DEV == "cuda":
        torch.cuda.synchronize()
    err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    return err < 1e-2, err  # one rounding of the output (bf16: 2^-8) plus fp32 sum-order noise


def time_ms(fn):
    """kgit's timer (a median over calls, the L2 cleared before each); one wall-clock call on a CPU."""
    if CPU:
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    return gpu_median_ms(fn, warmup_ms=25, rep_ms=100)


def host_us(fn, n=300 if not CPU else 3):
    """Wall time a call over n back-to-back calls: the host's cost where it exceeds the kernel's."""
    fn()
    if not CPU:
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    h = (time.perf_counter() - t) / n * 1e6
    if not CPU:
        torch.cuda.synchronize()
    return h


def main():
    print(f"torch {torch.__version__} triton {triton.__version__} device "
          f"{torch.cuda.get_device_name() if not CPU else 'cpu'} SMs {G._num_sms(torch.device(DEV))} "
          f"gluon {'yes' if G.gluon is not None else 'no'}", flush=True)
    for name, (M, N, K) in SHAPES.items():
        for dt in DTYPES:
            if time.time() - T0 > BUDGET_S:
                print(f"-- budget spent, skipping {name} {dt}")
                continue
            torch.manual_seed(M * 7 + N * 5 + K * 3 + (dt == torch.float16))
            a = torch.randn(M, K, device=DEV).to(dt)  # fresh random inputs per (shape, dtype)
            b = torch.randn(K, N, device=DEV).to(dt)
            ref = G.reference(a, b)
            out = torch.empty(M, N, device=DEV, dtype=dt)
            tflop = 2 * M * N * K / 1e12
            print(f"== {name} M={M} N={N} K={K} {str(dt)[6:]}", flush=True)
            ok_t, err_t = check(lambda x, y, o: torch.matmul(x, y, out=o), a, b, ref, out)
            ok_g, err_g = check(lambda x, y, o: G.gemm(x, y, out=o), a, b, ref, out)  # autotunes here
            print(f"   autotune picked: {path_of(G.last_config, a, b, out)}  GLUON_FAILED={G._GLUON_FAILED}")
            tuned = G._TUNED.get((tuple(a.shape), N, dt))
            if tuned is not None and tuned.get("GLUON") and not G.last_config.get("GLUON"):
                print("   !! the tuned config asked for GLUON but the launch fell back (see GLUON_FAILED)")
            print(f"   check: torch relerr {err_t:.2e} ok={ok_t}; gemm relerr {err_g:.2e} ok={ok_g}")
            ms_t = time_ms(lambda: torch.matmul(a, b, out=out))
            rows = [("torch.matmul (cuBLAS)", ms_t)]
            if ok_g:  # three readings: the host's time makes them bimodal where it outlasts the L2 clear
                reads = [time_ms(lambda: G.gemm(a, b, out=out)) for _ in range(3)]
                print(f"   gemm default: host {host_us(lambda: G.gemm(a, b, out=out)):.1f} us/call, "
                      f"3 readings {[round(r * 1e3, 1) for r in reads]} us")
                rows.append(("gemm default (autotuned)", sorted(reads)[1]))
            for label, cfg in OVERRIDES[name].items():
                if time.time() - T0 > BUDGET_S:
                    print("   -- budget spent, overrides skipped")
                    break
                try:
                    ok, err = check(lambda x, y, o: G.gemm(x, y, out=o, config=cfg), a, b, ref, out)
                except Exception as e:  # a config that does not compile or fit
                    print(f"   {label}: FAILED {type(e).__name__}: {str(e).strip().splitlines()[-1][:100]}")
                    continue
                ran = path_of(G.last_config, a, b, out)
                if not ok:
                    print(f"   {label}: WRONG relerr {err:.2e} ({ran})")
                    continue
                rows.append((f"{label} [{ran}]", time_ms(lambda: G.gemm(a, b, out=out, config=cfg))))
            for label, ms in rows:
                print(f"   {ms * 1e3:9.1f} us  {tflop / ms * 1e3:7.1f} TFLOP/s  {ms_t / ms:5.2f}x cuBLAS  {label}",
                      flush=True)
    print(f"done in {time.time() - T0:.0f} s")


if __name__ == "__main__":
    main()
