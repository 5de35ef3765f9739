"""Integer ``atomic.add``/``sub`` over every lane at once, in thread order."""

from __future__ import annotations

from typing import Any

import numpy as np


def integer_sums(
    data: np.ndarray, flats: np.ndarray, lanes: np.ndarray, operand: Any, sign: int, n: int
) -> np.ndarray:
    """``atomic.add`` (or ``sub``, ``sign`` -1) of integers into ``data`` at ``flats``
    for ``lanes`` (of ``n``), thread order kept: integer addition wraps and is
    associative, so a lane's old value is the element's value plus the operands of the
    earlier lanes on that element, and the element ends with its value plus all of them:
    the bits the lane-by-lane loop leaves. Returns the lanes' old values."""
    kind = data.dtype
    if isinstance(operand, np.ndarray):
        values = np.broadcast_to(operand, (n,))[lanes].astype(kind)
    else:
        values = np.full(lanes.size, kind.type(operand), kind)  # raises as per lane
    if sign < 0:
        values = np.negative(values)  # wraps, as old - v does
    order = np.argsort(flats, kind="stable")
    positions, values = flats[order], values[order]
    starts = np.flatnonzero(np.r_[True, positions[1:] != positions[:-1]])
    before = np.cumsum(values, dtype=kind) - values  # earlier lanes' sum, all elements
    group = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, positions.size]))
    olds = np.empty(lanes.size, kind)
    olds[order] = data[positions] + (before - before[starts][group])
    data[positions[starts]] += np.add.reduceat(values, starts, dtype=kind)
    return olds
