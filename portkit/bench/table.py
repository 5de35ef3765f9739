"""The benchmark as rich tables: one row per op x case x direction x implementation, and
the verdicts of a comparison with a baseline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from portkit.bench.model import OK, Report
from portkit.bench.regression import FASTER, REGRESSED, WRONG, Verdict
from portkit.bench.timing import EVENTS

if TYPE_CHECKING:
    from rich.table import Table


SHORT = {"forward": "fwd", "backward": "bwd"}


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def results_table(report: Report) -> Table:
    from rich.table import Table

    m0 = report.machine
    table = Table(
        title=(
            f"portkit bench: {m0.gpu}, copy {report.copy.gbps:.0f} GB/s "
            f"(median of {report.reps}, L2 flushed before each call)"
        ),
        title_justify="left",
    )
    for column in ("op", "case", "dir", "impl"):
        table.add_column(column)
    for column in ("median us", "IQR us", "GB/s", "% copy", "x torch", "x proto", "host us"):
        table.add_column(column, justify="right")
    table.add_column("check")
    for m in report.measurements:
        f = report.figures(m)
        if m.check == OK:
            check = "[green]ok[/]"
        elif m.check.startswith("skip"):
            check = f"[dim]{m.check}[/]"
        else:
            check = f"[red]{m.check}[/]"
        copy = f["copy"]
        x_torch = f["x_torch"]
        faster = x_torch is not None and m.role != "reference" and x_torch >= 1
        style = "green" if faster else ""
        rate = _num(f["gbps"], ".0f")
        if f["tflops"] is not None:
            rate += f" ({f['tflops']:.1f} TFLOP/s)"
        median = _num(m.time.median if m.time else None, ".1f")
        if m.time and m.timing == EVENTS:
            median += " *"
        table.add_row(
            m.op,
            m.case,
            SHORT[m.direction],
            m.implementation,
            median,
            _num(m.time.iqr if m.time else None, ".1f"),
            rate,
            _num(copy * 100 if copy is not None else None, ".0f"),
            f"[{style}]{_num(x_torch, '.2f')}[/]" if style else _num(x_torch, ".2f"),
            _num(f["x_proto"], ".2f"),
            _num(m.host_us, ".0f"),
            check,
        )
    table.caption = (
        "median/IQR: GPU time per call; % copy: GB/s over a torch clone's in this run; "
        "x torch: torch's time / this time; x proto: the prototype's time / the twin's; "
        "host: time to issue one call; *: the call waits for the GPU, so no spin hides "
        "the host: timed with plain events, the host's time included"
    )
    table.caption_justify = "left"
    return table


def verdict_table(verdicts: Sequence[Verdict], threshold: float) -> Table:
    from rich.table import Table

    table = Table(
        title=f"against the baseline (regression: > {threshold:.0%} slower and outside the IQR)",
        title_justify="left",
    )
    for column in ("op", "case", "dir", "impl", "new / old", "verdict", "detail"):
        table.add_column(column, justify="right" if column == "new / old" else "left")
    colour = {REGRESSED: "red", WRONG: "red", FASTER: "green"}
    for v in verdicts:
        op, case, direction, impl = v.key
        status = f"[{colour[v.status]}]{v.status}[/]" if v.status in colour else v.status
        table.add_row(op, case, SHORT[direction], impl, _num(v.ratio, ".3f"), status, v.detail)
    return table
