"""``portkit lint``: what will not compile and why a port will be slow, without a GPU."""

from __future__ import annotations

import sys

import click

from portkit.cli.context import (
    EXIT_FAILED_CHECKS,
    json_output,
    load_project,
    make_console,
    user_errors,
)


@click.command()
@click.argument("op_names", metavar="[OP]...", nargs=-1)
@click.option("--strict", is_flag=True, help="Treat warnings as errors (exit 1 on any finding).")
@click.option("--no-resources", is_flag=True, help="Skip the per-kernel resource table.")
@click.option("--json", "as_json", is_flag=True, help="Print findings and resources as JSON.")
@user_errors
def lint(op_names: tuple[str, ...], strict: bool, no_resources: bool, as_json: bool) -> None:
    """Static checks that need no GPU, for OPs (default: every op).

    \b
    errors:   a prototype kernel (numba, with each case's argument types) or a twin
              (NVRTC) that does not compile for sm_90; a twin kernel whose parameters
              do not match what the launcher passes (count, tensor vs scalar, a tensor
              size into an `int`); float64 arithmetic in a kernel whose inputs are
              float32 or narrower, where the PTX has a float64 instruction (with the
              line, the dtypes and the typed-constant fix); twin code that keeps a
              64-bit size or index in an `int` (truncation, from g++ -Wconversion)
    warnings: int64 index arithmetic in loops, launches of the large cases that
              cannot fill an H100, other 64-bit ints passed to 32-bit parameters
    table:    registers, spills, shared and local memory, float64 instructions,
              global load/store widths and special functions, prototype beside twin

    A line ending in `# portkit: allow-float64` (or allow-int64-index), or following a
    comment line that says so, is an intended choice and is not reported.
    Exits 1 on errors, or on warnings with --strict or `lint-warnings = "error"` in
    [tool.portkit].
    """
    from portkit.cli.render import print_lint
    from portkit.lint.findings import lint as run_lint

    if not no_resources:
        # The resource table is read from ptxas's -v report, which the driver's JIT cache
        # (~/.nv/ComputeCache) swallows: a compile it has seen comes back with no report
        # (H100, 2026-11-24). Read when CUDA first loads, so before anything touches it.
        from portkit.project.environment import default_process_variable

        default_process_variable("CUDA_CACHE_DISABLE", "1")
    emit = json_output(as_json)
    session = load_project()
    config, catalog = session.config, session.catalog
    ops = [catalog.get(n) for n in (op_names or catalog.names)]
    report = run_lint(ops, config, resources=not no_resources)
    warnings_fail = strict or config.lint_warnings_fail
    if as_json:
        import dataclasses
        import json

        payload = {
            "findings": [f.to_json() for f in report.findings],
            "resources": [
                {**dataclasses.asdict(r), "usage": dataclasses.asdict(r.usage)}
                for r in report.resources
            ],
            "skipped": report.skipped,
        }
        emit(json.dumps(payload, indent=2))
    else:
        why = "--strict" if strict else 'lint-warnings = "error"' if warnings_fail else ""
        print_lint(report, make_console(), warnings_fail, why)
    sys.exit(EXIT_FAILED_CHECKS if report.errors(warnings_fail) else 0)
