"""One case of one op on one backend, shown element by element next to the reference,
with the harness's verdict: the engine behind ``portkit sim``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from portkit.checking.case_runner import CaseRunner
from portkit.checking.sim_warnings import distinct_warnings, print_warning
from portkit.errors import PortkitError
from portkit.launch.trace import record_launches
from portkit.project.cases import Case, make_inputs
from portkit.results import Outcome

MARKS = {Outcome.FAIL: "[red]FAIL[/]", Outcome.SKIP: "[dim]skip[/]"}

if TYPE_CHECKING:
    import torch
    from rich.console import Console

    from portkit.backends import Backend
    from portkit.project.discovery import Op


def sim_command(op: Op, case: Case) -> str:
    """The `portkit sim` command line that runs exactly ``case`` again."""
    if case in op.definition.cases:
        return f"portkit sim {op.name} --case {case.name}"
    shape = "x".join(map(str, case.shapes[0]))
    return f"portkit sim {op.name} --shape {shape} --dtype {case.dtype} --seed {case.seed}"


def first_forward_kernel(op: Op, case: Case) -> str:
    """The kernel the forward launcher launches first (where pdb stops by default)."""
    launches = record_launches(op, case, backward=False)
    if not launches:
        raise PortkitError(
            f"op {op.name}'s forward launches no kernel for these inputs; pass --kernel"
        )
    return launches[0].kernel


def check_breakpoint(
    op: Op, case: Case, kernel: str, block: tuple[int, ...], thread: tuple[int, ...]
) -> None:
    """Refuse a breakpoint that the run would never reach: pdb stops in ``kernel``'s first
    launch, so ``block`` must be in its grid and ``thread`` in its blocks."""
    launches = record_launches(op, case)
    listing = "; ".join(
        f"{launch.kernel} grid {_dims(launch.config.grid)} block {_dims(launch.config.block)}"
        for launch in launches
    )
    first = next((launch.config for launch in launches if launch.kernel == kernel), None)
    if first is None:
        raise PortkitError(
            f"kernel {kernel} is not launched on this case, so pdb would never stop; "
            f"launches: {listing or 'none'}"
        )
    outside = [b >= g for b, g in zip(block, first.grid)] + [
        t >= d for t, d in zip(thread, first.block)
    ]
    if any(outside):
        raise PortkitError(
            f"--block {_dims(block)} --thread {_dims(thread)} is outside the first launch of "
            f"{kernel}, where pdb stops, so it would never stop; launches: {listing}"
        )


def _dims(values: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, values)) + ")"


def _cell(flat: torch.Tensor, j: int) -> str:
    return f"{flat[j].item():.7g}" if j < flat.numel() else ""


def run_simulation(op: Op, case: Case, backend: Backend, console: Console, show: int) -> bool:
    """Run, print values and verdict; True when every check passed."""
    from rich.table import Table

    runner = CaseRunner(op, case, rerun=sim_command(op, case))
    shapes = " ".join("x".join(map(str, s)) for s in case.shapes)
    console.print(
        f"[bold]{op.name}[/] in the simulator: inputs {shapes} {case.dtype}, seed {case.seed}"
    )
    run = runner.run_implementation(backend)
    inputs = make_inputs(case, backend.device)

    if run is not None and run.outputs:
        expected_outputs, expected_grads = runner.reference(backend.device)
        table = Table(title="first elements", title_justify="left")
        table.add_column("index", justify="right")
        for i in range(len(inputs)):
            table.add_column(f"input {i}", justify="right")
        for i in range(len(run.outputs)):
            table.add_column(f"output {i} sim", justify="right")
            table.add_column(f"output {i} reference", justify="right")
        for i in range(len(run.grads)):
            table.add_column(f"grad {i} sim", justify="right")
            table.add_column(f"grad {i} reference", justify="right")
        flat = [t.detach().reshape(-1) for t in inputs]
        pairs = [(a.reshape(-1), e.reshape(-1)) for a, e in zip(run.outputs, expected_outputs)]
        pairs += [
            (a.reshape(-1), e.reshape(-1))
            for a, e in zip(run.grads, expected_grads)
            if a is not None and e is not None
        ]
        # Tensors differ in size (a row reduction's output has one element per row):
        # rows run to the longest, a shorter tensor's cell stays empty.
        columns = flat + [t for pair in pairs for t in pair]
        count = min(show, max((t.numel() for t in columns), default=0))
        for j in range(count):
            table.add_row(str(j), *(_cell(t, j) for t in columns))
        if count:
            console.print(table)

    for result in runner.results:
        mark = MARKS.get(result.status, "[green]pass[/]")
        # The simulator's rows by check; another's (the reference's) by whose it is.
        mine = result.backend == backend.name
        label = result.check if mine else f"{result.backend} / {result.check}"
        console.print(f"{mark} {label} ({result.seconds:.2f} s)")
        if result.detail:
            console.print(f"     {result.detail}", markup=False)
    found = distinct_warnings(runner.results)
    for _, warning in found:
        print_warning(console, warning)
    ok = run is not None and not any(r.failed for r in runner.results)
    verdict = "[bold green]PASS[/]" if ok else "[bold red]FAIL[/]"
    if found:
        plural = "s" if len(found) != 1 else ""
        verdict += f" ({len(found)} simulator warning{plural}: not errors unless --strict)"
    console.print(verdict)
    return ok
