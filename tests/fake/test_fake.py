"""A stand-in kernel test that follows kgit's test contract; the kernel file chooses what it prints."""

import importlib
import json
import os
import signal
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The kernel file named for the folder, as kgit finds it: a copy of the folder under another name is another kernel.
kernel = importlib.import_module(os.path.basename(HERE).replace("-", "_"))

started = time.time()
mode = kernel.MODE
if os.environ.get("KGIT_FAKE_REQUIRE"):  # a judge stricter in this run only, its file unchanged
    kernel.CORRECT = kernel.CORRECT and getattr(kernel, os.environ["KGIT_FAKE_REQUIRE"], False)
if mode == "hang":
    Path(os.environ.get("KGIT_FAKE_STARTED", "/dev/null")).write_text(str(os.getpid()))
    time.sleep(600)
if mode == "edit-judge":  # a test that rewrites itself where it runs
    with open(os.path.abspath(__file__), "a") as me:
        me.write("# kinder now\n")
if mode in ("move-tag", "move-branch", "move-notes"):  # a test that moves one of kgit's refs
    import subprocess
    moves = {"move-tag": ["tag", "-f", "best/fake", "HEAD"], "move-branch": ["update-ref", "refs/heads/opt/fake", "HEAD~1"],
             "move-notes": ["notes", "--ref=refs/notes/kgit", "add", "-f", "-m", "{}", "HEAD"]}
    subprocess.run(["git", *moves[mode]], check=True, capture_output=True)
if mode == "crash":
    print("Traceback (most recent call last):\nRuntimeError: boom", file=sys.stderr)
    sys.exit(3)
if mode == "segv":
    os.kill(os.getpid(), signal.SIGSEGV)
if mode == "nojson":
    print("all good, but no JSON")
    sys.exit(0)
if mode == "malformed":
    print('{"kernel": "fake", "correctness": tru')
    sys.exit(0)

if "--profile" in sys.argv[1:] and hasattr(kernel, "PROFILED"):  # as kgit's harness prints its --profile run
    print(json.dumps({"kernel": "fake", "profile": True, "range": "kgit-profile", "shape": [8, 8], "dtype": "fp32",
                      "config": kernel.PROFILED, "status": "profiled"}))
    sys.exit(0)

result = {
    "kernel": "fake",
    "gpu": "Fake GPU",
    "correctness": kernel.CORRECT,
    "latency_us": 100.0 / kernel.METRIC if isinstance(kernel.METRIC, (int, float)) and kernel.METRIC > 0 else 1.0,
    "gbps": {"nan": float("nan"), "negative": -1.0}.get(mode, kernel.METRIC),
    "speedup": 1.0,
    "status": "pass" if kernel.CORRECT else "fail",
    "spread_pct": kernel.SPREAD,
    "pct_of_peak": kernel.METRIC / 10,
    "cpu_timing": getattr(kernel, "CPU_TIMING", False),  # it plays a GPU test wherever it runs
    # where and when it ran, for the tests of parallel tuning
    "cwd": os.getcwd(),
    "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    "argv": sys.argv[1:],
    "timing_only": os.environ.get("KGIT_TIMING_ONLY"),
    "t_start": started,
}
if hasattr(kernel, "RAN"):  # what an autotuned launch ran, as kgit's harness records it per shape
    result["shapes"] = [{"shape": [8, 8], "dtype": "fp32", "config": kernel.RAN}]
time.sleep(getattr(kernel, "SLEEP", 0.0))
result["t_end"] = time.time()
if mode == "nopeak":  # as tests written for other kernel collections print it
    result.update(gpu="NVIDIA H200")
    del result["pct_of_peak"], result["cpu_timing"]
if mode == "h200":  # a GPU test on a GPU kgit knows, without its own share of peak
    result.update(gpu="NVIDIA H200")
    del result["pct_of_peak"]
print("some progress output")
if mode == "collection":  # the awesome-kernel-skills gemm test's form: per-shape figures, none at the top
    result = {"kernel": "fake", "gpu": "Fake GPU", "correctness": kernel.CORRECT,
              "benchmarks": [{"size": f"{n}x{n}x{n}", "triton_tflops": kernel.METRIC * scale,
                              "pytorch_tflops": 700.0, "vs_pytorch": kernel.METRIC * scale / 700.0}
                             for n, scale in ((1024, 0.5), (4096, 2.0))],
              "avg_vs_pytorch": kernel.METRIC / 700.0, "status": "pass" if kernel.CORRECT else "fail"}
if mode == "timed":  # as many hand-written tests print it: a verdict and a time, nothing else
    result = {"ok": kernel.CORRECT, "time_ms": 0.1 / kernel.METRIC}
if mode in ("multiline", "collection"):  # as some existing tests print it
    print("--- JSON ---")
    print(json.dumps(result, indent=2))
else:
    print(json.dumps(result))
if not kernel.CORRECT and getattr(kernel, "EXIT_ON_WRONG", False):
    sys.exit(1)  # as the collection's tests do on a wrong result
