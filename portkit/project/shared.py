"""The process's one ``Session`` per project, shared by ``portkit.load`` and the notebook
API (``portkit.check``, ``sim``, ``diff``: api/sessions.py), so one notebook sees one
catalog and imports an op once for all of them.

The environment's settings are read at each call, as a new session would read them
(``PORTKIT_REPLAY=0`` and the next ``portkit.load`` replays no more); the callers
refresh the session so that an edited op is imported again. The ``MAX_SESSIONS``
projects used last are kept: a process that visits many projects (a test run) stays flat.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict
from pathlib import Path

from portkit.project.config import load_config
from portkit.project.discovery import require_project
from portkit.project.environment import Settings
from portkit.project.session import Session

MAX_SESSIONS = 8
_sessions: OrderedDict[Path, Session] = OrderedDict()


def project_session(start: Path | None = None, *, require: bool = True) -> Session:
    """The session of the project at or above ``start`` (default: the working
    directory), made on first use. ``require``: outside a project is an error."""
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
            _sessions.popitem(last=False)
    else:
        _sessions.move_to_end(root)
        if session.settings != settings:
            session.configure(**asdict(settings))
    return session


def is_kept(session: Session) -> bool:
    """Whether ``session`` is one the process still keeps."""
    return any(s is session for s in _sessions.values())


def forget_sessions() -> None:
    """Drop every kept session (a test's clean slate)."""
    _sessions.clear()
