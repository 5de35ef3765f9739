"""The check worker: ``python -m portkit.checking.parallel.worker REQUEST``.

REQUEST is a JSON file of the run's options (``Request``). The worker loads the project
and its backends once, then reads op names from stdin, one a line; for each it runs the
harness on that op alone, writes the op's rows to ``<results>/<op>.json`` (handoff.py)
and says so on stdout. stdout carries only that protocol (``step LABEL`` at the start of
each unit of work, ``done OP`` when the file is written); anything else written to fd 1
(a kernel's print, a C library) goes to stderr. It exits at the end of stdin.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from portkit.checking.parallel.handoff import BackendState, OpRun, crashed, write_run

if TYPE_CHECKING:
    from portkit.project.session import Session

MODULE = "portkit.checking.parallel.worker"


@dataclass(frozen=True)
class Request:
    """The options of one ``portkit check -j N`` run that every worker shares."""

    root: str
    results: str  # the folder of the per-op files
    case_names: tuple[str, ...] = ()
    quick: bool = False
    compile_first: bool = True
    backend_names: tuple[str, ...] = ()
    budget: float | None = None
    strict: bool = False
    verbose: bool = False
    phase: str = "all"  # --phase: the backends each worker runs (checking/verdicts/phases.py)
    verdicts: str = ""  # --verdicts PATH; "" the cache dir's store
    use_verdicts: bool = True  # False under --no-cache
    seeds: int = 1  # --seeds N: every case with N seeds, the worst margin per check
    first_seed: int = 0  # --first-seed K: from each case's K-th seed

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, path: Path) -> Request:
        data = json.loads(path.read_text())
        data["case_names"] = tuple(data["case_names"])
        data["backend_names"] = tuple(data["backend_names"])
        return cls(**data)


def command(request: Path) -> list[str]:
    return [sys.executable, "-m", MODULE, str(request)]


def check_op(session: Session, request: Request, name: str, say: IO[str]) -> OpRun:
    """One op through the harness, as ``portkit check`` runs it in-process, with backends
    of its own, so ``-v``'s engine counts (the simulator's lockstep fallbacks) are the
    op's, not the sum of the ops this worker checked before."""
    from portkit.backends import create_all
    from portkit.checking.harness import plan_suite
    from portkit.checking.seeds import run_seeds
    from portkit.checking.verdicts.phases import phase_backends
    from portkit.checking.verdicts.serve import open_verdicts

    all_backends = create_all(session.config, list(request.backend_names) or None)
    backends = phase_backends(all_backends, request.phase)
    # The one store every worker reads and updates: its writes lock and merge (store.py).
    path = Path(request.verdicts) if request.verdicts else None
    verdicts = open_verdicts(session.config, path, request.use_verdicts)

    op = session.op(name)
    # The run's --case names this op has (the parent checked that some op has each).
    cases = {c.name for c in op.definition.cases} & set(request.case_names)
    plan = plan_suite([op], cases, skip_large=request.quick)
    if request.case_names and not cases:
        plan = []

    def advance(label: str) -> None:
        say.write(f"step {label}\n")
        say.flush()

    common: dict[str, Any] = {
        "compile_first": request.compile_first,
        "advance": advance,
        "reuse": verdicts,
        "op_notes": request.phase != "gpu",
    }
    results: list = []
    margins: list = []
    if plan:
        results, margins = run_seeds(
            plan, backends, session.config, request.seeds, first=request.first_seed, **common
        )
    if verdicts is not None:
        verdicts.store.save()
    report: list[str] = []
    if request.verbose:
        for backend in backends:
            lines = backend.engine_report()
            if backend.reports_cache and not backend.unavailable_reason:
                lines += backend.cache_report([op])
            report += [f"{name}: {line}" for line in lines]
    states = [BackendState(b.name, b.role, b.unavailable_reason) for b in backends]
    return OpRun(name, results, states, report, margins)


def serve(request: Request, ops: IO[str], say: IO[str]) -> None:
    from portkit.errors import PortkitError, describe
    from portkit.project.session import Session

    session = Session.from_environment(
        Path(request.root), budget=request.budget, strict=request.strict
    )
    for line in ops:
        name = line.strip()
        if not name:
            continue
        try:
            run = check_op(session, request, name, say)
        except Exception as exc:  # the op's red row; the worker goes on with the next op
            detail = describe(exc)
            if not isinstance(exc, PortkitError):
                detail += "\n" + traceback.format_exc()
            run = OpRun(name, [crashed(name, f"the check raised {detail}")])
        write_run(Path(request.results) / f"{name}.json", run)
        say.write(f"done {name}\n")
        say.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 1:
        print(f"usage: python -m {MODULE} REQUEST.json", file=sys.stderr)
        return 2
    # The protocol keeps the real stdout; fd 1 becomes stderr for everything else.
    say = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(Request.read(Path(args[0])), sys.stdin, say)
    return 0


if __name__ == "__main__":
    sys.exit(main())
