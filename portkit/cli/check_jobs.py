"""``portkit check -j N``: the plan's ops through the worker pool
(portkit/checking/parallel/), merged into the rows, backends and report lines that
``portkit check`` prints as it does for one process."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from portkit.checking.parallel.handoff import BackendState
    from portkit.checking.seeds import WorstMargin
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op
    from portkit.results import CheckResult


def check_jobs(
    config: ProjectConfig,
    plan: Sequence[tuple[Op, Case]],
    backend_names: Sequence[str],
    case_names: Sequence[str],
    quick: bool,
    no_compile: bool,
    verbose: bool,
    jobs: int,
    console: Console,
    phase: str = "all",
    verdicts: Path | None = None,
    use_verdicts: bool = True,
    seeds: int = 1,
    first_seed: int = 0,
) -> tuple[list[CheckResult], list[BackendState], list[str], list[WorstMargin]]:
    """The rows in the order one process gives them, each backend once (a worker that
    could run it wins over one that could not), the ops' report lines in op order, and
    under ``seeds`` > 1 the worst margin per check (each op's from its worker).
    Workers run ``phase``'s backends and share one verdict store (``verdicts``, or the
    cache dir's), served from and updated as one process does."""
    from portkit.checking.parallel.handoff import suite_order
    from portkit.checking.parallel.pool import check_in_parallel
    from portkit.checking.parallel.worker import Request
    from portkit.checking.verdicts.store import checked_path
    from portkit.cli.render import progress_bar

    if verdicts is not None:
        verdicts = checked_path(verdicts)  # said before any worker starts

    compiles = not no_compile and phase != "gpu"  # the GPU phase compiles nothing first
    request = Request(
        root=str(config.root),
        results="",  # the pool's own folder
        case_names=tuple(case_names),
        quick=quick,
        compile_first=compiles,
        backend_names=tuple(backend_names),
        budget=config.sim_budget,
        strict=config.strict,
        verbose=verbose,
        phase=phase,
        verdicts=str(verdicts.resolve()) if verdicts is not None else "",
        use_verdicts=use_verdicts,
        seeds=seeds,
        first_seed=first_seed,
    )
    ops = list(dict.fromkeys(op.name for op, _ in plan))
    steps = len(plan) * seeds + (len(ops) if compiles else 0)
    with progress_bar(console, steps, f"checking ({jobs} jobs)") as advance:
        runs = check_in_parallel(ops, request, jobs, config.settings.as_environment(), advance)
    states: dict[str, BackendState] = {}
    for run in runs:
        for state in run.backends:
            if state.name not in states or states[state.name].unavailable_reason:
                states[state.name] = state
    report = [line for run in runs for line in run.report]
    margins = sorted((m for run in runs for m in run.margins), key=lambda m: -m.margin)
    return suite_order(runs), list(states.values()), report, margins
