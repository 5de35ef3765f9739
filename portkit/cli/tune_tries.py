"""``portkit tune OP --try SPEC``: each named configuration timed beside the one this GPU
runs now, forward and backward apart, per bench case; nothing written."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import click

from portkit.cli.context import make_console

if TYPE_CHECKING:
    from portkit.backends import Backend
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op
    from portkit.tuning.runner import CaseTuning


def run_tries(
    op: Op,
    cases: Sequence[Case],
    twin: Backend,
    config: ProjectConfig,
    gpu: str,
    overrides: Sequence[dict[str, Any]],
    *,
    reps: int,
    warmup: int,
    as_json: bool,
) -> NoReturn:
    """Times, prints, exits: 0 when every tried configuration was correct, 1 otherwise."""
    from portkit.bench.timing import CudaClock
    from portkit.cli.render import progress_bar
    from portkit.project.tuning_table import read_table, table_path
    from portkit.tuning.runner import try_case
    from portkit.tuning.tries import apply, current_config

    declared = dict(op.definition.knobs)
    table = read_table(table_path(config, op.name))
    directions = 2 if op.definition.has_backward else 1
    tunings: list[CaseTuning] = []
    with progress_bar(make_console(stderr=True), len(cases) * directions, verb="timing") as advance:
        for case in cases:
            current = current_config(table, gpu, case, declared)
            tries = [apply(current, o) for o in overrides]
            tunings.append(
                try_case(op, case, twin, config, CudaClock(), current, tries, reps=reps,
                         warmup=warmup, advance=advance)  # fmt: skip
            )
    if as_json:
        data = {"op": op.name, "gpu": gpu, "cases": [_case_dict(t) for t in tunings]}
        click.echo(json.dumps(data, indent=1))
    else:
        _print(tunings, gpu, op.name)
    sys.exit(1 if any(t.failures for t in tunings) else 0)


def _rows(tuning: CaseTuning) -> list[dict[str, Any]]:
    """One row a configuration, the current one first."""
    base = tuning.trials.times.get(tuning.default)
    rows = []
    for config, us in tuning.trials.times.items():
        rows.append({
            "config": dict(config),
            "current": config == tuning.default,
            **tuning.directions_us(config),
            "us": us,
            "x_current": None if us is None or not base else base / us,
            "wrong": tuning.failures.get(config),
        })  # fmt: skip
    return rows


def _case_dict(tuning: CaseTuning) -> dict[str, Any]:
    return {"case": tuning.case, "buckets": list(tuning.buckets), "rows": _rows(tuning)}


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _print(tunings: list[CaseTuning], gpu: str, op: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    from portkit.runtime.knob_choice import describe

    table = Table(title=f"portkit tune {op} --try on {gpu}")
    table.add_column("case")
    table.add_column("configuration")
    for column in ("forward (us)", "backward (us)", "total (us)", "x current"):
        table.add_column(column, justify="right")
    for t in tunings:
        for row in _rows(t):
            label = escape(describe(row["config"])) + (" (current)" if row["current"] else "")
            ratio = "[red]wrong[/]" if row["wrong"] else _ratio(row["x_current"])
            table.add_row(
                t.case, label, _us(row["forward_us"]), _us(row["backward_us"]),
                _us(row["us"]), ratio,
            )  # fmt: skip
    console = make_console()
    console.print(table)
    for t in tunings:
        for config, why in t.failures.items():
            first = why.splitlines()[0] if why else ""
            label = escape(describe(dict(config)))
            console.print(f"[red]WRONG[/] {t.case} {label}: {escape(first)}")
    console.print(
        "x current: the current configuration's total time over this one's (above 1: "
        "faster). Nothing was written: `portkit tune` searches and records."
    )


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
