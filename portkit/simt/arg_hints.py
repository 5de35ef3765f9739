"""numba's argument hints and argument extensions, applied to a simulated launch as
numba applies them to a GPU launch: ``cuda.In(a)`` (copied in, never back: the kernel's
writes are dropped), ``cuda.Out(a)`` and ``cuda.InOut(a)`` (written back), and a
kernel's ``extensions`` (objects whose ``prepare_args(ty, value, stream=, retr=)``
rewrites each argument first, e.g. wrapping arrays in ``cuda.In``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

_HINTS = ("In", "Out", "InOut")


def _is_hint(value: Any) -> bool:
    """numba.cuda.args' hints (and its simulator's copy of them)."""
    kind = type(value)
    return (
        kind.__name__ in _HINTS and kind.__module__.startswith("numba") and hasattr(value, "value")
    )


def _unhinted(value: Any) -> Any:
    if not _is_hint(value):
        return value
    inner = value.value
    if type(value).__name__ == "In":  # copied to the device only: writes do not come back
        array = getattr(inner, "_ary", inner)
        return np.array(array, copy=True) if isinstance(array, np.ndarray) else inner
    return inner


def prepared(extensions: Sequence[Any], args: Sequence[Any]) -> list[Any]:
    """The launch's arguments after the kernel's extensions and numba's hints."""
    retr: list[Any] = []  # numba's copy-back callbacks; the simulator writes in place

    def extend(value: Any) -> Any:
        _, value = functools.reduce(
            lambda typed, extension: extension.prepare_args(*typed, stream=0, retr=retr),
            extensions,
            (None, value),
        )
        return value

    return [_unhinted(extend(a) if extensions else a) for a in args]
