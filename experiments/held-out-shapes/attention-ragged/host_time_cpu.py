"""Host time of flash_attention() on the Gluon paths on this CPU (no GPU): main's file and the new one, the
kernels replaced by the JIT's binder and cache key (what the JIT does before its C launcher), the GPU's
answers (capability, SM count) faked as an H100's. Triton 3.9 (its binder's keywords). Run from the repository root:
    git show main:skills/kernels/flash-attention/flash_attention.py > /tmp/fa_main.py
    python experiments/held-out-shapes/attention-ragged/host_time_cpu.py /tmp/fa_main.py \
        skills/kernels/flash-attention/flash_attention.py"""
import importlib.util
import sys
import timeit

import torch
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.runtime.jit import create_function_from_signature, compute_cache_key

backend = make_backend(GPUTarget("cuda", 90, 32))

class Props:
    multi_processor_count = 132

torch.cuda.get_device_properties = lambda device=None: Props()
torch.cuda.get_device_capability = lambda device=None: (9, 0)

def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

class Binding:
    """Stands in for a JIT kernel: kernel[grid](*args, **kw) runs the JIT's binder and cache key only."""
    def __init__(self, kern):
        self.binder = create_function_from_signature(kern.signature, kern.params, backend)
        self.cache = {}
    def __getitem__(self, grid):
        def call(*args, **kw):
            bound, spec, opts = self.binder(*args, **kw, debug=False, instrumentation_mode="", fpsan_homomorphic_casts=False)
            compute_cache_key(self.cache, spec, opts)
        return call

for label, path in (("main", sys.argv[1]), ("new", sys.argv[2])):
    fa = load(label, path)
    fa._gluon_runs = lambda q: True
    fa._attn_fwd_persist = Binding(fa._attn_fwd_persist)
    fa._attn_fwd_ws = Binding(fa._attn_fwd_ws)
    for B, H, S, D, causal in ((8, 16, 1024, 64, True), (4, 16, 1024, 128, False)):
        q, k, v, o = (torch.empty(B, H, S, D, dtype=torch.bfloat16) for _ in range(4))
        for g in (1, 2):
            cfg = {"GLUON": g, "AUTOTUNE": 0}
            fn = lambda: fa.flash_attention(q, k, v, causal=causal, out=o, config=cfg)
            fn()
            assert fa.last_config["GLUON"] == g
            us = min(timeit.repeat(fn, number=2000, repeat=3)) / 2000 * 1e6
            print(f"{label} G{g} {B}x{H}x{S}x{D} {'causal' if causal else 'full'}: {us:.1f} us a call (before the C launcher)")
