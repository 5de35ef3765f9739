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
import operator
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from portkit.simt import floatmath
from portkit.simt.fp16 import HalfModule
from portkit.simt.poison import Poison, PoisonUsed, first_poison
from portkit.simt.rounding import typed_round

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
        if type(value) is Poison:  # an uninitialised value stays one (poison.py)
            return value.like(self, value)
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
    try:
        return _promote(values, builtins.max(values))
    except PoisonUsed:  # max of an uninitialised value is one (poison.py)
        return _poisoned(values)


def typed_min(*values: Any) -> Any:
    if len(values) == 1:
        values = tuple(values[0])
    try:
        return _promote(values, builtins.min(values))
    except PoisonUsed:
        return _poisoned(values)


def _poisoned(values: Any) -> Any:
    poison = first_poison(values)
    if poison is None:
        raise
    return poison.like(lambda *_: poison.raw)


def typed_float(value: Any = 0.0) -> Any:
    if type(value) is Poison:
        return value.like(FLOAT64, value)
    return FLOAT64(value)


def typed_int(value: Any = 0) -> Any:
    if type(value) is Poison:
        return value.like(lambda v: INT64(int(v)), value)
    return INT64(int(value))


def typed_range(*bounds: Any) -> Iterator[np.int64]:
    return map(INT64, range(*map(operator.index, bounds)))


def typed_len(value: Any) -> np.int64:
    return INT64(len(value))


_POWER_FLOATS = (np.float32, np.float64)


def typed_pow(base: Any, exponent: Any) -> Any:
    """``base ** exponent`` as numba-cuda computes it (its ``int_power`` and
    ``static_power``): a float32 or float64 (a value or one per lane) raised to an integer
    stays that float type, by squaring in it: ``x ** 2`` is ``x * x`` rounded once, and
    a negative power ``1.0 / r`` rounded to the type. NumPy's ``float32 ** int64`` is a
    float64 and its ``pow`` rounds otherwise. Any other operands: Python's ``**``."""
    plain = type(base) is np.ndarray or isinstance(base, np.generic)  # not bfloat16 lanes
    kind = base.dtype if plain else None
    if kind is None or kind.type not in _POWER_FLOATS:
        return base**exponent
    if isinstance(exponent, np.ndarray) and exponent.dtype.kind in "iu":  # one per lane
        out = np.empty(np.broadcast(base, exponent).shape, kind)
        for e in np.unique(exponent):
            chosen = exponent == e
            out[chosen] = np.broadcast_to(typed_pow(base, e), out.shape)[chosen]
        return out
    if isinstance(exponent, bool) or not isinstance(exponent, (int, np.integer)):
        return base**exponent
    n = int(exponent)
    if abs(n) > 0x10000:  # numba's cutoff: math.pow in float64, then the type
        return np.asarray(np.power(np.float64(base), float(n))).astype(kind)[()]
    result, square, left = np.ones_like(base), base, abs(n)
    with np.errstate(all="ignore"):  # inf and NaN as the GPU gives them
        while left:
            if left & 1:
                result = result * square
            left >>= 1
            square = square * square
        if n < 0:
            result = (1.0 / np.asarray(result, np.float64)).astype(kind)
    return result[()] if isinstance(result, np.ndarray) and result.ndim == 0 else result


# What the simulator puts in a kernel's namespace instead of these builtins.
TYPED_BUILTINS: dict[str, Any] = {
    "max": typed_max,
    "min": typed_min,
    "float": typed_float,
    "int": typed_int,
    "range": typed_range,
    "len": typed_len,
    "round": typed_round,  # rounding.py
    "pow": typed_pow,  # numba's float ** int, as ``**`` (numba has no three-argument pow)
}


# -- bfloat16 -------------------------------------------------------------------------
# numba-cuda's ``numba.cuda.bf16`` types a bfloat16 scalar (``__nv_bfloat16``) with
# operators, comparisons and conversions. NumPy has no bfloat16, so the simulator holds
# one as its 16 bits and computes in float32, rounding to nearest even after each
# operation: exact for +, -, * (a bfloat16 product or sum of two fits a float32) and what
# sm_90 does for them. Arrays of bfloat16 reach kernels as uint16 (project/dtypes.py).


def _round_to_bfloat16(value: Any) -> int:
    """The bits of ``value`` rounded to the nearest bfloat16, ties to even."""
    bits = int(np.float32(value).view(np.uint32))
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x007FFFFF:
        return 0x7FC0 | (bits >> 16 & 0x8000)  # NaN stays NaN, sign kept
    return ((bits + 0x7FFF + (bits >> 16 & 1)) >> 16) & 0xFFFF


class BFloat16:
    """A simulated ``__nv_bfloat16`` scalar."""

    __slots__ = ("bits",)
    bits: int
    __array_ufunc__ = None  # float32 * b: NumPy defers to __rmul__ (float32, as numba)

    def __init__(self, value: Any = 0.0) -> None:
        self.bits = value.bits if isinstance(value, BFloat16) else _round_to_bfloat16(value)

    @classmethod
    def from_bits(cls, bits: Any) -> BFloat16:
        result = cls.__new__(cls)
        result.bits = int(bits) & 0xFFFF
        return result

    def __float__(self) -> float:
        return float(self.float32())

    def __bool__(self) -> bool:  # C's: nonzero (NaN too)
        return bool(self.bits & 0x7FFF)

    def float32(self) -> np.float32:
        return np.uint32(self.bits << 16).view(np.float32)

    def __repr__(self) -> str:
        return f"bfloat16({self.float32()!r})"

    def _binary(self, other: Any, operation: Callable[[Any, Any], Any], reflected: bool) -> Any:
        if isinstance(other, BFloat16):
            a, b = self.float32(), other.float32()
            with np.errstate(all="ignore"):
                return BFloat16(operation(b, a) if reflected else operation(a, b))
        other = widen(other)
        a = self.float32()
        with np.errstate(all="ignore"):  # mixed with another type: numba's promotion
            return operation(other, a) if reflected else operation(a, other)

    def _compare(self, other: Any, operation: Callable[[Any, Any], Any]) -> np.bool_:
        b = other.float32() if isinstance(other, BFloat16) else widen(other)
        return np.bool_(operation(self.float32(), b))

    def __neg__(self) -> BFloat16:
        return BFloat16.from_bits(self.bits ^ 0x8000)

    def __abs__(self) -> BFloat16:
        return BFloat16.from_bits(self.bits & 0x7FFF)


for _name, _operation in (
    ("add", operator.add),
    ("sub", operator.sub),
    ("mul", operator.mul),
    ("truediv", operator.truediv),
):
    setattr(BFloat16, f"__{_name}__", lambda s, o, f=_operation: s._binary(o, f, False))
    setattr(BFloat16, f"__r{_name}__", lambda s, o, f=_operation: s._binary(o, f, True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    _operation = getattr(operator, _name)
    setattr(BFloat16, f"__{_name}__", lambda s, o, f=_operation: s._compare(o, f))


def _bf16_math(function: Callable[[Any], Any] | str) -> Callable[[BFloat16], BFloat16]:
    """The float32 function (portkit_math.h's if named), rounded as portkit_half.h does."""

    def simulated(value: BFloat16) -> BFloat16:
        if isinstance(function, str):
            return BFloat16(floatmath.compute(function, np.dtype(np.float32), value.float32()))
        with np.errstate(all="ignore"):
            return BFloat16(function(value.float32()))

    return simulated


def _bits_of(value: BFloat16) -> np.int64:
    return INT64(value.bits)


def _signed_bits_of(value: BFloat16) -> np.int64:
    return INT64(value.bits - 0x10000 if value.bits & 0x8000 else value.bits)


def _pick(test: Callable[[Any, Any], bool]) -> Callable[[BFloat16, BFloat16], BFloat16]:
    def pick(a: BFloat16, b: BFloat16) -> BFloat16:
        fa, fb = a.float32(), b.float32()
        if np.isnan(fa):
            return b
        if np.isnan(fb):
            return a
        return a if test(fa, fb) else b

    return pick


# Functions of numba.cuda.bf16 the simulator runs, under every name numba-cuda gives them.
_BF16_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "bfloat16": BFloat16,
    **dict.fromkeys(
        ("uint16_as_bfloat16", "ushort_as_bfloat16", "int16_as_bfloat16", "short_as_bfloat16"),
        BFloat16.from_bits,
    ),
    **dict.fromkeys(("bfloat16_as_uint16", "bfloat16_as_ushort"), _bits_of),
    **dict.fromkeys(("bfloat16_as_int16", "bfloat16_as_short"), _signed_bits_of),
    **dict.fromkeys(("bfloat162float", "bfloat16_to_float32"), BFloat16.float32),
    **dict.fromkeys(
        (
            "float2bfloat16",
            "float2bfloat16_rn",
            "float32_to_bfloat16",
            "float32_to_bfloat16_rn",
            # float64 is rounded to float32 first: a double rounding in rare ties.
            "double2bfloat16",
            "float64_to_bfloat16",
        ),
        BFloat16,
    ),
    **dict.fromkeys(("hadd", "hadd_rn"), operator.add),
    **dict.fromkeys(("hsub", "hsub_rn"), operator.sub),
    **dict.fromkeys(("hmul", "hmul_rn"), operator.mul),
    "hdiv": operator.truediv,
    "hfma": lambda a, b, c: BFloat16(
        np.float32(np.float64(a.float32()) * b.float32() + c.float32())
    ),
    "hneg": operator.neg,
    "habs": abs,
    "hmax": _pick(operator.gt),
    "hmin": _pick(operator.lt),
    "hisnan": lambda a: np.bool_(np.isnan(a.float32())),
    "hisinf": lambda a: np.bool_(np.isinf(a.float32())),
    "hsqrt": _bf16_math("sqrt"),
    "hexp": _bf16_math("exp"),
    "hlog": _bf16_math("log"),
    "htanh": _bf16_math("tanh"),
    "hrsqrt": _bf16_math(lambda v: np.float32(1) / np.sqrt(v)),
    "hrcp": _bf16_math(lambda v: np.float32(1) / v),
}


class BFloat16Bits(np.ndarray):
    """A uint16 NumPy array holding bfloat16 bits: the simulator's bfloat16 array. Its
    elements read as ``BFloat16`` and a store rounds to nearest even, as numba-cuda
    types an array of ``numba.cuda.bf16.bfloat16``."""


def bfloat16_store(value: Any) -> int:
    """The bits a store of ``value`` into a bfloat16 array writes."""
    return value.bits if isinstance(value, BFloat16) else _round_to_bfloat16(value)


SIMULATED_BF16 = HalfModule("bf16", _BF16_FUNCTIONS)


def simulated_bf16(value: Any) -> Any:
    """The simulated version of ``numba.cuda.bf16`` or of one of its functions, or None."""
    found = SIMULATED_BF16.simulated(value)
    if found is None and value is getattr(sys.modules.get("numba.cuda.bf16"), "bfloat16", None):
        return BFloat16
    return found
