"""The ``math`` module as a simulated kernel sees it: each function computed as
portkit_math.h does (``floatmath``, the CPU twin's bits) and typed as numba-cuda types it
(cudamath.py): a float32's function is a float32, an integer's a float64, floor, ceil and
trunc floats too; where Python raises (``exp(1e5)``, ``log(0)``) the GPU's inf or NaN."""

from __future__ import annotations

import math
import operator
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from portkit.simt import floatmath
from portkit.simt.poison import PoisonUsed, first_poison
from portkit.simt.scalars import FLOAT64, typed_constant

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
# numba-cuda types floor, ceil and trunc as floats (cudamath.py: float32 of a float32,
# float64 of an integer), not as the ints CPython and numba's CPU target return.
_FLOAT_OF_INTEGER = {"floor", "ceil", "trunc"}


_C_NAMES = {"gamma": "tgamma"}  # math names portkit_math.h (floatmath) spells otherwise


def _float_result(args: tuple[Any, ...], name: str = "") -> type:
    """The float type numba gives a math function of ``args``: their float type, float64
    where there is none; a float32 beside an integer (``math.pow(x, 2)``, ``atan2(x, 1)``)
    is float64, numba's best signature for the pair (float64, float64), except ``ldexp``,
    whose exponent is an int32. The simulator holds an int32 as int64, so ``pow`` of a
    float32 and an int32 (float32 in numba) is float64 here too: a known limit."""
    floats = {type(a) for a in args if isinstance(a, np.floating)}
    if not floats:
        return FLOAT64
    integers = any(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args)
    if integers and name != "ldexp":
        floats.add(FLOAT64)
    return np.result_type(*floats).type


def _typed_math_function(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    ufunc = getattr(np, _UFUNC_NAMES.get(name, name), None)
    arity = floatmath.ARITY.get(c_name := _C_NAMES.get(name, name))

    def typed(*args: Any) -> Any:
        if len(args) == arity and all(
            isinstance(a, (int, float, np.integer, np.floating)) for a in args
        ):
            kind = _float_result(args, name)
            return kind(floatmath.compute(c_name, np.dtype(kind), *args)[()])
        if name == "ldexp" and len(args) == 2:  # Python's takes an int only, not np.int32
            args = (args[0], operator.index(args[1]))
        try:
            result = function(*args)
        except PoisonUsed:  # a math function of an uninitialised value is one (poison.py)
            poison = first_poison(args)
            if poison is None:
                raise
            return poison.like(typed, *args)
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
            return _float_result(args, name)(result) if name in _FLOAT_OF_INTEGER else result
        if isinstance(result, float):
            return _float_result(args, name)(result)
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
