"""CUDA's vector types in a simulated kernel (``cuda.float32x4(...)``, ``cuda.float4``,
``v.x``...): numba's simulator's classes, which build from scalars and smaller vectors
and read back as ``.x .y .z .w``, under every name numba-cuda gives them."""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def vector_types() -> dict[str, type]:
    """Each vector type name and alias (``float32x4``, ``float4``) -> its class."""
    from numba.cuda.simulator.vector_types import vector_types as simulated

    names: dict[str, type] = {}
    for name, kind in simulated.items():
        names[name] = kind
        for alias in getattr(kind, "aliases", ()):
            names[alias] = kind
    return names


def simulated_vector_type(value: Any) -> type | None:
    """The simulator's class for numba-cuda's vector type stub ``value``, else None."""
    if not isinstance(value, type) or not value.__module__.startswith("numba.cuda.stubs"):
        return None
    return vector_types().get(value.__name__)
