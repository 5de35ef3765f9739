"""``portkit sim``: one case of one op through the simulator, shown element by element."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from portkit.cli.context import (
    EXIT_FAILED_CHECKS,
    SEED,
    SIZE,
    budget_option,
    load_project,
    make_console,
    parse_coords,
    parse_shape,
    strict_option,
    user_errors,
    working_on,
)
from portkit.errors import PortkitError
from portkit.project.dtypes import DTYPES
from portkit.simt.schedule import FORWARD, SCHEDULES

if TYPE_CHECKING:
    from rich.console import Console

    from portkit.simt.machine import Machine


@click.command(short_help="Run OP's prototype in the CUDA simulator and compare it with torch.")
@click.argument("op_name", metavar="OP")
@click.option("--case", "case_name", help="Run one of the op's cases by name (see `portkit list`).")
@click.option("--size", type=SIZE, help="1-D inputs of this many elements.")
@click.option("--shape", help="Input shape, e.g. 4x129 (every tensor input gets it).")
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    help="Scalar type of the inputs (default: float32; a --case has its own).",
)
@click.option("--seed", type=SEED, help="Seed for the random inputs (default: the case's).")
@click.option("--kernel", help="Kernel to stop in (default: the first one the forward launches).")
@click.option("--block", help="Stop in pdb when this block (X or X,Y,Z) runs --kernel.")
@click.option(
    "--thread", help="... and this thread (X or X,Y,Z) of it. Either option turns pdb on."
)
@click.option(
    "--show",
    type=click.IntRange(min=0),
    default=8,
    show_default=True,
    help="How many leading elements to print.",
)
@click.option(
    "--backend",
    "backend_name",
    type=click.Choice(["sim", "numba-sim"]),
    default="sim",
    show_default=True,
    help="sim: portkit's simulator (checks bounds, races, barriers, warps); "
    "numba-sim: numba's, for a cross-check.",
)
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Say which engine ran each launch (lockstep or per-thread) and why.",
)
@click.option(
    "--schedule",
    type=click.Choice(SCHEDULES),
    default=FORWARD,
    show_default=True,
    help="The order blocks and threads run in: reversed runs both last to first, so "
    "float atomics into one element sum in the other order (sim backend only).",
)
@budget_option
@strict_option
@user_errors
def sim(
    op_name: str,
    case_name: str | None,
    size: int | None,
    shape: str | None,
    dtype: str | None,
    seed: int | None,
    kernel: str | None,
    block: str | None,
    thread: str | None,
    show: int,
    backend_name: str,
    verbose: bool = False,
    schedule: str = FORWARD,
    budget: float | None = None,
    strict: bool = False,
) -> None:
    """Run OP's prototype in the CUDA simulator on the CPU and compare it with the reference.

    Prints the first elements of every output (and input gradient, if the op has a
    backward) next to the reference, then a verdict; exits 1 if they differ. No GPU
    and no environment variable needed. The simulator stops at the first kernel bug it
    sees (out-of-bounds access, race, uninitialised shared memory, divergent barrier,
    bad warp mask, an uninitialised value used) and names array, index, block, thread
    and line. What the CUDA C++ guide leaves undefined but GPUs run right (threads that
    returned before a barrier, an uninitialised value never used, threads storing the
    same value, a race the outputs do not depend on) is a warning, printed with kernel,
    thread, line and rule and counted in the verdict; --strict makes warnings errors.
    A bar shows progress over blocks when a launch takes more than two seconds.

    \b
    Examples:
      portkit sim sigmoid
      portkit sim sigmoid --size 1000 --dtype float64 --seed 3
      portkit sim softmax --shape 4x129
      portkit sim sigmoid --size 3000 --block 1 --thread 5   # pdb at block 1, thread 5
      portkit sim softmax --backend numba-sim        # numba's simulator instead
      portkit sim softmax --verbose                  # which engine ran, and why
      portkit sim index_add --schedule reversed      # blocks and threads last to first
      portkit sim softmax --strict                   # simulator warnings are errors
    """
    from portkit.backends import create
    from portkit.backends.numba_sim.backend import NumbaSimulator
    from portkit.backends.sim import PortkitSimulator
    from portkit.checking.show_case import check_breakpoint, first_forward_kernel, run_simulation
    from portkit.cli.render import BlockProgress
    from portkit.project.case_choice import check_fits, choose_case
    from portkit.simt.debug import Breakpoint

    session = load_project(budget, strict)
    config, catalog = session.config, session.catalog
    op = catalog.get(op_name)
    if size is not None and shape is not None:
        raise click.UsageError("give --size or --shape, not both")
    case = choose_case(
        op,
        case_name,
        dtype,
        (size,) if size is not None else (parse_shape(shape) if shape is not None else None),
        seed,
    )
    check_fits(op, case)
    block_at, thread_at = parse_coords(block, "--block"), parse_coords(thread, "--thread")
    if schedule != FORWARD and backend_name != "sim":
        raise click.UsageError("--schedule applies to --backend sim (numba's runs one order)")
    backend = create(backend_name, config)
    assert isinstance(backend, PortkitSimulator | NumbaSimulator)  # --backend's choices
    if isinstance(backend, PortkitSimulator):  # numba's simulator runs one order
        backend.schedule = schedule
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
        block_at, thread_at = block_at or (0, 0, 0), thread_at or (0, 0, 0)
        check_breakpoint(op, case, name, block_at, thread_at)
        backend.breakpoint = Breakpoint(name, block_at, thread_at)
    elif kernel:
        raise click.UsageError("--kernel chooses where --block/--thread stop; give one of them")
    console = make_console()
    order = "" if schedule == FORWARD else f", {schedule} schedule"
    working_on(f"{op.name} case {case.name} in the simulator{order}")
    with BlockProgress(console) as progress:
        if isinstance(backend, PortkitSimulator):  # numba's simulator reports no blocks
            backend.on_block = progress
        ok = run_simulation(op, case, backend, console, show)
    if verbose:
        _print_engines(console, backend.machine)  # None: numba's simulator
    sys.exit(0 if ok else EXIT_FAILED_CHECKS)


def _print_engines(console: Console, machine: Machine | None) -> None:
    """One line per launch: the kernel, the engine that ran it, and why."""
    if machine is None:
        console.print("engine: numba's simulator (one Python thread per CUDA thread)")
        return
    for choice in machine.engines:
        console.print(f"engine: {choice.kernel}: {choice.engine} ({choice.reason})")
    fallbacks = sum(choice.fallback for choice in machine.engines)
    console.print(f"lockstep fallbacks: {fallbacks} of {len(machine.engines)} launch(es)")
