"""The check results as the terminal shows them: a summary table (or one row per check),
the declared tolerances that passed, the failures in full and the count. ``portkit check``,
``portkit compile``, ``portkit watch`` and the notebook API's result objects print it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from portkit.checking.sim_warnings import distinct_warnings, print_warning
from portkit.results import CheckResult, Outcome

if TYPE_CHECKING:
    from rich.console import Console


def print_results(results: Sequence[CheckResult], console: Console, verbose: bool) -> bool:
    """Print a summary table (or every row) and the failures; True if any check failed."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title="portkit check", title_justify="left")
    for column in ("op", "implementation", "check"):
        table.add_column(column)
    if verbose:
        table.add_column("case")
        table.add_column("result")
        table.add_column("time", justify="right")
        table.add_column("note")
        for r in results:
            table.add_row(
                r.op,
                r.backend,
                r.check,
                r.case,
                "[cyan]cached[/]" if r.cached else _status(r.status),
                f"{r.seconds:.2f}s",
                Text(_first_line(r.detail)),
            )
    else:
        groups: dict[tuple[str, str, str], list[CheckResult]] = defaultdict(list)
        for r in results:
            groups[(r.op, r.backend, r.check)].append(r)
        any_cached = any(r.cached for r in results)
        for column in ("passed", "cached", "failed", "skipped"):
            if column != "cached" or any_cached:
                table.add_column(column, justify="right")
        table.add_column("time", justify="right")
        table.add_column("note")
        for (op, backend, check), rows in groups.items():
            counts = {s: sum(r.status == s and not r.cached for r in rows) for s in Outcome}
            served = [str(sum(r.cached for r in rows))] if any_cached else []
            note = next((r.detail for r in rows if r.status == Outcome.FAIL), "") or next(
                (r.detail for r in rows if r.status == Outcome.SKIP), ""
            )
            table.add_row(
                op,
                backend,
                check,
                str(counts[Outcome.PASS]),
                *served,
                f"[red]{counts[Outcome.FAIL]}[/]" if counts[Outcome.FAIL] else "0",
                str(counts[Outcome.SKIP]),
                f"{sum(r.seconds for r in rows):.2f}s",
                Text(_first_line(note)),
            )
    console.print(table)
    # A declared tolerance is part of what passed: say which and why, once each.
    declared = {
        (r.op, r.backend, r.check, line): None
        for r in results
        if r.status == Outcome.PASS
        for line in r.detail.splitlines()
        if ", declared: " in line
    }
    for op, backend, check, line in declared:
        console.print(f"{op} / {backend} / {check}: {line}", markup=False)
    failures = [r for r in results if r.status == Outcome.FAIL]
    for r in failures:
        console.print(f"[red]FAIL[/] {r.op} / {r.backend} / {r.check} / {r.case}")
        console.print(f"  {r.detail}", markup=False)
    found = distinct_warnings(results)
    for (op, backend, check, case), warning in found:
        print_warning(console, warning, f"{op} / {backend} / {check} / {case}")
    passed = sum(r.status == Outcome.PASS and not r.cached for r in results)
    cached = sum(r.cached for r in results)
    skipped = sum(r.status == Outcome.SKIP for r in results)
    summary = f"{passed} passed, {len(failures)} failed, {skipped} skipped"
    if cached:  # passes served from the verdict store, counted apart from those run
        summary = (
            f"{passed} passed, {cached} cached (passed before, unchanged), "
            f"{len(failures)} failed, {skipped} skipped"
        )
    if found:
        summary += f", {len(found)} warning{'s' if len(found) != 1 else ''}"
    console.print(summary)
    return bool(failures)


_MARKS = {
    Outcome.PASS: "[green]pass[/]",
    Outcome.FAIL: "[red]FAIL[/]",
    Outcome.SKIP: "[dim]skip[/]",
}


def _status(status: Outcome) -> str:
    return _MARKS[status]


def _first_line(text: str, width: int = 90) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[: width - 1] + "…"
