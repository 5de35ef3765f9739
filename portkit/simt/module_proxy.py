"""``numba`` (or ``numba.types``) as a simulated kernel sees it: each attribute the
kernel names, converted once to its simulated value."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any


def _is_namespace(value: Any) -> bool:
    """Objects of numba's whose attributes a kernel may name (stub namespaces)."""
    return type(value).__module__.startswith("numba")


class _ModuleProxy:
    """``numba`` (or ``numba.types``) as a simulated kernel sees it."""

    def __init__(self, module: types.ModuleType, convert: Callable[[Any], Any]) -> None:
        self._module, self._convert = module, convert

    def __getattr__(self, name: str) -> Any:
        value = self._convert(getattr(self._module, name))
        setattr(self, name, value)
        return value
