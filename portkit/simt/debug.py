"""pdb inside one simulated thread.

Only the chosen thread is traced: tracing is switched on while the machine runs that
thread and off while it runs the others, so ``next`` and ``step`` stay in the chosen
thread even across barriers and shuffles (pdb knows generators; each resume continues
where the thread stopped).
"""

from __future__ import annotations

import bdb
import pdb
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from portkit.errors import KernelError


@dataclass(frozen=True)
class Breakpoint:
    """Stop in pdb when ``thread`` of ``block`` runs ``kernel`` (its first launch only).

    With ``line``, run on to that line of the kernel's file first (``portkit diff --debug``
    stops before the write that differs); ``message`` is shown when pdb starts."""

    kernel: str
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    stdin: TextIO | None = None
    stdout: TextIO | None = None
    line: tuple[str, int] | None = None
    message: str | None = None


class DebugSession:
    def __init__(self, breakpoint: Breakpoint) -> None:
        self.breakpoint = breakpoint
        self.debugger = pdb.Pdb(
            stdin=breakpoint.stdin, stdout=breakpoint.stdout, readrc=breakpoint.stdin is None
        )
        if breakpoint.stdin is not None:
            self.debugger.use_rawinput = False
        self.debugger.reset()
        self._started = False

    def run(self, step: Callable[..., Any], *args: Any) -> Any:
        """Run one stretch of the chosen thread (to its next barrier, or to its end)."""
        debugger = self.debugger
        if not self._started:
            self._started = True
            where = self.breakpoint
            debugger.message(
                f"portkit: kernel {where.kernel}, block {where.block}, thread {where.thread}"
                + (f"\nportkit: {where.message}" if where.message else "")
            )
            if where.line is not None:
                debugger.rcLines.extend([f"break {where.line[0]}:{where.line[1]}", "continue"])
        sys.settrace(debugger.trace_dispatch)
        try:
            return step(*args)  # no frame of ours in between: pdb stops in the kernel
        except bdb.BdbQuit:
            raise KernelError("pdb was quit before the thread finished") from None
        finally:
            sys.settrace(None)

    def finish(self) -> None:
        self.debugger.quitting = True
