"""One ``Session`` and one engine per (project, mode, options) for the whole process, as a
notebook keeps them: torch, numba, the compiled kernels and the CPU twin's check worker
stay loaded between calls, and each call refreshes the session first, so a call after an
edit imports the edited prototype again (that one alone) and compiles the edited twin."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from portkit.project.config import load_config
from portkit.project.discovery import require_project
from portkit.project.environment import Settings
from portkit.project.session import Session
from portkit.watch.engine import Engine

# Projects a process works on at once: the least recently used session (and its engines)
# beyond this is dropped, so a process that visits many projects (a test run) stays flat.
MAX_SESSIONS = 8
_sessions: OrderedDict[Path, Session] = OrderedDict()
_engines: dict[tuple, Engine] = {}


def project_session(start: Path | None = None, *, require: bool = True) -> Session:
    """The process's one session of the project at or above ``start`` (default: the
    working directory), made on first use and shared by ``portkit.load``, ``check``,
    ``sim`` and ``diff``: one catalog per project. The environment's settings are read
    at each call, as a new session would read them (``PORTKIT_REPLAY=0`` then
    ``portkit.load`` replays no more). ``require``: outside a project is an error."""
    config = load_config(start)
    if require:
        require_project(config)
    root = config.root.resolve()
    settings = Settings.from_environment()
    session = _sessions.get(root)
    if session is None:
        session = Session.from_environment(root, settings=settings, require=False)
        _sessions[root] = session
        while len(_sessions) > MAX_SESSIONS:
            _drop(_sessions.popitem(last=False)[1])
    else:
        _sessions.move_to_end(root)
        if session.settings != settings:
            session.configure(**asdict(settings))
    return session


def _drop(session: Session) -> None:
    for key in [k for k, engine in _engines.items() if engine.session is session]:
        del _engines[key]


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
