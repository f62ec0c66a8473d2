"""Reading CUPTI's kernel activity records (kgit/harness/device_timing/cupti_kernels.py), with a stand-in
for libcupti that hands over buffers of records laid out as CUPTI lays them out."""

import ctypes
import importlib.util
from pathlib import Path

import kgit

PATH = Path(kgit.__file__).parent / "harness" / "device_timing" / "cupti_kernels.py"
spec = importlib.util.spec_from_file_location("cupti_kernels_under_test", PATH)
cupti_kernels = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cupti_kernels)


class FakeCupti:
    """Keeps the registered callbacks; flush hands CUPTI's buffer back filled with `records`."""

    def __init__(self, records):
        self.records, self.enabled = records, []

    def cuptiActivityRegisterCallbacks(self, request, complete):
        self.request, self.complete = request, complete
        return 0

    def cuptiActivityEnable(self, kind):
        self.enabled.append(kind)
        return 0

    def cuptiActivityDisable(self, kind):
        self.enabled.remove(kind)
        return 0

    def cuptiActivityFlushAll(self, flag):
        buffer, size, max_records = ctypes.POINTER(ctypes.c_uint8)(), ctypes.c_size_t(), ctypes.c_size_t()
        self.request(ctypes.byref(buffer), ctypes.byref(size), ctypes.byref(max_records))
        address = ctypes.addressof(buffer.contents)
        assert address % 8 == 0 and size.value >= len(self.records) * ctypes.sizeof(cupti_kernels._KernelRecord)
        for i, record in enumerate(self.records):
            ctypes.memmove(address + i * ctypes.sizeof(record), ctypes.addressof(record), ctypes.sizeof(record))
        self.complete(None, 7, buffer, size.value, len(self.records) * ctypes.sizeof(cupti_kernels._KernelRecord))
        return 0

    def cuptiActivityGetNextRecord(self, buffer, valid_size, record):
        """CUPTI's iterator: the record after the one `record` points at (the first when it is null)."""
        step, start = ctypes.sizeof(cupti_kernels._KernelRecord), ctypes.addressof(buffer.contents)
        current = record._obj.value
        following = start if current is None else current + step
        if following + step > start + valid_size.value:
            return 3  # CUPTI_ERROR_MAX_LIMIT_REACHED
        record._obj.value = following
        return 0


NAMES = [ctypes.c_char_p(b"_softmax_kernel"), ctypes.c_char_p(b"memcpy")]


def kernel(name, start_ns, end_ns, grid=(2048, 1, 1), block=(256, 1, 1), kind=10):
    record = cupti_kernels._KernelRecord(kind=kind, start=start_ns, end=end_ns)
    record.grid_x, record.grid_y, record.grid_z = grid
    record.block_x, record.block_y, record.block_z = block
    record.name = name.value
    return record


def test_each_kernel_launch_is_read_with_its_grid_block_and_device_time_in_us():
    fake = FakeCupti([kernel(NAMES[0], 1_000, 8_500), kernel(NAMES[0], 10_000, 17_250, grid=(16, 2, 1)),
                      kernel(NAMES[1], 20_000, 20_900, block=(128, 1, 1))])
    recorder = cupti_kernels.KernelRecorder(fake)
    assert recorder.start() and fake.enabled == [10]
    recorder.stop()
    assert fake.enabled == []
    assert recorder.launches == [("_softmax_kernel", [2048, 1, 1], [256, 1, 1], 7.5),
                                 ("_softmax_kernel", [16, 2, 1], [256, 1, 1], 7.25),
                                 ("memcpy", [2048, 1, 1], [128, 1, 1], 0.9)]
    assert recorder._buffers == {}  # a completed buffer is let go


def test_records_of_another_kind_or_without_a_duration_are_left_out():
    fake = FakeCupti([kernel(NAMES[0], 1_000, 2_000, kind=5), kernel(NAMES[0], 3_000, 3_000),
                      kernel(NAMES[0], 5_000, 4_000), kernel(NAMES[0], 6_000, 6_001)])
    recorder = cupti_kernels.KernelRecorder(fake)
    recorder.start()
    recorder.stop()
    assert recorder.launches == [("_softmax_kernel", [2048, 1, 1], [256, 1, 1], 0.001)]


def test_the_leading_fields_sit_where_cupti_puts_them():
    # CUpti_ActivityKernel4..11: start at 16, the grid at 52, the correlation id at 92, the name at 104
    offsets = {name: getattr(cupti_kernels._KernelRecord, name).offset for name in ("start", "end", "grid_x",
                                                                                     "block_x", "correlation_id", "name")}
    assert offsets == {"start": 16, "end": 24, "grid_x": 52, "block_x": 64, "correlation_id": 92, "name": 104}


def test_a_refusing_cupti_means_no_recorder_is_started():
    class Refusing(FakeCupti):
        def cuptiActivityEnable(self, kind):
            return 17  # e.g. no driver

    assert cupti_kernels.KernelRecorder(Refusing([])).start() is False
