"""The benchmark as rich tables: one row per op x case x direction x implementation, and
the verdicts of a comparison with a baseline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.markup import escape

from portkit.bench.model import BASELINE, BEST_OF, COMPILED, LATENCY_BOUND_US, Measurement, Report
from portkit.bench.regression import FASTER, REGRESSED, WRONG, Verdict
from portkit.bench.timing import EVENTS
from portkit.results import Outcome

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
    compute = any(m.flops for m in report.measurements)
    numbers = ["x best", "best torch", "median us", "IQR us", "MB", "GB/s", "% copy"]
    numbers += ["GFLOP", "TFLOP/s", "% peak"] if compute else []
    numbers += ["x ref", "x proto", "host us"]
    for column in ("op", "case", "dir", "impl"):
        table.add_column(column)
    for column in numbers:
        table.add_column(column, justify="right")
    table.add_column("check")
    table.add_column("note")
    for m in report.measurements:
        f = report.figures(m)
        median = _num(m.time.median if m.time else None, ".1f")
        if m.time and m.timing == EVENTS:
            median += " *"
        cells = [_ratio(m, f["x_best"]), report.best_role(m) or "-"]
        cells += [median, _num(m.time.iqr if m.time else None, ".1f"), f"{m.bytes / 1e6:.1f}"]
        cells += [_num(f["gbps"], ".0f"), _percent(f["copy"])]
        if compute:
            gflop = m.flops / 1e9 if m.flops else None
            cells += [_num(gflop, ".2f"), _num(f["tflops"], ".1f"), _percent(f["peak"])]
        cells += [_ratio(m, f["x_torch"]), _num(f["x_proto"], ".2f"), _num(m.host_us, ".0f")]
        table.add_row(
            m.op, m.case, SHORT[m.direction], m.implementation, *cells, _check(m), _note(m)
        )
    table.caption = (
        "x best: the fastest torch row's time / this time (best torch: which row, of the "
        "op's baseline=, the reference and torch.compile of it; 0.5 is half as fast); "
        "median/IQR: GPU time per call; MB: the bytes counted (inputs and outputs, or the "
        "op's bytes=); % copy: GB/s over a torch clone's in this run; GFLOP: the op's "
        "flops=, % peak: of this GPU's datasheet FLOP/s in the case's dtype; x ref: the "
        "reference's time / this time; x proto: the prototype's time / the twin's; host: "
        "time to issue one call; *: the call waits for the GPU, so no spin hides the host: "
        f"timed with plain events, the host's time included; latency-bound: under "
        f"{LATENCY_BOUND_US:.0f} us, mostly launch and fixed costs, not bandwidth; "
        "teaching example: the op's teaching=, its times are no speed claim"
    )
    table.caption += _untimed_best(report)
    table.caption_justify = "left"
    return table


_BEST_NAMES = {
    BASELINE: "the op's baseline=",
    "reference": "the reference",
    COMPILED: "torch.compile",
}


def _untimed_best(report: Report) -> str:
    """What x best left out: the candidates for best torch no row timed in this run."""
    missing = [_BEST_NAMES[role] for role in report.untimed_best()]
    if not missing:
        return ""
    return (
        f"; NOT in best torch, no row of it timed in this run: {', '.join(missing)} "
        "(--impl torch.compile adds torch.compile; an op without baseline= has none)"
    )


def _ratio(m: Measurement, ratio: float | None) -> str:
    """A speed ratio, green where a kernel row is at least as fast as torch's."""
    cell = _num(ratio, ".2f")
    kernel = m.role not in BEST_OF
    return f"[green]{cell}[/]" if kernel and ratio is not None and ratio >= 1 else cell


def _percent(fraction: float | None) -> str:
    return _num(fraction * 100 if fraction is not None else None, ".0f")


def _check(m: Measurement) -> str:
    if m.status is Outcome.PASS:
        return "[green]pass[/]"
    text = escape(f"{m.status.label}: {m.detail}")
    return f"[dim]{text}[/]" if not m.failed else f"[red]{text}[/]"


def _note(m: Measurement) -> str:
    """What qualifies a row's figures: the case it was scaled from, latency, events."""
    notes = []
    if m.teaching:
        notes.append("teaching example: no speed claim")
    if m.scaled_from:
        notes.append(f"scaled from {m.scaled_from}")
    if m.latency_bound:
        notes.append("latency-bound")
    if m.time and m.timing == EVENTS:
        notes.append("host included")
    return escape("; ".join(notes))


def verdict_table(verdicts: Sequence[Verdict], threshold: float) -> Table:
    from rich.table import Table

    table = Table(
        title=(
            f"against the saved report (regression: > {threshold:.0%} slower and outside the IQR)"
        ),
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
