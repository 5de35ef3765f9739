"""Launch compiled CUDA kernels through the driver API with the per-call work done once.

A launch packs its arguments with ``struct.pack_into`` (which refuses a value that does
not fit its C type) and hands them to torch's C++ launcher of inductor's cubins where
torch has it and the block is whole warps (3.5 µs a launch on the H100), else to
cuda.bindings' ``cuLaunchKernel`` (5.1 µs; cuda.core's launch: 7.9). Shipped in exported
packages (docs/fast-path.md, "Launch path").
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from .launch_contract import SCALAR_TYPES

# NumPy type name of a C scalar (launch_contract.SCALAR_TYPES) -> its struct code padded
# to one 8-byte slot, and its argument code for torch's StaticCudaLauncher. The 8- and
# 16-bit integers have neither: they travel as a raw slot.
_CODES = {
    "float32": ("f4x", "f"),
    "float64": ("d", "d"),
    "int32": ("i4x", "i"),
    "uint32": ("I4x", "I"),
    "int64": ("q", "l"),
    "uint64": ("Q", "K"),
    "bool_": ("?7x", "b"),
}
# C scalar type -> struct code. Pointers travel as "Q"; "raw" is a scalar type without a
# struct code: its bytes, made by the caller.
SLOT_CODES = {c: _CODES[k][0] for c, k in SCALAR_TYPES.items() if k in _CODES}
SLOT_CODES.update(pointer="Q", raw="8s")
SLOT_BYTES = 8
# C scalar type -> torch's StaticCudaLauncher argument code ("O": a pointer as an int).
STATIC_CODES = {c: _CODES[k][1] for c, k in SCALAR_TYPES.items() if k in _CODES}
STATIC_CODES["pointer"] = "O"
MAX_STATIC_GRID = 2**31  # the launcher multiplies the grid's dimensions in a C int


class ArgumentBuffers(threading.local):
    """The kernel-parameter block of one kernel, one per thread: a launch copies the
    parameters before it returns, but two Python threads could pack at once."""

    def __init__(self, count: int) -> None:
        slots = max(count, 1)
        self.data = ctypes.create_string_buffer(slots * SLOT_BYTES)
        base = ctypes.addressof(self.data)
        self.pointers = (ctypes.c_void_p * slots)(*[base + i * SLOT_BYTES for i in range(slots)])
        self.address = ctypes.addressof(self.pointers) if count else None


class DriverKernel:
    """One lowered kernel (one template instantiation), ready to launch.

    ``slots`` gives each parameter's C type ("pointer" for a tensor). ``pack`` raises
    ``struct.error``/``TypeError``/``OverflowError`` on a value that does not fit; callers
    that want a friendly message catch those and explain the argument.
    """

    def __init__(self, handle: Any, slots: Sequence[str]) -> None:
        from cuda.bindings import driver

        self.handle = handle
        # A CUkernel (library kernel) launches where a CUfunction is asked for; made a
        # CUfunction once so the binding does not convert it on every call.
        self._function = driver.CUfunction(int(handle))
        self.slots = tuple(slots)
        self._struct = struct.Struct("=" + "".join(SLOT_CODES[s] for s in self.slots))
        self._buffers = ArgumentBuffers(len(self.slots))
        self._launch = driver.cuLaunchKernel
        self._success = driver.CUresult.CUDA_SUCCESS
        self._handle = int(handle)
        codes = [STATIC_CODES.get(s) for s in self.slots]
        # mypy does not narrow a list by all(): no code is None here
        self._static_codes = "".join(codes) if all(codes) else None  # type: ignore[arg-type]
        self._static = static_launcher() if self._static_codes is not None else None

    def launch(
        self,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_bytes: int,
        stream: int,
        values: Sequence[Any],
        warps: int = 0,
    ) -> None:
        """``values``: data pointers (ints) for pointers, numbers (or a raw slot's bytes)
        else, checked by packing them. With ``warps`` (``static_warps``: the block suits
        torch's launcher) and values that are Python ints and floats only, torch's
        launcher takes them; otherwise ``cuLaunchKernel`` takes the packed buffer."""
        self._struct.pack_into(self._buffers.data, 0, *values)
        if warps and self._static is not None:
            self._static(
                self._handle,
                grid[0],
                grid[1],
                grid[2],
                warps,
                shared_bytes,
                self._static_codes,
                tuple(values),
                stream,
            )
        else:
            self.launch_packed(grid, block, shared_bytes, stream)

    def packed(self, values: Sequence[Any]) -> bytes:
        """The parameter block for ``values`` as bytes (a recording keeps one per launch)."""
        return self._struct.pack(*values)

    def pack(self, values: Sequence[Any]) -> None:
        """Write ``values`` into this thread's parameter block (raises before anything
        is launched if one does not fit its slot)."""
        self._struct.pack_into(self._buffers.data, 0, *values)

    def launch_packed(
        self,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_bytes: int,
        stream: int,
    ) -> None:
        """``cuLaunchKernel`` with the values ``pack`` wrote on this thread."""
        function, address = self._function, self._buffers.address
        (err,) = self._launch(function, *grid, *block, shared_bytes, stream, address, 0)
        if err != self._success:
            if err.name != "CUDA_ERROR_INVALID_CONTEXT":
                raise RuntimeError(f"cuLaunchKernel failed: {err.name}")
            _make_primary_context_current()  # a thread where torch set no context yet
            (err,) = self._launch(function, *grid, *block, shared_bytes, stream, address, 0)
            _check(err, "cuLaunchKernel")


def static_warps(grid: tuple[int, int, int], block: tuple[int, int, int]) -> int:
    """Warps per block if torch's launcher can take this configuration (it launches
    32 x warps threads along x only, and multiplies the grid's dimensions in a C int),
    else 0."""
    if block[1] == 1 and block[2] == 1 and not block[0] & 31:
        if grid[0] * grid[1] * grid[2] < MAX_STATIC_GRID:
            return block[0] >> 5
    return 0


def static_launcher() -> Any:
    """torch's C++ launcher of inductor's cubins, or None where this torch has none (CPU
    builds, older releases). It is private API: a torch without it costs 1.6 µs a launch,
    nothing else."""
    from .torch_private import static_cuda_launcher

    return static_cuda_launcher()


_raw_stream: Any = None


def current_stream(device_index: int) -> int:
    """torch's current stream on ``device_index`` as a raw handle, without building a
    torch.cuda.Stream object per call (Triton reads it the same way). Under CUDA graph
    capture this is the capturing stream, so launches are recorded."""
    global _raw_stream
    if _raw_stream is None:
        import torch

        from .torch_private import current_raw_stream

        _raw_stream = current_raw_stream() or (
            lambda index: torch.cuda.current_stream(index).cuda_stream
        )
    return _raw_stream(device_index)


def load_library(image: bytes) -> Any:
    """A CUlibrary from a cubin, fatbin or PTX image (PTX is compiled by the driver)."""
    import torch
    from cuda.bindings import driver

    torch.cuda.init()  # the primary context the kernels will run in
    (err,) = driver.cuInit(0)
    _check(err, "cuInit")
    err, library = driver.cuLibraryLoadData(image, [], [], 0, [], [], 0)
    _check(err, "cuLibraryLoadData")
    return library


class LoadedLibrary:
    """A CUlibrary loaded from a cubin, fatbin or PTX image (``load_library``), unloaded
    (``cuLibraryUnload``) once nothing references this object. Each of its kernels
    (``kernel``) references it, and so does every ``DriverKernel`` made from one: a
    KernelSet in use, a recording that replays its launches, keep its code loaded, and an
    edited twin's old library goes with the last of them (a resident process, ``portkit
    watch`` or a notebook, would otherwise keep every version it ever loaded). Nothing is
    unloaded at interpreter exit: the driver releases it all with the process."""

    def __init__(self, image: bytes) -> None:
        self.handle = load_library(image)
        finalizer = weakref.finalize(self, unload_library, self.handle)
        finalizer.atexit = False
        _LOADED.add(self)

    def kernel(self, lowered_name: str) -> LibraryKernel:
        return LibraryKernel(get_kernel(self.handle, lowered_name), self)


class LibraryKernel:
    """A CUkernel of a ``LoadedLibrary``, keeping it loaded; ``int()`` is the handle
    ``cuLaunchKernel`` and torch's launcher take (``DriverKernel``)."""

    __slots__ = ("kernel", "library")

    def __init__(self, kernel: Any, library: LoadedLibrary) -> None:
        self.kernel, self.library = kernel, library

    def __int__(self) -> int:
        return int(self.kernel)


# The libraries loaded now (``LoadedLibrary``): what a resident process holds on the GPU.
_LOADED: weakref.WeakSet[LoadedLibrary] = weakref.WeakSet()


def loaded_libraries() -> int:
    """How many ``LoadedLibrary`` are loaded in this process."""
    return len(_LOADED)


def unload_library(handle: Any) -> None:
    """``cuLibraryUnload``. It runs from the garbage collector: a failure is one line on
    stderr, never an exception."""
    from cuda.bindings import driver

    (err,) = driver.cuLibraryUnload(handle)
    if err != driver.CUresult.CUDA_SUCCESS:
        print(f"portkit: cuLibraryUnload failed: {err.name}", file=sys.stderr)


def _make_primary_context_current() -> None:
    import torch
    from cuda.bindings import driver

    err, device = driver.cuDeviceGet(torch.cuda.current_device())
    _check(err, "cuDeviceGet")
    err, context = driver.cuDevicePrimaryCtxRetain(device)
    _check(err, "cuDevicePrimaryCtxRetain")
    (err,) = driver.cuCtxSetCurrent(context)
    _check(err, "cuCtxSetCurrent")


def get_kernel(library: Any, lowered_name: str) -> Any:
    from cuda.bindings import driver

    err, kernel = driver.cuLibraryGetKernel(library, lowered_name.encode())
    _check(err, f"cuLibraryGetKernel({lowered_name})")
    return kernel


def _check(err: Any, what: str) -> None:
    from cuda.bindings import driver

    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {err.name}")
