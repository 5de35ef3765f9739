"""bfloat16 values over lanes, bit for bit the per-thread engine's ``BFloat16`` scalars.

A ``BF16Lanes`` is a float32 array whose every element is a bfloat16 value (its bits
shifted up by 16: exact in float32, NaN payloads included), marked by its class so that
arithmetic keeps the per-thread engine's typing (``scalars.BFloat16``):

- bfloat16 ``+ - * /`` bfloat16: the float32 operation rounded to nearest even, a NaN
  made the quiet NaN with its sign kept (``_round_to_bfloat16``);
- bfloat16 with anything else: the bfloat16 read as float32, then NumPy's promotion,
  in the order written (numba's: a bfloat16 converts safely to float32 and float64);
- comparisons in float32, ``-x`` and ``abs`` on the sign bit;
- anything else (``//``, ``**``, ``max``, ``int()``, a truth test, NumPy functions but
  ``np.where`` of two bfloat16 values) raises ``Unsupported``: the launch runs per
  thread, which computes or reports it itself.

In the lockstep engine a bfloat16 value is always per lane (a uniform one is
broadcast), never a ``BFloat16`` scalar: a scalar on the left of an operator would
call its own method and lose the lanes' rounding.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from portkit.simt.fp16 import HalfModule
from portkit.simt.lockstep.expressions import Unsupported
from portkit.simt.scalars import SIMULATED_BF16, BFloat16, NumberCast, simulated_bf16

_ROUNDED = {
    np.add: operator.add,
    np.subtract: operator.sub,
    np.multiply: operator.mul,
    np.true_divide: operator.truediv,
}
_COMPARISONS = {np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal}
_SIGN = np.uint32(0x80000000)


def round_to_bits(values: Any) -> np.ndarray:
    """The bfloat16 bits (uint16) of ``values`` rounded as the per-thread engine's store
    and ``bfloat16(v)`` round: to float32 first (NumPy's conversion), then to nearest
    even; a NaN becomes 0x7FC0 with its sign."""
    with np.errstate(all="ignore"):
        single = np.asarray(values).astype(np.float32)
    bits = np.atleast_1d(single).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16
    nan = ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)
    if nan.any():
        rounded = np.where(nan, 0x7FC0 | ((bits >> 16) & 0x8000), rounded)
    return rounded.astype(np.uint16)


def scalar_nans(operation: Any, x: Any, y: Any, result: Any) -> Any:
    """``result`` (``operation`` of lanes ``x`` and ``y``) with the lanes where both
    operands are NaN computed as the per-thread engine computes them, by NumPy's scalar
    arithmetic: which operand's NaN (sign, payload) comes out is the compiler's choice
    and differs between NumPy's scalar code and its SIMD loops."""
    xs, ys = np.asarray(x), np.asarray(y)
    if result.dtype.kind != "f" or xs.dtype.kind != "f" or ys.dtype.kind != "f":
        return result
    both = np.isnan(xs) & np.isnan(ys)
    if not both.any():
        return result
    result = np.array(result)
    for k in np.flatnonzero(np.broadcast_to(both, result.shape)).tolist():
        left = xs[k] if xs.ndim else xs[()]
        right = ys[k] if ys.ndim else ys[()]
        result[k] = operation(left, right)
    return result


class BF16Lanes(np.ndarray):
    """One bfloat16 value per lane (see the module's docstring)."""

    @staticmethod
    def of_bits(bits: np.ndarray) -> BF16Lanes:
        return (bits.astype(np.uint32) << 16).view(np.float32).view(BF16Lanes)

    @staticmethod
    def rounded(values: Any) -> BF16Lanes:
        if isinstance(values, BF16Lanes):  # bfloat16(b) copies b, NaN payload and all
            return values
        return BF16Lanes.of_bits(round_to_bits(values))

    def bits(self) -> np.ndarray:
        return (self.plain().view(np.uint32) >> 16).astype(np.uint16)

    def plain(self) -> np.ndarray:
        """The values as a float32 array (what ``float32(b)`` gives each lane)."""
        return self.view(np.ndarray)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        return self.plain().astype(dtype, *args, **kwargs)

    def __bool__(self) -> bool:
        raise Unsupported("the truth of a bfloat16 value")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__" or kwargs:
            raise Unsupported(f"np.{ufunc.__name__}.{method} of bfloat16 values")
        halves = [isinstance(v, (BF16Lanes, BFloat16)) for v in inputs]
        values = [_as_float32(v) for v in inputs]
        with np.errstate(all="ignore"):
            if ufunc in _ROUNDED and len(values) == 2:
                x, y = values
                result = scalar_nans(_ROUNDED[ufunc], x, y, ufunc(x, y))
                return BF16Lanes.rounded(result) if all(halves) else result
            if ufunc in _COMPARISONS:
                return ufunc(*values)
        if ufunc is np.negative:
            return (values[0].view(np.uint32) ^ _SIGN).view(np.float32).view(BF16Lanes)
        if ufunc is np.absolute:
            return (values[0].view(np.uint32) & ~_SIGN).view(np.float32).view(BF16Lanes)
        raise Unsupported(f"{ufunc.__name__} of bfloat16 values")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func is np.where and len(args) == 3 and not kwargs:
            return where(*args)
        raise Unsupported(f"np.{func.__name__} of bfloat16 values")


def where(mask: Any, first: Any, second: Any) -> BF16Lanes:
    """Per lane ``first`` where ``mask``, else ``second``: both bfloat16, else refused (a
    variable of another type in other threads: the per-thread engine runs that)."""
    if not (is_bfloat16(first) and is_bfloat16(second)):
        raise Unsupported("a value that is bfloat16 in some threads and not in others")
    chosen = np.where(np.asarray(mask), _as_float32(first), _as_float32(second))
    return chosen.view(BF16Lanes)


def is_bfloat16(value: Any) -> bool:
    return isinstance(value, (BF16Lanes, BFloat16))


def _as_float32(value: Any) -> Any:
    if isinstance(value, BF16Lanes):
        return value.plain()
    if isinstance(value, BFloat16):
        return value.float32()
    return value


def lanes_of(value: Any, lanes: int) -> BF16Lanes:
    """A bfloat16 scalar (or lanes) as lanes: a uniform value broadcast."""
    if isinstance(value, BF16Lanes):
        return value
    return np.full(lanes, value.float32(), np.float32).view(BF16Lanes)


def lane_values(value: BF16Lanes, lanes: np.ndarray) -> list[BFloat16]:
    """The active lanes' values as the per-thread engine's scalars."""
    return [BFloat16.from_bits(b) for b in value.bits()[lanes].tolist()]


# -- numba.cuda.bf16 over lanes ----------------------------------------------------------
def _float32_of(value: Any, name: str) -> np.ndarray:
    if not is_bfloat16(value):  # the per-thread function needs a BFloat16 (.float32())
        raise Unsupported(f"bf16.{name} of a {type(value).__name__}")
    return np.asarray(_as_float32(value))


def _hfma(a: Any, b: Any, c: Any) -> BF16Lanes:
    # as per thread: float64(a) * b + c in float64, rounded to float32, then to bfloat16
    wide, b32, c32 = (_float32_of(v, "hfma") for v in (a, b, c))
    wide = wide.astype(np.float64)
    with np.errstate(all="ignore"):
        product = scalar_nans(operator.mul, wide, b32, wide * b32)
        return BF16Lanes.rounded(scalar_nans(operator.add, product, c32, product + c32))


def _pick(larger: bool) -> Any:
    def pick(a: Any, b: Any) -> BF16Lanes:
        fa, fb = _float32_of(a, "hmax"), _float32_of(b, "hmax")
        first = fa > fb if larger else fa < fb
        first = (first | np.isnan(fb)) & ~np.isnan(fa)
        return np.where(first, fa, fb).view(BF16Lanes)

    return pick


def _math(function: Any) -> Any:
    def apply(value: Any) -> BF16Lanes:
        x = _float32_of(value, "math")
        with np.errstate(all="ignore"):
            if isinstance(function, str):
                from portkit.simt import floatmath

                return BF16Lanes.rounded(floatmath.compute(function, np.dtype(np.float32), x))
            return BF16Lanes.rounded(function(x))

    return apply


def _from_bits(bits: Any) -> BF16Lanes:
    return BF16Lanes.of_bits(np.asarray(bits).astype(np.int64) & 0xFFFF)


def _bits(value: Any) -> np.ndarray:
    if not isinstance(value, BF16Lanes):
        raise Unsupported(f"the bits of a {type(value).__name__}")
    return value.bits().astype(np.int64)


def _signed_bits(value: Any) -> np.ndarray:
    return _bits(value).astype(np.int16).astype(np.int64)


# The per-thread engine's numba.cuda.bf16 (scalars._BF16_FUNCTIONS), name by name.
_LANE_FUNCTIONS: dict[str, Any] = {
    **dict.fromkeys(
        (
            "bfloat16", "float2bfloat16", "float2bfloat16_rn", "float32_to_bfloat16",
            "float32_to_bfloat16_rn", "double2bfloat16", "float64_to_bfloat16",
        ),
        BF16Lanes.rounded,
    ),
    **dict.fromkeys(
        ("uint16_as_bfloat16", "ushort_as_bfloat16", "int16_as_bfloat16", "short_as_bfloat16"),
        _from_bits,
    ),
    **dict.fromkeys(("bfloat16_as_uint16", "bfloat16_as_ushort"), _bits),
    **dict.fromkeys(("bfloat16_as_int16", "bfloat16_as_short"), _signed_bits),
    **dict.fromkeys(
        ("bfloat162float", "bfloat16_to_float32"), lambda v: _float32_of(v, "to float32")
    ),
    **dict.fromkeys(("hadd", "hadd_rn"), operator.add),
    **dict.fromkeys(("hsub", "hsub_rn"), operator.sub),
    **dict.fromkeys(("hmul", "hmul_rn"), operator.mul),
    "hdiv": operator.truediv,
    "hfma": _hfma,
    "hneg": operator.neg,
    "habs": abs,
    "hmax": _pick(larger=True),
    "hmin": _pick(larger=False),
    "hisnan": lambda a: np.isnan(_float32_of(a, "hisnan")),
    "hisinf": lambda a: np.isinf(_float32_of(a, "hisinf")),
    **{f"h{name}": _math(name) for name in ("sqrt", "exp", "log", "tanh")},
    "hrsqrt": _math(lambda v: np.float32(1) / np.sqrt(v)),
    "hrcp": _math(lambda v: np.float32(1) / v),
}


def _over_lanes(function: Any, per_thread: Any, current: Any) -> Any:
    """``function`` where an argument is per lane; else the per-thread function, its
    bfloat16 result broadcast (bfloat16 values are always lanes here)."""

    def apply(*args: Any) -> Any:
        if any(isinstance(a, np.ndarray) for a in args):
            return function(*args)
        result = per_thread(*args)
        return lanes_of(result, current.chunk.n) if isinstance(result, BFloat16) else result

    apply.per_thread = per_thread  # type: ignore[attr-defined]  # chunk: bfloat16 arrays
    return apply


def lane_bf16(current: Any) -> HalfModule:
    """``numba.cuda.bf16`` for the lanes of one engine (``current``: its chunk holder)."""
    simulated = SIMULATED_BF16._functions
    return HalfModule(
        "bf16",
        {n: _over_lanes(f, simulated[n], current) for n, f in _LANE_FUNCTIONS.items()},
    )


def simulated_lane_bf16(module: HalfModule, value: Any) -> Any:
    """The lane version of ``numba.cuda.bf16`` or of one of its functions, or None."""
    found = module.simulated(value)
    if found is None and simulated_bf16(value) is BFloat16:
        return module._functions["bfloat16"]
    return found


class LaneCast(NumberCast):
    """``float32(x)``, ``int32(x)``... over lanes: of a bfloat16 value its float32 value
    converted (exact for float32 and float64, one rounding for float16, as per thread);
    an integer of one is refused (the per-thread engine's ``int()`` of a BFloat16 raises)."""

    def __call__(self, value: Any = 0) -> Any:
        if isinstance(value, BF16Lanes):
            if self.dtype.kind != "f":
                raise Unsupported(f"{self.__name__}() of a bfloat16 value")
            return value.plain().astype(self.dtype)
        return super().__call__(value)
