"""Run code written for ``numba.cuda`` (a test suite, a script) in portkit's simulator,
unedited: ``cuda.jit`` kernels launch in portkit's machine, and the host side
(``to_device``, ``device_array``, streams, events, ``synchronize``) is numba's own
simulator API, host memory standing in for device memory.

    with portkit.simt.simulated_cuda():
        import my_kernels            # their @cuda.jit now builds simulated kernels
        my_kernels.run_everything()

or ``pytest --portkit-simt`` (portkit's pytest plugin), which turns it on before tests
are collected. What changes is what ``numba.cuda`` hands out while it is on: kernels
jitted before keep launching on the GPU. Where numba-cuda-mlir is installed, its
``cuda`` module (``from numba_cuda_mlir import cuda``) is switched the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from portkit.errors import LaunchError
from portkit.numba_internals import set_cudasim_flag, switch_modules
from portkit.simt.device import (
    DEFAULT_CC,
    DeviceList,
    Event,
    SimulatedDevice,
    make_context,
    parse_cc,
    pop_device,
    push_device,
)
from portkit.simt.launcher import SimulatedKernel
from portkit.simt.mlir_names import forget, installed_modules
from portkit.simt.vector_types import vector_types

# numba.cuda names replaced by numba's simulator's (host memory, no driver).
_FROM_DEVICEARRAY = (
    "to_device",
    "device_array",
    "device_array_like",
    "pinned_array",
    "pinned_array_like",
    "mapped_array",
    "managed_array",
    "pinned",
    "mapped",
    "is_cuda_array",
)
_FROM_API = (
    "is_bfloat16_supported",  # False, as numba's simulator says: its tests skip alike
    "is_fp8_supported",
    "synchronize",
    "stream",
    "default_stream",
    "legacy_default_stream",
    "per_thread_default_stream",
    "external_stream",
    "defer_cleanup",
)


def _is_signature(value: Any) -> bool:
    from numba.core.sigutils import is_signature

    return isinstance(value, (str, list, tuple)) or is_signature(value)


# numba.cuda.cudadrv.driver names replaced by numba's simulator's (copies on host memory).
_FROM_DRIVER = (
    "_have_nvjitlink",  # no linker in a simulator: skip_if_nvjitlink_missing skips
    "device_memset",
    "host_to_device",
    "device_to_host",
    "device_to_device",
    "device_memory_size",
    "driver",
)


def _device_names(cc: tuple[int, int]) -> tuple[SimulatedDevice, dict[str, Any]]:
    """The simulated device, and what ``numba.cuda`` and ``numba.cuda.cudadrv.devices``
    answer about devices and contexts with it (no driver is reached)."""
    device = SimulatedDevice(cc)
    context = make_context(device)
    gpus = DeviceList(context)

    def get_context(devnum: int = 0) -> Any:
        return gpus[devnum]

    def select_device(device_id: int) -> SimulatedDevice:
        if device_id != 0:
            raise LaunchError(f"select_device({device_id}): the simulator has one device, 0")
        return device

    def close() -> None:
        gpus.closed = True

    def detect() -> bool:
        print("Found 1 CUDA devices")
        print(f"id 0    {device.name!r:>40} {'[SUPPORTED] (simulated)':>40}")
        print(f"{'Compute Capability':>40}: {cc[0]}.{cc[1]}")
        print("Summary:\n\t1/1 devices are supported")
        return True

    names = {
        "is_available": lambda: True,
        "get_current_device": lambda: device,
        "current_context": get_context,
        "get_context": get_context,
        "gpus": gpus,
        "list_devices": lambda: gpus,
        "select_device": select_device,
        "close": close,
        "detect": detect,
        "event": Event,
        "Event": Event,
        "event_elapsed_time": lambda start, end: start.elapsed_time(end),
    }
    return device, names


def _simulated_jit(original: Any, engine: str | None) -> Any:
    def jit(func_or_sig: Any = None, **options: Any) -> Any:
        device = bool(options.get("device"))
        options.pop("link", None)
        keep = {k: v for k, v in options.items() if k in ("device", "inline", "forceinline")}

        def wrap(fn: Any) -> Any:
            # A real dispatcher (lazy: nothing compiles before a launch), even where the
            # suite set numba's ENABLE_CUDASIM to pick its simulator's skips.
            simulating = set_cudasim_flag(False)
            try:
                dispatcher = original(**keep)(fn)
            finally:
                set_cudasim_flag(simulating)
            if device:
                return dispatcher
            # No numba type check here: the kernel's globals are this switch's simulated
            # objects (a plain cuda.jit function it calls is a SimulatedKernel), which
            # numba cannot type; simulate() of a kernel written against numba checks.
            kernel = SimulatedKernel(dispatcher, engine, signature=signature, typecheck=False)
            # debug=True: a float division by zero stops the kernel (numba's Python error
            # model on a GPU; FloatingPointError as numba's simulator raises it)
            kernel.debug = bool(options.get("debug"))
            return kernel

        signature = func_or_sig if func_or_sig is not None and _is_signature(func_or_sig) else None
        if func_or_sig is None or signature is not None:
            return wrap
        return wrap(func_or_sig)

    jit.__doc__ = original.__doc__
    return jit


def _swap(module: Any, replaced: dict[str, Any]) -> dict[str, Any]:
    """Set ``replaced`` on ``module``; returns what to restore (a missing name: a sentinel)."""
    saved = {name: getattr(module, name, _MISSING) for name in replaced}
    for name, value in replaced.items():
        setattr(module, name, value)
    return saved


def _restore(module: Any, saved: dict[str, Any]) -> None:
    for name, value in saved.items():
        if value is _MISSING:
            delattr(module, name)
        else:
            setattr(module, name, value)


_MISSING = object()


def _cuda_names(cuda: Any, engine: str | None, device_names: dict[str, Any]) -> dict[str, Any]:
    """What a ``cuda`` module (numba-cuda's or numba-cuda-mlir's) hands out while on."""
    numba_modules = switch_modules()
    api, devicearray = numba_modules.simulated_api, numba_modules.simulated_devicearray
    Reduce = numba_modules.Reduce

    replaced: dict[str, Any] = {"jit": _simulated_jit(cuda.jit, engine), **device_names}
    # numba's reduction kernel makes a full-mask syncwarp that lanes 2-31 never reach
    # (undefined on a GPU; the simulator stops there): reduce on the host, as numba's
    # simulator does.
    replaced["reduce"] = replaced["Reduce"] = Reduce
    replaced.update(vector_types())  # cuda.float32x4 on the host too (numba's tests)
    replaced["devicearray"] = devicearray  # cuda.devicearray.auto_device..., as numba's simulator
    del replaced["get_context"]  # numba.cuda's name for it is current_context
    for name in _FROM_DEVICEARRAY:
        if hasattr(devicearray, name):
            replaced[name] = getattr(devicearray, name)
    for name in _FROM_API:
        if hasattr(api, name):
            replaced[name] = getattr(api, name)
    return replaced


@contextmanager
def simulated_cuda(engine: str | None = None, cc: Any = None) -> Iterator[SimulatedDevice]:
    """While on, ``numba.cuda.jit`` kernels (run by ``engine``, default auto) and
    ``numba.cuda`` arrays are simulated, and device and context queries answer as a GPU
    of compute capability ``cc`` (default 9.0: ``"8.0"``, ``(8, 6)``...), the device
    yielded. Where numba-cuda-mlir is installed, its ``cuda`` module is switched the
    same way (one simulated device for both)."""
    numba_modules = switch_modules()
    cuda, real_api = numba_modules.cuda, numba_modules.api
    devices, driver = numba_modules.devices, numba_modules.driver
    simulated_api, simulated_driver = numba_modules.simulated_api, numba_modules.simulated_driver

    device, device_names = _device_names(parse_cc(DEFAULT_CC if cc is None else cc))
    # numba.cuda.testing's helpers (skip_unless_cc_60...) ask devices.get_context().
    on_devices = {n: device_names[n] for n in ("get_context", "gpus")}
    on_driver = {n: getattr(simulated_driver, n) for n in _FROM_DRIVER}
    switched = [(cuda, _cuda_names(cuda, engine, device_names)), (devices, on_devices)]
    switched.append((driver, on_driver))
    # numba.cuda.api's own answers (tests import is_fp8_supported from there)
    supports = ("is_bfloat16_supported", "is_fp8_supported")
    switched.append((real_api, {n: getattr(simulated_api, n) for n in supports}))
    mlir = installed_modules()
    if mlir is not None:
        switched.append((mlir.cuda, _cuda_names(mlir.cuda, engine, device_names)))
        switched += [(mlir.devices, on_devices), (mlir.driver, on_driver)]
    testing = numba_modules.testing
    if testing is not None:
        # numba's answer under its simulator is "every cc"; the simulated device has one.
        switched.append((testing, {"cc_X_or_above": lambda *cc: device.compute_capability >= cc}))
    forget()
    saved = [(module, _swap(module, names)) for module, names in switched]
    push_device(device)
    simulating = _announce(1, "1")
    try:
        yield device
    finally:
        _announce(*simulating)
        pop_device(device)
        for module, names in reversed(saved):
            _restore(module, names)
        forget()


def _announce(on: Any, variable: str | None) -> tuple[Any, str | None]:
    """Tell code that asks "am I simulated?" (numba's ``config.ENABLE_CUDASIM``: its test
    helpers, ``skip_on_cudasim``) and child processes (``NUMBA_ENABLE_CUDASIM``, which
    gives them numba's simulator) whether CUDA is simulated; returns the previous state."""
    from portkit.project.environment import set_process_variable

    return set_cudasim_flag(on), set_process_variable("NUMBA_ENABLE_CUDASIM", variable)
