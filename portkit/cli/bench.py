"""``portkit bench``: time torch (reference, baseline, torch.compile), the prototype and the
twin side by side on the GPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from portkit.cli.context import (
    EXIT_FAILED_CHECKS,
    json_output,
    load_project,
    make_console,
    user_errors,
)
from portkit.errors import PortkitError

if TYPE_CHECKING:
    from portkit.bench.cases import Wanted

# portkit.bench.session's, without importing it
IMPLEMENTATIONS = ("torch", "baseline", "torch.compile", "numba", "twin")
WIDE = 250  # columns of the results table in a log: a row with its check and note whole
SHAPE_HELP = (
    "Time at this shape instead of the op's bench cases: 4096x4096 gives the first input "
    "that shape (8x1024,1024x64: the first inputs, one shape each); the other inputs "
    "follow the dimensions they equal in every case of the op (a layernorm weight: the "
    "columns), the rest keep the sizes of the op's largest case. See docs/bench.md."
)
SIZE_HELP = (
    "Time the op's largest case with its first input's leading dimension (rows, batch) "
    "grown to N elements or just over (67108864 or 2^26); the other dimensions keep "
    "their sizes, the other inputs follow as with --shape."
)


def _writable(path: str | None, option: str, suffix: str | None = None) -> Path | None:
    if path is None:
        return None
    target = Path(path)
    if suffix and target.suffix.lower() != suffix:
        raise click.BadParameter(f"{path!r} must end in {suffix}", param_hint=option)
    if not target.parent.resolve().is_dir():
        raise click.BadParameter(f"folder {str(target.parent)!r} does not exist", param_hint=option)
    return target


@click.command("bench")
@click.argument("op_names", metavar="[OP]...", nargs=-1)
@click.option("--all", "all_ops", is_flag=True, help="Every op of the project.")
@click.option("--case", "case_names", multiple=True, help="Only this case (repeatable).")
@click.option("--shape", "shape_text", metavar="AxB[,CxD...]", help=SHAPE_HELP)
@click.option("--size", "size_text", metavar="N", help=SIZE_HELP)
@click.option(
    "--dtype",
    "dtype_name",
    metavar="DTYPE",
    help="With --shape or --size: the floating-point inputs in this dtype (bfloat16, ...).",
)
@click.option(
    "--impl",
    "impl_names",
    multiple=True,
    help=f"Only these implementations (repeatable): {', '.join(IMPLEMENTATIONS)}. Default: all.",
)
@click.option(
    "--direction",
    type=click.Choice(["both", "forward", "backward"]),
    default="both",
    show_default=True,
    help="Time the forward, the backward, or both (each apart).",
)
@click.option(
    "--reps", type=click.IntRange(min=5), default=30, show_default=True, help="Timed calls each."
)
@click.option(
    "--warmup", type=click.IntRange(min=1), default=3, show_default=True, help="Untimed calls."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--plot", "plot_path", metavar="FILE.png", help="Draw % of copy bandwidth.")
@click.option(
    "--save", "save_path", metavar="FILE", help="Save the report (JSON) for a later --compare."
)
@click.option(
    "--compare",
    "compare_path",
    metavar="FILE",
    help="Compare with a saved report; exit 1 on a regression.",
)
@click.option(
    "--threshold",
    type=click.FloatRange(min=0, min_open=True, max=10),
    default=0.10,
    show_default=True,
    help="With --compare: the slowdown (0.10 = 10%) that counts, if outside the spread.",
)
@user_errors
def bench(
    op_names: tuple[str, ...],
    all_ops: bool,
    case_names: tuple[str, ...],
    shape_text: str | None,
    size_text: str | None,
    dtype_name: str | None,
    impl_names: tuple[str, ...],
    direction: str,
    reps: int,
    warmup: int,
    as_json: bool,
    plot_path: str | None,
    save_path: str | None,
    compare_path: str | None,
    threshold: float,
) -> None:
    """Time OPs on the GPU: torch, the numba prototype and the twin, side by side.

    First column: x best, the speed against the fastest torch row (best torch: the op's
    baseline=, the torch call a user would make instead; its reference; or torch.compile
    of the reference). For each op, benchmark case, direction and implementation: CUDA
    events on torch's stream, L2 flushed before each call, implementations interleaved,
    median and interquartile range of --reps calls; GB/s and % of the copy bandwidth
    measured in the same run; speed against the reference alone (x ref) and twin against
    prototype; the host time to issue a call. The output of every timed call, the
    baseline's included, is checked against the reference. Without bench= cases an op is timed at
    its largest case grown to 256 MiB of inputs ("scaled from" in the note column).
    Rows under 20 us are marked latency-bound: fixed costs, not bandwidth.

    Rows of an op declared teaching= say "teaching example: no speed claim". Exits 1 if
    an output of the reference, baseline, prototype or twin is wrong or their call
    fails, or (with --compare) a regression is found; a row not run here (no GPU for it,
    no baseline= declared), a call timed with plain events, or a torch.compile that
    fails is reported, not a failure.

    \b
    Examples:
      portkit bench sigmoid
      portkit bench --all --plot bench.png --save baseline.json
      portkit bench softmax --case float32-4096x4096 --impl baseline --impl twin
      portkit bench layernorm --shape 16384x4096 --dtype bfloat16
      portkit bench my_op --size 2^26
      portkit bench --all --compare baseline.json --threshold 0.15
    """
    if all_ops == bool(op_names):
        raise click.UsageError("name one or more OPs, or pass --all")
    unknown = [n for n in impl_names if n not in IMPLEMENTATIONS]
    if unknown:
        raise click.BadParameter(
            f"{unknown[0]!r} is not timed; choose from {', '.join(IMPLEMENTATIONS)} "
            f"(the simulators run on the CPU)",
            param_hint="--impl",
        )
    plot_file = _writable(plot_path, "--plot", ".png")
    save_file = _writable(save_path, "--save")

    from portkit.bench.cases import Wanted, bench_cases
    from portkit.bench.model import Report
    from portkit.bench.scaling import parse_shapes, parse_size

    wanted = Wanted(
        names=case_names,
        shapes=parse_shapes(shape_text) if shape_text is not None else (),
        size=parse_size(size_text) if size_text is not None else None,
        dtype=dtype_name,
    )
    _check_wanted(wanted)
    emit = json_output(as_json)
    session = load_project()
    config, catalog = session.config, session.catalog
    ops = [catalog.get(n) for n in (catalog.names if all_ops else op_names)]
    if case_names and len(ops) != 1:
        raise PortkitError("--case names one op's cases: name exactly one OP with it")
    plan = [(op, bench_cases(op, wanted=wanted)) for op in ops]
    baseline = Report.load(Path(compare_path)) if compare_path else None

    from portkit.bench import session as bench_session
    from portkit.bench.runner import DIRECTIONS
    from portkit.cli.render import progress_bar

    bench_session.require_gpu()
    directions = DIRECTIONS if direction == "both" else (direction,)
    backends = bench_session.implementations(impl_names or IMPLEMENTATIONS, config)
    with progress_bar(make_console(stderr=True), bench_session.units(plan, directions)) as advance:
        report = bench_session.run_bench(plan, backends, directions, reps, warmup, advance)

    from portkit.bench.regression import compare_reports
    from portkit.bench.table import results_table, verdict_table

    verdicts = compare_reports(baseline, report, threshold) if baseline else []
    if save_file:
        report.save(save_file)
    if plot_file:
        from portkit.bench.plot import write_plot

        write_plot(report, plot_file)
    if as_json:
        data = report.to_dict()
        if baseline:
            data["comparison"] = [
                {"key": list(v.key), "status": v.status, "ratio": v.ratio, "detail": v.detail}
                for v in verdicts
            ]
        emit(json.dumps(data, indent=1))
    else:
        console = make_console(width=WIDE)
        console.print(results_table(report))
        if baseline:
            console.print(verdict_table(verdicts, threshold))
        for m in report.failures:
            console.print(f"[red]FAIL[/] {m.op} / {m.implementation} / {m.direction} / "
                          f"{m.case}: {m.status.value}: {m.detail}")  # fmt: skip
    failed = bool(report.failures) or any(v.failed for v in verdicts)
    sys.exit(EXIT_FAILED_CHECKS if failed else 0)


def _check_wanted(wanted: Wanted) -> None:
    """One way to choose what is timed: case names, a shape, or a size."""
    chosen = [o for o, v in (("--case", wanted.names), ("--shape", wanted.shapes),
                             ("--size", wanted.size is not None)) if v]  # fmt: skip
    if len(chosen) > 1:
        raise PortkitError(f"{chosen[0]} and {chosen[1]} both choose what is timed; give one")
    if wanted.dtype is not None and not (wanted.shapes or wanted.size is not None):
        raise PortkitError("--dtype goes with --shape or --size (the op's cases have theirs)")
