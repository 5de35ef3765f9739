"""Scalars typed the way numba types them, so simulated arithmetic rounds as on the GPU.

NumPy scalars carry the types; the differences from NumPy's own rules are fixed here:

- literals and module constants in kernel code are int64 / float64 (numba's literal types),
  so ``x[i] * 2`` and ``x[i] * 2.0`` are float64 for a float32 ``x``, as numba compiles them;
- every integer narrower than 64 bits is held as int64: numba widens int32 arithmetic to
  int64 (``threadIdx.x + 1`` is int64), and the value is the same;
- ``math`` functions return the float type of their arguments (``math.exp(float32)`` is
  float32) and give inf/NaN where Python's ``math`` would raise;
- ``max``, ``min``, ``float``, ``int``, ``range``, ``len`` return numba's types.
"""

from __future__ import annotations

import builtins
import math
import operator
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

INT64 = np.int64
FLOAT64 = np.float64
_NARROW_INTS = {np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.intc, np.uintc}


def typed_constant(value: Any) -> Any:
    """A Python number as numba types a literal or a global constant; anything else as is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, float):
        return FLOAT64(value)
    if -(2**63) <= value < 2**63:
        return INT64(value)
    if 0 <= value < 2**64:
        return np.uint64(value)
    return value


def widen(value: Any) -> Any:
    """A scalar read from memory or passed by the host, in the simulator's representation."""
    kind = type(value)
    if kind in _NARROW_INTS:
        return INT64(value)
    if kind is int or kind is float:
        return typed_constant(value)
    if kind is bool:
        return np.bool_(value)
    return value


class NumberCast:
    """``float32(x)``, ``numba.int32(x)``...: a cast to a numba type, used in kernels both
    as a function and as a dtype (``cuda.local.array(4, float32)``)."""

    def __init__(self, dtype: np.dtype, name: str) -> None:
        self.dtype = np.dtype(dtype)
        self.__name__ = name
        self._type = self.dtype.type
        self._narrow_int = self._type in _NARROW_INTS

    def __call__(self, value: Any = 0) -> Any:
        if self._narrow_int:
            # Wrap to the type's width as a C cast does, then hold it as int64.
            return INT64(np.asarray(value).astype(self.dtype, casting="unsafe"))
        return self._type(value)

    def __repr__(self) -> str:
        return f"<simulated numba type {self.__name__}>"


def as_dtype(value: Any) -> np.dtype:
    """The NumPy dtype of a kernel's dtype argument (numba type, NumberCast, NumPy type)."""
    if isinstance(value, NumberCast):
        return value.dtype
    try:
        from numba.np.numpy_support import as_dtype as numba_as_dtype

        return numba_as_dtype(value)
    except Exception:
        return np.dtype(value)


_PROMOTED: dict[tuple[type, ...], Callable[[Any], Any]] = {}


def _promote(values: tuple[Any, ...], result: Any) -> Any:
    key = tuple(type(v) for v in values)
    convert = _PROMOTED.get(key)
    if convert is None:
        common = np.result_type(*(widen(v) for v in values))
        convert = common.type
        _PROMOTED[key] = convert
    return convert(result)


def typed_max(*values: Any) -> Any:
    if len(values) == 1:
        values = tuple(values[0])
    return _promote(values, builtins.max(values))


def typed_min(*values: Any) -> Any:
    if len(values) == 1:
        values = tuple(values[0])
    return _promote(values, builtins.min(values))


def typed_float(value: Any = 0.0) -> np.float64:
    return FLOAT64(value)


def typed_int(value: Any = 0) -> np.int64:
    return INT64(int(value))


def typed_range(*bounds: Any) -> Iterator[np.int64]:
    return map(INT64, range(*map(operator.index, bounds)))


def typed_len(value: Any) -> np.int64:
    return INT64(len(value))


# math names whose NumPy ufunc has another name.
_UFUNC_NAMES = {
    "fabs": "fabs",
    "pow": "power",
    "atan2": "arctan2",
    "asin": "arcsin",
    "acos": "arccos",
    "atan": "arctan",
    "asinh": "arcsinh",
    "acosh": "arccosh",
    "atanh": "arctanh",
    "copysign": "copysign",
    "fmod": "fmod",
    "hypot": "hypot",
    "log1p": "log1p",
    "expm1": "expm1",
}
_INT_RESULT = {"floor", "ceil", "trunc"}


def _typed_math_function(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    ufunc = getattr(np, _UFUNC_NAMES.get(name, name), None)

    def typed(*args: Any) -> Any:
        try:
            result = function(*args)
        except (OverflowError, ValueError, ZeroDivisionError):
            if ufunc is None:
                raise
            # Python raises where the GPU returns inf or NaN (exp(1e5), log(0), sqrt(-1)).
            with np.errstate(all="ignore"):
                result = ufunc(*args)
            return result if isinstance(result, np.generic) else FLOAT64(result)
        if isinstance(result, bool):
            return np.bool_(result)
        if isinstance(result, int):
            return INT64(result) if name in _INT_RESULT else result
        if isinstance(result, float):
            floats = [type(a) for a in args if isinstance(a, np.floating)]
            if len(floats) == 1 or (floats and all(f is floats[0] for f in floats)):
                return floats[0](result)
            if floats:
                return np.result_type(*floats).type(result)
            return FLOAT64(result)
        return result

    typed.__name__ = name
    return typed


class TypedMath(types.ModuleType):
    """The ``math`` module as a simulated kernel sees it."""

    def __init__(self) -> None:
        super().__init__("math")

    def __getattr__(self, name: str) -> Any:
        value = getattr(math, name)
        value = _typed_math_function(name, value) if callable(value) else typed_constant(value)
        setattr(self, name, value)  # built once; kernels look math up per thread
        return value


TYPED_MATH = TypedMath()

# What the simulator puts in a kernel's namespace instead of these builtins.
TYPED_BUILTINS: dict[str, Any] = {
    "max": typed_max,
    "min": typed_min,
    "float": typed_float,
    "int": typed_int,
    "range": typed_range,
    "len": typed_len,
}
