"""A CPU emulator of the flash-attention template's persistent Gluon kernel (_attn_fwd_persist), of the gemm
template's gemm_gluon_kernel (Emulator.gemm) and of the fused-moe template's moe_gemm_gluon_kernel (Emulator.moe_gemm):
the kernel's own
partition functions (their Python bodies, GluonJITFunction.fn) run in threads, one a partition, over mocks of
Gluon's language: shared memory, mbarriers with their phases and transaction bytes, TMA copies that land on an
engine of their own in a random order after random delays, and asynchronous wgmma whose operands are read when
issued and retired by warpgroup_mma_wait. Gluon has no interpreter (TRITON_INTERPRET does not run it), so this
is how the partitions' agreement on tiles, Q slots, K/V stages and barrier phases is tested without a GPU.

What it checks, beyond the output against torch's attention:
- every mbarrier wait returns only once the phase it names has completed, on the hardware's one parity bit
  (a waiter two phases behind passes, as on the GPU; a waiter whose phase was never armed hangs: a deadlock
  is reported, not waited out);
- no mbarrier is arrived on more than its count in a phase;
- no TMA copy lands in a shared-memory tile that an issued, not yet retired wgmma reads (a Q slot or K/V stage
  handed back too early);
- every tile of shared memory a wgmma reads was written (a never-loaded slot holds NaN, as garbage would).
Only the persistent kernel's partitions and the helpers they call run here; `_store_rows_before` (pointer
arithmetic on a pointer tensor) is replaced by its meaning, masked row stores."""
import importlib.util
import math
import os
import random
import threading
import time
import types

import torch

DEADLOCK_S = 0.5  # every partition waiting this long with no copy in flight: a hang


def template(kernel: str, file: str):
    """A bundled kernel's template module (skills/kernels/KERNEL/FILE), loaded afresh for emulation; the calling test
    is skipped where this Triton has no Gluon."""
    import pytest

    path = os.path.join(os.path.dirname(__file__), "..", "..", "skills", "kernels", kernel, file)
    spec = importlib.util.spec_from_file_location(f"{file[:-3]}_for_emulation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.gluon is None:
        pytest.skip("this Triton has no Gluon")
    return module


class EmulatorError(AssertionError):
    pass


class _Shared:
    """One program's shared state: the condition every blocking wait sleeps on, the TMA engine's queue, the
    errors seen."""

    def __init__(self, rng):
        self.cond = threading.Condition()
        self.rng = rng
        self.tma_queue = []
        self.errors = []
        self.stop = False
        self.in_flight_reads = {}  # id(tile) -> number of issued, unretired wgmma reading it
        self.store_reads = {}  # id(tile) -> number of TMA stores issued from it and not yet waited for (store_wait)
        self.blocked = 0  # partitions in an mbarrier wait
        self.alive = 0  # partitions not yet returned
        self.engine_busy = False  # a copy taken off the queue and not landed yet

    def error(self, message):
        with self.cond:
            self.errors.append(message)
            self.cond.notify_all()


class Barrier:
    def __init__(self, shared, name):
        self.shared, self.name = shared, name
        self.count = None
        self.pending = None
        self.tx = 0
        self.completed = 0  # phases completed

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.completed += 1
            self.pending = self.count
            self.shared.cond.notify_all()

    def arrive(self, n=1):
        with self.shared.cond:
            if self.count is None:
                self.shared.errors.append(f"{self.name}: arrive before init")
                return
            self.pending -= n
            if self.pending < 0:
                self.shared.errors.append(f"{self.name}: more arrivals than its count {self.count} in phase "
                                          f"{self.completed}")
                self.pending = 0
            self._maybe_complete()

    def complete_tx(self, nbytes):
        with self.shared.cond:
            self.tx -= nbytes
            self._maybe_complete()


class Tile:
    """A shared-memory tile: data (NaN until written), a version bumped by every write."""

    def __init__(self, shared, name, shape, dtype):
        self.shared, self.name = shared, name
        self.data = torch.full(shape, float("nan") if dtype.is_floating_point else -2 ** 31, dtype=dtype)
        self.version = 0
        self.dtype = dtype
        self.shape = list(shape)

    def store(self, value):
        self.write(value)

    def load(self, layout=None):
        return self.data.clone()

    def write(self, value):
        with self.shared.cond:
            if self.shared.in_flight_reads.get(id(self), 0):
                self.shared.errors.append(f"{self.name} written while a wgmma issued before reads it")
            if self.shared.store_reads.get(id(self), 0):
                self.shared.errors.append(f"{self.name} written while a TMA store issued from it may still read it "
                                          f"(no store_wait since)")
            self.data = value.to(self.dtype).clone()
            self.version += 1

    def permute(self, order):
        assert tuple(order) == (1, 0)
        return _Transposed(self)

    def slice(self, start, length, dim=0):
        assert dim == 0
        return _Rows(self, int(start), int(length))

    def reshape(self, shape):
        return _Reshaped(self, list(shape))


class _Rows:
    """Tile.slice's view: rows [start, start + length) of a tile, which a wgmma reads (its reads in flight count
    on the whole tile, so a copy landing in it is caught as for the tile)."""

    def __init__(self, tile, start, length):
        self.tile, self.start, self.length = tile, start, length
        self.name = f"{tile.name}[{start}:{start + length}]"

    @property
    def data(self):
        return self.tile.data[self.start:self.start + self.length]

    def permute(self, order):
        assert tuple(order) == (1, 0)
        return _Transposed(self)


class _Reshaped:
    """Tile.reshape's view (the fused-moe weight box [2, BLOCK_N, BLOCK_K] read as one [2 * BLOCK_N, BLOCK_K] B
    operand): a wgmma's reads in flight count on the whole tile, as for _Rows."""

    def __init__(self, tile, shape):
        self.tile, self.shape = tile, shape
        self.name = f"{tile.name}.reshape({shape})"

    @property
    def data(self):
        return self.tile.data.reshape(self.shape)

    def permute(self, order):
        assert tuple(order) == (1, 0)
        return _Transposed(self)


class _Transposed:
    def __init__(self, tile):
        self.tile = tile


class _Registers(torch.Tensor):
    """A wgmma's result in registers: a torch tensor with Gluon's split() (a last dimension of 2 into its two
    halves), as the fused-moe consumer's epilogue takes the gate and up columns apart."""

    def split(self, *args, **kwargs):
        if args or kwargs:
            return super().split(*args, **kwargs)
        assert self.shape[-1] == 2
        return tuple(t.as_subclass(torch.Tensor) for t in self.unbind(-1))


class Array:
    """gl.allocate_shared_memory's result: tiles (or barriers) along the first dimension."""

    def __init__(self, shared, name, shape, dtype, barriers):
        self.name = name
        self.dtype = dtype
        self.shape = list(shape)
        if barriers:
            self.items = [Barrier(shared, f"{name}[{i}]") for i in range(shape[0])] if len(shape) == 2 else None
            self.single = Barrier(shared, name) if len(shape) == 1 else None
        else:
            self.items = [Tile(shared, f"{name}[{i}]", shape[1:], dtype) for i in range(shape[0])]

    def index(self, i):
        return self.items[int(i)]


class Descriptor:
    """A TMA descriptor over a tensor in boxes of `block` (2-D: rows x D; the fused-moe weights' 3-D boxes too);
    what lies past the tensor reads as zeros."""

    def __init__(self, tensor, block):
        self.tensor = tensor
        self.block = list(block)
        self.dtype = tensor.dtype
        self.layout = None
        self.block_type = types.SimpleNamespace(shape=list(block), nbytes=math.prod(block) * tensor.element_size())


class _Ptr:
    def __init__(self, table, offset=0):
        self.table, self.offset = table, offset

    def __add__(self, n):
        return _Ptr(self.table, self.offset + int(n))

    __radd__ = __add__


class _Pending:
    """An issued wgmma: its result, computed from the operands as issued, and the tiles it reads."""

    def __init__(self, value, tiles):
        self.value, self.tiles = value, tiles


def _resolve(x):
    return x.value if isinstance(x, _Pending) else x


class Emulator:
    def __init__(self, module, seed=0, max_delay_s=2e-4, overrides=None):
        """overrides: {name: function} replacing the kernel's helpers of those names (a test's deliberate fault);
        a function given takes the emulator's namespace as its globals, so it calls the others as the kernel does."""
        self.module = module
        self.rng = random.Random(seed)
        self.max_delay_s = max_delay_s
        self.local = threading.local()
        self.loads = []  # (descriptor, coordinates) of every TMA copy issued, in issue order
        self.wgmmas = 0  # wgmma issued
        self.ns = self._namespace()
        for name, fn in (overrides or {}).items():
            self.ns[name] = types.FunctionType(fn.__code__, self.ns, name, fn.__defaults__, fn.__closure__)

    # ---------------------------------------------------------------------------------------------- mocks
    def _namespace(self):
        ns = dict(vars(self.module))
        emu = self

        class Layout:
            def __init__(self, *args, **kwargs):
                pass

        def program_id(axis):
            assert axis == 0
            return emu.program

        def num_programs(axis):
            assert axis == 0
            return emu.programs

        def load(ptr):
            return int(ptr.table.reshape(-1)[ptr.offset])

        def cdiv(a, b):
            return -(-a // b)

        def minimum(a, b):
            return min(a, b)

        def maximum(a, b):
            if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
                return torch.maximum(torch.as_tensor(a), torch.as_tensor(b))
            return max(a, b)

        def allocate_shared_memory(dtype, shape, layout):
            if dtype == "int64":  # mbarriers
                return emu._barriers(shape)
            emu.arrays.append("smem")
            return Array(emu.shared, f"smem{len(emu.arrays)}", shape, torch.int32 if dtype == "int32" else emu.dtype,
                         False)

        def static_assert(cond, msg=""):
            assert cond, msg

        def warp_specialize(partitions, worker_warps, worker_regs):
            emu._run_partitions(partitions)

        gl = types.SimpleNamespace(
            constexpr=object, int64="int64", int32="int32", float32=torch.float32,
            program_id=program_id, num_programs=num_programs, load=load, cdiv=cdiv, maximum=maximum,
            minimum=minimum, exp=torch.exp,
            zeros=lambda shape, dtype, layout=None: torch.zeros(shape, dtype=torch.float32),
            full=lambda shape, value, dtype, layout=None: torch.full(shape, value, dtype=torch.float32),
            arange=lambda start, end, layout=None: torch.arange(start, end),
            expand_dims=lambda x, axis: x.unsqueeze(axis),
            where=lambda c, a, b: torch.where(c, a, b),
            max=lambda x, axis: x.amax(axis), sum=lambda x, axis: x.sum(axis),
            exp2=torch.exp2, convert_layout=lambda x, layout: x,
            join=lambda a, b: torch.stack((a, b), dim=-1), permute=lambda x, order: x.permute(order),
            reshape=lambda x, shape: x.reshape(shape), zeros_like=torch.zeros_like,
            static_assert=static_assert,
            static_range=range, allocate_shared_memory=allocate_shared_memory, warp_specialize=warp_specialize,
            NVMMADistributedLayout=Layout, DotOperandLayout=Layout, SliceLayout=Layout, BlockedLayout=Layout,
            SwizzledSharedLayout=Layout,
        )

        def init(bar, count):
            bar.count, bar.pending, bar.tx, bar.completed = count, count, 0, 0

        def expect(bar, nbytes, pred=True):
            if pred:
                with emu.shared.cond:
                    bar.tx += nbytes
                bar.arrive()

        def wait(bar, phase, pred=True, deps=None):
            if not pred:
                return
            emu._jitter()
            sh = emu.shared
            with sh.cond:
                sh.blocked += 1
                stuck_since = None
                try:
                    while (bar.completed & 1) == (int(phase) & 1):  # the phase of parity `phase` not complete yet
                        if sh.errors:
                            raise EmulatorError("stopped")
                        idle = sh.blocked == sh.alive and not sh.tma_queue and not sh.engine_busy
                        stuck_since = (stuck_since or time.time()) if idle else None
                        if stuck_since is not None and time.time() - stuck_since > DEADLOCK_S:
                            sh.errors.append(f"deadlock: wait on {bar.name} for parity {int(phase) & 1} "
                                             f"({bar.completed} phases completed)")
                            sh.cond.notify_all()
                            raise EmulatorError("deadlock")
                        sh.cond.wait(0.02)
                finally:
                    sh.blocked -= 1

        def arrive(bar, count=1, pred=True):
            emu._jitter()
            if pred:
                bar.arrive(count)

        mbarrier = types.SimpleNamespace(MBarrierLayout=Layout, init=init, expect=expect, wait=wait, arrive=arrive)

        def tma_load(desc, coord, bar, tile, pred=True):
            if not pred:
                return
            coord = [int(c) for c in coord]
            src = desc.tensor
            value = torch.zeros(desc.block, dtype=src.dtype)  # what lies outside the tensor reads as zeros
            ends = [min(c + b, n) for c, b, n in zip(coord, desc.block, src.shape)]
            if all(end > c for c, end in zip(coord, ends)):
                value[tuple(slice(0, end - c) for c, end in zip(coord, ends))] = \
                    src[tuple(slice(c, end) for c, end in zip(coord, ends))]
            with emu.shared.cond:
                emu.loads.append((desc, coord))
                emu.shared.tma_queue.append((tile, value, bar, desc.block_type.nbytes))
                emu.shared.cond.notify_all()

        def tma_store(desc, coord, tile):
            # clipped to the tensor: nothing of a box that lies wholly outside it is written. Written at once, from
            # the tile as it is now; the tile counts as read by the store until the issuing partition's store_wait
            # lets it go (a write to it before then is reported: on the GPU the store may not have read it yet)
            row, col = int(coord[0]), int(coord[1])
            end = min(row + tile.data.shape[0], desc.tensor.shape[0])
            col_end = min(col + tile.data.shape[1], desc.tensor.shape[1])
            if end > row and col_end > col:
                desc.tensor[row:end, col:col_end] = tile.data[:end - row, :col_end - col].to(desc.tensor.dtype)
            tile = tile.tile if isinstance(tile, _Rows) else tile  # a store of some rows reads the whole buffer
            with emu.shared.cond:
                emu.shared.store_reads[id(tile)] = emu.shared.store_reads.get(id(tile), 0) + 1
            emu._stores().append(tile)

        def store_wait(pendings):
            # the partition's stores but its last `pendings` have read their tiles (bulk groups complete in order)
            stores = emu._stores()
            done = stores[:max(0, len(stores) - int(pendings))]
            del stores[:len(done)]
            with emu.shared.cond:
                for tile in done:
                    emu.shared.store_reads[id(tile)] -= 1

        tma = types.SimpleNamespace(store_wait=store_wait)

        def warpgroup_mma(a, b, acc, use_acc=True, is_async=True):
            emu._jitter()
            tiles = []
            if isinstance(a, Tile):
                tiles.append(a)
                a_val = a.data
            else:
                a_val = _resolve(a)
            if isinstance(b, _Transposed):
                tiles.append(b.tile)
                b_val = b.tile.data.t()
            else:
                tiles.append(b)
                b_val = b.data
            for t in tiles:
                if torch.isnan(t.data).all():
                    emu.shared.error(f"a wgmma read {t.name}, never written")
            tiles = [t.tile if isinstance(t, (_Rows, _Reshaped)) else t for t in tiles]
            acc_val = _resolve(acc)
            value = (a_val.float() @ b_val.float() + (acc_val if use_acc else 0)).as_subclass(_Registers)
            with emu.shared.cond:
                emu.wgmmas += 1
                for t in tiles:
                    emu.shared.in_flight_reads[id(t)] = emu.shared.in_flight_reads.get(id(t), 0) + 1
            pending = _Pending(value, tiles)
            emu._issued().append(pending)
            return pending

        def warpgroup_mma_wait(num_outstanding=0, deps=()):
            issued = emu._issued()
            retire = issued[:max(0, len(issued) - num_outstanding)]
            del issued[:len(retire)]
            with emu.shared.cond:
                for p in retire:
                    for t in p.tiles:
                        emu.shared.in_flight_reads[id(t)] -= 1
            # a result still in flight comes back as it went in: only a wgmma may take it (as its accumulator, as the
            # gemm consumer's chain of k-steps does); read any other way it fails, as it would hold garbage
            values = tuple(d if isinstance(d, _Pending) and d in issued else _resolve(d) for d in deps)
            return values[0] if len(values) == 1 else values

        def store_rows_before(o_ptr, out, row0, q_row, S, o_layout):
            rows = q_row + torch.arange(out.shape[0])
            keep = rows < S
            o_ptr[(row0 + rows[keep]).long()] = out[keep].to(o_ptr.dtype)

        ns.update(gl=gl, mbarrier=mbarrier, tma=tma, tma_load=tma_load, tma_store=tma_store,
                  warpgroup_mma=warpgroup_mma, warpgroup_mma_wait=warpgroup_mma_wait,
                  fence_async_shared=lambda: None)
        for name, value in vars(self.module).items():
            fn = getattr(value, "fn", None)
            if isinstance(fn, types.FunctionType) and hasattr(value, "arg_names"):  # a (Gluon) JIT function
                ns[name] = types.FunctionType(fn.__code__, ns, name, fn.__defaults__, fn.__closure__)
        ns["_store_rows_before"] = store_rows_before
        # griddepcontrol (PDL): the programs here run after every kernel before them, and before any after
        ns["_grid_dependency_wait"] = ns["_grid_dependency_launch_dependents"] = lambda: None

        def claim_tile(counter_ptr):  # the fused-moe loader's atomic claim: the counter's value, then one more
            with emu.shared.cond:
                table = counter_ptr.table.reshape(-1)
                value = int(table[counter_ptr.offset])
                table[counter_ptr.offset] = value + 1
            return value

        ns["_claim_tile"] = claim_tile
        ns["_claimed"] = lambda got: got
        return ns

    def _barriers(self, shape):
        name = f"bar{len(self.arrays)}"
        self.arrays.append(name)
        if len(shape) == 1:
            return Barrier(self.shared, name)
        return Array(self.shared, name, shape, None, True)

    def _issued(self):
        if not hasattr(self.local, "issued"):
            self.local.issued = []
        return self.local.issued

    def _stores(self):
        # this partition's TMA stores not yet waited for (a thread-local list, as _issued's wgmma)
        if not hasattr(self.local, "stores"):
            self.local.stores = []
        return self.local.stores

    def _jitter(self):
        with self.shared.cond:
            r = self.rng.random()
        if r < 0.3:
            time.sleep(self.rng.random() * self.max_delay_s)

    # ---------------------------------------------------------------------------------------------- engine
    def _tma_engine(self):
        while True:
            with self.shared.cond:
                while not self.shared.tma_queue and not self.shared.stop:
                    self.shared.cond.wait(0.05)
                if self.shared.stop and not self.shared.tma_queue:
                    return
                op = self.shared.tma_queue.pop(self.rng.randrange(len(self.shared.tma_queue)))
                self.shared.engine_busy = True
            time.sleep(self.rng.random() * self.max_delay_s)
            tile, value, bar, nbytes = op
            tile.write(value)
            bar.complete_tx(nbytes)
            with self.shared.cond:
                self.shared.engine_busy = False
                self.shared.cond.notify_all()

    def _run_partitions(self, partitions):
        failures = []

        def run(fn, args):
            try:
                self.local.stores = []
                self.ns[fn.__name__](*args)
                if self.local.stores:
                    self.shared.error(f"{fn.__name__} returned with {len(self.local.stores)} TMA stores not waited "
                                      f"for (the program's shared memory may go before they read it)")
            except EmulatorError:
                pass
            except Exception as e:  # a bug in the emulated code: report it
                self.shared.error(f"{fn.__name__}: {type(e).__name__}: {e}")
                failures.append(e)
            finally:
                with self.shared.cond:
                    self.shared.alive -= 1
                    self.shared.cond.notify_all()

        self.shared.alive = len(partitions)

        threads = [threading.Thread(target=run, args=(fn, args), daemon=True) for fn, args in partitions]
        engine = threading.Thread(target=self._tma_engine, daemon=True)
        engine.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self.shared.cond:
            self.shared.stop = True
            self.shared.cond.notify_all()
        engine.join()

    # ---------------------------------------------------------------------------------------------- driver
    def gemm(self, a, b, block_m, block_n, stages, block_k=64, persistent_sms=None):
        """The gemm template's gemm_gluon_kernel: C = a @ b (a (M, K), b (K, N), 16-bit) on block_m x block_n tiles
        (a width gluon_widths splits into two boxes, or one), its programs run one after another as the launcher
        grids them: one a tile, or with persistent_sms the persistent grid on that many SMs (persistent_programs),
        each program walking its tiles. C starts as NaN, so an element no program stores shows. Raises
        EmulatorError on a protocol fault."""
        m = self.module
        (M, K), N = a.shape, b.shape[1]
        n1, n2 = m.gluon_widths(block_n)
        self.dtype = a.dtype
        c = torch.full((M, N), float("nan"), dtype=a.dtype)
        descs = [Descriptor(a, [64, block_k]), Descriptor(b, [block_k, n1]), Descriptor(c, [64, n1]),
                 Descriptor(b, [block_k, n2]) if n2 else None, Descriptor(c, [64, n2]) if n2 else None]
        tiles = -(-M // block_m) * -(-N // block_n)
        self.programs = m.persistent_programs(tiles, persistent_sms) if persistent_sms else tiles
        for program in range(self.programs):
            self.program = program
            self.shared = _Shared(self.rng)
            self.arrays = []
            self.ns["gemm_gluon_kernel"](*descs, M, N, K, block_m, n1, block_k, stages, m.GLUON_LOADER_REGS,
                                         m.GLUON_CONSUMER_REGS, n2, int(persistent_sms is not None))
            if self.shared.errors:
                raise EmulatorError(f"program {program}: " + "; ".join(self.shared.errors[:4]))
        return c

    def moe_gemm(self, a, w, counts, swiglu, consumers, block_n, stages, sms, block_k=64, pairs_only=False, pdl=False,
                 claim=False):
        """The fused-moe template's moe_gemm_gluon_kernel on one expert-sorted layout: a (rows, K) its A (x_sorted, or
        h), each expert's run of counts[e] pairs padded to a multiple of 64 * consumers rows; w the weights as the
        launcher views them (gate/up, swiglu: (E * 2, I, K), boxes [2, block_n, block_k]; down: (E, N, K), boxes [1,
        block_n, block_k]). The persistent grid on `sms` SMs, its programs run one after another, each walking its
        tiles: every sms-th, or (claim) its first, then those it claims from the launch's counter (here, one program
        running at a time, the first claims all the others' share). self.program_loads: each program's TMA copies.
        Returns C (rows, I or N), NaN where nothing was stored. Raises EmulatorError on a protocol fault."""
        m = self.module
        block_m = 64 * consumers
        blocks = [-(-c // block_m) for c in counts]
        ends = torch.tensor(blocks).cumsum(0).tolist()
        num_m_blocks = -(-sum(counts) // block_m) + len(counts)  # route_and_align's bound: blocks past it idle
        block_expert = torch.full((num_m_blocks,), -1, dtype=torch.int32)
        for e, (n, end) in enumerate(zip(blocks, ends)):
            block_expert[end - n:end] = e
        expert_start = torch.tensor([0] + ends, dtype=torch.int32)
        expert_rows = torch.tensor(counts, dtype=torch.int32)
        self.dtype = a.dtype
        w_box = [2 if swiglu else 1, block_n, block_k]
        c_cols = w.shape[1]  # gate/up: I (h's columns); down: N
        c_box = [64, block_n if swiglu else block_n // 2]
        c = torch.full((a.shape[0], c_cols), float("nan"), dtype=a.dtype)
        n_tiles = -(-c_cols // block_n)
        descs = [Descriptor(a, [64, block_k]), Descriptor(w, w_box), Descriptor(c, c_box), Descriptor(c, [8, c_box[1]])]
        self.programs = min(sms, num_m_blocks * n_tiles)
        counter = torch.zeros(1, dtype=torch.int32)
        self.program_loads = []  # each program's TMA copies
        for program in range(self.programs):
            issued = len(self.loads)
            self.program = program
            self.shared = _Shared(self.rng)
            self.arrays = []
            self.ns["moe_gemm_gluon_kernel"](*descs, _Ptr(block_expert), _Ptr(expert_start), _Ptr(expert_rows),
                                             _Ptr(counter), num_m_blocks, n_tiles, a.shape[1], stages, int(swiglu),
                                             consumers, m.GLUON_LOADER_REGS, m.GLUON_CONSUMER_REGS, int(pdl),
                                             int(pairs_only), int(claim))
            self.program_loads.append(self.loads[issued:])
            if self.shared.errors:
                raise EmulatorError(f"program {program}: " + "; ".join(self.shared.errors[:4]))
        return c

    def attention(self, q, k, v, causal, num_buffers, sms=4, q_slots=None):
        """The persistent kernel's output for q, k, v (B, H, S, D) fp32, its programs run one after another, each
        on the schedule the launcher would give it with `sms` SMs and q_slots Q tiles a consumer (the launcher's
        PERSISTENT_Q_SLOTS by default); raises EmulatorError on a protocol fault."""
        m = self.module
        q_slots = m.PERSISTENT_Q_SLOTS if q_slots is None else q_slots
        B, H, S, D = q.shape
        BM = m.WS_BLOCK_M
        n_m = -(-S // BM)
        dealt = m.persist_schedule(n_m, B * H, sms, causal)
        width = 2 + max(len(row) for row in dealt)
        table = torch.tensor([[len(row), *row] + [0] * (width - 1 - len(row)) for row in dealt], dtype=torch.int32)
        self.dtype = q.dtype
        o = torch.full_like(q, float("nan"))
        views = [t.reshape(B * H * S, D) for t in (q, k, v, o)]
        descs = [Descriptor(t, [rows, D]) for t, rows in zip(views, (BM // 2, m.WS_BLOCK_N, m.WS_BLOCK_N, BM // 2))]
        for program in range(len(dealt)):
            self.program = program
            self.shared = _Shared(self.rng)
            self.arrays = []
            self.ns["_attn_fwd_persist"](*descs, views[3], S, _Ptr(table), width, m.LOG2E / D ** 0.5,
                                         BM, m.WS_BLOCK_N, num_buffers, causal, S % BM != 0,
                                         m.WS_LOADER_REGS, m.WS_CONSUMER_REGS, q_slots)
            if self.shared.errors:
                raise EmulatorError(f"program {program} (tiles {dealt[program]}): " + "; ".join(self.shared.errors[:4]))
        return o
