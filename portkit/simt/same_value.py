"""Races whose write stored the bits the element already held: whichever order the GPU
takes, the element keeps those bits and a racing read gets them, so the race cannot
change a result. A warning (``same-value-race``, docs/simulator.md's rule table), the
error it was in strict mode. ``memory.py`` notes such writes (``Shadow.same_writes``)
and asks here."""

from __future__ import annotations

from typing import Any

from portkit.simt.memory_fault import MemoryFault


def judge_write(machine: Any, fault: MemoryFault, same: bool, kind: str, frame: Any) -> None:
    """A write racing with another thread's ``kind`` ("read" or "write"): ``fault``
    raised unless the write stored the bits the element held (``same``)."""
    if not same or machine.strict:
        differs = " of another value" if kind == "write" else ""
        raise MemoryFault(fault.kind, fault.detail + differs, fault.other)
    held = " of the same value" if kind == "write" else ", storing the value it held"
    detail = f"{fault.detail}{held}, with no barrier between them"
    machine.memory_warning("same-value-race", detail, frame, fault.other)


def read_after_same_write(machine: Any, fault: MemoryFault, frame: Any) -> bool:
    """A read racing with a write that stored the bits the element held: a warning
    (True), or False in strict mode (the caller raises)."""
    if machine.strict:
        return False
    detail = f"{fault.detail}, racing with a write of the value it held"
    machine.memory_warning("same-value-race", detail, frame, fault.other)
    return True
