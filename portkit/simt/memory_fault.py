"""``MemoryFault``: a checked access failed (simulated memory, uninitialised values); the
machine adds block, thread and source line (``machine.Machine.fault``)."""

from __future__ import annotations


class MemoryFault(Exception):
    """A checked access failed; the machine adds block, thread and source line."""

    def __init__(self, kind: str, detail: str, other: tuple[int, int] | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.other = other  # (stamp, line key) of the earlier access in a race
