"""``portkit.check``, ``portkit.sim`` and ``portkit.diff``: the commands as functions that
return their results instead of printing them and exiting. A user's mistake (an unknown
op, a prototype that does not import) raises its ``PortkitError``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from portkit.api.reports import CheckReport, DiffReport
from portkit.api.sessions import engine_for, project_session
from portkit.project.session import Session

if TYPE_CHECKING:
    from portkit.watch.engine import Engine
    from portkit.watch.model import OpVerdict


def _names(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    return [n.strip() for item in items for n in item.split(",") if n.strip()]


def _run(
    op: str,
    mode: str,
    backends: str | Sequence[str] | None,
    cases: str | Sequence[str] | None,
    quick: bool,
    project: str | Path | None,
    session: Session | None,
) -> tuple[Engine, OpVerdict]:
    session = session or project_session(Path(project) if project is not None else None)
    engine = engine_for(session, op, mode, _names(backends), _names(cases), quick)
    verdict = engine.run(every_op=True).verdicts[op]
    if verdict.exception is not None:
        raise verdict.exception
    return engine, verdict


def check(
    op: str,
    cases: str | Sequence[str] | None = None,
    backends: str | Sequence[str] | None = None,
    quick: bool = False,
    *,
    project: str | Path | None = None,
    session: Session | None = None,
) -> CheckReport:
    """``portkit check OP --no-compile``: every case (``cases``: only these; ``quick``:
    not the GPU-sized ones) on every backend this machine has (``backends``: these)."""
    _, verdict = _run(op, "check", backends, cases, quick, project, session)
    return CheckReport(op, "check", verdict.results, verdict.seconds)


def sim(
    op: str,
    cases: str | Sequence[str] | None = None,
    *,
    project: str | Path | None = None,
    session: Session | None = None,
) -> CheckReport:
    """``portkit sim OP``: the op's default case (or ``cases``) in the simulator."""
    _, verdict = _run(op, "sim", None, cases, True, project, session)
    return CheckReport(op, "sim", verdict.results, verdict.seconds)


def diff(
    op: str,
    cases: str | Sequence[str] | None = None,
    quick: bool = True,
    *,
    project: str | Path | None = None,
    session: Session | None = None,
) -> DiffReport:
    """``portkit diff OP``: prototype against twin, each mismatch with its writer."""
    engine, verdict = _run(op, "diff", None, cases, quick, project, session)
    note = engine.mode.plan(engine.session.op(op)).note  # type: ignore[attr-defined]
    return DiffReport(op, "diff", verdict.results, verdict.seconds, verdict.diffs, note)
