"""Tables and progress for the terminal (rich), and the JSON listing. The check results' table
is ``checking/table.py``'s (re-exported here), which the notebook API prints too."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from portkit.checking.table import print_results  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from portkit.backends import Backend
    from portkit.lint.findings import LintReport
    from portkit.project.discovery import Catalog


def op_listing(catalog: Catalog, backends: Sequence[Backend]) -> list[dict]:
    rows: list[dict[str, Any]] = []
    for name in catalog.names:
        if name in catalog.broken:
            rows.append({"op": name, "error": catalog.broken[name]})
            continue
        op = catalog.ops[name]
        runs = {}
        for b in backends:
            reason = b.unavailable_reason or b.unsupported_reason(op)
            runs[b.name] = "yes" if reason is None else reason
        rows.append(
            {
                "op": name,
                "kernels": sorted(op.kernels),
                "prototype": str(op.prototype_path),
                "twin": str(op.twin_path) if op.twin_path else None,
                "backward": op.definition.has_backward,
                "dtypes": list(op.definition.dtypes),
                "cases": [c.name for c in op.definition.cases],
                "backends": runs,
            }
        )
    return rows


def listing_table(rows: list[dict], backends: Sequence[Backend]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="ops", title_justify="left")
    for column in ("op", "kernels", "twin", "backward", "cases"):
        table.add_column(column)
    for b in backends:
        table.add_column(b.name)
    for row in rows:
        if "error" in row:
            table.add_row(row["op"], Text(f"broken: {row['error']}", style="red"))
            continue
        marks = [
            "[green]yes[/]" if row["backends"][b.name] == "yes" else "[dim]no[/]" for b in backends
        ]
        table.add_row(
            row["op"],
            ", ".join(row["kernels"]),
            "yes" if row["twin"] else "[yellow]missing[/]",
            "yes" if row["backward"] else "no",
            str(len(row["cases"])),
            *marks,
        )
    reasons = {b.name: b.unavailable_reason for b in backends if b.unavailable_reason is not None}
    if reasons:
        table.caption = "; ".join(f"{n}: {r}" for n, r in reasons.items())
        table.caption_justify = "left"
    return table


@contextmanager
def progress_bar(
    console: Console, total: int, verb: str = "running"
) -> Iterator[Callable[[str], None]]:
    """A transient bar; ``advance(label)`` marks the start of the next unit of work.
    Where the console is no terminal (CI logs), a line per unit on stderr instead
    ("checking softmax float32-3x127 (3/10)..."), so a long run is never silent."""
    from portkit.cli.context import working_on

    if not console.is_terminal:
        done = [0]

        def log(label: str) -> None:
            done[0] += 1
            working_on(f"{label} ({done[0]}/{total})")
            click.echo(f"{verb} {label} ({done[0]}/{total})...", err=True)

        yield log
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("starting", total=total)
        started = [False]

        def advance(label: str) -> None:
            working_on(label)
            if started[0]:
                progress.advance(task)
            started[0] = True
            progress.update(task, description=label)

        yield advance


class BlockProgress:
    """``on_block(done, total)`` for the simulator: a bar over the blocks of a launch that
    appears only once the launch looks like it will take more than ``after`` seconds."""

    def __init__(self, console: Console, after: float = 2.0) -> None:
        self._console, self._after = console, after
        self._progress: Any = None
        self._task: Any = None
        self._started = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if done == 1:
            self._close()
            self._started = now
        elapsed = now - self._started
        if self._progress is None and done < total and elapsed * total / done > self._after:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("simulating blocks"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=self._console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("blocks", total=total)
        if self._progress is not None:
            self._progress.update(self._task, completed=done)
            if done == total:
                self._close()

    def _close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> BlockProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()


def _widths(counts: dict[int, int]) -> str:
    return " ".join(f"{count}x{width}B" for width, count in sorted(counts.items())) or "-"


def print_lint(report: LintReport, console: Console, warnings_fail: bool, why: str = "") -> None:
    """The findings, then prototype and twin resources side by side. ``warnings_fail``
    (``why``: "--strict" or the project's setting) shows warnings as errors."""
    from rich.table import Table
    from rich.text import Text

    if report.resources:
        table = Table(title="resources per kernel (sm_90)", title_justify="left")
        for column in (
            "op",
            "kernel",
            "dtype",
            "side",
            "regs",
            "spill st/ld B",
            "smem B",
            "local B",
            "f64 instr",
            "global loads",
            "global stores",
            "special fns",
        ):
            table.add_column(
                column, justify="right" if column.endswith(("B", "regs", "instr")) else "left"
            )
        for row in report.resources:
            u = row.usage
            special = " ".join(f"{n}:{c}" for n, c in sorted(u.special_functions.items()) if c)
            table.add_row(
                row.op,
                row.kernel,
                row.dtype,
                row.side,
                str(u.registers),
                f"{u.spill_store_bytes}/{u.spill_load_bytes}",
                str(u.shared_bytes),
                str(u.local_bytes),
                Text(str(u.f64_instructions), style="yellow" if u.f64_instructions else ""),
                _widths(u.global_loads),
                _widths(u.global_stores),
                Text(special or "-"),
            )
        console.print(table)
    if report.findings:
        table = Table(title="findings", title_justify="left")
        for column in ("severity", "op", "kernel", "where", "what", "fix"):
            table.add_column(column)
        for f in report.findings:
            severity = "error" if f.fails(warnings_fail) else f.severity.value
            style = "red" if severity == "error" else "yellow"
            dtypes = f" [{', '.join(f.dtypes)}]" if f.dtypes else ""
            table.add_row(
                Text(severity, style=style),
                f.op,
                f.kernel,
                Text(f.where),
                Text(f.message + dtypes),
                Text(f.fix),
            )
        console.print(table)
    for line in report.skipped:
        console.print(Text(f"skipped {line}"))
    errors = len(report.errors(warnings_fail))
    warnings = len(report.findings) - len(report.errors(False))
    console.print(f"{errors} error(s), {warnings} warning(s)" + (f" ({why})" if why else ""))
