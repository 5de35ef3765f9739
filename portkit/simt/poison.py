"""Uninitialised values, MemorySanitizer's way: a read of shared or local memory nobody
wrote returns a ``Poison``, which flows through arithmetic, casts and math functions and
is an error only where it is used: a branch condition (``bool``), an index or address
(``__index__``), a conversion to a Python number, an atomic's operand, a store to global
memory (``memory.py``). Loaded and dropped, it is a warning (simt/warning_log.py). Stored
to shared or local memory, it keeps that element uninitialised.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from portkit.simt.memory_fault import MemoryFault


class PoisonUsed(MemoryFault):
    """An uninitialised value was used where its bits decide something."""

    def __init__(self, poison: Poison, how: str) -> None:
        super().__init__("uninitialised", f"uninitialised value {how}: {poison.origin}")


class Poison:
    """A value computed from uninitialised memory. ``raw``: the bits the simulator holds
    (NaN or a pattern), kept so a store to shared memory keeps a plausible value;
    ``origin``: which read it came from; ``pending``: (shared shadow, flat) while the
    element it came from may still be written by another thread in this barrier
    interval (then it is a race, reported at that write)."""

    __slots__ = ("raw", "origin", "pending")

    def __init__(self, raw: Any, origin: str, pending: Any = None) -> None:
        self.raw, self.origin, self.pending = raw, origin, pending

    def __repr__(self) -> str:
        return f"<uninitialised {self.raw!r}>"

    def __bool__(self) -> bool:
        raise PoisonUsed(self, "used in a branch condition")

    def __index__(self) -> int:
        raise PoisonUsed(self, "used as an index")

    def __int__(self) -> int:
        raise PoisonUsed(self, "converted to a Python number")

    def __float__(self) -> float:
        raise PoisonUsed(self, "converted to a Python number")

    def __complex__(self) -> complex:
        raise PoisonUsed(self, "converted to a Python number")

    def __hash__(self) -> int:
        raise PoisonUsed(self, "used as a key")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return self.like(ufunc, *inputs)

    def like(self, function: Callable[..., Any], *args: Any) -> Poison:
        """``function`` of ``args`` (some of them poison) as a poison: what its raw
        values give, or this one's raw value where that fails."""
        try:
            raw = function(*(a.raw if type(a) is Poison else a for a in args))
        except Exception:
            raw = self.raw
        return Poison(raw, self.origin, self.pending)


def first_poison(values: Any) -> Poison | None:
    """The first ``Poison`` among ``values``, or None."""
    for value in values:
        if type(value) is Poison:
            return value
    return None


def _binary(operation: Callable[[Any, Any], Any]) -> tuple[Callable, Callable]:
    def forward(self: Poison, other: Any) -> Poison:
        return self.like(operation, self, other)

    def reflected(self: Poison, other: Any) -> Poison:
        return self.like(operation, other, self)

    return forward, reflected


for _name in (
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "lshift",
    "rshift",
    "and",
    "or",
    "xor",
    "matmul",
):
    _op = getattr(operator, _name + ("_" if _name in ("and", "or") else ""))
    _forward, _reflected = _binary(_op)
    setattr(Poison, f"__{_name}__", _forward)
    setattr(Poison, f"__r{_name}__", _reflected)

for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Poison, f"__{_name}__", _binary(getattr(operator, _name))[0])

for _name in ("neg", "pos", "abs", "invert"):
    _unary = getattr(operator, _name)
    setattr(Poison, f"__{_name}__", lambda self, _f=_unary: self.like(_f, self))
