"""A NumPy ufunc called on whole arrays inside a kernel (``np.sin(x, r)``), as numba
compiles it: each thread that calls it runs the ufunc over every element, reading its
inputs and writing its output array through the simulator's checked accesses (bounds,
races, uninitialised memory), with NumPy's broadcasting and type rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from portkit.errors import KernelError


def _is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) or hasattr(value, "space")  # SimArray: memory.py


def _values(array: Any) -> np.ndarray:
    """Every element of a kernel's array, each read through its checked ``[]``."""
    if isinstance(array, np.ndarray):
        return array
    if not isinstance(array.dtype, np.dtype):
        raise KernelError(f"a ufunc over {array.name} ({array.dtype}) is not simulated")
    shape = tuple(int(n) for n in array.shape)
    flat = [array[index] for index in np.ndindex(*shape)]
    return np.array(flat, dtype=array.dtype).reshape(shape)


def whole_array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``ufunc(*inputs, out=...)`` where some input or output is a simulated array."""
    if method != "__call__" or set(kwargs) - {"out"}:
        raise KernelError(f"np.{ufunc.__name__}.{method} over arrays in a kernel is not simulated")
    values = [_values(v) if _is_array(v) else v for v in inputs]
    results = ufunc(*values)
    results = results if isinstance(results, tuple) else (results,)
    outs = kwargs.get("out") or (None,) * ufunc.nout
    written = []
    for out, result in zip(outs, results):
        if out is None:
            written.append(result)
            continue
        shape = tuple(int(n) for n in out.shape)
        result = np.broadcast_to(np.asarray(result).astype(out.dtype), shape)
        for index in np.ndindex(*shape):
            out[index] = result[index]
        written.append(out)
    return written[0] if ufunc.nout == 1 else tuple(written)
