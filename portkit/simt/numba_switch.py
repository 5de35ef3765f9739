"""Run code written for ``numba.cuda`` (a test suite, a script) in portkit's simulator,
unedited: ``cuda.jit`` kernels launch in portkit's machine, and the host side
(``to_device``, ``device_array``, streams, events, ``synchronize``) is numba's own
simulator API, host memory standing in for device memory.

    with portkit.simt.simulated_cuda():
        import my_kernels            # their @cuda.jit now builds simulated kernels
        my_kernels.run_everything()

or ``pytest --portkit-simt`` (portkit's pytest plugin), which turns it on before tests
are collected. What changes is what ``numba.cuda`` hands out while it is on: kernels
jitted before keep launching on the GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from portkit.simt.launcher import SimulatedKernel

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
    "synchronize",
    "stream",
    "default_stream",
    "legacy_default_stream",
    "per_thread_default_stream",
    "external_stream",
    "Event",
    "event",
    "select_device",
    "get_current_device",
    "list_devices",
    "detect",
    "close",
    "defer_cleanup",
    "current_context",
    "gpus",
)


def _is_signature(value: Any) -> bool:
    from numba.core.sigutils import is_signature

    return isinstance(value, (str, list, tuple)) or is_signature(value)


def _simulated_jit(original: Any, engine: str | None) -> Any:
    def jit(func_or_sig: Any = None, **options: Any) -> Any:
        device = bool(options.get("device"))
        options.pop("link", None)
        keep = {k: v for k, v in options.items() if k in ("device", "inline", "forceinline")}

        def wrap(fn: Any) -> Any:
            from numba.cuda.core import config

            # A real dispatcher (lazy: nothing compiles before a launch), even where the
            # suite set numba's ENABLE_CUDASIM to pick its simulator's skips.
            simulating, config.ENABLE_CUDASIM = config.ENABLE_CUDASIM, False
            try:
                dispatcher = original(**keep)(fn)
            finally:
                config.ENABLE_CUDASIM = simulating
            return dispatcher if device else SimulatedKernel(dispatcher, engine)

        if func_or_sig is None or _is_signature(func_or_sig):
            return wrap
        return wrap(func_or_sig)

    jit.__doc__ = original.__doc__
    return jit


@contextmanager
def simulated_cuda(engine: str | None = None) -> Iterator[None]:
    """While on, ``numba.cuda.jit`` kernels (run by ``engine``, default auto) and
    ``numba.cuda`` arrays are simulated."""
    from numba import cuda
    from numba.cuda.simulator import api
    from numba.cuda.simulator.cudadrv import devicearray

    replaced: dict[str, Any] = {
        "jit": _simulated_jit(cuda.jit, engine),
        "is_available": lambda: True,
    }
    for name in _FROM_DEVICEARRAY:
        if hasattr(devicearray, name):
            replaced[name] = getattr(devicearray, name)
    for name in _FROM_API:
        if hasattr(api, name):
            replaced[name] = getattr(api, name)
    saved = {name: getattr(cuda, name) for name in replaced if hasattr(cuda, name)}
    for name, value in replaced.items():
        setattr(cuda, name, value)
    try:
        yield
    finally:
        for name in replaced:
            if name in saved:
                setattr(cuda, name, saved[name])
            else:
                delattr(cuda, name)
