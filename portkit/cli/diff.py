"""``portkit diff``: where prototype and twin part ways, down to the thread."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from portkit.cli.context import (
    EXIT_FAILED_CHECKS,
    EXIT_NOTHING_RAN,
    SEED,
    SIZE,
    budget_option,
    json_output,
    load_project,
    make_console,
    parse_shape,
    user_errors,
)
from portkit.errors import PortkitError
from portkit.project.dtypes import DTYPES

if TYPE_CHECKING:
    from portkit.project.cases import Case


@click.command("diff")
@click.argument("op_name", metavar="OP")
@click.option("--case", "case_name", help="Only this case (see `portkit list`).")
@click.option("--size", type=SIZE, help="One case: 1-D inputs of this size.")
@click.option("--shape", help="One case: inputs of this shape, e.g. 4x129.")
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    help="One case of this dtype (default with --size/--shape: float32).",
)
@click.option("--seed", type=SEED, help="Seed for the random inputs (default: the case's).")
@click.option("--show", default=5, show_default=True, help="How many first mismatches to list.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option(
    "--debug",
    is_flag=True,
    help="Re-run the block that wrote the first mismatch in the simulator and stop "
    "in pdb at its thread, at the line that writes the element.",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, writable=True),
    help="Write a picture of where the errors are (PNG).",
)
@click.option(
    "--sim",
    "simulate",
    is_flag=True,
    help="Compare the prototype in the simulator with the reference, even on a GPU.",
)
@budget_option
@user_errors
def diff_command(
    op_name: str,
    case_name: str | None,
    size: int | None,
    shape: str | None,
    dtype: str | None,
    seed: int | None,
    show: int,
    as_json: bool,
    debug: bool,
    plot_path: str | None,
    simulate: bool,
    budget: float | None = None,
) -> None:
    """Find where OP's prototype and twin part ways, down to the thread.

    Runs both on the same inputs through the same host launcher (on a GPU: numba's
    compiled prototype and the NVRTC twin) and reports, for every output and input
    gradient: max abs/rel/ULP error, how many elements differ under the harness's
    tolerance, NaN/Inf disagreements, the first mismatches with the launch, block,
    thread and line that wrote each (recorded by re-running only those blocks in the
    simulator), and the pattern of the disagreement (tail lost, every 32nd element,
    only where the input is large, whole rows, swapped rows and columns...).

    Without a GPU the prototype runs in portkit's simulator and is compared with the
    twin compiled for the CPU (twin-cpu, needs g++ or clang++), or with the PyTorch
    reference when there is no compiler; the output says which. There the GPU-sized
    cases are left out unless --case names one (a note says which).
    Exits 1 when anything differs or a case could not run, 0 when everything agrees,
    3 when the twin could not run (no twin file, or no GPU and no C++ compiler) and the
    prototype was compared with the reference only (--sim asks for that: exit 0).

    \b
    Examples:
      portkit diff sigmoid
      portkit diff softmax --shape 4x1000 --dtype float64
      portkit diff sigmoid --case float32-n129 --debug
      portkit diff softmax --json > softmax-diff.json
      portkit diff softmax --plot softmax-errors.png
    """
    import json

    from portkit.cli.render import progress_bar
    from portkit.diffing.case_diff import debug_mismatch, diff_case, plan_diff
    from portkit.diffing.patterns import across_cases
    from portkit.diffing.report import diff_json, print_diff, write_plot
    from portkit.project.case_choice import check_fits, choose_case

    emit = json_output(as_json)
    session = load_project(budget)
    config, catalog = session.config, session.catalog
    op = catalog.get(op_name)
    if size is not None and shape is not None:
        raise click.UsageError("give --size or --shape, not both")
    if plot_path and not Path(plot_path).resolve().parent.is_dir():
        raise PortkitError(f"--plot: folder {Path(plot_path).parent} does not exist")
    plan = plan_diff(op, config, simulate)
    dims = (size,) if size is not None else (parse_shape(shape) if shape is not None else None)
    if case_name or dims is not None or dtype or seed is not None:
        cases = [choose_case(op, case_name, dtype, dims, seed)]
        check_fits(op, cases[0])
        left_out = ""  # the one case asked for
    else:
        cases = [
            c
            for c in op.definition.cases
            if not ((c.gpu_only or c.large) and plan.prototype.simulated)
        ]
        left_out = _left_out(op.definition.cases, cases)
    note = "\n".join(filter(None, [plan.note, left_out]))
    console = make_console()
    results = []
    shown = console if not as_json else make_console(stderr=True)
    with progress_bar(shown, len(cases), "diffing") as advance:
        for case in cases:
            advance(f"{op.name} {case.name}")
            results.append(diff_case(op, case, plan, show))
    notes = across_cases(results)
    if as_json:
        emit(json.dumps(diff_json(results, notes, note), indent=2))
    else:
        print_diff(console, results, notes, note)
    if plot_path:
        written = write_plot(Path(plot_path), results)
        if not as_json:
            console.print(f"plot written to {written}")
    if debug:
        differing = [c for c in results if c.differs]
        if not differing:
            raise PortkitError("--debug: nothing differs, so there is no thread to stop at")
        debug_mismatch(op, differing[0])
    if any(c.differs or c.error for c in results):
        sys.exit(EXIT_FAILED_CHECKS)
    if plan.twin_missing and not simulate:
        # diff is prototype against twin: a twin that did not run is not a pass
        click.echo(
            f"not run: the twin ({plan.twin_missing}); the prototype was compared with the "
            f"reference only (--sim asks for that on purpose)",
            err=True,
        )
        sys.exit(EXIT_NOTHING_RAN)
    sys.exit(0)


def _left_out(every: Sequence[Case], diffed: Sequence[Case]) -> str:
    """Says which of the op's cases a default run left out (the GPU-sized ones, where the
    prototype is simulated), so an "all cases agree" is not read as all of the op's."""
    names = [c.name for c in every if c not in diffed]
    if not names:
        return ""
    return (
        f"left out {len(names)} GPU-sized case(s) here ({', '.join(names)}): a GPU diffs "
        "them; `--case NAME` diffs one in the simulator"
    )
