"""``portkit watch``: a resident process that re-runs what each save touches."""

from __future__ import annotations

import sys

import click

from portkit.cli.context import (
    EXIT_FAILED_CHECKS,
    EXIT_NOTHING_RAN,
    budget_option,
    load_project,
    make_console,
    user_errors,
    working_on,
)
from portkit.errors import PortkitError


@click.command("watch", short_help="Re-run OPs' checks on every save.")
@click.argument("op_names", metavar="[OP]...", nargs=-1)
@click.option(
    "--check",
    "mode",
    flag_value="check",
    default=True,
    help="The check suite for each op, as `portkit check --quick --no-compile` (default).",
)
@click.option(
    "--sim",
    "mode",
    flag_value="sim",
    help="The case `portkit sim OP` runs, in the simulator against the reference: the "
    "fastest loop, no GPU or compiler needed.",
)
@click.option(
    "--diff",
    "mode",
    flag_value="diff",
    help="`portkit diff OP`: prototype against twin, with the thread that wrote each mismatch.",
)
@click.option(
    "--backend",
    "backend_names",
    multiple=True,
    help="--check on these backends only (repeatable or comma-separated), as in `portkit check`.",
)
@click.option("--case", "case_names", multiple=True, help="Only cases with this name (repeatable).")
@click.option(
    "--full", is_flag=True, help="Run the GPU-sized cases too (left out by default, as --quick)."
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Stop after N runs, the first included (for scripts and tests); exit 1 if an "
    "op's latest verdict failed, 3 if a --backend or --case asked for did not run.",
)
@budget_option
@user_errors
def watch_command(
    op_names: tuple[str, ...],
    mode: str,
    backend_names: tuple[str, ...],
    case_names: tuple[str, ...],
    full: bool,
    runs: int | None,
    budget: float | None = None,
) -> None:
    """Re-run OPs' checks on every save: the edit-to-verdict loop in one resident process.

    Loads torch, numba (and the CUDA context on a GPU machine) once, runs every OP (all
    the project's ops when none is named), then watches prototypes/, cuda_src/ and the
    project modules the prototypes import. A save re-runs only what it touches: an edited
    prototype is imported again (that module alone); an edited twin is compiled again
    (that twin alone, NVRTC on a GPU, the C++ compiler on a CPU); an edited shared module
    re-runs every op. Cases that failed last time run first, so the first verdict shows
    before the rest. A syntax or compile error is shown with its line, and the watch goes
    on. Each op shows its verdict, its first mismatch or fault (kernel, block, thread,
    line) and the time its re-run took; each run says what it imported and compiled.
    Ctrl-C stops (exit 130, as every portkit command).

    \b
    Modes (one of):
      --check   every case but the GPU-sized ones on every backend here (default)
      --sim     the one case `portkit sim OP` picks, in the simulator (fastest, CPU only)
      --diff    prototype against twin, as `portkit diff OP`

    \b
    Examples:
      portkit watch sigmoid                  # check sigmoid on every save
      portkit watch sigmoid --sim            # simulator only: well under a second a save
      portkit watch softmax --diff --case float32-3x127
      portkit watch --backend sim,twin-cpu   # every op, two backends
      portkit watch sigmoid --runs 3         # three runs, then exit (scripts, tests)
    """
    from portkit.watch.engine import Engine
    from portkit.watch.loop import watch_loop
    from portkit.watch.view import make_view

    session = load_project(budget)
    names = [name.strip() for item in backend_names for name in item.split(",") if name.strip()]
    if backend_names and not names:
        raise click.UsageError("--backend needs a backend name, e.g. --backend sim")
    if names and mode != "check":
        raise click.UsageError(f"--backend chooses the backends of --check, not of --{mode}")
    engine = Engine(session, op_names, mode, backends=names, cases=case_names, quick=not full)
    for name in op_names if case_names else ():  # as check: a named op must have the case
        try:
            op = session.op(name)
        except PortkitError:
            continue  # an op that does not load: the watch shows why, and waits for a fix
        if not op.has_any_case(case_names):
            op.case(case_names[0])  # raises, naming the op and listing its cases
    if not engine.ops:
        raise click.UsageError(f"no ops to watch in {session.config.prototypes_dir}")
    working_on(f"portkit watch ({mode})")
    console = make_console()
    watch_loop(engine, make_view(console, mode), runs=runs)
    if engine.failing:
        sys.exit(EXIT_FAILED_CHECKS)
    idle = engine.not_run()
    if idle:  # asked for and never checked: not a pass
        console.print(f"not run: {'; '.join(idle)}", soft_wrap=True)
        sys.exit(EXIT_NOTHING_RAN)
    sys.exit(0)
