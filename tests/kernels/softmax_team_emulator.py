"""A CPU emulator of softmax's shared-memory team (_softmax_smem_team, Gluon): the kernel's own Python body and its
helpers' (GluonJITFunction.fn) run over mocks of the Gluon language, one thread a program, so that the programs
of a team exchange their partials through the words as on the GPU (a sibling's gather spins until the others have
published). Gluon has no interpreter (TRITON_INTERPRET does not run it); this is how the team's order of copies,
reduces, exchanges and writes is tested without a GPU.

What it checks, beyond the output against float64:
- a cp.async copy fills its shared memory with NaN when issued and lands only when cp.wait_group retires its
  commit group, so a chunk read before its copies were waited for, or refilled before its last read, reads NaN;
  lanes a copy masks off stay NaN (the GPU zero-fills them; the kernel must not use them);
- a load or store outside its tensor's storage, where not masked off, raises;
- gl.multiple_of's hint holds;
- a gather that spins out (a partial never published) gives the launch up as wrong.
Programs are whole blocks here: one Python thread runs a program's block-wide tensor operations in order, so
cta_barrier has nothing to do."""
import threading
import time
import types

import torch

SPIN_SLEEP_S = 1e-4  # each volatile load yields this long, so that a spinning gather lets its siblings run
SPIN = 20000  # about 2 s of spinning, then the kernel's gather gives up (a wrong output, as on the GPU)


def _raw(v):
    return v.t if isinstance(v, V) else v


class V:
    """A Gluon tensor of one program: a torch tensor, scalars as 0-d ones."""

    def __init__(self, t):
        self.t = t

    def to(self, dtype, bitcast=False):
        return V(self.t.view(dtype) if bitcast else self.t.to(dtype))

    def __bool__(self):
        return bool(self.t)

    def __index__(self):
        return int(self.t)

    def __int__(self):
        return int(self.t)

    def __neg__(self):
        return V(-self.t)


def _binary(name):
    def op(self, other):
        return V(getattr(self.t, name)(_raw(other)))
    return op


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "and", "or", "xor", "rshift", "lshift",
              "lt", "le", "gt", "ge", "eq", "ne"):
    for _dunder in (f"__{_name}__", f"__r{_name}__"):
        if hasattr(torch.Tensor, _dunder):
            setattr(V, _dunder, _binary(_dunder))


class _DType:
    def __init__(self, element_ty):
        self.element_ty = element_ty


class Ptr:
    """A pointer, or a tensor of them: a flat view of a tensor's storage and element offsets into it."""

    def __init__(self, flat, off=0):
        self.flat, self.off = flat, off
        self.dtype = _DType(flat.dtype)

    def __add__(self, n):
        return Ptr(self.flat, self.off + _raw(n))

    __radd__ = __add__


def pointer(t):
    """A Ptr at t's first element over the rest of t's storage (as a kernel argument sees it)."""
    n = t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()
    return Ptr(t.as_strided((n,), (1,), t.storage_offset()))


class Smem:
    def __init__(self, t):
        self.t = t

    def index(self, i):
        return Smem(self.t[i])

    def slice(self, start, size):
        return Smem(self.t[start:start + size])

    def load(self, layout=None):
        return V(self.t.clone())


class TeamEmulator:
    def __init__(self, module):
        self.m = module
        self.lock = threading.Lock()  # one memory operation at a time: loads, stores and atomics are whole
        self.local = threading.local()  # the running program's id and its cp.async commit groups
        self.ns = dict(module.__dict__)
        self.ns.update(gl=self._gl(), cp=self._cp(), copy_to_shared=self._copy_to_shared,
                       cta_barrier=lambda: None, LOG2E=float(module.LOG2E.value), UNSTAMPED=int(module.UNSTAMPED.value))
        for name, value in module.__dict__.items():  # every Gluon function, its body over these mocks
            fn = getattr(value, "fn", None)
            if isinstance(fn, types.FunctionType) and type(value).__name__.startswith("Gluon"):
                self.ns[name] = types.FunctionType(fn.__code__, self.ns, name, fn.__defaults__, fn.__closure__)

    # --- memory ------------------------------------------------------------------------------------------------
    def _lanes(self, ptr, mask):
        off = torch.as_tensor(_raw(ptr.off), dtype=torch.int64)
        on = torch.ones_like(off, dtype=torch.bool) if mask is None else torch.as_tensor(_raw(mask)).expand(off.shape)
        n = ptr.flat.numel()
        if ((off[on] < 0) | (off[on] >= n)).any():
            raise IndexError(f"an access outside the tensor's storage: offsets {off[on].min()}..{off[on].max()} of {n}")
        return off.clamp(0, n - 1), on

    def _load(self, ptr, mask=None, other=None, volatile=False, **kw):
        if volatile:
            time.sleep(SPIN_SLEEP_S)
        with self.lock:
            off, on = self._lanes(ptr, mask)
            v = ptr.flat[off].clone()
        if other is not None:
            v = torch.where(on, v, torch.as_tensor(other, dtype=v.dtype))
        return V(v)

    def _store(self, ptr, value, mask=None, **kw):
        with self.lock:
            off, on = self._lanes(ptr, mask)
            value = torch.as_tensor(_raw(value)).to(ptr.flat.dtype).expand(off.shape)
            ptr.flat[off[on]] = value[on]

    def _atomic(self, ptr, value, mask=None, add=False):
        with self.lock:
            off, on = self._lanes(ptr, mask)
            old = ptr.flat[off].clone()
            value = torch.as_tensor(_raw(value)).to(ptr.flat.dtype).expand(off.shape)
            ptr.flat[off[on]] = (old + value)[on] if add else value[on]
        return V(old)

    # --- cp.async ------------------------------------------------------------------------------------------------
    def _copy_to_shared(self, smem, ptr, mask=None):
        with self.lock:
            off, on = self._lanes(ptr, mask)
            values = torch.where(on, ptr.flat[off], torch.tensor(float("nan"), dtype=ptr.flat.dtype))
        smem.t.fill_(float("nan"))  # in flux until its group is waited for
        self.local.open.append((smem.t, values))

    def _cp(self):
        local = self.local

        def commit_group():
            local.groups.append(local.open)
            local.open = []

        def wait_group(n):
            while len(local.groups) > n:
                for dst, values in local.groups.pop(0):
                    dst.copy_(values)
        return types.SimpleNamespace(commit_group=commit_group, wait_group=wait_group)

    # --- the language --------------------------------------------------------------------------------------------
    def _gl(self):
        em = self

        def multiple_of(x, v):
            assert int(torch.as_tensor(_raw(x)) % v) == 0, f"multiple_of({int(_raw(x))}, {v}) does not hold"
            return x

        def reduce(op):
            return lambda x, axis=0: V(op(_raw(x)))

        def binary(op):
            return lambda a, b: V(op(torch.as_tensor(_raw(a)), torch.as_tensor(_raw(b))))

        return types.SimpleNamespace(
            float32=torch.float32, int32=torch.int32, int64=torch.int64,
            BlockedLayout=lambda *a, **k: None, SwizzledSharedLayout=lambda *a, **k: None,
            num_warps=lambda: 4, static_range=range,
            program_id=lambda axis: V(torch.tensor(em.local.pid, dtype=torch.int32)),
            num_programs=lambda axis: V(torch.tensor(em.grid, dtype=torch.int32)),
            arange=lambda start, end, layout=None: V(torch.arange(start, end, dtype=torch.int32)),
            full=lambda shape, value, dtype, layout=None: V(torch.full(shape, value, dtype=dtype)),
            zeros=lambda shape, dtype, layout=None: V(torch.zeros(shape, dtype=dtype)),
            allocate_shared_memory=lambda dtype, shape, layout: Smem(torch.full(shape, float("nan"), dtype=dtype)),
            max=reduce(torch.amax), min=reduce(torch.amin), sum=reduce(torch.sum),
            maximum=binary(torch.maximum), minimum=binary(torch.minimum),
            where=lambda c, a, b: V(torch.where(_raw(c), _raw(a), _raw(b))),
            exp2=lambda x: V(torch.exp2(_raw(x))), log2=lambda x: V(torch.log2(_raw(x))),
            multiple_of=multiple_of, load=em._load, store=em._store,
            atomic_xchg=lambda ptr, value, mask=None, sem=None: em._atomic(ptr, value, mask),
            atomic_add=lambda ptr, value, mask=None, sem=None: em._atomic(ptr, value, mask, add=True),
        )

    # --- a launch ------------------------------------------------------------------------------------------------
    def launch(self, grid, args, consts):
        """Run _softmax_smem_team's `grid` programs at once on these arguments (tensors as the launcher passes
        them) and constexprs; raise what any program raised."""
        self.grid = grid
        kernel = self.ns["_softmax_smem_team"]
        args = [pointer(a) if isinstance(a, torch.Tensor) else a for a in args]
        errors = []

        def program(pid):
            self.local.pid, self.local.groups, self.local.open = pid, [], []
            try:
                kernel(*args, **consts)
            except Exception as e:  # reported by the launch
                errors.append(e)

        threads = [threading.Thread(target=program, args=(pid,)) for pid in range(grid)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def softmax(self, x2, y2, teams, chunk, nch, cut, words=None, exits=None):
        """y2 = softmax(x2) by the team on `teams` teams of parts of nch chunks of `chunk` elements, as
        _launch_smem_team launches it (cut: on rows cut at 16-byte boundaries); the words and exit counters
        given (to launch again on what a launch left), else fresh ones."""
        m = self.m
        M, N = x2.shape
        vec = 16 // x2.element_size()
        P = m._team_parts(N, chunk * nch, vec if cut else 1)
        if words is None:
            words = torch.full((8 * teams * P,), int(m.UNSTAMPED.value), dtype=torch.int64)
            exits = torch.zeros(teams * P, dtype=torch.int32)
        x_arg, off_x, y_arg, off_y, y_cut = m._cut_args(x2, y2) if cut else (x2, 0, y2, 0, False)
        self.launch(teams * P, (x_arg, y_arg, words, exits, M, N, x2.stride(0), y2.stride(0), off_x, off_y),
                    dict(CHUNK=chunk, NCH=nch, P=P, P_POW2=1 << (P - 1).bit_length(), SPIN=SPIN, CUT=cut,
                         Y_CUT=y_cut, VEC=vec))
        return words, exits
