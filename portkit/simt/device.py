"""The simulated GPU that ``numba.cuda``'s device and context queries answer as, while
``simulated_cuda()`` (``pytest --portkit-simt``) is on: no driver is reached.

A device of one compute capability (default 9.0, ``--portkit-simt-cc``) with the
attributes numba reads through ``Device.__getattr__`` (``MAX_THREADS_PER_BLOCK``,
``MULTIPROCESSOR_COUNT``...): the values of a real GPU of that capability (an H100 for
9.0), so occupancy and cooperative-grid questions get a GPU's answers. The context is
numba's own simulator context (host memory stands in for device memory), told about
this device; events time what ran between them on the host.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from portkit.errors import LaunchError, PortkitError


class DeviceChoiceError(PortkitError):
    """A simulated compute capability that is not one of ``KNOWN``."""


@dataclass(frozen=True)
class DeviceSpec:
    """What one GPU generation has (NVIDIA's occupancy tables, per compute capability)."""

    name: str
    sms: int
    max_blocks_per_sm: int
    max_threads_per_sm: int
    shared_per_block_optin: int
    shared_per_sm: int
    memory_bytes: int
    clock_khz: int
    l2_bytes: int


KNOWN: dict[tuple[int, int], DeviceSpec] = {
    (7, 0): DeviceSpec(
        "Tesla V100-SXM2-32GB", 80, 32, 2048, 98304, 98304, 32 << 30, 1530000, 6 << 20
    ),
    (7, 5): DeviceSpec("Tesla T4", 40, 16, 1024, 65536, 65536, 16 << 30, 1590000, 4 << 20),
    (8, 0): DeviceSpec(
        "NVIDIA A100-SXM4-80GB", 108, 32, 2048, 166912, 167936, 80 << 30, 1410000, 40 << 20
    ),
    (8, 6): DeviceSpec(
        "NVIDIA GeForce RTX 3090", 82, 16, 1536, 101376, 102400, 24 << 30, 1695000, 6 << 20
    ),
    (8, 9): DeviceSpec("NVIDIA L4", 58, 24, 1536, 101376, 102400, 24 << 30, 2040000, 48 << 20),
    (9, 0): DeviceSpec(
        "NVIDIA H100 80GB HBM3", 132, 32, 2048, 232448, 233472, 80 << 30, 1980000, 50 << 20
    ),
    (10, 0): DeviceSpec(
        "NVIDIA B200", 148, 32, 2048, 232448, 233472, 180 << 30, 1965000, 126 << 20
    ),
    (12, 0): DeviceSpec(
        "NVIDIA GeForce RTX 5090", 170, 24, 1536, 101376, 102400, 32 << 30, 2407000, 96 << 20
    ),
}
DEFAULT_CC = (9, 0)


class MemoryInfo(NamedTuple):
    """``context.get_memory_info()``: bytes free and in all (numba's names)."""

    free: int
    total: int


def parse_cc(value: Any) -> tuple[int, int]:
    """``"9.0"``, ``9.0``, ``(9, 0)`` or ``"sm_90"`` as a known compute capability."""
    if isinstance(value, tuple):
        cc = tuple(int(v) for v in value)
    else:
        text = str(value).strip().lower().removeprefix("sm_")
        major, _, minor = text.partition(".") if "." in text else (text[:-1], "", text[-1:])
        try:
            cc = (int(major), int(minor or 0))
        except ValueError:
            cc = ()
    if cc not in KNOWN:
        known = ", ".join(f"{a}.{b}" for a, b in KNOWN)
        raise DeviceChoiceError(f"simulated compute capability {value!r}: one of {known}")
    return cc


class SimulatedDevice:
    """``cuda.get_current_device()`` under the simulator."""

    def __init__(self, cc: tuple[int, int]) -> None:
        self.id = 0
        self.compute_capability = cc
        self.spec = KNOWN[cc]
        self.name = self.spec.name
        self.uuid = "GPU-00000000-0000-0000-0000-000000000000"
        self.supports_float16 = cc >= (5, 3)
        self.supports_bfloat16 = cc >= (8, 0)
        self.primary_context: Any = None
        self._attributes = attributes(cc, self.spec)

    def __getattr__(self, attr: str) -> int:
        # numba's Device reads CU_DEVICE_ATTRIBUTE_<attr> from the driver on first use.
        attributes = self.__dict__.get("_attributes", {})
        if attr in attributes:
            return attributes[attr]
        raise AttributeError(f"simulated device has no attribute {attr!r}")

    def get_device_identity(self) -> dict[str, int]:
        return {"pci_domain_id": 0, "pci_bus_id": 0, "pci_device_id": 0}

    def get_primary_context(self) -> Any:
        return self.primary_context

    def reset(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"<CUDA device {self.id:d} '{self.name}' (simulated)>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SimulatedDevice) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)


def attributes(cc: tuple[int, int], spec: DeviceSpec) -> dict[str, int]:
    """The driver attributes numba and its tests read, as a GPU of ``cc`` reports them."""
    return {
        "MAX_THREADS_PER_BLOCK": 1024,
        "MAX_BLOCK_DIM_X": 1024,
        "MAX_BLOCK_DIM_Y": 1024,
        "MAX_BLOCK_DIM_Z": 64,
        "MAX_GRID_DIM_X": 2**31 - 1,
        "MAX_GRID_DIM_Y": 65535,
        "MAX_GRID_DIM_Z": 65535,
        "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
        "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": spec.shared_per_block_optin,
        "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": spec.shared_per_sm,
        "TOTAL_CONSTANT_MEMORY": 65536,
        "WARP_SIZE": 32,
        "MAX_PITCH": 2**31 - 1,
        "MAX_REGISTERS_PER_BLOCK": 65536,
        "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536,
        "CLOCK_RATE": spec.clock_khz,
        "MULTIPROCESSOR_COUNT": spec.sms,
        "MAX_THREADS_PER_MULTI_PROCESSOR": spec.max_threads_per_sm,
        "MAX_BLOCKS_PER_MULTIPROCESSOR": spec.max_blocks_per_sm,
        "COMPUTE_CAPABILITY_MAJOR": cc[0],
        "COMPUTE_CAPABILITY_MINOR": cc[1],
        "L2_CACHE_SIZE": spec.l2_bytes,
        "KERNEL_EXEC_TIMEOUT": 0,
        "INTEGRATED": 0,
        "CAN_MAP_HOST_MEMORY": 1,
        "COMPUTE_MODE": 0,
        "CONCURRENT_KERNELS": 1,
        "ECC_ENABLED": 1,
        "PCI_BUS_ID": 0,
        "PCI_DEVICE_ID": 0,
        "PCI_DOMAIN_ID": 0,
        "ASYNC_ENGINE_COUNT": 2,
        "UNIFIED_ADDRESSING": 1,
        "MANAGED_MEMORY": 1,
        "CONCURRENT_MANAGED_ACCESS": 1,
        "PAGEABLE_MEMORY_ACCESS": 0,
        "COOPERATIVE_LAUNCH": 1,
        "MULTI_GPU_BOARD": 0,
        "TCC_DRIVER": 0,
    }


def blocks_per_sm(spec: DeviceSpec, threads_per_block: int, shared_bytes: int = 0) -> int:
    """Blocks of this size one SM holds at once (threads, block slots, shared memory;
    registers are taken as 32 per thread, which never limits first at 1024 threads)."""
    warps = -(-max(1, threads_per_block) // 32)
    by_threads = spec.max_threads_per_sm // (warps * 32)
    by_shared = spec.shared_per_sm // shared_bytes if shared_bytes else spec.max_blocks_per_sm
    return max(0, min(spec.max_blocks_per_sm, by_threads, by_shared))


class DeviceList:
    """``cuda.gpus`` under the simulator: one device, its context current."""

    def __init__(self, context: Any) -> None:
        self.lst = (context,)
        self.closed = False

    def __getitem__(self, devnum: int) -> Any:
        self.closed = False
        return self.lst[devnum]

    def __iter__(self) -> Any:
        return iter(self.lst)

    def __len__(self) -> int:
        return len(self.lst)

    def __str__(self) -> str:
        return ", ".join(str(c) for c in self.lst)

    @property
    def current(self) -> Any:
        return None if self.closed else self.lst[0]


class Event:
    """``cuda.event()``: records the host clock; kernels run synchronously, so the time
    between two events is the time the simulator spent between them."""

    def __init__(self, timing: bool = True) -> None:
        self.timing = timing
        self._at: float | None = None

    def record(self, stream: Any = 0) -> None:
        self._at = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def wait(self, stream: Any = 0) -> None:
        return None

    def query(self) -> bool:
        return True

    def elapsed_time(self, evtend: Event) -> float:
        """Milliseconds from this event to ``evtend``, as ``cudaEventElapsedTime``."""
        if not (self.timing and evtend.timing):
            raise LaunchError("elapsed_time needs two events created with timing=True")
        if self._at is None or evtend._at is None:
            raise LaunchError("elapsed_time of an event that was never recorded")
        return (evtend._at - self._at) * 1000.0


def make_context(device: SimulatedDevice) -> Any:
    """numba's simulator context (host allocations, memory info), for ``device``."""
    from numba.cuda.simulator.cudadrv.devices import FakeCUDAContext

    class SimulatedContext(FakeCUDAContext):
        def __init__(self) -> None:
            super().__init__(0)
            self._device = device

        @property
        def compute_capability(self) -> tuple[int, int]:
            return device.compute_capability

        def get_memory_info(self) -> Any:
            total = device.spec.memory_bytes
            return MemoryInfo(free=total, total=total)

        def synchronize(self) -> None:
            return None

        def get_active_blocks_per_multiprocessor(
            self, func: Any, blocksize: int, memsize: int = 0, flags: Any = None
        ) -> int:
            return blocks_per_sm(device.spec, blocksize, memsize)

        def __repr__(self) -> str:
            return f"<CUDA context of {device!r}>"

    context = SimulatedContext()
    device.primary_context = context
    return context


_current: list[SimulatedDevice] = []  # the device simulated_cuda() answers as, while on


def current_device() -> SimulatedDevice:
    """The simulated device (the default one when simulated_cuda() is off)."""
    if not _current:
        _current.append(SimulatedDevice(DEFAULT_CC))
    return _current[-1]


def push_device(device: SimulatedDevice) -> None:
    _current.append(device)


def pop_device(device: SimulatedDevice) -> None:
    if device in _current:
        _current.reverse()
        _current.remove(device)  # the newest entry of it
        _current.reverse()
