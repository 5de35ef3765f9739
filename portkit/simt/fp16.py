"""``numba.cuda.fp16`` in the simulator: the half-precision intrinsics of cuda_fp16.h.

A float16 value is a NumPy float16 (a scalar per thread, an array of lanes in the
lockstep engine: every function here takes either). Arithmetic is rounded to float16
once per operation, as the GPU's ``__hadd`` & co are: NumPy computes float16 + - * /
in float32 and rounds, which gives the correctly rounded float16 (float32 holds more
than twice float16's 11 bits, so the double rounding cannot differ). ``hfma`` rounds
once, as the GPU's fused ``__hfma``: the product of two float16 values is exact in
float64 and so is its sum with a float16 unless the two are too far apart for the
smaller to matter, so float64 rounded to float16 is the fused result. The math
functions are the float32 function rounded to float16 (``floatmath``, as portkit_half.h
computes them for the CPU twin). Comparisons are CUDA's ordered ones (``hne`` of a NaN
is false); ``hmax``/``hmin`` return the other value where one is NaN and order +0
above -0, as ``__hmax``/``__hmin`` do.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from portkit.errors import KernelError
from portkit.simt import floatmath

HALF = np.dtype(np.float16)


def _half(value: Any) -> Any:
    """``value`` as numba passes it to a float16 parameter (rounded to float16)."""
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(HALF)[()]


def _arithmetic(operation: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def intrinsic(a: Any, b: Any) -> Any:
        with np.errstate(all="ignore"):  # inf and NaN as on the GPU
            return _half(operation(_half(a), _half(b)))

    return intrinsic


def hfma(a: Any, b: Any, c: Any) -> Any:
    wide = [np.asarray(_half(v), np.float64) for v in (a, b, c)]
    with np.errstate(all="ignore"):
        return _half(wide[0] * wide[1] + wide[2])


def _compare(operation: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def intrinsic(a: Any, b: Any) -> Any:
        return np.asarray(operation(_half(a), _half(b)), np.bool_)[()]

    return intrinsic


def _ordered_ne(a: Any, b: Any) -> Any:
    return (a < b) | (a > b)


def _pick(larger: bool) -> Callable[[Any, Any], Any]:
    def intrinsic(a: Any, b: Any) -> Any:
        a, b = _half(a), _half(b)
        # on a tie (+0 and -0) the one with the sign bit is the smaller
        if larger:
            first = (a > b) | ((a == b) & np.signbit(b))
        else:
            first = (a < b) | ((a == b) & np.signbit(a))
        first = (first | np.isnan(b)) & ~np.isnan(a)
        return _half(np.where(first, a, b))

    return intrinsic


def _math(name: str) -> Callable[[Any], Any]:
    def intrinsic(x: Any) -> Any:
        return floatmath.compute(name, HALF, _half(x))[()]

    return intrinsic


def _float32_then_half(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def intrinsic(x: Any) -> Any:
        with np.errstate(all="ignore"):
            return _half(function(np.asarray(_half(x), np.float32)))

    return intrinsic


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "hadd": _arithmetic(np.add),
    "hsub": _arithmetic(np.subtract),
    "hmul": _arithmetic(np.multiply),
    "hdiv": _arithmetic(np.true_divide),
    "hfma": hfma,
    "hneg": lambda a: -_half(a),
    "habs": lambda a: np.abs(_half(a)),
    "heq": _compare(np.equal),
    "hne": _compare(_ordered_ne),
    "hge": _compare(np.greater_equal),
    "hgt": _compare(np.greater),
    "hle": _compare(np.less_equal),
    "hlt": _compare(np.less),
    "hmax": _pick(larger=True),
    "hmin": _pick(larger=False),
    **{f"h{name}": _math(name) for name in ("sin", "cos", "log", "log2", "log10", "exp")},
    **{f"h{name}": _math(name) for name in ("exp2", "exp10", "sqrt", "tanh")},
    # the GPU's tanh.approx.f16 is within an ULP or two of this
    "htanh_approx": _math("tanh"),
    "hrsqrt": _float32_then_half(lambda v: np.float32(1) / np.sqrt(v)),
    "hrcp": _float32_then_half(lambda v: np.float32(1) / v),
    "hceil": _float32_then_half(np.ceil),
    "hfloor": _float32_then_half(np.floor),
    "htrunc": _float32_then_half(np.trunc),
    "hrint": _float32_then_half(np.rint),  # to nearest, ties to even
}


class NotSimulated(KernelError, AttributeError):
    """A half-precision function the simulator does not run (an AttributeError too, so
    ``hasattr`` and ``getattr(..., default)`` answer as for any module)."""


class HalfModule(types.ModuleType):
    """``numba.cuda.fp16`` or ``numba.cuda.bf16`` as a simulated kernel sees it."""

    def __init__(self, name: str, functions: dict[str, Callable[..., Any]]) -> None:
        super().__init__(name)
        self._functions = functions
        self._names: dict[int, str] = {}  # id of numba's function -> its name

    def simulated(self, value: Any) -> Any:
        """This module for numba's, the simulated function for one of numba's, or None."""
        module = sys.modules.get(f"numba.cuda.{self.__name__}")
        if module is None:
            return None
        if value is module:
            return self
        if not self._names:
            functions = self._functions
            self._names.update({id(getattr(module, n)): n for n in functions if hasattr(module, n)})
        name = self._names.get(id(value))
        return None if name is None else self._functions[name]

    def __getattr__(self, name: str) -> Any:
        if name in self._functions:
            return self._functions[name]
        raise NotSimulated(
            f"numba.cuda.{self.__name__}.{name} is not simulated; the simulator runs "
            f"{', '.join(sorted(self._functions))} (convert to float32 for the rest)"
        )


SIMULATED_FP16 = HalfModule("fp16", FUNCTIONS)


def simulated_fp16(value: Any) -> Any:
    """The simulated ``numba.cuda.fp16`` or one of its functions, or None."""
    return SIMULATED_FP16.simulated(value)
