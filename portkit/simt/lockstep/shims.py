"""``cuda``, ``math`` and the builtins as lanes see them.

Typing follows the per-thread engine exactly (``scalars.py``): a function of uniform
arguments is the per-thread function itself; of per-lane arguments, the same function
applied lane by lane (``per_lane``), except where a whole-array form is known to give
the same bits: ``math.exp`` & co of a float array make one call into portkit_math.h
(``floatmath``), which the per-thread engine and the CPU twin compute too, and ``sqrt``
(correctly rounded in NumPy and in C) runs as one ufunc.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from portkit.simt import floatmath, intrinsics
from portkit.simt.fp16 import SIMULATED_FP16
from portkit.simt.lockstep.arrays import LaneArray
from portkit.simt.lockstep.bfloat16 import BF16Lanes, LaneCast, lane_bf16, lane_values
from portkit.simt.lockstep.lanes import is_lanes
from portkit.simt.lockstep.unordered import UNORDERED
from portkit.simt.lockstep.vectorize import UNUSED_ATOMICS, Unsupported
from portkit.simt.scalars import INT64, TYPED_BUILTINS, BFloat16, as_dtype, typed_pow
from portkit.simt.typed_math import TYPED_MATH

# Every shim that needs the chunk running now reads it from ``current``: the engine's own
# holder (``current.chunk``), so two machines, or two sessions, never share one.


def per_lane(function: Callable[..., Any], name: str, current: Any) -> Callable[..., Any]:
    """``function`` of scalars, applied to each active lane when an argument is per-lane."""

    def apply(*args: Any) -> Any:
        if not any(is_lanes(a) for a in args):
            if any(isinstance(a, LaneArray) for a in args):
                raise Unsupported(f"{name}() of an array")
            return function(*args)
        chunk = current.chunk
        lanes = np.flatnonzero(chunk.mask)
        columns = [_column(a, lanes) if is_lanes(a) else None for a in args]
        kinds: list[Any] = [_kind(a) if is_lanes(a) else None for a in args]
        results = []
        for k in range(lanes.size):
            lane_args = [a if c is None else t(c[k]) for a, c, t in zip(args, columns, kinds)]
            results.append(function(*lane_args))
        types = {type(r) for r in results}
        if types == {BFloat16}:  # bfloat16 results: lanes of them (round(b) gives b)
            out = np.zeros(chunk.n, np.uint16)
            out[lanes] = [r.bits for r in results]
            return BF16Lanes.of_bits(out)
        if len(types) > 1 or (types and not issubclass(next(iter(types)), np.generic)):
            raise Unsupported(f"{name}() gives {', '.join(t.__name__ for t in types)}")
        kind = next(iter(types)) if types else np.float64
        out = np.zeros(chunk.n, kind)
        if results:
            out[lanes] = np.array(results, dtype=kind)
        return out

    apply.__name__ = name
    return apply


def _column(values: np.ndarray, lanes: np.ndarray) -> list:
    """The active lanes' values as the per-thread engine holds them, one per lane."""
    return lane_values(values, lanes) if isinstance(values, BF16Lanes) else values[lanes].tolist()


def _kind(values: np.ndarray) -> Any:
    return (lambda v: v) if isinstance(values, BF16Lanes) else values.dtype.type


_FAST_UNARY = {
    "exp", "log", "log2", "log10", "log1p", "expm1", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "fabs",
}  # fmt: skip


def _fast_unary(name: str, current: Any) -> Callable[..., Any]:
    slow = per_lane(getattr(TYPED_MATH, name), name, current)

    def apply(*args: Any) -> Any:
        if len(args) != 1 or not is_lanes(args[0]):
            return slow(*args)
        x = args[0]
        if x.dtype.kind != "f" or isinstance(x, BF16Lanes):  # math of a BFloat16: float64
            return slow(x)
        chunk = current.chunk
        full = chunk.full_lanes
        values = x if full else x[chunk.mask]
        if name in floatmath.ARITY:  # portkit_math.h, as the CPU twin computes it
            result = floatmath.compute(name, x.dtype, values)
        else:
            result = np.abs(values)  # fabs: exact
        if full:
            return result
        out = np.zeros(x.size, x.dtype)
        out[chunk.mask] = result
        return out

    apply.__name__ = name
    return apply


def _sqrt(current: Any) -> Callable[..., Any]:
    slow = per_lane(TYPED_MATH.sqrt, "sqrt", current)

    def apply(*args: Any) -> Any:
        x = args[0]
        if len(args) == 1 and is_lanes(x) and x.dtype.kind == "f" and type(x) is np.ndarray:
            with np.errstate(all="ignore"):
                return np.sqrt(x.astype(np.float64)).astype(x.dtype)
        return slow(*args)

    return apply


class LaneMath:
    """``math`` for lanes."""

    def __init__(self, current: Any) -> None:
        self._current = current

    def __getattr__(self, name: str) -> Any:
        value = getattr(TYPED_MATH, name)
        if callable(value):
            if name == "sqrt":
                value = _sqrt(self._current)
            elif name in _FAST_UNARY:
                value = _fast_unary(name, self._current)
            else:
                value = per_lane(value, name, self._current)
        setattr(self, name, value)
        return value


def _dtype(value: Any) -> np.dtype:
    return value.dtype if isinstance(value, (np.ndarray, np.generic)) else np.asarray(value).dtype


def _pairwise(
    pick: Callable[[Any, Any], Any], name: str, exact: Callable[[Any, Any], Any]
) -> Callable[..., Any]:
    scalar = TYPED_BUILTINS[name]
    # By the arguments' types: the result's type, and whether ``exact`` gives it (two
    # integers of one type: np.minimum/maximum pick the same element as ``pick``).
    commons: dict[tuple, tuple[np.dtype, bool]] = {}

    def apply(*values: Any) -> Any:
        if len(values) == 2:  # the common case, without the generic loops
            first, second = values
            if not isinstance(first, np.ndarray) and not isinstance(second, np.ndarray):
                return scalar(first, second)
            key: tuple = (_dtype(first), _dtype(second))
        elif not any(is_lanes(v) for v in values):
            return scalar(*values)
        elif len(values) < 2:
            raise Unsupported(f"{name}() of one per-thread value")
        else:
            key = tuple(_dtype(v) for v in values)
        if any(isinstance(v, BF16Lanes) for v in values):
            raise Unsupported(f"{name}() of bfloat16 values")  # per thread: its TypeError
        entry = commons.get(key)
        if entry is None:
            types = set(key)
            if any(t.kind not in "iufb" for t in types):
                raise Unsupported(f"{name}() of {types}")
            common = np.result_type(
                *(
                    np.int64(0) if t.kind in "iu" and t.itemsize < 8 else np.zeros(1, t)
                    for t in types
                )
            )
            same = len(key) == 2 and key[0] == key[1] == common and common.kind in "iu"
            entry = commons[key] = (common, same)
        common, same = entry
        if same:
            return exact(values[1], values[0])
        result = values[0]
        for v in values[1:]:
            result = pick(v, result)
        return np.asarray(result).astype(common, copy=False)

    apply.__name__ = name
    return apply


def _int(current: Any) -> Callable[..., Any]:
    def apply(value: Any = 0) -> Any:
        if not is_lanes(value):
            return TYPED_BUILTINS["int"](value)
        if isinstance(value, BF16Lanes):
            raise Unsupported("int() of a bfloat16 value")  # per thread: its TypeError
        if value.dtype.kind == "f" and not np.all(np.isfinite(value[current.chunk.mask])):
            raise Unsupported("int() of inf or NaN")
        return value.astype(np.int64)

    return apply


def _float(value: Any = 0.0) -> Any:
    return value.astype(np.float64) if is_lanes(value) else TYPED_BUILTINS["float"](value)


def _abs(value: Any) -> Any:
    return np.abs(value) if is_lanes(value) else builtins.abs(value)


def _len(value: Any) -> Any:
    return INT64(len(value))


def lane_builtins(current: Any) -> dict[str, Any]:
    """The builtins for lanes of one engine (``current``: its holder of the chunk)."""
    return {
        # Python's max keeps the first of equal values and skips NaN only in later places.
        "max": _pairwise(lambda v, best: np.where(v > best, v, best), "max", np.maximum),
        "min": _pairwise(lambda v, best: np.where(v < best, v, best), "min", np.minimum),
        "int": _int(current),
        "float": _float,
        "abs": _abs,
        "len": _len,
        "round": per_lane(TYPED_BUILTINS["round"], "round", current),
        "pow": per_lane(typed_pow, "pow", current),  # numba's float ** int, as ``**``
        "bool": per_lane(lambda v: np.bool_(v), "bool", current),
        UNUSED_ATOMICS: LaneAtomics(unused=True),
    }


def _lane_atomic(
    update: Callable[[Any, Any], Any], add_sign: int = 0, unused: str | None = None
) -> Callable[..., Any]:
    def atomic(array: Any, index: Any, value: Any) -> Any:
        if not isinstance(array, LaneArray):
            raise Unsupported("an atomic on something other than an array")
        cast = array.dtype.type
        return array.atomic(
            index, lambda old, v: update(old, cast(v)), (value,), sys._getframe(1), add_sign, unused
        )

    return atomic


class LaneAtomics:
    """``cuda.atomic``: per lane in thread order, with the per-thread engine's updates.
    ``unused``: the atomics of statements that drop the old value (the rewrite calls
    these for ``cuda.atomic.add(...)`` as a statement), which may run unordered."""

    def __init__(self, unused: bool = False) -> None:
        self._unused = unused

    def __getattr__(self, name: str) -> Any:
        if name in ("cas", "compare_and_swap"):
            raise Unsupported(f"cuda.atomic.{name}")
        function = getattr(intrinsics.Atomics, name)
        cells = dict(zip(function.__code__.co_freevars, function.__closure__ or ()))
        update = cells["update"].cell_contents if "update" in cells else None
        if update is None:
            raise Unsupported(f"cuda.atomic.{name}")
        unused = UNORDERED.get(name) if self._unused else None
        value = _lane_atomic(update, {"add": 1, "sub": -1}.get(name, 0), unused)
        setattr(self, name, value)
        return value


class LaneDim3:
    __slots__ = ("x", "y", "z")

    def __init__(self, x: Any, y: Any, z: Any) -> None:
        self.x, self.y, self.z = x, y, z

    def __iter__(self) -> Iterator[Any]:
        return iter((self.x, self.y, self.z))


class LaneCuda:
    """``numba.cuda`` for lanes: coordinates are arrays, one element per lane."""

    warpsize = INT64(32)
    atomic = LaneAtomics()
    fp16 = SIMULATED_FP16  # its functions take lane arrays as they take scalars

    def __init__(self, current: Any) -> None:
        self._current = current
        self.bf16 = lane_bf16(current)  # numba.cuda.bf16: lanes of bfloat16 (bfloat16.py)
        zero = LaneDim3(INT64(0), INT64(0), INT64(0))  # set_chunk gives the lanes theirs
        self.threadIdx = self.blockIdx = self.blockDim = self.gridDim = zero
        self._thread_key: tuple | None = None
        self.laneid: Any = None

    def set_chunk(self, chunk: Any, block_dims: tuple, grid_dims: tuple) -> None:
        bx, by, _ = block_dims
        gx, gy, _ = grid_dims
        t, b = chunk.thread, chunk.block
        # Chunks of one shape share ``t`` (read-only, kept here so its id is not reused).
        known = self._thread_key
        if known is None or known[0] is not t or known[1:] != (bx, by):
            self._thread_key = (t, bx, by)
            self.threadIdx = LaneDim3(t % bx, (t // bx) % by, t // (bx * by))
        self.blockIdx = LaneDim3(b % gx, (b // gx) % gy, b // (gx * gy))
        self.blockDim = LaneDim3(*(INT64(v) for v in block_dims))
        self.gridDim = LaneDim3(*(INT64(v) for v in grid_dims))
        self.laneid = chunk.lane_in_warp

    def grid(self, ndim: int) -> Any:
        t, b, d = self.threadIdx, self.blockIdx, self.blockDim
        coords = (b.x * d.x + t.x, b.y * d.y + t.y, b.z * d.z + t.z)
        return coords[0] if ndim == 1 else coords[:ndim]

    def gridsize(self, ndim: int) -> Any:
        sizes = tuple(INT64(int(a) * int(b)) for a, b in zip(self.gridDim, self.blockDim))
        return sizes[0] if ndim == 1 else sizes[:ndim]

    def activemask(self) -> Any:
        """The lanes of the warp that exist, as the per-thread engine answers in a kernel
        that never waits; in one that waits its answer depends on the order threads ran."""
        chunk = self._current.chunk
        if chunk.kernel_waits:
            raise Unsupported("cuda.activemask in a kernel with barriers or warp operations")
        first = chunk.thread - chunk.lane_in_warp
        lanes = np.minimum(32, chunk.threads - first)
        return (np.int64(1) << lanes) - 1

    def lanemask_lt(self) -> Any:
        return (np.int64(1) << self.laneid) - 1

    def threadfence(self) -> None:
        return None

    threadfence_block = threadfence_system = threadfence

    def nanosleep(self, ns: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        from numba import cuda
        from numba.core import types as numba_types

        value = getattr(cuda, name, None)
        if isinstance(value, numba_types.Number):
            cast = LaneCast(as_dtype(value), name)
            setattr(self, name, cast)
            return cast
        scalar = getattr(intrinsics.SimulatedCuda, name, None)
        if name in ("fma", "cbrt", "popc", "brev", "clz", "ffs") and scalar is not None:
            function = per_lane(scalar, name, self._current)
            setattr(self, name, function)
            return function
        raise Unsupported(f"cuda.{name} is not vectorised")
