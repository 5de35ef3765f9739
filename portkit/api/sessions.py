"""One ``Session`` (project/shared.py, shared with ``portkit.load``) and one engine per
(project, mode, options) for the whole process, as a notebook keeps them: torch, numba,
the compiled kernels and the CPU twin's check worker stay loaded between calls, and each
call refreshes the session first, so a call after an edit imports the edited prototype
again (that one alone) and compiles the edited twin."""

from __future__ import annotations

from collections.abc import Sequence

from portkit.project.session import Session
from portkit.project.shared import MAX_SESSIONS, forget_sessions, is_kept, project_session
from portkit.watch.engine import Engine

_engines: dict[tuple, Engine] = {}

__all__ = ["MAX_SESSIONS", "engine_for", "forget", "project_session"]


def engine_for(
    session: Session,
    op: str,
    mode: str,
    backends: Sequence[str],
    cases: Sequence[str],
    quick: bool,
) -> Engine:
    """The engine of these options on ``session``: its backends are kept between calls.
    Engines of sessions the process no longer keeps are dropped with them."""
    for stale in [k for k, e in _engines.items() if not is_kept(e.session)]:
        del _engines[stale]
    key = (id(session), op, mode, tuple(backends), tuple(cases), quick)
    if key not in _engines or _engines[key].session is not session:
        _engines[key] = Engine(session, [op], mode, backends=backends, cases=cases, quick=quick)
    return _engines[key]


def forget() -> None:
    """Drop every session and engine (a test's clean slate)."""
    forget_sessions()
    _engines.clear()
