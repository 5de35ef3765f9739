"""GPU arrays a simulated launch takes: a CuPy array or a numba device array (numba-cuda's
or numba-cuda-mlir's ``DeviceNDArray``) is copied to the host before the launch and back
after it, the way a simulator on the CPU must; other GPU memory is refused by name.

CuPy is imported by nobody here: an array is CuPy's when its class is ``cupy.ndarray`` of
the ``cupy`` module already imported (whoever made the array imported it). The calls are
CuPy's documented ones: ``cupy.asnumpy(a)`` (a blocking copy on the current stream) and
``a.set(host)``; numba's are ``copy_to_host()`` and ``copy_to_device(host)``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from portkit.errors import LaunchError


@dataclass(frozen=True)
class HostCopy:
    """A GPU array's contents on the host, and how to put them back after the launch."""

    host: np.ndarray
    write_back: Callable[[], None]


def is_cupy_array(value: Any) -> bool:
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(value, cupy.ndarray)


def _is_numba_device_array(value: Any) -> bool:
    """numba-cuda's or numba-cuda-mlir's ``DeviceNDArray`` (the two packages share the API)."""
    return (
        type(value).__module__.split(".")[0] in ("numba", "numba_cuda", "numba_cuda_mlir")
        and callable(getattr(value, "copy_to_host", None))
        and callable(getattr(value, "copy_to_device", None))
    )


def _contiguous(interface: dict[str, Any]) -> bool:
    """Whether a ``__cuda_array_interface__`` describes C-contiguous memory (strides None
    means so, per the interface's specification)."""
    strides = interface.get("strides")
    if strides is None:
        return True
    shape = tuple(interface["shape"])
    expected, step = [0] * len(shape), np.dtype(interface["typestr"]).itemsize
    for axis in reversed(range(len(shape))):
        expected[axis], step = step, step * shape[axis]
    return 0 in shape or all(n == 1 or s == e for s, e, n in zip(strides, expected, shape))


def host_copy(where: str, value: Any) -> HostCopy | None:
    """``value`` copied to the host when it is a GPU array the simulator copies; None for
    anything else. ``where`` ("kernel k: parameter x") starts an error's line."""
    cupy = is_cupy_array(value)
    if not cupy and not _is_numba_device_array(value):
        return None
    name = type(value).__name__
    own = getattr(value, "_ary", None)
    if ".simulator." in type(value).__module__ and isinstance(own, np.ndarray):
        if own.flags.c_contiguous:  # numba's simulator's device array: host memory already
            return HostCopy(own, lambda: None)
    if not _contiguous(value.__cuda_array_interface__):
        fix = "cupy.ascontiguousarray(...)" if cupy else "a contiguous device array"
        raise LaunchError(
            f"{where} is a non-contiguous {name}; the simulator copies contiguous GPU "
            f"arrays to the host and back: pass {fix}"
        )
    if cupy:
        host = np.ascontiguousarray(sys.modules["cupy"].asnumpy(value))
        return HostCopy(host, lambda: value.set(host))
    host = np.ascontiguousarray(value.copy_to_host())
    return HostCopy(host, lambda: value.copy_to_device(host))


def refuse_device_memory(where: str, value: Any) -> NoReturn:
    """GPU memory of a kind the simulator cannot copy: say which kinds it takes."""
    raise LaunchError(
        f"{where} is GPU memory the simulator cannot copy ({type(value).__module__}."
        f"{type(value).__name__}): pass a CuPy array, a numba device array, a NumPy array "
        f"or a CPU tensor"
    )
