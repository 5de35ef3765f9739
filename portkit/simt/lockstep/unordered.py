"""Atomics whose result no order changes, over every lane at once.

An atomic statement whose old value the kernel drops (``cuda.atomic.add(hist, b, 1)``
as a statement), with an integer operation that is commutative and associative (add
and sub wrap, and, or, xor, max, min), leaves every element with the same bits in any
order of its lanes, of its loop iterations, of its statements: so the lockstep engine
runs it as one NumPy ``ufunc.at`` per statement, and may run it again in the same
chunk (a grid-stride loop), where an atomic whose old value is used, or whose order
matters (exch, inc, dec, float sums), hands the chunk to the per-thread engine.

What the order still decides is the writer record: the per-thread engine leaves each
element the stamp and line of its last atomic in thread order (blocks in order, each
block's threads in order, epoch after epoch). In a chunk whose stamps order as the
threads run (below), that is the largest stamp (the smallest in the reversed schedule),
so each element keeps the later of its stamp and the statement's last lane's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from portkit.simt import epochs

# What ``unused`` names for each atomic (the class of operations that may mix on one
# array in one chunk: add and sub are one).
UNORDERED = {
    "add": "add",
    "sub": "add",
    "and_": "and",
    "or_": "or",
    "xor": "xor",
    "max": "max",
    "min": "min",
}
_UFUNCS = {
    "add": np.add,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "max": np.maximum,
    "min": np.minimum,
}


def accumulate(
    kind: str,
    data: np.ndarray,
    flats: np.ndarray,
    lanes: np.ndarray,
    operand: Any,
    sign: int,
    n: int,
) -> None:
    """``data[flats[k]] = op(data[flats[k]], operand of lane lanes[k])`` for every k, the
    operand cast to ``data``'s type as the per-thread update casts it (an array wraps; a
    scalar out of range raises, as per lane)."""
    dtype = data.dtype
    if isinstance(operand, np.ndarray):
        values: Any = np.broadcast_to(operand, (n,))[lanes].astype(dtype)
    else:
        values = dtype.type(operand)
    if sign < 0:
        values = np.negative(values)  # wraps, as old - v does
    _UFUNCS[kind].at(data, flats, values)


def last_writers_known(chunk: Any, shadow: Any) -> bool:
    """Whether this chunk's stamps order its atomics as the per-thread engine runs them:
    a kernel that never waits (thread codes: block, then thread), or, forward, one whose
    warps made no warp operation since their last barrier (block, epoch, thread) and no
    epoch refresh rewrote older stamps."""
    if not chunk.kernel_waits:
        return True
    if chunk.reversed or shadow.threads:
        return False
    return not chunk.generation.any() and int(chunk.epoch.max()) < epochs.REFRESH - 1


def last_writers(shadow: Any, chunk: Any, flats: np.ndarray, line: int) -> None:
    """Stamp the elements at ``flats`` (the active lanes', in lane order) with their last
    atomic writer in thread order: this statement's last lane there, unless a later
    thread's stamp is there already (an earlier statement or iteration of this chunk)."""
    me = shadow.me(chunk)
    writes = shadow.writes
    if chunk.reversed:  # threads last to first: the first lane in lane order runs last
        elements, first = np.unique(flats, return_index=True)
        best = me[first]
        old = writes[elements]
        wins = (old == shadow.nobody) | (best <= old)
    else:
        elements, last = np.unique(flats[::-1], return_index=True)
        best = me[flats.size - 1 - last]
        wins = best >= writes[elements]  # nobody is below every stamp
    writes[elements[wins]] = best[wins]
    shadow.set_lines("write_lines", elements[wins], line)
