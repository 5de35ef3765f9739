"""What a worker hands its parent for one op, through a file: JSON with a ``format``
number, so a parent never misreads what another portkit's worker wrote.

Format 3: ``{"format": 3, "op": NAME, "results": [CheckResult as a dict, ...],
"backends": [{"name", "role", "unavailable_reason"}, ...], "report": [line, ...],
"margins": [WorstMargin as a dict, ...]}``; ``report``: ``portkit check -v``'s lines on
the backends' engines and caches; ``margins``: under ``--seeds N``, the op's worst margin
per check (empty otherwise). Format 3 rows carry ``stage``, ``site`` and ``mismatch``
(results.CheckResult), which format 2 had not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from portkit.atomic_write import write_atomic
from portkit.checking.seeds import WorstMargin
from portkit.errors import PortkitError
from portkit.results import CheckResult, Outcome

FORMAT = 3


class HandoffError(PortkitError):
    """A worker's file this portkit cannot read: another format, or not JSON."""


@dataclass(frozen=True)
class BackendState:
    """What ``portkit check`` needs of a backend the parent never created: whether it
    could run here (the ``not run:`` line)."""

    name: str
    role: str
    unavailable_reason: str | None


@dataclass
class OpRun:
    """One op's rows from a worker, with its backends' states and report lines."""

    op: str
    results: list[CheckResult]
    backends: list[BackendState] = field(default_factory=list)
    report: list[str] = field(default_factory=list)
    margins: list[WorstMargin] = field(default_factory=list)


def write_run(path: Path, run: OpRun) -> None:
    """Whole or not at all: a parent never reads half a file from a killed worker."""
    payload = {
        "format": FORMAT,
        "op": run.op,
        "results": [asdict(r) for r in run.results],
        "backends": [asdict(b) for b in run.backends],
        "report": run.report,
        "margins": [asdict(m) for m in run.margins],
    }
    write_atomic(path, json.dumps(payload))


def read_run(path: Path) -> OpRun:
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HandoffError(f"{path}: a check worker's results are unreadable ({exc})") from None
    version = payload.get("format") if isinstance(payload, dict) else None
    if version != FORMAT:
        raise HandoffError(
            f"{path}: a check worker's results are in format {version!r}; this portkit "
            f"reads format {FORMAT} (parent and worker must be the same portkit)"
        )
    return OpRun(
        payload["op"],
        [CheckResult.from_dict(row) for row in payload["results"]],
        [BackendState(**b) for b in payload["backends"]],
        list(payload["report"]),
        [WorstMargin(**m) for m in payload["margins"]],
    )


def crashed(op: str, why: str) -> CheckResult:
    """The red row of an op whose worker died or failed before it handed back its rows."""
    return CheckResult(op, "all", "portkit", "worker", Outcome.FAIL, why)


def suite_order(runs: Sequence[OpRun]) -> list[CheckResult]:
    """The rows of ``runs`` (in op order) as one in-process ``run_suite`` orders them:
    every op's compile and lint rows, then the ops' op-wide notes (the gradcheck
    SKIP rows), then every op's cases."""
    sections: list[list[CheckResult]] = [[], [], []]
    for run in runs:
        for r in run.results:
            if r.case != "all":
                sections[2].append(r)
            elif r.backend == "torch" and r.check == "gradcheck":
                sections[1].append(r)
            else:
                sections[0].append(r)
    return [r for section in sections for r in section]
