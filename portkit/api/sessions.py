"""One ``Session`` and one engine per (project, mode, options) for the whole process, as a
notebook keeps them: torch, numba, the compiled kernels and the CPU twin's check worker
stay loaded between calls, and each call refreshes the session first, so a call after an
edit imports the edited prototype again (that one alone) and compiles the edited twin."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from portkit.project.config import load_config
from portkit.project.session import Session
from portkit.watch.engine import Engine

_sessions: dict[Path, Session] = {}
_engines: dict[tuple, Engine] = {}


def project_session(start: Path | None = None) -> Session:
    """The process's session of the project at or above ``start`` (default: the working
    directory), made on first use."""
    root = load_config(start).root.resolve()
    if root not in _sessions:
        _sessions[root] = Session.from_environment(root)
    return _sessions[root]


def engine_for(
    session: Session,
    op: str,
    mode: str,
    backends: Sequence[str],
    cases: Sequence[str],
    quick: bool,
) -> Engine:
    """The engine of these options on ``session``: its backends are kept between calls."""
    key = (id(session), op, mode, tuple(backends), tuple(cases), quick)
    if key not in _engines or _engines[key].session is not session:
        _engines[key] = Engine(session, [op], mode, backends=backends, cases=cases, quick=quick)
    return _engines[key]


def forget() -> None:
    """Drop every session and engine (a test's clean slate)."""
    _sessions.clear()
    _engines.clear()
