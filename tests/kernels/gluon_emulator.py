"""A CPU emulator of the flash-attention template's persistent Gluon kernel (_attn_fwd_persist): the kernel's own
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
arithmetic on a pointer tensor) is replaced by its meaning, masked row stores.

The gemm template's cluster kernel (gemm_gluon_cluster_kernel, Emulator.gemm_cluster) runs its two CTAs at once, each
its three partitions in threads, and its PTX (`_ptx`) by meaning: the CTA's rank, a shared-memory base of 0 (the
emulator lays each CTA's buffers out in allocation order and hands the kernel those offsets), the cluster barrier,
the multicast copy into both CTAs (addressed by offset: an address that is not a tile's or barrier's start is an
error) and the arrive on the peer's barrier. Beyond the checks above: no copy completes on a barrier before its
CTA initialized it, and nothing lands in or arrives on a CTA after all its partitions have returned (an exited
CTA's shared memory is gone)."""
import random
import threading
import time
import types

import torch

DEADLOCK_S = 0.5  # every partition waiting this long with no copy in flight: a hang


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
            if self.count is None:
                self.shared.errors.append(f"{self.name}: a copy completed before init")
                return
            self.tx -= nbytes
            self._maybe_complete()


class Tile:
    """A shared-memory tile: data (NaN until written), a version bumped by every write."""

    def __init__(self, shared, name, shape, dtype):
        self.shared, self.name = shared, name
        self.data = torch.full(shape, float("nan"), dtype=dtype)
        self.version = 0
        self.dtype = dtype
        self.shape = list(shape)

    def store(self, value):
        self.write(value)

    def write(self, value):
        with self.shared.cond:
            if self.shared.in_flight_reads.get(id(self), 0):
                self.shared.errors.append(f"{self.name} written while a wgmma issued before reads it")
            self.data = value.to(self.dtype).clone()
            self.version += 1

    def permute(self, order):
        assert tuple(order) == (1, 0)
        return _Transposed(self)


class _Transposed:
    def __init__(self, tile):
        self.tile = tile


class Array:
    """gl.allocate_shared_memory's result: tiles (or barriers) along the first dimension."""

    def __init__(self, shared, name, shape, dtype, barriers):
        self.name = name
        self.dtype = dtype
        if barriers:
            self.items = [Barrier(shared, f"{name}[{i}]") for i in range(shape[0])] if len(shape) == 2 else None
            self.single = Barrier(shared, name) if len(shape) == 1 else None
        else:
            self.items = [Tile(shared, f"{name}[{i}]", shape[1:], dtype) for i in range(shape[0])]

    def index(self, i):
        return self.items[int(i)]


class Descriptor:
    """A TMA descriptor over a 2-D tensor in boxes of block rows x D (rows past the tensor read as zeros)."""

    def __init__(self, tensor, block):
        self.tensor = tensor
        self.block = list(block)
        self.dtype = tensor.dtype
        self.layout = None
        self.block_type = types.SimpleNamespace(shape=list(block), nbytes=block[0] * block[1] * tensor.element_size())


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
    def __init__(self, module, seed=0, max_delay_s=2e-4, overrides=None, slow_cta=None):
        """overrides: {name: function} replacing the kernel's helpers of those names (a test's deliberate fault);
        a function given takes the emulator's namespace as its globals, so it calls the others as the kernel does.
        slow_cta: in a cluster, the rank of a CTA that starts late and waits at every barrier operation."""
        self.module = module
        self.slow_cta = slow_cta
        self.rng = random.Random(seed)
        self.max_delay_s = max_delay_s
        self.local = threading.local()
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

        def load(ptr):
            return int(ptr.table.reshape(-1)[ptr.offset])

        def cdiv(a, b):
            return -(-a // b)

        def maximum(a, b):
            if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
                return torch.maximum(torch.as_tensor(a), torch.as_tensor(b))
            return max(a, b)

        def allocate_shared_memory(dtype, shape, layout):
            if isinstance(dtype, str):  # gl.int64: mbarriers
                array, item_bytes = emu._barriers(shape), 8
            else:
                emu.arrays.append("smem")
                array = Array(emu.shared, f"smem{len(emu.arrays)}", shape, emu.dtype, False)
                item_bytes = emu.dtype.itemsize * int(torch.tensor(shape[1:]).prod())
            cta = getattr(emu.local, "cta", None)
            if cta is not None:
                cta.place(array, shape[0], item_bytes)
            return array

        def static_assert(cond, msg=""):
            assert cond, msg

        def warp_specialize(partitions, worker_warps, worker_regs):
            emu._run_partitions(partitions)

        gl = types.SimpleNamespace(
            constexpr=object, int64="int64", int32="int32", float32=torch.float32,
            program_id=program_id, load=load, cdiv=cdiv, maximum=maximum,
            zeros=lambda shape, dtype, layout=None: torch.zeros(shape, dtype=torch.float32),
            full=lambda shape, value, dtype, layout=None: torch.full(shape, value, dtype=torch.float32),
            arange=lambda start, end, layout=None: torch.arange(start, end),
            expand_dims=lambda x, axis: x.unsqueeze(axis),
            where=lambda c, a, b: torch.where(c, a, b),
            max=lambda x, axis: x.amax(axis), sum=lambda x, axis: x.sum(axis),
            exp2=torch.exp2, convert_layout=lambda x, layout: x,
            static_assert=static_assert,
            static_range=range, allocate_shared_memory=allocate_shared_memory, warp_specialize=warp_specialize,
            NVMMADistributedLayout=Layout, DotOperandLayout=Layout, SliceLayout=Layout,
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
            row, col = int(coord[0]), int(coord[1])
            rows = desc.block[0]
            src = desc.tensor
            value = emu._box(desc, row, col)
            with emu.shared.cond:
                emu.shared.tma_queue.append((tile, value, bar, desc.block_type.nbytes, None))
                emu.shared.cond.notify_all()

        def tma_store(desc, coord, tile):
            row, col = int(coord[0]), int(coord[1])
            end = min(row + tile.data.shape[0], desc.tensor.shape[0])
            width = min(col + tile.data.shape[1], desc.tensor.shape[1]) - col
            if end > row and width > 0:
                desc.tensor[row:end, col:col + width] = tile.data[:end - row, :width].to(desc.tensor.dtype)

        tma = types.SimpleNamespace(store_wait=lambda n: None)

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
            acc_val = _resolve(acc)
            value = a_val.float() @ b_val.float() + (acc_val if use_acc else 0)
            with emu.shared.cond:
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
            # a wgmma still in flight comes back as it went in: the accumulator of the next wgmma (which the hardware
            # orders after it) or a later wait's dep, and nothing else (it is not a tensor yet)
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
        ns["_ptx"] = self._ptx
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

    def _jitter(self):
        with self.shared.cond:
            r = self.rng.random()
        cta = getattr(self.local, "cta", None)
        if cta is not None and cta.rank == self.slow_cta:
            time.sleep(5 * self.max_delay_s)
        elif r < 0.3:
            time.sleep(self.rng.random() * self.max_delay_s)

    @staticmethod
    def _box(desc, row, col):
        """A TMA copy's box at (row, col): the tensor's elements, zeros past its edges."""
        rows, cols = desc.block
        src = desc.tensor
        value = torch.zeros(rows, cols, dtype=src.dtype)
        end, width = min(row + rows, src.shape[0]), min(col + cols, src.shape[1]) - col
        if end > row and width > 0:
            value[:end - row, :width] = src[row:end, col:col + width]
        return value

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
            tile, value, bar, nbytes, cta = op
            if cta is not None and cta.exited:
                self.shared.error(f"a copy landed in CTA {cta.rank} after it exited")
            tile.write(value)
            bar.complete_tx(nbytes)
            with self.shared.cond:
                self.shared.engine_busy = False
                self.shared.cond.notify_all()

    def _run_partitions(self, partitions):
        cta = getattr(self.local, "cta", None)
        if cta is not None:  # a CTA of a cluster: the driver runs the TMA engine and counts every CTA's partitions
            threads = self._partition_threads(partitions, cta)
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            cta.exited = True
            return
        self.shared.alive = len(partitions)
        threads = self._partition_threads(partitions, None)
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

    def _partition_threads(self, partitions, cta):
        failures = []

        def run(fn, args):
            self.local.cta = cta
            try:
                self.ns[fn.__name__](*args)
            except EmulatorError:
                pass
            except Exception as e:  # a bug in the emulated code: report it
                self.shared.error(f"{fn.__name__}: {type(e).__name__}: {e}")
                failures.append(e)
            finally:
                with self.shared.cond:
                    self.shared.alive -= 1
                    self.shared.cond.notify_all()

        return [threading.Thread(target=run, args=(fn, args), daemon=True) for fn, args in partitions]

    # ---------------------------------------------------------------------------------------------- driver
    def attention(self, q, k, v, causal, num_buffers, sms=4, q_slots=None, diagonal_first=None):
        """The persistent kernel's output for q, k, v (B, H, S, D) fp32, its programs run one after another, each
        on the schedule the launcher would give it with `sms` SMs, q_slots Q tiles a consumer and causal tiles'
        diagonal blocks first or last (the launcher's PERSISTENT_Q_SLOTS and PERSISTENT_DIAGONAL_FIRST by
        default); raises EmulatorError on a protocol fault."""
        m = self.module
        q_slots = m.PERSISTENT_Q_SLOTS if q_slots is None else q_slots
        diagonal_first = m.PERSISTENT_DIAGONAL_FIRST if diagonal_first is None else diagonal_first
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
                                         m.WS_LOADER_REGS, m.WS_CONSUMER_REGS, q_slots, diagonal_first)
            if self.shared.errors:
                raise EmulatorError(f"program {program} (tiles {dealt[program]}): " + "; ".join(self.shared.errors[:4]))
        return o

    # ---------------------------------------------------------------------------------------------- clusters
    def _ptx(self, asm, args, pure=False):
        """The cluster kernel's inline PTX (gemm.py's _ptx), by what each snippet means."""
        cta = self.local.cta
        asm = str(getattr(asm, "value", asm))  # a gl.constexpr at module level in the kernel's file
        if "multicast::cluster" in asm:  # _A_MULTICAST: the box at (row $3, column $2) of param_0 into both CTAs
            dst, col, row, bar = (int(x) for x in args)
            value = self._box(self.param_0, row, col)
            with self.shared.cond:
                for target in self.ctas:
                    self.shared.tma_queue.append((target.at(dst, "tile"), value, target.at(bar, "barrier"),
                                                  self.param_0.block_type.nbytes, target))
                self.shared.cond.notify_all()
        elif "mapa" in asm:  # _PEER_ARRIVE: the barrier at address $1 in CTA $2
            address, peer = (int(x) for x in args)
            self._jitter()
            target = self.ctas[peer]
            if target.exited:
                self.shared.error(f"CTA {cta.rank} arrived on CTA {peer}'s barrier after it exited")
            else:
                target.at(address, "barrier").arrive()
        elif "barrier.cluster" in asm:
            try:
                self.cluster_barrier.wait()
            except threading.BrokenBarrierError:
                self.shared.error(f"CTA {cta.rank}: the cluster barrier broke (a partition never reached it)")
                raise EmulatorError("cluster barrier")
        elif "%cluster_ctarank" in asm:
            return cta.rank
        elif "global_smem" in asm:
            return 0
        elif "fence.mbarrier_init" not in asm:
            self.shared.error(f"PTX the emulator does not know: {asm}")
            raise EmulatorError("unknown PTX")
        return 0

    def gemm_cluster(self, a, b, block_n, block_k, num_stages):
        """gemm_gluon_cluster_kernel's C for a (M, K) and b (K, N), its clusters run one after another, the two CTAs
        of each at once; raises EmulatorError on a protocol fault. The kernel's offsets are the emulator's layout of
        its buffers (_Cta.place): allocation order, from 0."""
        m = self.module
        M, K = a.shape
        N = b.shape[1]
        self.dtype = a.dtype
        c = torch.full((M, N), float("nan"), dtype=a.dtype)
        descs = [Descriptor(a, [64, block_k]), Descriptor(b, [block_k, block_n]), Descriptor(c, [64, block_n])]
        self.param_0 = descs[0]  # the tensor map _A_MULTICAST names
        size = a.element_size()
        ring_and_c = (2 * num_stages * 64 * block_k + num_stages * block_k * block_n + 2 * 64 * block_n) * size
        offsets = (0, ring_and_c, ring_and_c + 8 * num_stages)  # A's ring first, then B's, C's, ready, empty
        clusters = -(-M // 128) * -(-(-(-N // block_n)) // 2)
        for cluster in range(clusters):
            self.program = cluster
            self.shared = _Shared(self.rng)
            self.arrays = []
            self.ctas = [_Cta(rank) for rank in (0, 1)]
            self.shared.alive = 6  # three partitions a CTA
            self.cluster_barrier = threading.Barrier(6, timeout=20 * DEADLOCK_S)
            engine = threading.Thread(target=self._tma_engine, daemon=True)
            engine.start()

            def run_cta(cta):
                self.local.cta = cta
                if cta.rank == self.slow_cta:
                    time.sleep(50 * self.max_delay_s)
                try:
                    self.ns["gemm_gluon_cluster_kernel"](*descs, M, N, K, block_n, block_k, num_stages,
                                                         m.GLUON_CLUSTER_LOADER_REGS, m.GLUON_CONSUMER_REGS, *offsets)
                except EmulatorError:
                    pass
                except Exception as e:  # a bug in the emulated code
                    self.shared.error(f"CTA {cta.rank}: {type(e).__name__}: {e}")

            ctas = [threading.Thread(target=run_cta, args=(cta,), daemon=True) for cta in self.ctas]
            for t in ctas:
                t.start()
            for t in ctas:
                t.join()
            with self.shared.cond:
                self.shared.stop = True
                self.shared.cond.notify_all()
            engine.join()
            if self.shared.errors:
                raise EmulatorError(f"cluster {cluster}: " + "; ".join(self.shared.errors[:4]))
        return c


class _Cta:
    """One CTA of a cluster: its rank, its shared memory's layout (offset, array, bytes an item; in allocation order),
    and whether all its partitions have returned."""

    def __init__(self, rank):
        self.rank = rank
        self.buffers = []
        self.end = 0
        self.exited = False

    def place(self, array, items, item_bytes):
        self.buffers.append((self.end, array, item_bytes, items))
        self.end += items * item_bytes

    def at(self, address, kind):
        """The tile or barrier that starts at this shared-memory address."""
        for offset, array, item_bytes, items in self.buffers:
            index, rest = divmod(address - offset, item_bytes)
            if 0 <= index < items and rest == 0 and isinstance(array.items[0], Barrier) == (kind == "barrier"):
                return array.items[index]
        if not self.buffers:
            raise LookupError(f"CTA {self.rank} has no shared memory yet (it has not started): nothing may land in it")
        raise LookupError(f"CTA {self.rank}: no {kind} starts at shared-memory address {address}")
