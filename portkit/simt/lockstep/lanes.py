"""Masks over lanes: what the rewritten kernel calls for control flow and assignment.

``mask`` is the set of lanes executing the current statement. ``dead`` holds the lanes
that returned from the current function; ``parked`` those that left the current loops
through ``break`` or ``continue`` (they come back when the loop, or the iteration,
ends). ``full`` says that every lane that could still read a variable of this
function is executing, so an assignment may replace the value outright (and a uniform
value stays a scalar) instead of merging with ``np.where``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from portkit.simt.lockstep.bfloat16 import is_bfloat16, where
from portkit.simt.lockstep.vectorize import Unsupported


class Undefined:
    """The value of a local before its first assignment."""

    def __repr__(self) -> str:
        return "<undefined>"


UNDEF = Undefined()


def truth(value: Any) -> Any:
    """Per-lane truth of a value, as ``bool()`` of each lane's scalar."""
    if isinstance(value, np.ndarray):
        return value if value.dtype == np.bool_ else value != 0
    return bool(value)


def is_lanes(value: Any) -> bool:
    return isinstance(value, np.ndarray)


class _Loop:
    __slots__ = ("saved", "brk", "cont", "last")

    def __init__(self, saved: np.ndarray, last: bool) -> None:
        self.saved = saved
        # The kernel's last statement: a lane that leaves it has nothing left to run.
        self.last = last
        # Lanes that ran ``break`` / ``continue`` in this loop; None while none has (a
        # loop step then tests nothing for them).
        self.brk: np.ndarray | None = None
        self.cont: np.ndarray | None = None


class Lanes:
    """Control-flow state of one chunk of lanes."""

    def __init__(self, lanes: int) -> None:
        self.n = lanes
        self.none = np.zeros(lanes, bool)
        self.mask = np.ones(lanes, bool)
        self.entry = self.mask
        self.dead = self.none
        self.parked = self.none
        self.active_count = lanes
        self.live_count = lanes
        self.full = True
        self.depth = 0  # 1 in the kernel, more in device functions
        self.exited = self.none  # lanes that returned from the kernel

    def _set(self, mask: np.ndarray) -> None:
        self.mask = mask
        self.active_count = int(np.count_nonzero(mask))
        self.full = self.active_count == self.live_count

    def _live(self) -> None:
        self.live_count = int(np.count_nonzero(self.entry & ~self.dead))

    # -- functions -----------------------------------------------------------------------
    def enter(self) -> tuple:
        frame = (self.mask, self.entry, self.dead, self.parked, self.live_count)
        self.entry, self.dead, self.parked = self.mask, self.none, self.none
        self.live_count = self.active_count
        self.full = True
        self.depth += 1
        return frame

    def leave(self, frame: tuple, value: Any) -> Any:
        mask, self.entry, self.dead, self.parked, self.live_count = frame
        self.depth -= 1
        self._set(mask)
        return None if value is UNDEF else value

    def ret(self, current: Any, value: Any) -> Any:
        # Lanes that returned earlier keep their value: ``full`` does not apply here.
        if current is UNDEF or value is None or self.active_count == 0:
            merged = current if self.active_count == 0 else value
        elif _same_tuples(value, current):
            # `return top, s * exp(m - top)` in some lanes, `return m, s` in others: the
            # elements merge one by one (each must be a number of one type, as below).
            merged = tuple(self.merge(self.mask, v, c) for v, c in zip(value, current))
        elif not _numeric(value) or not _numeric(current):
            raise Unsupported("a device function returning non-numbers from several places")
        else:
            merged = self.merge(self.mask, value, current)
        self.dead = self.dead | self.mask
        if self.depth == 1:
            self.exited = self.exited | self.mask
        self._live()
        self._set(self.none)
        return merged

    def active(self) -> bool:
        return self.active_count > 0

    # -- if --------------------------------------------------------------------------------
    @staticmethod
    def uniform(value: Any) -> bool:
        return not isinstance(value, np.ndarray)

    def branch(self, test: np.ndarray) -> np.ndarray:
        saved = self.mask
        self._set(saved & truth(test))
        return saved

    def orelse(self, saved: np.ndarray, test: np.ndarray) -> None:
        self._set(saved & ~truth(test) & ~self.dead & ~self.parked)

    def endif(self, saved: np.ndarray) -> None:
        self._set(saved & ~self.dead & ~self.parked)

    # -- loops -----------------------------------------------------------------------------
    def loop_enter(self, last: bool = False) -> _Loop:
        """A loop begins; ``last``: it is the kernel's last statement, so a lane that
        leaves it (its test false, or ``break``) has ended, as if it returned: the lanes
        still looping are then all the live ones, and assignments need no merging."""
        return _Loop(self.mask, last and self.depth == 1)

    def _end(self, lanes: np.ndarray) -> None:
        """``lanes`` left the kernel's last loop: they have ended (as ``ret``)."""
        self.dead = self.dead | lanes
        self.exited = self.exited | lanes
        self._live()

    def loop_top(self, loop: _Loop) -> bool:
        cont = loop.cont
        if cont is not None:
            loop.cont = None
            self.parked = self.parked & ~cont
            self._set(self.mask | cont)
        return True

    def loop_test(self, loop: _Loop, test: Any) -> bool:
        if isinstance(test, np.ndarray):
            mask = self.mask & truth(test)
            count = int(np.count_nonzero(mask))
            if count != self.active_count:  # else the same lanes: keep the mask (caches)
                if loop.last:
                    self._end(self.mask & ~mask)
                self.mask, self.active_count = mask, count
                self.full = count == self.live_count
        elif not test:
            if loop.last:
                self._end(self.mask)
            self._set(self.none)
        return self.active_count > 0

    def brk(self, loop: _Loop) -> None:
        if loop.last:
            self._end(self.mask)
        else:
            loop.brk = self.mask if loop.brk is None else loop.brk | self.mask
            self.parked = self.parked | self.mask
        self._set(self.none)

    def cont(self, loop: _Loop) -> None:
        loop.cont = self.mask if loop.cont is None else loop.cont | self.mask
        self.parked = self.parked | self.mask
        self._set(self.none)

    def loop_exit(self, loop: _Loop) -> None:
        for left in (loop.brk, loop.cont):
            if left is not None:
                self.parked = self.parked & ~left
        self._set(loop.saved & ~self.dead & ~self.parked)

    def range_start(self, *bounds: Any) -> list:
        start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds, 1)[:3]
        for bound in (start, stop, step):
            kind = np.asarray(bound).dtype.kind
            if kind not in "iub":
                raise Unsupported(f"range() of {np.asarray(bound).dtype}")
        if is_lanes(step):
            raise Unsupported("range() with a step that differs between threads")
        if int(step) == 0:
            raise Unsupported("range() with step 0")
        as_int = (lambda v: v.astype(np.int64)) if is_lanes(start) else np.int64
        return [as_int(start), stop, np.int64(step), self._trips(start, stop, int(step))]

    def _trips(self, start: Any, stop: Any, step: int) -> int | None:
        """The trip count of a range whose bounds differ between the lanes entering it
        but not their difference (``range(i, i + j)``): every lane loops that often, so
        the loop's test is that count, not a comparison per lane. None otherwise."""
        if not (is_lanes(start) or is_lanes(stop)):
            return None
        if np.asarray(start).dtype.kind != "i" or np.asarray(stop).dtype.kind != "i":
            return None
        first, last = np.asarray(start, np.int64), np.asarray(stop, np.int64)  # no wrap
        span = (last - first) if step > 0 else (first - last)
        if self.active_count != self.n:
            span = span[self.mask]
        if span.size == 0 or span.min() != span.max():
            return None
        return max(0, -(-int(span[0]) // abs(step)))

    @staticmethod
    def range_test(counter: list) -> Any:
        value, stop, step, trips = counter
        if trips is not None:
            return trips > 0
        return value < stop if step > 0 else value > stop

    @staticmethod
    def range_next(counter: list) -> Any:
        value = counter[0]
        counter[0] = value + counter[2]
        if counter[3] is not None:
            counter[3] -= 1
        return value

    # -- values ----------------------------------------------------------------------------
    def sel(self, new: Any, old: Any) -> Any:
        """``x = new`` in the active lanes; the others keep ``old``."""
        if self.full or old is UNDEF or new is old:
            return new
        if self.active_count == 0:
            return old
        if type(old) is np.ndarray and isinstance(new, (np.ndarray, np.generic)):
            if new.dtype == old.dtype:  # one type: nothing to unify (the common case)
                return np.where(self.mask, new, old)
        if isinstance(new, tuple) and isinstance(old, tuple) and len(new) == len(old):
            return tuple(self.sel(a, b) for a, b in zip(new, old))
        if is_bfloat16(new) or is_bfloat16(old):
            return where(self.mask, new, old)  # both bfloat16, or refused
        if not _numeric(new) or not _numeric(old):
            raise Unsupported("a divergent assignment of a non-number (array view, tuple)")
        kind = unified(np.asarray(new).dtype, np.asarray(old).dtype)
        if kind is None:
            raise Unsupported(
                f"a variable that is {np.asarray(new).dtype} in some threads and "
                f"{np.asarray(old).dtype} in others"
            )
        return np.where(self.mask, new, old).astype(kind, copy=False)

    def unpack(self, value: Any, count: int) -> Any:
        if not isinstance(value, tuple) or len(value) != count:
            raise Unsupported("unpacking something other than a tuple")
        return value

    def merge(self, taken: Any, value_if: Any, other: Any) -> Any:
        """Per-lane choice between two branch values (same type in every lane)."""
        if is_bfloat16(value_if) or is_bfloat16(other):
            return where(taken, value_if, other)  # both bfloat16, or refused
        if not _numeric(value_if) or not _numeric(other):
            raise Unsupported("a conditional choice between non-numbers")
        kind = unified(np.asarray(value_if).dtype, np.asarray(other).dtype)
        if kind is None:
            raise Unsupported(
                f"a conditional expression that is {np.asarray(value_if).dtype} in some "
                f"threads and {np.asarray(other).dtype} in others"
            )
        return np.where(taken, value_if, other).astype(kind, copy=False)

    def and_(self, left: Any, right: Any) -> Any:
        if not is_lanes(left):
            return right() if left else left
        go = truth(left)
        saved = self.mask
        self._set(saved & go)
        value = right() if self.active_count else left
        self._set(saved)
        if value is left:
            return left
        return self._pick(go & saved, value, left)

    def or_(self, left: Any, right: Any) -> Any:
        if not is_lanes(left):
            return left if left else right()
        stop = truth(left)
        saved = self.mask
        self._set(saved & ~stop)
        value = right() if self.active_count else left
        self._set(saved)
        if value is left:
            return left
        return self._pick(~stop & saved, value, left)

    def _pick(self, where: np.ndarray, value: Any, other: Any) -> Any:
        if not np.any(where):
            return other
        if not np.any(self.mask & ~where):
            return value
        return self.merge(where, value, other)

    def not_(self, value: Any) -> Any:
        return ~truth(value) if is_lanes(value) else not value

    def ifexp(self, test: Any, body: Any, orelse: Any) -> Any:
        if not is_lanes(test):
            return body() if test else orelse()
        go = truth(test)
        saved = self.mask
        taken, other = saved & go, saved & ~go
        if not other.any():
            return body()
        if not taken.any():
            return orelse()
        self._set(taken)
        first = body()
        self._set(other)
        second = orelse()
        self._set(saved)
        return self.merge(go, first, second)


def unified(first: np.dtype, second: np.dtype) -> np.dtype | None:
    """The one type numba's type inference gives a variable (or a conditional value, or
    a function's result) that is ``first`` on one path and ``second`` on another: its
    ``unify_pairs`` on the types the simulator holds (integers narrower than 64 bits are
    int64 here). float32 and float64 unify to float64, a float and an integer to
    float64, bool and a number to the number. None where numba's answer would not be
    the simulator's (int64 and uint64: float64 in numba, uint32 held as int64 here)."""
    if first == second:
        return first
    kinds = first.kind + second.kind
    if "b" in kinds:
        other = second if first.kind == "b" else first
        return other if other.kind in "iuf" else None
    if kinds == "ff":
        return first if first.itemsize >= second.itemsize else second
    if "f" in kinds and kinds.strip("iuf") == "":
        return np.dtype(np.float64)
    return None


def _same_tuples(value: Any, current: Any) -> bool:
    return type(value) is tuple and type(current) is tuple and len(value) == len(current)


def _numeric(value: Any) -> bool:
    return isinstance(value, (np.ndarray, np.generic, bool, int, float))
