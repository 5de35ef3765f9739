"""``portkit mutate``: do an op's cases catch the bugs people make? Mutants of its twin and
prototype (portkit/mutate/) run against its cases; each is killed, survives or is
stillborn (does not compile)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from portkit.cli.context import (
    EXIT_FAILED_CHECKS,
    EXIT_NOTHING_RAN,
    json_output,
    load_project,
    make_console,
    user_errors,
)

if TYPE_CHECKING:
    from rich.console import Console

    from portkit.mutate.report import OpScore
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

# Kinds, kept here (not imported from portkit.mutate) so that --help imports only click;
# tests/mutate/test_mutate_cli.py checks that they match portkit.mutate.model.KINDS.
KIND_NAMES = ("barrier", "bound", "index", "int32", "atomic", "accum", "tail", "shuffle", "guard")
# Seconds one simulated launch of a mutant may run with --quick (no GPU-sized case, whose
# launches take minutes on a CPU): a mutant that spins is stopped and counted killed by
# the budget, not waited on for the project's sim-budget (300 s by default).
DEFAULT_MUTANT_BUDGET = 60.0


@click.command("mutate")
@click.argument("op_names", metavar="[OP]...", nargs=-1)
@click.option("--all", "all_ops", is_flag=True, help="Mutate every op of the project.")
@click.option(
    "--kinds",
    "kinds",
    multiple=True,
    help=f"Only these mutation kinds (repeatable or comma-separated): {', '.join(KIND_NAMES)}.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="At most N mutants per op, taken in turn from each kind and side.",
)
@click.option("--quick", is_flag=True, help="Only the non-large cases.")
@click.option("--case", "case_names", multiple=True, help="Only cases with this name (repeatable).")
@click.option(
    "--max-survivors",
    type=click.FloatRange(0, 1),
    default=0.2,
    show_default=True,
    help="Exit 1 when more than this share of an op's mutants that ran survived.",
)
@click.option("-v", "--verbose", is_flag=True, help="A row for every mutant, killed ones too.")
@click.option(
    "--budget",
    type=click.FloatRange(min=0, max=1e9),
    metavar="SECONDS",
    help="Stop a mutant's simulated launch that runs longer than this: it is killed by the "
    f"budget (default with --quick: {DEFAULT_MUTANT_BUDGET:g}; else [tool.portkit] "
    "sim-budget, as check: GPU-sized cases take minutes; 0: no limit).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@user_errors
def mutate(
    op_names: tuple[str, ...],
    all_ops: bool,
    kinds: tuple[str, ...],
    limit: int | None,
    quick: bool,
    case_names: tuple[str, ...],
    max_survivors: float,
    verbose: bool,
    as_json: bool,
    budget: float | None = None,
) -> None:
    """Mutate OP's twin and prototype and run its cases against every mutant.

    Mutants: a barrier dropped, a bound `<` made `<=`, an index off by one, a 64-bit
    local declared int, an atomic made a plain update, accumulation in the storage
    dtype, a tail loop dropped, a shuffle's direction or offset changed, a guard
    removed. Each runs in a temporary copy of the op (your files are not touched) on
    the backends of its side this machine has: prototype mutants in the simulator (and
    numba on a GPU), twin mutants on the CPU twin (and the twin on a GPU). A mutant is
    killed by the first check that fails, survives with a hint of the case that would
    kill it, or is stillborn (does not compile; not counted). Exits 1 when more than
    --max-survivors of an op's mutants survived or the op fails its own checks, 3 when
    no mutant ran, 2 on a mistake.

    \b
    Examples:
      portkit mutate vector_add
      portkit mutate softmax --kinds barrier,shuffle --quick
      portkit mutate --all --limit 20 --quick --json
    """
    from portkit.mutate.report import print_scores, too_many_survivors
    from portkit.mutate.runner import check_kinds, private_cache

    emit = json_output(as_json)
    if budget is None and quick:
        budget = DEFAULT_MUTANT_BUDGET
    session = load_project(budget)
    config, catalog = session.config, session.catalog
    if all_ops == bool(op_names):
        raise click.UsageError("name one or more OPs, or pass --all")
    chosen = {k.strip() for item in kinds for k in item.split(",") if k.strip()}
    if kinds and not chosen:
        raise click.UsageError("--kinds needs a kind, e.g. --kinds barrier")
    check_kinds(chosen)
    ops = [catalog.get(n) for n in (catalog.names if all_ops else op_names)]
    if case_names:
        for op in ops if op_names else ():
            if not op.has_any_case(case_names):
                op.case(case_names[0])  # raises, naming the op and listing its cases
        ops = [op for op in ops if op.has_any_case(case_names)]
    if not ops:
        why = f"no op has case(s) {', '.join(case_names)}" if case_names else "no ops"
        click.echo(f"nothing ran: {why} in {config.prototypes_dir}", err=True)
        sys.exit(EXIT_NOTHING_RAN)
    console = make_console(stderr=as_json)
    with private_cache(config) as scratch:
        scores, broken = _mutate_ops(ops, scratch, chosen, limit, quick, case_names, console)
    print_scores(scores, console, verbose)
    for line in broken:
        console.print(f"[red]{line}[/]", soft_wrap=True)
    failing = too_many_survivors(scores, max_survivors)
    for name in failing:
        console.print(
            f"[red]{name}: more than {max_survivors:.0%} of its mutants survived[/]",
            soft_wrap=True,
        )
    ran = sum(len(s.results) for s in scores)
    if not ran and not broken:
        console.print("nothing ran: no mutant of the kinds asked for has a backend here")
    if as_json:
        document = {
            "max_survivors": max_survivors,
            "ops": [s.as_dict() for s in scores],
            "broken": broken,
        }
        emit(json.dumps(document, indent=1))
    if broken or failing:
        sys.exit(EXIT_FAILED_CHECKS)
    sys.exit(0 if ran else EXIT_NOTHING_RAN)


def _mutate_ops(
    ops: Sequence[Op],
    config: ProjectConfig,
    kinds: set[str],
    limit: int | None,
    quick: bool,
    case_names: tuple[str, ...],
    console: Console,
) -> tuple[list[OpScore], list[str]]:
    """Each op's score, and a line for each op that fails its own checks (not mutated)."""
    from portkit.backends import create_all
    from portkit.cli.render import progress_bar
    from portkit.mutate.report import OpScore
    from portkit.mutate.runner import MutationRun, mutants_of, run_mutants, select

    backends = create_all(config)
    runs, planned, scores = [], [], []
    for op in ops:
        own = frozenset(c.name for c in op.definition.cases if c.name in case_names)
        run = MutationRun(op, config, backends, quick, own)
        score = OpScore(op.name)
        for side, chosen_backends in run.sides.items():
            if not chosen_backends:
                score.skipped.append(f"{side} not mutated: no {side} backend runs it here")
        found = [m for m in mutants_of(op, config, kinds or None) if run.sides.get(m.side)]
        score.generated = len(found)
        runs.append(run)
        planned.append(select(found, limit))
        scores.append(score)
    broken: list[str] = []
    with progress_bar(console, sum(len(p) + 1 for p in planned), "mutating") as advance:
        for run, mutants, score in zip(runs, planned, scores):
            advance(f"{run.op.name}: the unmutated op")
            failure = run.baseline()
            if failure is not None:
                broken.append(
                    f"{run.op.name} fails its own check before any mutation "
                    f"({failure.backend} {failure.check} {failure.case}); fix it first"
                )
                for _ in mutants:
                    advance(f"{run.op.name}: skipped")
                continue
            score.results = run_mutants(run, mutants, advance)
    return scores, broken
