"""``portkit compile``: prototypes and twins compiled for sm_90, without a GPU."""

from __future__ import annotations

import sys

import click

from portkit.cli.context import EXIT_FAILED_CHECKS, load_project, make_console, user_errors


@click.command("compile")
@click.argument("op_names", metavar="[OP]...", nargs=-1)
@user_errors
def compile_command(op_names: tuple[str, ...]) -> None:
    """Compile every prototype (numba, compile_ptx) and twin (NVRTC) for sm_90.

    Needs no GPU. Twins are cached on disk keyed by source, options, arch and NVRTC
    version. With no OP, compiles every op. Exits 1 if anything fails to compile.
    """
    from portkit.build.compile_checks import compile_checks
    from portkit.cli.render import print_results

    session = load_project()
    config, catalog = session.config, session.catalog
    ops = [catalog.get(n) for n in (op_names or catalog.names)]
    results = [r for op in ops for r in compile_checks(op, config)]
    failed = print_results(results, make_console(), verbose=True)
    sys.exit(EXIT_FAILED_CHECKS if failed else 0)
