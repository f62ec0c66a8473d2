"""Issue 15: does the way the timer clears L2 tax the shorter kernels?

    python benchmarks/explore/l2_clear.py [--out DIR]

Observation (experiments/sweep-h200-2026-12-01/session10-reduce-once/call3): Nsight Compute reads
cross-entropy 4096x32768 bf16 at 67 us, 4.05 TB/s of DRAM traffic, where the sweep's timer reads 76 us
(83.6% of copy). The timer is triton.testing.do_bench, which clears L2 before every call by zeroing a
256 MB buffer. Hypothesis: the zeroing leaves L2 full of dirty lines (up to its 50 MB), which the timed
kernel's own reads then write back to DRAM: a fixed tax of up to ~50 MB a call, about 10% of a 16-bit
time shape's 512 MB and 2.5% of the 2 GB copy the sweep compares against. Predicted: under a clear that
leaves L2 clean (reading the 256 MB buffer instead of zeroing it), copies of 128-512 MB read as fast as
the 1 GB one, and the 16-bit kernels gain ~10% where the 1 GB copy gains ~2%.

Both clears are timed by one loop (do_bench's: per call, clear, record, run, record; the median over
calls, 3 repeats for a spread), on copies of 64 MB to 2 GB and on the templates at their 16-bit and
fp32 time shapes. Writes DIR/l2_clear.json. The loop is kgit/harness/timing.gpu_median_ms since the
harness took the reading clear; the committed record (session10-reduce-once/l2-clear/) ran this file's
own copy of it, which timed at least 5 calls where gpu_median_ms times at least 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from kgit.harness.timing import L2_CLEAR_BYTES, gpu_median_ms, spread_pct  # noqa: E402
import templates  # noqa: E402  (beside this file)



def cases(dev):
    """(name, fn, bytes moved) for copies and the templates' time shapes."""
    for mb in (64, 128, 256, 512, 1024, 2048):
        x = torch.empty(mb * 2**20, dtype=torch.uint8, device=dev).random_()
        y = torch.empty_like(x)
        yield f"copy {mb} MB", (lambda x=x, y=y: y.copy_(x)), 2 * x.numel()
    ce, sm = templates.load("cross-entropy"), templates.load("softmax")
    rms, ln = templates.load("rmsnorm"), templates.load("layernorm")
    for dt in (torch.bfloat16, torch.float32):
        name = "bf16" if dt == torch.bfloat16 else "fp32"
        for M, N in ((131072, 1024), (4096, 32768)):
            x = torch.randn(M, N, device=dev).to(dt)
            t = torch.randint(0, N, (M,), device=dev)
            loss = torch.empty(M, device=dev)
            yield f"cross-entropy {M}x{N} {name}", (lambda x=x, t=t, l=loss: ce.cross_entropy(x, t, out=l)), \
                x.numel() * x.element_size() + 12 * M
        for M, N in ((32768, 4096), (4096, 32768), (2048, 65536)):
            x = torch.randn(M, N, device=dev).to(dt)
            y = torch.empty_like(x)
            w = torch.rand(N, device=dev).to(dt) + 0.5
            b = torch.randn(N, device=dev).to(dt)
            nbytes = 2 * x.numel() * x.element_size()
            yield f"softmax {M}x{N} {name}", (lambda x=x, y=y: sm.softmax(x, out=y)), nbytes
            yield f"rmsnorm {M}x{N} {name}", (lambda x=x, w=w, y=y: rms.rmsnorm(x, w, out=y)), nbytes
            yield f"layernorm {M}x{N} {name}", (lambda x=x, w=w, b=b, y=y: ln.layernorm(x, w, b, out=y)), nbytes


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    cache = torch.empty(L2_CLEAR_BYTES // 4, dtype=torch.int32, device=dev)
    sink = torch.empty((), dtype=torch.int64, device=dev)
    clears = {"zero (do_bench)": lambda: cache.zero_(),
              "read (clean)": lambda: torch.sum(cache, dim=0, out=sink)}
    rows = []
    started = time.time()
    for name, fn, nbytes in cases(dev):
        row = {"case": name, "bytes": nbytes}
        for clear_name, clear in clears.items():
            times = [gpu_median_ms(fn, warmup_ms=25, rep_ms=100, clear=clear) for _ in range(3)]
            row[clear_name] = {"ms": statistics.median(times), "gbps": nbytes / statistics.median(times) * 1e-6,
                               "spread_pct": spread_pct(times)}
        rows.append(row)
        z, r = row["zero (do_bench)"], row["read (clean)"]
        print(f"{name}: zero {z['gbps']:.0f} GB/s ±{z['spread_pct']:.1f}%, read {r['gbps']:.0f} GB/s "
              f"±{r['spread_pct']:.1f}% ({100 * (r['gbps'] / z['gbps'] - 1):+.1f}%)", flush=True)
        (out / "l2_clear.json").write_text(json.dumps({"rows": rows, "torch": torch.__version__,
                                                       "device": torch.cuda.get_device_name()}, indent=1))
    print(f"done in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
