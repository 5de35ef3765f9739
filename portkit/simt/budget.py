"""A time budget on every simulated launch, so a kernel that never finishes (a loop whose
condition never fails) stops with its kernel, block, thread and line instead of spinning.

The budget is wall-clock seconds per launch, enforced with ``SIGALRM``: the alarm's
handler runs between two bytecodes of whatever Python code is running (the kernel, in
either engine), and raises there. Only the main thread receives signals, so elsewhere a
launch runs without a budget; an outer alarm due sooner (pytest-timeout's) is left alone.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import numpy as np

from portkit.errors import KernelError
from portkit.simt.records import Place, unflatten


class BudgetExceeded(KernelError):
    """A launch ran past its budget: the kernel spins, or the budget is too small."""


class _Expired(BaseException):
    """Raised by the alarm inside the kernel; a BaseException, so no ``except Exception``
    of the kernel or of the engines (which re-run failures per thread) swallows it."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


@contextmanager
def launch_budget(
    seconds: float | None, kernel: str, where: Callable[[FrameType | None], str]
) -> Iterator[None]:
    """Run the body under a budget of ``seconds`` (None or 0: none). ``where(frame)``
    names the spinning thread and line when the alarm fires (``frame``: the running one)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    outer_delay, outer_interval = (
        signal.getitimer(signal.ITIMER_REAL) if seconds and usable else (0.0, 0.0)
    )
    if not seconds or not usable or (outer_delay and outer_delay <= seconds):
        yield
        return
    armed = [True]

    def expire(signum: int, frame: FrameType | None) -> None:
        if armed[0]:
            armed[0] = False
            raise _Expired(where(frame))

    previous = signal.signal(signal.SIGALRM, expire)
    started = time.monotonic()
    try:  # armed inside: a budget of microseconds may fire before the body starts
        signal.setitimer(signal.ITIMER_REAL, seconds)
        yield
    except _Expired as exc:
        raise BudgetExceeded(
            f"kernel {kernel}: still running after {seconds:g} s (the budget of one "
            f"simulated launch) at {exc.where}; a loop that never ends? A longer launch "
            f"needs --budget SECONDS or [tool.portkit] sim-budget"
        ) from None
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay:
            left = outer_delay - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), outer_interval)


def where_spinning(
    frame: FrameType | None, engine: Any, per_thread: Callable[[str, int], Place]
) -> str:
    """Block, thread and kernel line of a launch whose budget ran out: in lockstep the
    first lane still active, per thread the thread running (``per_thread(file, line)``)."""
    file, line = kernel_line(frame)
    if file == "?":  # no kernel line on the stack: the budget ran out before one ran
        return "the launch's start, before a kernel line ran"
    return (lockstep_place(engine, file, line) or per_thread(file, line)).describe()


def kernel_line(frame: FrameType | None) -> tuple[str, int]:
    """The file and line of the innermost rewritten kernel or device function on the
    stack (either engine's helpers are in its globals; the host launcher in the same
    file has none)."""
    while frame is not None and not ({"__pk_shared", "__pk_ctx"} & frame.f_globals.keys()):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("?", 0)


def lockstep_place(engine: Any, file: str, line: int) -> Place | None:
    """In a lockstep launch, the first lane still active; None when none is running."""
    chunk = engine.running_chunk if engine is not None else None
    if chunk is None:
        return None
    active = np.flatnonzero(chunk.mask)
    lane = int(active[0]) if active.size else 0
    grid = tuple(int(v) for v in engine.cuda.gridDim)
    dims = tuple(int(v) for v in engine.cuda.blockDim)
    block = unflatten(int(chunk.block[lane]), grid)
    return Place(block, unflatten(int(chunk.thread[lane]), dims), file, line)
