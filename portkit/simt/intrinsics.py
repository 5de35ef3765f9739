"""The ``cuda`` module as a simulated kernel sees it: thread coordinates, memory
allocation, atomics and the intrinsics that do not make lanes wait for each other.

Its coordinate attributes are plain attributes that the machine rewrites as it switches
from one simulated thread to the next, so ``cuda.threadIdx.x`` costs two attribute reads.
The intrinsics that wait (barriers, shuffles, votes) never reach this object: the
rewrite turns their calls into yields that the machine answers (see ``machine.py``).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from portkit.errors import KernelError
from portkit.simt import floatmath
from portkit.simt.fp16 import SIMULATED_FP16
from portkit.simt.poison import Poison, PoisonUsed
from portkit.simt.scalars import INT64, NumberCast, as_dtype
from portkit.simt.vector_types import vector_types

if TYPE_CHECKING:
    from portkit.simt.memory import SimArray

WARP_SIZE = 32

# Intrinsics that make a thread wait for others: they become yields.
WAITING_INTRINSICS = (
    "syncthreads",
    "syncthreads_count",
    "syncthreads_and",
    "syncthreads_or",
    "syncwarp",
    "shfl_sync",
    "shfl_up_sync",
    "shfl_down_sync",
    "shfl_xor_sync",
    "ballot_sync",
    "any_sync",
    "all_sync",
    "eq_sync",
    "match_any_sync",
    "match_all_sync",
)


class LaneSource(Protocol):
    """What ``cuda.activemask()`` asks of the machine running it (``machine.Machine``)."""

    def live_lanes(self) -> int: ...


class Dim3:
    """``threadIdx``, ``blockIdx``, ``blockDim``, ``gridDim``."""

    __slots__ = ("x", "y", "z")

    def __init__(self, x: int, y: int, z: int) -> None:
        self.x, self.y, self.z = INT64(x), INT64(y), INT64(z)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.x, self.y, self.z))

    def __repr__(self) -> str:
        return f"({self.x}, {self.y}, {self.z})"


def _bit_width(x: Any) -> int:
    """The bits a bit-count intrinsic counts of ``x``: 64 for a uint64, else 32 (above)."""
    return 64 if type(x) is np.uint64 else 32


def _bit_result(x: Any, value: int) -> Any:
    """A bit count as numba types it: a uint64's a uint64, the rest held as int64."""
    return np.uint64(value) if type(x) is np.uint64 else INT64(value)


def _atomic(update: Callable[[Any, Any], Any], sums: bool = False) -> Callable[..., Any]:
    """``sums``: add and sub, whose float results depend on the order (simt/tally.py)."""

    def atomic(array: SimArray, index: Any, value: Any) -> Any:
        if type(value) is Poison:
            raise PoisonUsed(value, "used as an atomic's operand")
        value = array.dtype.type(value)  # numba's signature: (dtype, array, index, dtype)
        summand = value if sums else None
        return array.atomic_update(index, lambda old: update(old, value), summand)

    return atomic


def _inc(old: Any, limit: Any) -> Any:
    return 0 if old >= limit else old + 1


def _dec(old: Any, limit: Any) -> Any:
    return limit if old == 0 or old > limit else old - 1


def _nan_aware(pick: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def update(old: Any, value: Any) -> Any:
        if math.isnan(old):
            return value
        if math.isnan(value):
            return old
        return pick(old, value)

    return update


class Atomics:
    """``cuda.atomic``: each operation is indivisible and returns the old value."""

    add = staticmethod(_atomic(lambda old, v: old + v, sums=True))
    sub = staticmethod(_atomic(lambda old, v: old - v, sums=True))
    max = staticmethod(_atomic(lambda old, v: v if v > old or math.isnan(old) else old))
    min = staticmethod(_atomic(lambda old, v: v if v < old or math.isnan(old) else old))
    # builtins.max/min: inside this class body, max and min are the atomics above.
    nanmax = staticmethod(_atomic(_nan_aware(builtins.max)))
    nanmin = staticmethod(_atomic(_nan_aware(builtins.min)))
    exch = staticmethod(_atomic(lambda old, v: v))
    and_ = staticmethod(_atomic(lambda old, v: old & v))
    or_ = staticmethod(_atomic(lambda old, v: old | v))
    xor = staticmethod(_atomic(lambda old, v: old ^ v))
    inc = staticmethod(_atomic(_inc))
    dec = staticmethod(_atomic(_dec))

    @staticmethod
    def cas(array: SimArray, index: Any, expected: Any, value: Any) -> Any:
        return array.atomic_update(index, lambda old: value if old == expected else old)

    @staticmethod
    def compare_and_swap(array: SimArray, expected: Any, value: Any) -> Any:
        return array.atomic_update(0, lambda old: value if old == expected else old)


class _Unrewritten:
    """``cuda.shared`` & co reached in a way the rewrite could not see (through an alias)."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> Any:
        raise KernelError(
            f"cuda.{self._what}.{name} was reached through an alias the simulator cannot "
            f"follow; call it as cuda.{self._what}.{name}(...) in the kernel"
        )


class GridGroup:
    """``cuda.cg.this_grid()``: the rewrite turns its ``sync()`` into a grid barrier."""

    def sync(self) -> None:
        raise KernelError(
            "a grid group's sync() was reached through an alias the simulator cannot "
            "follow; call it as g.sync() on g = cuda.cg.this_grid() in the kernel"
        )


class CooperativeGroups:
    """``cuda.cg``: numba's cooperative groups, of which it has the grid."""

    @staticmethod
    def this_grid() -> GridGroup:
        return GridGroup()


class SimulatedCuda:
    """What ``cuda`` (numba.cuda) is inside a simulated kernel."""

    warpsize = INT64(WARP_SIZE)
    cg = CooperativeGroups()
    atomic = Atomics()
    fp16 = SIMULATED_FP16
    shared = _Unrewritten("shared")
    local = _Unrewritten("local")
    const = _Unrewritten("const")

    def __init__(self, machine: LaneSource) -> None:
        self._machine = machine
        self.threadIdx = Dim3(0, 0, 0)
        self.blockIdx = Dim3(0, 0, 0)
        self.blockDim = Dim3(1, 1, 1)
        self.gridDim = Dim3(1, 1, 1)
        self.laneid = INT64(0)

    # -- coordinates ---------------------------------------------------------------------
    def grid(self, ndim: int) -> Any:
        t, b, d = self.threadIdx, self.blockIdx, self.blockDim
        x = INT64(int(b.x) * int(d.x) + int(t.x))
        if ndim == 1:
            return x
        y = INT64(int(b.y) * int(d.y) + int(t.y))
        if ndim == 2:
            return x, y
        return x, y, INT64(int(b.z) * int(d.z) + int(t.z))

    def gridsize(self, ndim: int) -> Any:
        g, d = self.gridDim, self.blockDim
        sizes = tuple(INT64(int(a) * int(b)) for a, b in zip(g, d))
        return sizes[0] if ndim == 1 else sizes[:ndim]

    # -- lane masks that need no waiting ---------------------------------------------------
    def activemask(self) -> Any:
        """Lanes of this warp that have not exited (the simulator does not model partial
        convergence within a warp: lanes of one warp may be at different lines)."""
        return INT64(self._machine.live_lanes())

    def lanemask_lt(self) -> Any:
        return INT64((1 << int(self.laneid)) - 1)

    # -- fences, hints and bit tricks --------------------------------------------------
    def threadfence(self) -> None:
        return None

    threadfence_block = threadfence_system = threadfence

    def nanosleep(self, ns: Any) -> None:
        return None

    @staticmethod
    def fma(a: Any, b: Any, c: Any) -> Any:
        kind = np.result_type(a, b, c)
        return kind.type(floatmath.compute("fma", kind, a, b, c)[()])

    @staticmethod
    def cbrt(x: Any) -> Any:
        kind = np.dtype(type(x)) if isinstance(x, np.floating) else np.dtype(np.float64)
        return kind.type(floatmath.compute("cbrt", kind, x)[()])

    @staticmethod
    def selp(test: Any, a: Any, b: Any) -> Any:
        """``a`` where ``test`` holds, else ``b`` (numba types both alike; a literal int is
        int64, a literal float float64)."""
        if type(test) is Poison:
            raise PoisonUsed(test, "used as cuda.selp's predicate")
        picked = a if test else b
        if isinstance(picked, bool) or not isinstance(picked, (int, float)):
            return picked
        return INT64(picked) if isinstance(picked, int) else np.float64(picked)

    # Bit counts as numba-cuda lowers them (cudaimpl.py): popc and clz over the argument's
    # width (llvm ctpop / ctlz), brev of a uint64 over 64 bits (__nv_brevll) and of any other
    # integer over its low 32 (__nv_brev), ffs over 32 bits or 64 (__nv_ffs / __nv_ffsll).
    # The simulator holds int8-int32 values as int64 (scalars.widen), so an int64 here is
    # taken for the int32 it most often is: 32 bits; a true int64's high half is not
    # counted (a known limit, docs/simulator.md). A uint64 is never a widened narrow int:
    # 64 bits, as the GPU counts it.
    @staticmethod
    def popc(x: Any) -> Any:
        bits = _bit_width(x)
        return _bit_result(x, bin(int(x) & ((1 << bits) - 1)).count("1"))

    @staticmethod
    def brev(x: Any) -> Any:
        bits = _bit_width(x)
        return _bit_result(x, int(f"{int(x) & ((1 << bits) - 1):0{bits}b}"[::-1], 2))

    @staticmethod
    def clz(x: Any) -> Any:
        bits = _bit_width(x)
        return _bit_result(x, bits - (int(x) & ((1 << bits) - 1)).bit_length())

    @staticmethod
    def ffs(x: Any) -> Any:
        v = int(x) & ((1 << _bit_width(x)) - 1)
        return INT64((v & -v).bit_length())  # numba's uint32, held as int64

    def __getattr__(self, name: str) -> Any:
        from numba import cuda
        from numba.core import types as numba_types

        vector = vector_types().get(name)
        if vector is not None:
            setattr(self, name, vector)
            return vector
        value = getattr(cuda, name, None)
        if isinstance(value, (numba_types.Number, numba_types.Boolean)):
            cast = NumberCast(as_dtype(value), name)
            setattr(self, name, cast)
            return cast
        if name in WAITING_INTRINSICS:
            raise KernelError(
                f"cuda.{name} was reached through an alias the simulator cannot follow; "
                f"call it as cuda.{name}(...) in the kernel or a device function"
            )
        raise KernelError(f"cuda.{name} is not supported by portkit's simulator")
