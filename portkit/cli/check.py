"""``portkit check``: the equivalence and gradcheck suite on every backend this machine has."""

from __future__ import annotations

import sys

import click

from portkit.cli.context import EXIT_FAILED_CHECKS, load_project, make_console, user_errors


@click.command()
@click.argument("op_names", metavar="[OP]...", nargs=-1)
@click.option("--all", "all_ops", is_flag=True, help="Check every op of the project.")
@click.option(
    "--backend",
    "backend_names",
    multiple=True,
    help="Only these backends (repeatable): torch, sim, numba, twin, numba-sim. "
    "Default: all but numba-sim (numba's simulator, a cross-check).",
)
@click.option("--case", "case_names", multiple=True, help="Only cases with this name (repeatable).")
@click.option("--no-compile", is_flag=True, help="Skip the sm_90 compile checks.")
@click.option("-v", "--verbose", is_flag=True, help="One row per case instead of per check.")
@user_errors
def check(
    op_names: tuple[str, ...],
    all_ops: bool,
    backend_names: tuple[str, ...],
    case_names: tuple[str, ...],
    no_compile: bool,
    verbose: bool,
) -> None:
    """Run the equivalence and gradcheck suite for OPs on every backend this machine has.

    On a CPU-only machine: the reference's gradcheck, the prototype in the simulator,
    and compile checks for sm_90. On a GPU machine also: the prototype compiled by
    numba, the twin, and prototype against twin. Exits 1 if any check fails.

    \b
    Examples:
      portkit check sigmoid
      portkit check --all --backend sim
      portkit check softmax --case float64-gradcheck -v
    """
    from portkit.backends import create_all
    from portkit.check.harness import plan_suite, run_suite
    from portkit.cli.render import print_results, progress_bar

    config, catalog = load_project()
    if all_ops == bool(op_names):
        raise click.UsageError("name one or more OPs, or pass --all")
    ops = [catalog.get(n) for n in (catalog.names if all_ops else op_names)]
    backends = create_all(config, list(backend_names) or None)
    plan = plan_suite(ops, set(case_names))
    console = make_console()
    with progress_bar(console, len(plan) + (0 if no_compile else len(ops))) as advance:
        results = run_suite(plan, backends, config, compile_first=not no_compile, advance=advance)
    failed = print_results(results, console, verbose)
    sys.exit(EXIT_FAILED_CHECKS if failed else 0)
