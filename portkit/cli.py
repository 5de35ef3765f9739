"""The ``portkit`` command. Heavy libraries (torch, numba, cuda.core) are imported
inside commands, never at module import, so ``portkit --help`` is instant."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from portkit import __version__
from portkit.errors import PortkitError

EXIT_FAILED_CHECKS = 1
EXIT_USER_ERROR = 2


def user_errors(command: Callable) -> Callable:
    """Turn a PortkitError into one line on stderr and exit code 2, without a traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except PortkitError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(EXIT_USER_ERROR)

    return wrapper


def _project():
    from portkit.config import load_config
    from portkit.discovery import discover

    config = load_config()
    return config, discover(config)


def _console(stderr: bool = False):
    from rich.console import Console

    console = Console(highlight=False, stderr=stderr)
    if not console.is_terminal:
        # logs and CI: don't squeeze tables
        console = Console(highlight=False, width=200, stderr=stderr)
    return console


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="portkit")  # works uninstalled too
def main() -> None:
    """portkit: one op, three implementations, one check.

    An op is two files joined by name: prototypes/OP.py (numba.cuda.jit kernels,
    host launchers, the PyTorch reference, the cases) and cuda_src/OP.cu (the C CUDA
    twin, same kernel names). A project can move those folders with
    [tool.portkit] prototypes = "..." / cuda-src = "..." in its pyproject.toml.

    \b
    The loop:
      portkit list              what ops exist and what can run here
      portkit sim sigmoid       run the prototype in the CUDA simulator, on a CPU
      portkit sim sigmoid --block 1 --thread 5    ... and stop there in pdb
      portkit check --all       equivalence + gradcheck on every backend this machine has
      portkit compile           do prototypes and twins compile for sm_90? (no GPU needed)
      portkit lint              ... and float64 in float32 kernels, resources side by side
      pytest prototypes         the same suite as generated pytest tests
    """


@main.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@user_errors
def list_ops(as_json: bool) -> None:
    """List every op with its kernels, twin and the backends that can run it here."""
    from portkit.backends import create_all
    from portkit.report import op_listing

    config, catalog = _project()
    backends = create_all(config)
    rows = op_listing(catalog, backends)
    if as_json:
        import json

        click.echo(json.dumps(rows, indent=2))
        return
    from portkit.report import listing_table

    console = _console()
    console.print(listing_table(rows, backends))
    if not catalog.names:
        console.print(f"no ops found in {config.prototypes_dir}")


def _parse_coords(text: str | None, what: str) -> tuple[int, int, int] | None:
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise click.BadParameter(
            f"{what} is X or X,Y or X,Y,Z with integers, got {text!r}"
        ) from None
    if not 1 <= len(values) <= 3 or min(values) < 0:
        raise click.BadParameter(f"{what} is 1 to 3 non-negative integers, got {text!r}")
    return tuple(values + [0] * (3 - len(values)))  # type: ignore[return-value]


def _parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"shape is like 129 or 4x129, got {text!r}") from None
    if min(shape) < 0:
        raise click.BadParameter(f"shape dimensions must be >= 0, got {text!r}")
    return shape


@main.command()
@click.argument("op_name", metavar="OP")
@click.option("--case", "case_name", help="Run one of the op's cases by name (see `portkit list`).")
@click.option("--size", type=click.IntRange(min=0), help="1-D inputs of this many elements.")
@click.option("--shape", help="Input shape, e.g. 4x129 (every tensor input gets it).")
@click.option(
    "--dtype",
    type=click.Choice(["float32", "float64"]),
    default="float32",
    show_default=True,
    help="Scalar type of the inputs.",
)
@click.option("--seed", type=int, help="Seed for the random inputs (default: the case's).")
@click.option("--kernel", help="Kernel to stop in (default: the first one the forward launches).")
@click.option("--block", help="Stop in pdb when this block (X or X,Y,Z) runs --kernel.")
@click.option(
    "--thread", help="... and this thread (X or X,Y,Z) of it. Either option turns pdb on."
)
@click.option("--show", default=8, show_default=True, help="How many leading elements to print.")
@click.option(
    "--backend",
    "backend_name",
    type=click.Choice(["sim", "numba-sim"]),
    default="sim",
    show_default=True,
    help="sim: portkit's simulator (checks bounds, races, barriers, warps); "
    "numba-sim: numba's, for a cross-check.",
)
@user_errors
def sim(
    op_name: str,
    case_name: str | None,
    size: int | None,
    shape: str | None,
    dtype: str,
    seed: int | None,
    kernel: str | None,
    block: str | None,
    thread: str | None,
    show: int,
    backend_name: str,
) -> None:
    """Run OP's prototype in the CUDA simulator on the CPU and compare it with the reference.

    Prints the first elements of every output (and input gradient, if the op has a
    backward) next to the reference, then a verdict; exits 1 if they differ. No GPU
    and no environment variable needed. The simulator stops at the first kernel bug it
    sees (out-of-bounds access, race, uninitialised shared memory, divergent barrier,
    bad warp mask) and names array, index, block, thread and line. A bar shows
    progress over blocks when a launch takes more than two seconds.

    \b
    Examples:
      portkit sim sigmoid
      portkit sim sigmoid --size 1000 --dtype float64 --seed 3
      portkit sim softmax --shape 4x129
      portkit sim sigmoid --block 1 --thread 5       # pdb at block 1, thread 5
      portkit sim softmax --backend numba-sim        # numba's simulator instead
    """
    from portkit.backends import create
    from portkit.report import BlockProgress
    from portkit.simt.debug import Breakpoint
    from portkit.simulate import choose_case, first_forward_kernel, run_simulation

    config, catalog = _project()
    op = catalog.get(op_name)
    if size is not None and shape is not None:
        raise click.UsageError("give --size or --shape, not both")
    case = choose_case(
        op,
        case_name,
        dtype,
        (size,) if size is not None else (_parse_shape(shape) if shape else None),
        seed,
    )
    block_at, thread_at = _parse_coords(block, "--block"), _parse_coords(thread, "--thread")
    backend = create(backend_name, config)
    if backend.unavailable_reason:
        raise PortkitError(f"the simulator cannot run here: {backend.unavailable_reason}")
    if backend.unsupported_reason(op):
        raise PortkitError(f"{backend_name} cannot run {op.name}: {backend.unsupported_reason(op)}")
    if block_at or thread_at:
        name = kernel or first_forward_kernel(op, case)
        if name not in op.kernels:
            raise PortkitError(
                f"op {op.name} has no kernel {name!r}; kernels: {', '.join(op.kernels)}"
            )
        backend.breakpoint = Breakpoint(name, block_at or (0, 0, 0), thread_at or (0, 0, 0))
    elif kernel:
        raise click.UsageError("--kernel chooses where --block/--thread stop; give one of them")
    console = _console()
    with BlockProgress(console) as progress:
        backend.on_block = progress
        ok = run_simulation(op, case, backend, console, show)
    sys.exit(0 if ok else EXIT_FAILED_CHECKS)


@main.command()
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
    from portkit.harness import plan_suite, run_suite
    from portkit.report import print_results, progress_bar

    config, catalog = _project()
    if all_ops == bool(op_names):
        raise click.UsageError("name one or more OPs, or pass --all")
    ops = [catalog.get(n) for n in (catalog.names if all_ops else op_names)]
    backends = create_all(config, list(backend_names) or None)
    plan = plan_suite(ops, set(case_names))
    console = _console()
    with progress_bar(console, len(plan) + (0 if no_compile else len(ops))) as advance:
        results = run_suite(plan, backends, config, compile_first=not no_compile, advance=advance)
    failed = print_results(results, console, verbose)
    sys.exit(EXIT_FAILED_CHECKS if failed else 0)


@main.command()
@click.argument("op_names", metavar="[OP]...", nargs=-1)
@click.option("--strict", is_flag=True, help="Treat warnings as errors (exit 1 on any finding).")
@click.option("--no-resources", is_flag=True, help="Skip the per-kernel resource table.")
@click.option("--json", "as_json", is_flag=True, help="Print findings and resources as JSON.")
@user_errors
def lint(op_names: tuple[str, ...], strict: bool, no_resources: bool, as_json: bool) -> None:
    """Static checks that need no GPU, for OPs (default: every op).

    \b
    errors:   a prototype kernel (numba, with each case's argument types) or a twin
              (NVRTC) that does not compile for sm_90
    warnings: float64 arithmetic in a kernel whose inputs are float32 (with the line
              and the typed-constant fix), int64 index arithmetic in loops, launches
              of the large cases that cannot fill an H100
    table:    registers, spills, shared and local memory, float64 instructions,
              global load/store widths and special functions, prototype beside twin

    A line ending in `# portkit: allow-float64` (or allow-int64-index), or following a
    comment line that says so, is an intended choice and is not reported.
    Exits 1 on errors, or on warnings with --strict.
    """
    from portkit.lint import lint as run_lint
    from portkit.report import print_lint

    config, catalog = _project()
    ops = [catalog.get(n) for n in (op_names or catalog.names)]
    report = run_lint(ops, config, resources=not no_resources)
    if as_json:
        import dataclasses
        import json

        payload = {
            "findings": [dataclasses.asdict(f) for f in report.findings],
            "resources": [
                {**dataclasses.asdict(r), "usage": dataclasses.asdict(r.usage)}
                for r in report.resources
            ],
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        print_lint(report, _console(), strict)
    sys.exit(EXIT_FAILED_CHECKS if report.errors(strict) else 0)


@main.command("compile")
@click.argument("op_names", metavar="[OP]...", nargs=-1)
@user_errors
def compile_command(op_names: tuple[str, ...]) -> None:
    """Compile every prototype (numba, compile_ptx) and twin (NVRTC) for sm_90.

    Needs no GPU. Twins are cached on disk keyed by source, options, arch and NVRTC
    version. With no OP, compiles every op. Exits 1 if anything fails to compile.
    """
    from portkit.compile_check import compile_checks
    from portkit.report import print_results

    config, catalog = _project()
    ops = [catalog.get(n) for n in (op_names or catalog.names)]
    results = [r for op in ops for r in compile_checks(op, config)]
    failed = print_results(results, _console(), verbose=True)
    sys.exit(EXIT_FAILED_CHECKS if failed else 0)


@main.command("diff")
@click.argument("op_name", metavar="OP")
@click.option("--case", "case_name", help="Only this case (see `portkit list`).")
@click.option("--size", type=click.IntRange(min=0), help="One case: 1-D inputs of this size.")
@click.option("--shape", help="One case: inputs of this shape, e.g. 4x129.")
@click.option(
    "--dtype",
    type=click.Choice(["float32", "float64"]),
    help="One case of this dtype (default with --size/--shape: float32).",
)
@click.option("--seed", type=int, help="Seed for the random inputs (default: the case's).")
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
) -> None:
    """Find where OP's prototype and twin part ways, down to the thread.

    Runs both on the same inputs through the same host launcher (on a GPU: numba's
    compiled prototype and the NVRTC twin) and reports, for every output and input
    gradient: max abs/rel/ULP error, how many elements differ under the harness's
    tolerance, NaN/Inf disagreements, the first mismatches with the launch, block,
    thread and line that wrote each (recorded by re-running only those blocks in the
    simulator), and the pattern of the disagreement (tail lost, every 32nd element,
    only where the input is large, whole rows, swapped rows and columns...).

    Without a GPU the twin cannot run: the prototype runs in portkit's simulator and
    is compared with the PyTorch reference instead, and the output says so.
    Exits 1 when anything differs, 0 when everything agrees.

    \b
    Examples:
      portkit diff sigmoid
      portkit diff softmax --shape 4x1000 --dtype float64
      portkit diff sigmoid --case float32-n129 --debug
      portkit diff softmax --json > softmax-diff.json
      portkit diff softmax --plot softmax-errors.png
    """
    import json

    from portkit.diff import debug_mismatch, diff_case, plan_diff
    from portkit.diff_report import diff_json, print_diff, write_plot
    from portkit.patterns import across_cases
    from portkit.report import progress_bar
    from portkit.simulate import choose_case

    config, catalog = _project()
    op = catalog.get(op_name)
    if size is not None and shape is not None:
        raise click.UsageError("give --size or --shape, not both")
    if plot_path and not Path(plot_path).resolve().parent.is_dir():
        raise PortkitError(f"--plot: folder {Path(plot_path).parent} does not exist")
    plan = plan_diff(op, config, simulate)
    dims = (size,) if size is not None else (_parse_shape(shape) if shape else None)
    if case_name or dims is not None or dtype or seed is not None:
        cases = [choose_case(op, case_name, dtype or "float32", dims, seed)]
    else:
        cases = [c for c in op.definition.cases if not (c.gpu_only and plan.prototype.simulated)]
    console = _console()
    results = []
    with progress_bar(console if not as_json else _console(stderr=True), len(cases)) as advance:
        for case in cases:
            advance(f"{op.name} {case.name}")
            results.append(diff_case(op, case, plan, show))
    notes = across_cases(results)
    if as_json:
        click.echo(json.dumps(diff_json(results, notes, plan.note), indent=2))
    else:
        print_diff(console, results, notes, plan.note)
    if plot_path:
        written = write_plot(Path(plot_path), results)
        if not as_json:
            console.print(f"plot written to {written}")
    if debug:
        differing = [c for c in results if c.differs and not c.error]
        if not differing:
            raise PortkitError("--debug: nothing differs, so there is no thread to stop at")
        debug_mismatch(op, differing[0])
    sys.exit(EXIT_FAILED_CHECKS if any(c.differs for c in results) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
