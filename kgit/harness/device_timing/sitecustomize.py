"""kgit's device timing, loaded into every Python process of a kernel's test (kgit.runner puts this
folder first on PYTHONPATH and names an output file in KGIT_DEVICE_TIMES).

The user's test is not changed: when the test imports triton, the launches of every kernel start
being recorded, and at the process's exit one JSON line per process is appended to the output file:

    {"pid": 123, "source": "cupti", "groups": [{"name": "_softmax_kernel", "grid": [2048, 1, 1],
      "block": [256, 1, 1], "launches": 255, "median_us": 11.2, "min_us": 10.9, "max_us": 30.1}]}

On an NVIDIA GPU the durations are the kernels' own, as CUPTI timed them on the device (read through
cupti_kernels.py; through torch's profiler on ROCm or where libcupti cannot be loaded): what a test's
perf_counter around a loop of launches adds (Python, the launch path) is not in them. In Triton's
interpreter (TRITON_INTERPRET=1) a kernel runs on the CPU within its launch call, so the launch call is
timed. kgit keeps the groups of the kernel file's own kernels (kgit.model.device_time).

This file runs inside the user's process, under any Python that has torch: it imports nothing of kgit,
and whatever goes wrong here is swallowed, so that the test runs exactly as it would without it. A
sitecustomize of the user's, further along sys.path, is still imported (after this one).
"""

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import time

_OUTPUT = os.environ.get("KGIT_DEVICE_TIMES")
_HERE = os.path.dirname(os.path.abspath(__file__))
_launches = {}  # (name, grid, block) -> [durations in us], for the interpreter's timed launches
_profiler = []  # the running torch profiler, once triton is imported on a GPU


def _start(triton_module):
    """Once triton is imported: time the interpreter's launches, or start CUPTI's kernel activity."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        from triton.runtime import interpreter

        run = interpreter.InterpretedFunction.run

        def timed_run(self, *args, grid, warmup, **kwargs):
            if warmup:
                return run(self, *args, grid=grid, warmup=warmup, **kwargs)
            started = time.perf_counter()
            try:
                return run(self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                key = (self.fn.__name__, list(grid) if isinstance(grid, tuple) else None, None)
                _launches.setdefault(json.dumps(key), []).append((time.perf_counter() - started) * 1e6)

        interpreter.InterpretedFunction.run = timed_run
        atexit.register(_write, "interpreter")
        return
    # loaded by path under a private name: the user's sys.path is left as it was
    spec = importlib.util.spec_from_file_location("_kgit_cupti_kernels", os.path.join(_HERE, "cupti_kernels.py"))
    cupti_kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cupti_kernels)
    recorder = cupti_kernels.recorder()
    if recorder is not None and recorder.start():
        atexit.register(_stop_recorder, recorder)
        return
    import torch  # ROCm (roctracer), or a CUDA build whose libcupti kgit cannot load

    if not torch.cuda.is_available():
        return
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
    profiler.start()
    _profiler.append(profiler)
    atexit.register(_stop_profiler)


def _stop_recorder(recorder):
    recorder.stop()
    for name, grid, block, duration_us in recorder.launches:
        _launches.setdefault(json.dumps((name, grid, block)), []).append(duration_us)
    _write("cupti")


def _stop_profiler():
    import tempfile

    profiler = _profiler.pop()
    profiler.stop()
    with tempfile.TemporaryDirectory() as folder:
        trace = os.path.join(folder, "trace.json")
        profiler.export_chrome_trace(trace)
        with open(trace) as f:
            events = json.load(f).get("traceEvents", [])
    for event in events:
        if event.get("cat") != "kernel" or "dur" not in event:
            continue
        args = event.get("args") or {}
        key = (event.get("name"), args.get("grid"), args.get("block"))
        _launches.setdefault(json.dumps(key), []).append(float(event["dur"]))
    _write("cupti")


def _write(source):
    groups = []
    for key, durations in _launches.items():
        name, grid, block = json.loads(key)
        ordered = sorted(durations)
        middle = len(ordered) // 2
        median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
        groups.append({"name": name, "grid": grid, "block": block, "launches": len(ordered),
                       "median_us": median, "min_us": ordered[0], "max_us": ordered[-1]})
    line = json.dumps({"pid": os.getpid(), "source": source, "groups": groups})
    with open(_OUTPUT, "a") as out:  # one line per process: a test's child processes append theirs
        out.write(line + "\n")


class _AfterTriton(importlib.abc.MetaPathFinder):
    """Lets triton import as usual, then starts the timing (never before: the test may set its
    environment, TRITON_INTERPRET or CUDA_VISIBLE_DEVICES, before it imports triton)."""

    def find_spec(self, name, path=None, target=None):
        if name != "triton":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            try:
                _start(module)
            except Exception:  # the test must run as it would without kgit
                pass

        spec.loader.exec_module = exec_module
        return spec


def _chain_users_sitecustomize():
    """Import the sitecustomize this file shadows, if there is one further along sys.path."""
    others = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if _OUTPUT:
    try:
        sys.meta_path.insert(0, _AfterTriton())
    except Exception:
        pass
_chain_users_sitecustomize()
