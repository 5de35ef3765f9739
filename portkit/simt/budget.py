"""A time budget on every simulated launch, so a kernel that never finishes (a loop whose
condition never fails) stops with its kernel, block, thread and line instead of spinning.

The budget is wall-clock seconds per launch, enforced by one watchdog thread
(``simt/watchdog.py``): when a launch's deadline passes, the watchdog names the
spinning thread and line from the launching thread's live frames, then raises
``_Expired`` in that thread (``PyThreadState_SetAsyncExc``) between two of its
bytecodes, inside whatever Python code runs (the kernel, in either engine). Unlike a
signal this works in any thread (a notebook's worker, a ``threading.Thread``) and
leaves ``SIGALRM`` to its owner (pytest-timeout's alarm still fires).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import numpy as np

from portkit.errors import KernelError
from portkit.results import FailureSite
from portkit.simt.records import Place, unflatten
from portkit.simt.watchdog import WATCHDOG, Expired


class BudgetExceeded(KernelError):
    """A launch ran past its budget: the kernel spins, or the budget is too small."""


@contextmanager
def launch_budget(
    seconds: float | None, kernel: str, where: Callable[[FrameType | None], Place | str]
) -> Iterator[None]:
    """Run the body under a budget of ``seconds`` (None or 0: none). ``where(frame)``
    names the spinning thread and line when the budget runs out (``frame``: the
    launching thread's innermost one)."""
    if not seconds:
        yield
        return
    alarm = WATCHDOG.arm(seconds, threading.get_ident(), where)
    try:
        yield
    except Expired:
        if not alarm.fired:  # another budget's (an outer launch's): not ours to name
            raise
        place = alarm.where
        at, site = (
            (place.describe(), place.site(kernel))
            if isinstance(place, Place)
            else (str(place), FailureSite(kernel))
        )
        raise BudgetExceeded(
            f"kernel {kernel}: still running after {seconds:g} s (the budget of one "
            f"simulated launch) at {at}; a loop that never ends? A longer launch "
            f"needs --budget SECONDS or [tool.portkit] sim-budget",
            site,
        ) from None
    finally:
        _disarm(alarm)


def _disarm(alarm: Any) -> None:
    """Disarm, even when the ``Expired`` sent as the launch ended arrives in here."""
    while True:
        try:
            alarm.disarm()
            return
        except Expired:
            continue


def where_spinning(
    frame: FrameType | None, engine: Any, per_thread: Callable[[str, int], Place]
) -> Place | str:
    """Block, thread and kernel line of a launch whose budget ran out: in lockstep the
    first lane still active, per thread the thread running (``per_thread(file, line)``)."""
    file, line = kernel_line(frame)
    if file == "?":  # no kernel line on the stack: the budget ran out before one ran
        return "the launch's start, before a kernel line ran"
    return lockstep_place(engine, file, line) or per_thread(file, line)


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
