"""Atomics over the lanes of a chunk: the per-thread engine's order and values.

Each active lane's read-modify-write runs in thread order (the chunk's lanes are its
threads in the per-thread engine's order; reversed in the reversed schedule), with the
per-thread engine's own update, so old values are the same; integer sums run over all
lanes at once (``integer_sums.py``); a statement that drops the old value with an
operation no order changes runs unordered (``unordered.py``). ``self`` is the
``LaneArray`` the atomic updates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from portkit.simt.lockstep.expressions import Unsupported
from portkit.simt.lockstep.float_sums import float_sums
from portkit.simt.lockstep.integer_sums import integer_sums
from portkit.simt.lockstep.lanes import is_lanes
from portkit.simt.lockstep.unordered import accumulate, last_writers, last_writers_known
from portkit.simt.memory import CONST, _line_key


def _integer(value: Any) -> bool:
    """An atomic operand that casts to an integer array's type as the lane loop does."""
    if is_lanes(value):
        return value.dtype.kind in "iu"
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def lane_atomic(
    self: Any,
    index: Any,
    update: Any,
    operands: tuple,
    frame: Any,
    add_sign: int = 0,
    unused: str | None = None,
) -> Any:
    """Read-modify-write per active lane, in thread order; returns the old values.
    ``update(old, *operands of the lane)`` is the per-thread engine's own update.
    ``add_sign`` (1: atomic.add, -1: atomic.sub) sums integers over all lanes at once.
    ``unused``: the statement drops the old values and its operation is one whose
    result no order changes (``unordered.py``): integer add/sub, and, or, xor, max,
    min; such atomics may run again on the array in this chunk (a loop)."""
    flat = self.positions(index)
    if flat is None:
        raise Unsupported("an atomic on a view")
    if self.space == CONST or self.unwritten:
        raise Unsupported("an atomic on constant memory or an array the kernel only reads")
    chunk = self.chunk
    operand = operands[0]
    kind = unused if unused and self.data.dtype.kind in "iu" and _integer(operand) else None
    again = chunk.count_atomic(self, kind)
    lanes = np.flatnonzero(chunk.mask)[:: -1 if chunk.reversed else 1]  # schedule.py
    order = -1 if chunk.reversed else 1
    flats = np.broadcast_to(flat, (chunk.active_count,))[::order]
    shadow = self.shadow
    if shadow is not None and self._poisoned and np.any(shadow.writes[flats] == shadow.nobody):
        raise Unsupported("an atomic on uninitialised shared memory")
    data = self.data
    if shadow is not None:
        shadow.mine = None
    if again and shadow is not None and not last_writers_known(chunk, shadow):
        raise Unsupported("atomics on one array in a chunk whose stamps do not order them")
    if self.journal is not None:
        self.journal.save(data, shadow, flats)
    if kind is not None:
        if lanes.size:
            accumulate(kind, data, flats, lanes, operand, add_sign, chunk.n)
        if shadow is not None:
            line = shadow.line_code(_line_key(frame, chunk.files))
            if again:  # earlier atomics of this chunk: keep each element's last writer
                last_writers(shadow, chunk, flats[::order], line)
            else:
                shadow.writes[flats] = shadow.me(chunk)[::order]
                shadow.set_lines("write_lines", flats, line)
        return None
    # Float sums depend on the order: counted per element (simt/tally.py).
    tally = self.tally if add_sign and data.dtype.kind == "f" else None
    olds = None
    if add_sign and data.dtype.kind in "iu" and _integer(operand) and lanes.size:
        olds = integer_sums(data, flats, lanes, operand, add_sign, chunk.n)
    elif add_sign and data.dtype.kind == "f" and lanes.size:
        olds = float_sums(data, flats, lanes, operand, add_sign, chunk.n, tally)
    if olds is None:
        columns = [
            np.broadcast_to(v, (chunk.n,))[lanes] if is_lanes(v) else None for v in operands
        ]
        olds = np.zeros(lanes.size, data.dtype)
        for k, position in enumerate(flats.tolist()):
            args = [v if c is None else c[k] for v, c in zip(operands, columns)]
            old = data[position]
            data[position] = update(old, *args)
            olds[k] = old
            if tally is not None:
                tally.add(data, position, old, data.dtype.type(args[0]))
    if shadow is not None:
        stamps = shadow.me(chunk)[::order]
        shadow.writes[flats] = stamps  # in run order: the last lane wins, as per thread
        shadow.set_lines("write_lines", flats, shadow.line_code(_line_key(frame, chunk.files)))
    result = np.zeros(chunk.n, data.dtype)
    result[lanes] = olds
    if self._widen:
        result = result.astype(np.int64)
    return result
