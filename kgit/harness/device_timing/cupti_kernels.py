"""The device time of every kernel launch, read from CUPTI's activity API directly through ctypes.

Why not torch's profiler: its start (kineto's CUPTI set-up, with callbacks on the runtime and driver
APIs) cost 4.1-4.6 s in every process on an H100 (experiments/noise-decisions/h100-collection-softmax/),
as long as the test run itself, and kgit pays it in every run of a step. One activity kind, the
concurrent kernel record, is all kgit reads: a start and end timestamp on the device, the grid, the block
and the name of each launch.

Like sitecustomize.py beside it, this file runs inside the user's process and imports nothing of kgit.
"""

import ctypes
import glob
import os
import sys

_KIND_CONCURRENT_KERNEL = 10  # CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
_FLUSH_FORCED = 1  # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: also the records of kernels still running
_BUFFER_BYTES = 8 << 20
_ALIGNMENT = 8  # CUPTI's ACTIVITY_RECORD_ALIGNMENT


class _KernelRecord(ctypes.Structure):
    """The leading fields of CUpti_ActivityKernel (versions 4 to 11 share them: later versions add
    fields after `name`, never before)."""

    _fields_ = [("kind", ctypes.c_uint32), ("cache_config", ctypes.c_uint8), ("shared_memory_config", ctypes.c_uint8),
                ("registers_per_thread", ctypes.c_uint16), ("partitioned_requested", ctypes.c_uint32),
                ("partitioned_executed", ctypes.c_uint32), ("start", ctypes.c_uint64), ("end", ctypes.c_uint64),
                ("completed", ctypes.c_uint64), ("device_id", ctypes.c_uint32), ("context_id", ctypes.c_uint32),
                ("stream_id", ctypes.c_uint32), ("grid_x", ctypes.c_int32), ("grid_y", ctypes.c_int32),
                ("grid_z", ctypes.c_int32), ("block_x", ctypes.c_int32), ("block_y", ctypes.c_int32),
                ("block_z", ctypes.c_int32), ("static_shared", ctypes.c_int32), ("dynamic_shared", ctypes.c_int32),
                ("local_per_thread", ctypes.c_uint32), ("local_total", ctypes.c_uint32),
                ("correlation_id", ctypes.c_uint32), ("grid_id", ctypes.c_int64), ("name", ctypes.c_char_p)]


_REQUEST = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)), ctypes.POINTER(ctypes.c_size_t),
                            ctypes.POINTER(ctypes.c_size_t))
_COMPLETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t,
                             ctypes.c_size_t)


def _find_library():
    """libcupti from the CUDA wheels next to torch (nvidia/*/lib), or the system's."""
    names = []
    for folder in sys.path:
        names += sorted(glob.glob(os.path.join(folder, "nvidia", "*", "lib", "libcupti.so*")))
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            names += sorted(glob.glob(os.path.join(root, "extras", "CUPTI", "lib64", "libcupti.so*")))
    names.append("libcupti.so")
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


class KernelRecorder:
    """Records (name, grid, block, duration in us) of each kernel launch from start() to stop()."""

    def __init__(self, library):
        self._cupti = library
        self._buffers = {}  # address -> the ctypes buffer CUPTI is filling (kept alive until completed)
        self.launches = []
        # the callbacks must outlive every call CUPTI makes to them
        self._request = _REQUEST(self._on_request)
        self._complete = _COMPLETE(self._on_complete)

    def start(self) -> bool:
        if self._cupti.cuptiActivityRegisterCallbacks(self._request, self._complete) != 0:
            return False
        return self._cupti.cuptiActivityEnable(_KIND_CONCURRENT_KERNEL) == 0

    def stop(self) -> None:
        self._cupti.cuptiActivityFlushAll(_FLUSH_FORCED)
        self._cupti.cuptiActivityDisable(_KIND_CONCURRENT_KERNEL)

    def _on_request(self, buffer, size, max_records):
        raw = ctypes.create_string_buffer(_BUFFER_BYTES + _ALIGNMENT)
        address = ctypes.addressof(raw)
        aligned = address + (-address % _ALIGNMENT)
        self._buffers[aligned] = raw
        buffer[0] = ctypes.cast(aligned, ctypes.POINTER(ctypes.c_uint8))
        size[0] = _BUFFER_BYTES
        max_records[0] = 0  # as many as fit

    def _on_complete(self, context, stream_id, buffer, size, valid_size):
        address = ctypes.addressof(buffer.contents)
        record = ctypes.c_void_p()
        next_record = self._cupti.cuptiActivityGetNextRecord
        while next_record(buffer, ctypes.c_size_t(valid_size), ctypes.byref(record)) == 0:
            kernel = ctypes.cast(record, ctypes.POINTER(_KernelRecord)).contents
            if kernel.kind != _KIND_CONCURRENT_KERNEL or kernel.end <= kernel.start:
                continue
            name = kernel.name.decode("utf-8", "replace") if kernel.name else "?"
            self.launches.append((name, [kernel.grid_x, kernel.grid_y, kernel.grid_z],
                                  [kernel.block_x, kernel.block_y, kernel.block_z], (kernel.end - kernel.start) / 1e3))
        self._buffers.pop(address, None)


def recorder():
    """A KernelRecorder, or None where no libcupti loads (a ROCm build, a CUDA without CUPTI)."""
    library = _find_library()
    if library is None:
        return None
    library.cuptiActivityGetNextRecord.argtypes = [ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t,
                                                   ctypes.POINTER(ctypes.c_void_p)]
    return KernelRecorder(library)
