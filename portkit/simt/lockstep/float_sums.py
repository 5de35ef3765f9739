"""Float ``atomic.add``/``sub`` over the lanes of a chunk, bit for bit the lane loop.

Float addition is not associative, so each element's contributions must be added one
by one in thread order, each rounded: the lanes on one element form a sequence. The
lanes run in rounds: round ``r`` adds every element's ``r``-th contribution at once
(distinct elements, one NumPy gather, add and scatter), so a launch costs as many
NumPy steps as the most contributions one element receives in a chunk, not one Python
step per lane (a scatter-add backward, 1M atomics: seconds, not tens of seconds). The
tally (``simt/tally.py``) is counted the same way, each element's magnitude summed in
thread order. Where a NaN is involved (which operand's NaN an addition returns differs
between NumPy's scalar code and its loops) or one element gets more than
``MAX_ROUNDS`` contributions in a chunk, it answers None and the lane loop runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from portkit.simt.tally import AtomicTally

MAX_ROUNDS = 256


def float_sums(
    data: np.ndarray,
    flats: np.ndarray,
    lanes: np.ndarray,
    operand: Any,
    sign: int,
    n: int,
    tally: AtomicTally | None,
) -> np.ndarray | None:
    """``atomic.add`` (``sign`` 1) or ``sub`` (-1) of ``operand`` into float ``data`` at
    ``flats`` (one per lane of ``lanes``, in run order); the lanes' old values, or None
    where the lane loop must run."""
    kind = data.dtype
    if isinstance(operand, np.ndarray):
        if operand.dtype.kind not in "iuf" or type(operand) is not np.ndarray:
            return None
        values = np.broadcast_to(operand, (n,))[lanes].astype(kind)
    elif isinstance(operand, (int, float, np.integer, np.floating)):
        values = np.full(lanes.size, kind.type(operand), kind)  # as each lane casts it
    else:
        return None
    order = np.argsort(flats, kind="stable")
    positions = flats[order]
    starts = np.flatnonzero(np.r_[True, positions[1:] != positions[:-1]])
    sizes = np.diff(np.r_[starts, positions.size])
    rounds = int(sizes.max())
    if rounds > MAX_ROUNDS or np.isnan(values).any() or np.isnan(data[positions[starts]]).any():
        return None
    rank, group = np.empty(lanes.size, np.int64), np.empty(lanes.size, np.int64)
    rank[order] = np.arange(positions.size) - np.repeat(starts, sizes)
    group[order] = np.repeat(np.arange(starts.size), sizes)
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[by_rank], np.arange(rounds + 1))
    step = np.add if sign > 0 else np.subtract
    olds = np.empty(lanes.size, kind)
    magnitude = None if tally is None else tally.sums_before(data, positions[starts])
    for r in range(rounds):
        k = by_rank[bounds[r] : bounds[r + 1]]
        at = flats[k]
        old = data[at]
        olds[k] = old
        data[at] = step(old, values[k])
        if magnitude is not None:  # in thread order per element, as the lane loop adds
            magnitude[group[k]] += np.abs(values[k].astype(np.float64))
    if tally is not None and magnitude is not None:
        first = np.abs(olds[order[starts]].astype(np.float64))
        tally.record(data, positions[starts], sizes, magnitude, first)
    return olds
