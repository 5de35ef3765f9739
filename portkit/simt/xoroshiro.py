"""``numba.cuda.random``'s xoroshiro128+ generator in the simulator.

numba-cuda's device-side functions (``xoroshiro128p_uniform_float32(states, i)``...) are
``numba.jit`` functions over a record array of states (fields ``s0``, ``s1``). The
simulator runs the same arithmetic (uint64, wrapping) over NumPy: one state per call in
the per-thread engine, every lane's state at once in the lockstep engine, each read and
write of ``states[i]`` checked like any other access (bounds, races: two threads drawing
from one state race). The draws are bit-identical to numba's own CPU implementation of
these functions (tests/simt/test_dropin_random.py compares them).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

_U = np.uint64
_TO_UNIT = np.float64(1.0) / np.float64(1 << 53)
_TWO_PI_32 = np.float32(2 * math.pi)
_TWO_PI_64 = np.float64(2 * math.pi)


def _rotl(x: Any, k: int) -> Any:
    return (x << _U(k)) | (x >> _U(64 - k))


def _step(s0: Any, s1: Any) -> tuple[Any, Any, Any]:
    """(result, new s0, new s1) of one xoroshiro128+ step; scalars or arrays of uint64."""
    result = s0 + s1
    s1 = s1 ^ s0
    return result, _rotl(s0, 55) ^ s1 ^ (s1 << _U(14)), _rotl(s1, 36)


def _unit64(x: Any) -> Any:
    return (
        (x >> _U(11)).astype(np.float64) * _TO_UNIT
        if isinstance(x, np.ndarray)
        else (np.float64(x >> _U(11)) * _TO_UNIT)
    )


def _unit32(x: Any) -> Any:
    value = _unit64(x)
    return value.astype(np.float32) if isinstance(value, np.ndarray) else np.float32(value)


# -- the per-thread engine: states is a SimArray of records, index one integer ----------
def _next(states: Any, index: Any) -> Any:
    with np.errstate(over="ignore"):
        record = states[index]  # a checked read of the whole state
        result, s0, s1 = _step(_U(record["s0"]), _U(record["s1"]))
        states[index] = (s0, s1)  # a checked write
    return result


def _thread_functions() -> dict[str, Callable[..., Any]]:
    from portkit.simt.typed_math import TYPED_MATH

    def normal(states: Any, index: Any, two_pi: Any, kind: Any) -> Any:
        u1 = _unit32(_next(states, index))
        u2 = _unit32(_next(states, index))
        radius = TYPED_MATH.sqrt(-kind(2.0) * TYPED_MATH.log(u1))
        return radius * TYPED_MATH.cos(two_pi * u2)

    return {
        "xoroshiro128p_next": _next,
        "xoroshiro128p_uniform_float32": lambda s, i: _unit32(_next(s, i)),
        "xoroshiro128p_uniform_float64": lambda s, i: _unit64(_next(s, i)),
        "xoroshiro128p_normal_float32": lambda s, i: normal(s, i, _TWO_PI_32, np.float32),
        "xoroshiro128p_normal_float64": lambda s, i: normal(s, i, _TWO_PI_64, np.float64),
    }


# -- the lockstep engine: states is a LaneArray, index one integer or one per lane -------
class PerThreadOnly(NotImplementedError):
    """The lockstep engine hands the launch to the per-thread engine (it falls back on
    any exception; this module stays below the lockstep package)."""


def _caller() -> Any:
    frame: Any = sys._getframe(1)
    while frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return frame  # the kernel's line, for the checks' records


def _next_lanes(states: Any, index: Any) -> Any:
    if not hasattr(states, "load"):
        raise PerThreadOnly("xoroshiro states that are not an array argument")
    frame = _caller()
    records = states.load(index, frame)
    if not isinstance(records, np.ndarray):
        raise PerThreadOnly("every thread draws from one xoroshiro state (a race)")
    updated = np.empty_like(records)
    if records.dtype == _STATE:  # numba's states: each an (s0, s1) pair of uint64
        pairs, out = records.view(_U).reshape(-1, 2), updated.view(_U).reshape(-1, 2)
        result = _step_into(pairs[:, 0], pairs[:, 1], out[:, 0], out[:, 1])
    else:
        with np.errstate(over="ignore"):
            result, s0, s1 = _step(records["s0"].astype(_U), records["s1"].astype(_U))
        updated["s0"], updated["s1"] = s0, s1
    states.store(index, updated, frame)
    return result


_STATE = np.dtype([("s0", _U), ("s1", _U)], align=True)


def _step_into(s0: np.ndarray, s1: np.ndarray, out0: np.ndarray, out1: np.ndarray) -> Any:
    """``_step`` over lanes, the new state written into ``out0``/``out1`` (fewer
    temporaries: the draw is most of a random-filling kernel's time)."""
    result = s0 + s1
    t = s1 ^ s0
    spare = np.right_shift(s0, _U(9))
    np.left_shift(s0, _U(55), out=out0)  # rotl(s0, 55) ^ t ^ (t << 14)
    out0 |= spare
    out0 ^= t
    np.left_shift(t, _U(14), out=spare)
    out0 ^= spare
    np.left_shift(t, _U(36), out=out1)  # rotl(t, 36)
    np.right_shift(t, _U(28), out=spare)
    out1 |= spare
    return result


def _lane_functions() -> dict[str, Callable[..., Any]]:
    def normal(states: Any, index: Any) -> Any:
        raise PerThreadOnly("xoroshiro128p_normal_* (runs per thread)")

    return {
        "xoroshiro128p_next": _next_lanes,
        "xoroshiro128p_uniform_float32": lambda s, i: _unit32(_next_lanes(s, i)),
        "xoroshiro128p_uniform_float64": lambda s, i: _unit64(_next_lanes(s, i)),
        "xoroshiro128p_normal_float32": normal,
        "xoroshiro128p_normal_float64": normal,
    }


def _numba_functions() -> dict[int, str]:
    from numba.cuda import random

    names = ("next", "uniform_float32", "uniform_float64", "normal_float32", "normal_float64")
    return {id(getattr(random, f"xoroshiro128p_{n}")): f"xoroshiro128p_{n}" for n in names}


_TABLES: dict[str, Any] = {}


def simulated_random(value: Any, lanes: bool = False) -> Callable[..., Any] | None:
    """The simulator's version of ``value`` if it is one of numba.cuda.random's
    device-side functions (for the lockstep engine with ``lanes``), else None."""
    if not hasattr(value, "py_func") or "numba.cuda.random" not in sys.modules:
        return None
    if not _TABLES:
        _TABLES["ids"] = _numba_functions()
        _TABLES["thread"], _TABLES["lanes"] = _thread_functions(), _lane_functions()
    name = _TABLES["ids"].get(id(value))
    if name is None:
        return None
    return _TABLES["lanes" if lanes else "thread"][name]
