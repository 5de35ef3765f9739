"""Keep barrier epochs and warp generations in stamps from wrapping into a false race.

A stamp holds a block's barrier epoch in ``EPOCH_MASK`` bits (memory.py), so an access
made 2^13 barriers ago would look like one made in the current interval. Only whether
an older access's epoch *differs* from the current one matters (it is then ordered
before every current access), so every ``REFRESH`` barriers a block's older stamps are
moved to the epoch just before the current one: they stay ordered, and their epoch can
no longer come round to the current one. Both engines call this at the same barriers.

The warp generation (``GENERATION_BITS``, counting a warp's operations since the last
barrier) wraps the same way after 256 shuffles in one barrier interval, and is kept
from it the same way: every ``GENERATION_REFRESH`` operations of a warp, the stamps its
lanes made in the interval at older generations move to the generation just before.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from portkit.simt.stamps import (
    EPOCH_MASK,
    EPOCH_SHIFT,
    GENERATION_BITS,
    NOBODY,
    THREAD_BITS,
    THREAD_MASK,
)

REFRESH = (EPOCH_MASK + 1) // 2  # well before the epoch field wraps
_EPOCH_FIELD = EPOCH_MASK << EPOCH_SHIFT
GENERATION_MASK = (1 << GENERATION_BITS) - 1
GENERATION_REFRESH = (GENERATION_MASK + 1) // 2
_GENERATION_FIELD = GENERATION_MASK << THREAD_BITS


def due(epoch: int) -> bool:
    """Whether the barrier that made ``epoch`` must refresh the block's stamps."""
    return epoch % REFRESH == 0


def _slots(shadow: Any) -> Iterable[Any]:
    names = ("writes", "reads", "reads2")
    if hasattr(shadow, "has"):  # the lockstep engine's: only the slots it allocated
        return [getattr(shadow, n) for n in names if shadow.has(n)]
    return [getattr(shadow, n) for n in names]


def refresh(shadows: Iterable[Any], block: int, epoch: int) -> None:
    """Move ``block``'s stamps older than ``epoch`` to ``epoch - 1`` in every shadow
    (``memory.Shadow``: arrays of stamps, or dicts for a subset of blocks)."""
    previous = ((epoch - 1) & EPOCH_MASK) << EPOCH_SHIFT
    current = (epoch & EPOCH_MASK) << EPOCH_SHIFT
    for shadow in shadows:
        for slot in _slots(shadow):
            if isinstance(slot, dict):
                for key, stamp in list(slot.items()):
                    if _stale(stamp, block, current):
                        slot[key] = (stamp & ~_EPOCH_FIELD) | previous
                continue
            stamps = slot if isinstance(slot, np.ndarray) else np.frombuffer(slot, np.int64)
            stale = (
                (stamps != NOBODY)
                & ((stamps >> 32) == block)
                & ((stamps & _EPOCH_FIELD) != current)
            )
            if stale.any():
                stamps[stale] = (stamps[stale] & ~_EPOCH_FIELD) | previous


def _stale(stamp: int, block: int, current: int) -> bool:
    return stamp != NOBODY and stamp >> 32 == block and (stamp & _EPOCH_FIELD) != current


def generation_due(generation: int) -> bool:
    """Whether the warp operation that made ``generation`` must refresh the warp's stamps."""
    return generation % GENERATION_REFRESH == 0


def refresh_generations(
    shadows: Iterable[Any],
    first: int,
    warps_per_block: int,
    epoch: np.ndarray,
    generation: np.ndarray,
    due: np.ndarray,
) -> None:
    """For each warp ``k`` with ``due[k]`` (warp ``k % warps_per_block`` of block
    ``first + k // warps_per_block``, now at ``generation[k]`` in barrier epoch
    ``epoch[k // warps_per_block]``): move the stamps its lanes made in this epoch at
    another generation to ``generation[k] - 1``, so they stay ordered before the warp's
    current accesses when the generation field comes round again."""
    for shadow in shadows:
        for slot in _slots(shadow):
            if isinstance(slot, dict):
                for key, stamp in list(slot.items()):
                    moved = _moved(
                        np.array([stamp], np.int64), first, warps_per_block, epoch, generation, due
                    )
                    if moved is not None and moved[0].size:
                        slot[key] = int(moved[1][0])
                continue
            stamps = slot if isinstance(slot, np.ndarray) else np.frombuffer(slot, np.int64)
            moved = _moved(stamps, first, warps_per_block, epoch, generation, due)
            if moved is not None:
                stamps[moved[0]] = moved[1]


def _moved(
    stamps: np.ndarray,
    first: int,
    warps_per_block: int,
    epoch: np.ndarray,
    generation: np.ndarray,
    due: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:
    """(positions, new stamps) of the stale stamps among ``stamps``, or None."""
    block = (stamps >> 32) - first
    inside = np.flatnonzero((stamps != NOBODY) & (block >= 0) & (block < epoch.size))
    if inside.size == 0:
        return None
    s, b = stamps[inside], block[inside]
    warp = b * warps_per_block + ((s & THREAD_MASK) >> 5)
    now = generation[warp]
    stale = (
        due[warp]
        & ((s & _EPOCH_FIELD) == ((epoch[b] & EPOCH_MASK) << EPOCH_SHIFT))
        & ((s & _GENERATION_FIELD) != (now << THREAD_BITS))
    )
    previous = ((now[stale] - 1) & GENERATION_MASK) << THREAD_BITS
    return inside[stale], (s[stale] & ~_GENERATION_FIELD) | previous
