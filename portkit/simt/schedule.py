"""The order the simulator runs a launch in: ``forward`` (blocks and threads in index
order, the default) or ``reversed`` (blocks last to first, threads within a block last to
first). Correct kernels give the same bits either way except where float atomics sum
into one element: a GPU promises no order, so an output that differs between the two
schedules is order-dependent (checking/order_bound.py bounds by how much)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from portkit.errors import KernelError

FORWARD, REVERSED = "forward", "reversed"
SCHEDULES = (FORWARD, REVERSED)

T = TypeVar("T")


def checked(schedule: str | None) -> str:
    """``schedule`` (None: forward), or ``KernelError`` naming the ones there are."""
    schedule = schedule or FORWARD
    if schedule not in SCHEDULES:
        raise KernelError(f"unknown simulator schedule {schedule!r}: one of {SCHEDULES}")
    return schedule


def in_order(items: Iterable[T], schedule: str) -> list[T]:
    """``items`` (blocks or threads, in index order) in the order ``schedule`` runs them."""
    ordered = list(items)
    return ordered[::-1] if schedule == REVERSED else ordered
