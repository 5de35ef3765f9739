"""Which exceptions inside a simulated launch are the launch's own, and which only pass
through it.

The engines turn the kernel's exceptions into faults, and the lockstep engine hands a
chunk that failed to the per-thread engine. Neither may do that to an exception that
came from outside the launch: a test timeout raised as an ``Exception`` by a signal
handler that ran between two of the kernel's bytecodes, a ``MemoryError``, Ctrl-C, the
budget's ``Expired``. Those pass through unchanged, and nothing is re-run.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from functools import cache


def passes_through(exc: BaseException) -> bool:
    """True for an exception no engine may take as the kernel's failure: not an
    ``Exception`` (KeyboardInterrupt, the budget's), a ``MemoryError``, or one raised by
    code that is neither the rewritten kernel nor the simulator, NumPy, numba or
    Python's standard library (a signal handler, a callback of the caller's)."""
    if not isinstance(exc, Exception) or isinstance(exc, MemoryError):
        return True
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    if {"__pk_ctx", "__pk_shared"} & frame.f_globals.keys():  # a rewritten kernel's frame
        return False
    return not _inside(frame.f_code.co_filename)


def _inside(file: str) -> bool:
    """Is ``file`` the simulator's, NumPy's, numba's or the standard library's?"""
    path = os.path.abspath(file)
    own, stdlib, site = _roots()
    if path.startswith(own):
        return True
    return path.startswith(stdlib) and not path.startswith(site)


@cache
def _roots() -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """The engine's own folders; the standard library's; the installed packages'."""
    own = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # portkit/
    for name in ("numpy", "numba", "numba.cuda"):
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            own.append(os.path.dirname(os.path.abspath(file)))
    paths = sysconfig.get_paths()
    site = tuple({os.path.abspath(paths["purelib"]), os.path.abspath(paths["platlib"])})
    return tuple(own), os.path.abspath(paths["stdlib"]), site
