"""CuPy arrays in and out of a loaded op: ``portkit.load(...)`` callables take CuPy arrays
as they take tensors, and then return CuPy arrays (``cupy_call``, which the callable asks
only for inputs that are neither tensors nor scalars).

The arrays are viewed, not copied: ``torch.from_dlpack(array)`` in, ``cupy.from_dlpack
(tensor)`` out (CuPy's documented DLPack calls). The op runs on CuPy's current stream, made
PyTorch's current stream for the call (``torch.cuda.ExternalStream``), so the DLPack
exchanges need no synchronisation and the op is ordered with the user's CuPy work. CuPy
arrays carry no autograd: the outputs are plain arrays. CuPy is never imported here: an
argument is CuPy's when it is a ``cupy.ndarray`` of the ``cupy`` module its maker imported.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from portkit.errors import InputError

_TENSOR = torch.Tensor
_SCALARS = (bool, int, float, complex, str, type(None))

# kDLCUDA and kDLCUDAManaged: the device types ``__dlpack_device__`` gives for GPU memory
_DLPACK_GPU = (2, 13)


def _is_cupy(value: Any) -> bool:
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(value, cupy.ndarray)


def cupy_call(function: Callable[..., Any], inputs: Sequence[Any]) -> Any:
    """``OpCallable.other_arrays``: ``function`` on ``inputs`` if one of them is a CuPy
    array, else NotImplemented. Only the slow path asks (an input that is neither a
    tensor nor a scalar), so a loaded op called on tensors pays nothing for CuPy."""
    first = next((v for v in inputs if not isinstance(v, _TENSOR) and _is_cupy(v)), None)
    if first is None:
        return NotImplemented
    for value in inputs:
        if not _is_cupy(value) and _is_array(value):
            raise InputError(
                f"op {function.__name__}: inputs mix CuPy arrays with a {type(value).__module__}."
                f"{type(value).__name__}; pass CuPy arrays only (or tensors only)"
            )
    cupy = sys.modules["cupy"]
    with _on_current_stream(cupy, first):
        tensors = [torch.from_dlpack(v) if _is_cupy(v) else v for v in inputs]
        result = function(*tensors)
        if isinstance(result, torch.Tensor):
            return cupy.from_dlpack(result.detach())
        return tuple(cupy.from_dlpack(t.detach()) for t in result)


def _is_array(value: Any) -> bool:
    """A tensor or another library's array: anything but a scalar, Python's or NumPy's
    (which may go beside CuPy arrays; an op's inputs are tensors and scalars)."""
    import numpy as np

    return not isinstance(value, (*_SCALARS, np.generic))


@contextlib.contextmanager
def _on_current_stream(cupy: Any, array: Any) -> Iterator[None]:
    """PyTorch's device and current stream made CuPy's for the call. CuPy's null stream
    (pointer 0) is the legacy default stream, which is PyTorch's default stream too."""
    kind, index = array.__dlpack_device__()
    if kind not in _DLPACK_GPU:  # not GPU memory (a host stand-in in tests): no stream
        yield
        return

    pointer = cupy.cuda.get_current_stream().ptr
    with torch.cuda.device(index):
        stream = (
            torch.cuda.ExternalStream(pointer, device=torch.device("cuda", index))
            if pointer
            else torch.cuda.default_stream(index)
        )
        with torch.cuda.stream(stream):
            yield
