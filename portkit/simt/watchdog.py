"""One watchdog thread that stops launches past their deadline, in whatever thread
they run.

A signal reaches the main thread only, so a budget built on ``SIGALRM`` does nothing in
a notebook's worker or a ``threading.Thread``. The watchdog instead raises ``Expired``
in the launching thread itself (CPython's ``PyThreadState_SetAsyncExc``), which that
thread's interpreter raises between two bytecodes: inside the kernel's Python code, in
either engine, at the next loop back-edge or call. A NumPy call already running
finishes first, as it does under a signal.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType


class Expired(BaseException):
    """Raised in a launching thread whose deadline passed; a BaseException, so no
    ``except Exception`` of the kernel or of the engines (which re-run failures per
    thread) swallows it."""


class Alarm:
    """One launch's deadline; ``where`` is filled in when it fires."""

    def __init__(
        self, watchdog: Watchdog, deadline: float, thread: int, where: Callable[..., object]
    ) -> None:
        self._watchdog, self.deadline, self.thread = watchdog, deadline, thread
        self._describe = where
        self.armed, self.fired = True, False
        self.where: object = "?"  # what ``where(frame)`` gave: a place, or text

    def fire(self, frame: FrameType | None) -> None:
        """Name the place from the thread's innermost frame, then stop the thread."""
        try:
            self.where = self._describe(frame)
        except Exception:  # a message is no reason to let the launch spin on
            self.where = "an unknown place"
        self.fired = True
        _raise_in(self.thread, Expired)

    def disarm(self) -> None:
        """The launch is over: never fire, and drop an ``Expired`` sent but not yet
        raised (the launch ended just as the deadline passed)."""
        with self._watchdog.lock:
            self.armed = False
            if self.fired:
                _raise_in(self.thread, None)


class Watchdog:
    """The process's watchdog: a daemon thread asleep until the next deadline."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._wake = threading.Condition(self.lock)
        self._alarms: list[Alarm] = []
        self._thread: threading.Thread | None = None

    def after_fork(self) -> None:
        """A forked child has no watchdog thread, and its lock may be held: start over."""
        self.__init__()  # type: ignore[misc]

    def arm(self, seconds: float, thread: int, where: Callable[..., object]) -> Alarm:
        """An alarm that stops ``thread`` (a ``threading.get_ident()``) in ``seconds``
        unless disarmed; ``where(frame)`` names the place it stopped."""
        alarm = Alarm(self, time.monotonic() + seconds, thread, where)
        with self.lock:
            self._alarms.append(alarm)
            if self._thread is None or not self._thread.is_alive():  # first use, or a fork
                self._thread = threading.Thread(
                    target=self._run, name="portkit-launch-budget", daemon=True
                )
                self._thread.start()
            self._wake.notify()
        return alarm

    def _run(self) -> None:
        with self.lock:
            while True:
                self._alarms = [a for a in self._alarms if a.armed and not a.fired]
                now = time.monotonic()
                for alarm in self._alarms:
                    if alarm.deadline <= now:
                        alarm.fire(sys._current_frames().get(alarm.thread))
                waiting = [a.deadline for a in self._alarms if not a.fired]
                self._wake.wait(timeout=max(min(waiting) - now, 0.0) if waiting else None)


def _raise_in(thread: int, exception: type[BaseException] | None) -> None:
    """Raise ``exception`` in ``thread`` at its next bytecode; None clears one pending."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread), ctypes.py_object(exception) if exception else ctypes.c_void_p()
    )


WATCHDOG = Watchdog()
os.register_at_fork(after_in_child=WATCHDOG.after_fork)
