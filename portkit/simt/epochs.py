"""Keep barrier epochs in stamps from wrapping into a false race.

A stamp holds a block's barrier epoch in ``EPOCH_MASK`` bits (memory.py), so an access
made 2^13 barriers ago would look like one made in the current interval. Only whether
an older access's epoch *differs* from the current one matters (it is then ordered
before every current access), so every ``REFRESH`` barriers a block's older stamps are
moved to the epoch just before the current one: they stay ordered, and their epoch can
no longer come round to the current one. Both engines call this at the same barriers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from portkit.simt.stamps import EPOCH_MASK, EPOCH_SHIFT, NOBODY

REFRESH = (EPOCH_MASK + 1) // 2  # well before the epoch field wraps
_EPOCH_FIELD = EPOCH_MASK << EPOCH_SHIFT


def due(epoch: int) -> bool:
    """Whether the barrier that made ``epoch`` must refresh the block's stamps."""
    return epoch % REFRESH == 0


def _slots(shadow: Any) -> Iterable[Any]:
    return (shadow.writes, shadow.reads, shadow.reads2)


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
