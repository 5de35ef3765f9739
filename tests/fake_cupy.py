"""A STAND-IN for CuPy, for tests on machines without a GPU (CuPy has no wheel here).

It is NOT CuPy: it implements only the few calls portkit makes, with CuPy's documented
signatures, over NumPy arrays in host memory: ``cupy.ndarray`` (with
``__cuda_array_interface__``, ``set``, ``__dlpack__``/``__dlpack_device__``),
``cupy.asnumpy``, ``cupy.asarray``, ``cupy.from_dlpack`` and
``cupy.cuda.get_current_stream().ptr``. ``install(monkeypatch)`` puts it in
``sys.modules["cupy"]`` for one test. Real CuPy runs in the GPU tests beside these.
"""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np


class ndarray:  # noqa: N801 - CuPy's class name
    """Device memory, played by a NumPy array."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array
        self.shape, self.dtype, self.size = array.shape, array.dtype, array.size

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        a = self._array
        strides = None if a.flags.c_contiguous else a.strides
        return {
            "shape": a.shape,
            "typestr": a.dtype.str,
            "data": (a.__array_interface__["data"][0], False),
            "strides": strides,
            "version": 3,
        }

    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        if not self._array.flags.c_contiguous:
            raise RuntimeError("Cannot set to non-contiguous array")  # as CuPy says
        self._array[...] = arr

    def __getitem__(self, index: Any) -> ndarray:
        return ndarray(self._array[index])

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        return self._array.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._array.__dlpack_device__()


def asnumpy(a: ndarray, stream: Any = None, order: str = "C", out: Any = None) -> np.ndarray:
    return a._array.copy()


def asarray(a: Any, dtype: Any = None) -> ndarray:
    return ndarray(np.array(a, dtype=dtype))


def from_dlpack(x: Any) -> ndarray:
    return ndarray(np.from_dlpack(x))


_STREAM = SimpleNamespace(ptr=0)  # CuPy's default stream is the null stream
cuda = SimpleNamespace(get_current_stream=lambda: _STREAM)


def install(monkeypatch: Any) -> ModuleType:
    """This module as ``cupy`` for one test (``monkeypatch`` undoes it)."""
    module = sys.modules[__name__]
    # Where real CuPy is installed too (the GPU machine), its submodules leave the
    # process for the test: a lazily imported one (cupyx's) would otherwise import while
    # the stand-in is "cupy" (inspect.getmodule walks sys.modules) and keep the stand-in
    # as its "cupy" for the rest of the process.
    for name in [n for n in sys.modules if n.startswith(("cupy.", "cupyx")) or n == "cupyx"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cupy", module)
    return module
