"""A stand-in GPU for an exported sigmoid package imported on the CPU: its kernels by
handle, run on CPU tensors from their launch arguments (data pointers and all), as the
GPU would run them, through every launcher a package may use: torch's launcher of
inductor's cubins, cuda.bindings' ``cuLaunchKernel`` and, for the compiled replayer,
a C function with ``cuLaunchKernel``'s signature (``c_launch_address``)."""

from __future__ import annotations

import ctypes
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

_C_TYPES = {"float": (ctypes.c_float, torch.float32), "double": (ctypes.c_double, torch.float64)}

# cuLaunchKernel(function, grid xyz, block xyz, shared, stream, params, extra)
_LAUNCH_KERNEL = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    *[ctypes.c_uint] * 7,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_void_p,
)


class StandInGpu:
    """The kernels of the package's sigmoid by handle; every launch noted as
    (launcher, kernel, values): "torch", "driver" or "compiled"."""

    def __init__(self, manifest: dict) -> None:
        self.kernels: dict[int, tuple[str, str]] = {}
        self.handles: dict[str, int] = {}
        for name, spec in manifest["ops"]["sigmoid"]["kernels"].items():
            for ctype, lowered in spec["lowered"].items():
                handle = self.handles[lowered] = 1000 + len(self.handles)
                self.kernels[handle] = (name, ctype)
        self.launches: list[tuple[str, str, tuple]] = []
        self._c_launch = _LAUNCH_KERNEL(self._compiled)  # kept alive with the GPU

    def run(self, launcher: str, handle: int, values: tuple) -> None:
        name, ctype = self.kernels[handle]
        self.launches.append((launcher, name, values))
        *pointers, n = values
        c_type, dtype = _C_TYPES[ctype]
        with _disable_current_modes():  # the kernel's work, unseen by a recorder's watch
            x, *rest = [
                torch.frombuffer((c_type * n).from_address(p), dtype=dtype) for p in pointers
            ]
            if name == "sigmoid_fwd":
                rest[0].copy_(torch.sigmoid(x))
            else:  # sigmoid_bwd(y, dy, dx, n)
                rest[1].copy_(rest[0] * x * (1 - x))

    def static(self, handle, gx, gy, gz, warps, shared, codes, values, stream) -> None:
        assert codes == "OOl" or codes == "OOOl"
        self.run("torch", handle, tuple(values))

    def cu_launch_kernel(self, function, *rest: Any) -> tuple:
        from cuda.bindings import driver

        values = self._values(int(function), rest[-2])
        self.run("driver", int(function), values)
        return (driver.CUresult.CUDA_SUCCESS,)

    @property
    def c_launch_address(self) -> int:
        """The compiled replayer's launch function (``native_replayer.launch_entry_points``)."""
        return ctypes.cast(self._c_launch, ctypes.c_void_p).value or 0

    def _compiled(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> int:
        address = ctypes.cast(params, ctypes.c_void_p).value or 0
        self.run("compiled", int(function), self._values(int(function), address))
        return 0

    def _values(self, handle: int, params: int) -> tuple:
        """The parameters of a launch from ``cuLaunchKernel``'s array of pointers: the
        data pointers, then the element count (a C ``long long``)."""
        name, _ = self.kernels[handle]
        count = 3 if name == "sigmoid_fwd" else 4
        slots = (ctypes.c_void_p * count).from_address(params)
        values = tuple(ctypes.c_uint64.from_address(s).value for s in slots)
        return values[:-1] + (ctypes.c_int64(values[-1]).value,)


def import_on_stand_in(
    mp: Any, folder: Any, package: str, gpu: StandInGpu, compiled: bool = False
) -> Any:
    """The exported package ``package`` in ``folder`` imported in this process on ``gpu``:
    CPU tensors pass for CUDA ones on device 0, buffers are CPU tensors, and each launcher
    runs the kernel on ``gpu`` (``mp``: a ``pytest.MonkeyPatch`` that undoes it all).
    ``compiled``: the package's compiled replayer launches through ``gpu`` too (a CPU
    build of torch has no driver: ``native_replayer.launch_entry_points`` gives None);
    else the package replays in Python (``PORTKIT_REPLAY=python``), on a GPU machine too."""
    import importlib
    import sys
    import types

    from cuda.bindings import driver

    mp.setattr(torch.Tensor, "is_cuda", property(lambda self: True), raising=False)
    mp.setattr(torch.Tensor, "get_device", lambda self: 0)  # cuda:0, as current_device
    mp.setattr(torch.cuda, "current_device", lambda: 0)
    mp.setattr(driver, "cuLaunchKernel", gpu.cu_launch_kernel)
    mp.syspath_prepend(str(folder))
    # The runtime first, patched, under a bare parent: the package's __init__ registers
    # its ops (and picks their replayer) as it imports.
    parent = types.ModuleType(package)
    parent.__path__ = [str(folder / package)]  # type: ignore[attr-defined]
    mp.setitem(sys.modules, package, parent)
    launch = importlib.import_module(f"{package}._runtime.driver_launch")
    mp.setattr(launch, "static_launcher", lambda: gpu.static)
    mp.setattr(launch, "current_stream", lambda device: 0)
    contract = importlib.import_module(f"{package}._runtime.launch_contract")
    mp.setattr(contract, "_get_device", lambda: 0)
    mp.setattr(contract, "_cuda_sm_count", lambda device: 132)
    if compiled:
        native = importlib.import_module(f"{package}._runtime.native_replayer")
        mp.setattr(native, "launch_entry_points", lambda: (gpu.c_launch_address, 0))
    else:
        mp.setenv("PORTKIT_REPLAY", "python")  # read as the package registers its ops
    runtime = importlib.import_module(f"{package}._runtime.exported")
    mp.setattr(runtime.Library, "kernel", lambda self, lowered: gpu.handles[lowered])
    mp.setattr(runtime.Kernels, "empty", lambda self, shape, dtype: torch.empty(shape, dtype=dtype))
    mp.delitem(sys.modules, package)  # the package itself, over the patched runtime
    return importlib.import_module(package)
