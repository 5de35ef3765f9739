"""``portkit tune``: pick an op's launch configuration for this machine's GPU."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from portkit.cli.context import (
    EXIT_NOTHING_RAN,
    json_output,
    load_project,
    make_console,
    user_errors,
)
from portkit.errors import PortkitError

if TYPE_CHECKING:
    from portkit.tuning.runner import CaseTuning

STRATEGIES = ("auto", "grid", "greedy", "random")  # portkit.tuning.search's


@click.command("tune", short_help="Search OP's knobs on this GPU; record the fastest in tuning/.")
@click.argument("op_name", metavar="OP")
@click.option("--case", "case_names", multiple=True, help="Only this bench case (repeatable).")
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default="auto",
    show_default=True,
    help="grid: every configuration; greedy: one knob at a time from the defaults, sweeps "
    "until nothing improves; random: --budget drawn from the grid; auto: grid when it has "
    "at most --budget configurations, else greedy.",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="The most configurations timed per case.",
)
@click.option(
    "--reps", type=click.IntRange(min=5), default=30, show_default=True, help="Timed calls each."
)
@click.option(
    "--warmup", type=click.IntRange(min=1), default=3, show_default=True, help="Untimed calls."
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Start no case after this many seconds: the cases done are in the table, the "
    "rest are named with the command that tunes them (exit 3). Default: every case.",
)
@click.option(
    "--try",
    "try_specs",
    multiple=True,
    metavar="KNOB=VALUE[,...]",
    help="Time this configuration beside the one this GPU runs now (its table entry, else "
    "the defaults), which it overrides knob by knob; forward and backward apart, per case. "
    "Repeatable. No search (so no --strategy, --budget, --time-limit), nothing written; "
    "exit 1 if a tried configuration is wrong.",
)
@click.option("--dry-run", is_flag=True, help="Time and report; write no table.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@user_errors
def tune(
    op_name: str,
    case_names: tuple[str, ...],
    strategy: str,
    budget: int,
    reps: int,
    warmup: int,
    time_limit: float | None,
    try_specs: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
) -> None:
    """Search OP's knobs (its tunable launch parameters, knobs= in @portkit.op) on this
    machine's GPU and record the fastest correct configuration per bench case in
    tuning/OP.json, keyed by the GPU's name and the case's shape bucket (dtype and each
    dimension rounded to a power of two). portkit.load, `portkit check` and exported
    packages read that table: on a GPU and bucket it lists, the launchers get the tuned
    values from portkit.knobs(k, x); anywhere else, the defaults (each knob's first
    value). Commit the file: it is part of the op. Each case is written as soon as it is
    tuned, so a run stopped by --time-limit or Ctrl-C keeps the cases it finished (and
    the table's other entries).

    Each candidate is the twin pinned to one configuration, timed as `portkit bench`
    times (CUDA events, L2 flushed, candidates interleaved, medians of --reps calls;
    forward plus backward), and every timed output is checked against the reference
    within the op's tolerance: a configuration that computes a wrong result is reported
    and never chosen. `portkit check OP` then runs every configuration the table can pick.

    Needs an NVIDIA GPU (exit 2 without one). Exits 1 if no configuration of a case was
    correct.

    \b
    Examples:
      portkit tune rmsnorm
      portkit tune softmax --case float32-4096x4096 --strategy grid --budget 64
      portkit tune layernorm --strategy greedy --budget 20 --json
      portkit tune rmsnorm --dry-run     # time and report, write nothing
      portkit tune softmax --time-limit 300   # what fits in 5 minutes, the rest named
      portkit tune rmsnorm --case bfloat16-16384x4096 --try bwd_elems=16 --try fwd_elems=8
    """
    emit = json_output(as_json)
    session = load_project()
    config = session.config
    op = session.catalog.get(op_name)
    if not op.definition.knobs:
        raise PortkitError(
            f"op {op.name} declares no knobs: add knobs={{name: [values, the default first]}} "
            f"to its @portkit.op and read them with portkit.knobs(k, x) (docs/authoring.md)"
        )
    from portkit.backends import create
    from portkit.bench.cases import Wanted, bench_cases
    from portkit.tuning.tries import parse_try

    declared = dict(op.definition.knobs)
    overrides = [parse_try(spec, declared) for spec in try_specs]
    _search_options_without_a_search(overrides)

    twin = create("twin", config)
    reason = twin.unavailable_reason or twin.unsupported_reason(op)
    if reason:
        raise PortkitError(f"portkit tune times the twin on this machine's GPU: {reason}")
    cases = bench_cases(op, wanted=Wanted(names=case_names))

    import torch

    from portkit.bench.timing import CudaClock
    from portkit.cli.render import progress_bar
    from portkit.project.tuning_table import merge_results, table_path
    from portkit.tuning.runner import table_results, tune_op

    gpu = torch.cuda.get_device_name()
    if overrides:
        from portkit.cli.tune_tries import run_tries

        run_tries(op, cases, twin, config, gpu, overrides, reps=reps, warmup=warmup,
                  as_json=as_json)  # fmt: skip
    batches = 1 if strategy == "grid" else 2 * len(op.definition.knobs) + 1
    directions = 2 if op.definition.has_backward else 1
    total = len(cases) * batches * directions
    path = table_path(config, op.name)
    dropped: set[str] = set()
    written: list[str] = []  # the cases already in the table

    def write(tuning: CaseTuning) -> None:
        results = table_results([tuning])
        if results and not dry_run:
            dropped.update(merge_results(path, op, gpu, results)["dropped"])
            written.append(tuning.case)

    deadline = None if time_limit is None else time.monotonic() + time_limit
    try:
        with progress_bar(make_console(stderr=True), total, verb="tuning") as advance:
            tunings = tune_op(
                op, cases, twin, config, CudaClock(), deadline=deadline, tuned=write,
                strategy=strategy, budget=budget, reps=reps, warmup=warmup, advance=advance,
            )  # fmt: skip
    except KeyboardInterrupt:
        if written:  # said before user_errors' "interrupted while ..." line
            click.echo(f"kept in {path}: {', '.join(written)}", err=True)
        raise
    untuned = [case.name for case in cases[len(tunings) :]]
    failed = any(t.best is None for t in tunings)
    if as_json:
        data = {
            "op": op.name,
            "gpu": gpu,
            "table": str(path),
            "written": bool(written),
            "dropped": sorted(dropped),  # GPUs with entries for knobs no longer declared
            "cases": [_case_dict(t) for t in tunings],
            "not_tuned": untuned,  # past --time-limit
        }
        emit(json.dumps(data, indent=1))
    else:
        _print(tunings, gpu, path if written else None, op.name)
        if dropped:
            make_console().print(
                f"dropped entries of {', '.join(sorted(dropped))}: tuned with knobs or "
                f"values the op no longer declares; run `portkit tune {op.name}` on those "
                "GPUs again"
            )
    if untuned:
        click.secho(_continue_line(op.name, untuned, time_limit), fg="yellow", err=True)
    sys.exit(1 if failed else EXIT_NOTHING_RAN if untuned else 0)


def _search_options_without_a_search(overrides: list[dict[str, Any]]) -> None:
    """--try runs no search: a search option given with it would be silently ignored."""
    if not overrides:
        return
    context = click.get_current_context()
    given = [
        f"--{name.replace('_', '-')}"
        for name in ("strategy", "budget", "time_limit")
        if context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
    ]
    if given:
        raise PortkitError(
            f"--try times the configurations named, with no search: {', '.join(given)} "
            "would do nothing; leave it out, or search without --try"
        )


def _continue_line(op: str, untuned: list[str], time_limit: float | None) -> str:
    """What --time-limit left out, and the command that tunes just that."""
    cases = " ".join(f"--case {name}" for name in untuned)
    return (
        f"not tuned, past --time-limit {time_limit:g} s: {', '.join(untuned)}; "
        f"tune them with `portkit tune {op} {cases}`"
    )


def _case_dict(tuning: CaseTuning) -> dict[str, Any]:
    best = tuning.best
    return {
        "case": tuning.case,
        "buckets": list(tuning.buckets),
        "default": {"config": dict(tuning.default), "us": tuning.default_us},
        "best": None if best is None else {"config": dict(best[0]), "us": best[1]},
        "speedup": _speedup(tuning),
        "tried": len(tuning.trials.times),
        "wrong": [{"config": dict(c), "why": why} for c, why in tuning.failures.items()],
        # every configuration timed, in the order tried: what the search saw, not just won
        "trials": [
            {"config": dict(c), "us": us, **tuning.directions_us(c)}
            for c, us in tuning.trials.times.items()
        ],
    }


def _speedup(tuning: CaseTuning) -> float | None:
    best, default = tuning.best, tuning.default_us
    return None if best is None or not default else default / best[1]


def _print(tunings: list[CaseTuning], gpu: str, written: Any, op: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    from portkit.runtime.knob_choice import describe

    table = Table(title=f"portkit tune {op} on {gpu}")
    for column in (
        "case",
        "tried",
        "defaults (us)",
        "best (us)",
        "x defaults",
        "best configuration",
    ):
        table.add_column(column, justify="right" if "(" in column or column[0] in "tx" else "left")
    for t in tunings:
        best, speedup = t.best, _speedup(t)
        table.add_row(
            t.case,
            str(len(t.trials.times)),
            "-" if t.default_us is None else f"{t.default_us:.1f}",
            "-" if best is None else f"{best[1]:.1f}",
            "-" if speedup is None else f"{speedup:.2f}",
            "[red]none correct[/]" if best is None else escape(describe(dict(best[0]))),
        )
    console = make_console()
    console.print(table)
    for t in tunings:
        for config, why in t.failures.items():
            console.print(f"[red]WRONG[/] {t.case} {escape(describe(dict(config)))}: "
                          f"{escape(why.splitlines()[0] if why else '')}")  # fmt: skip
    if written:
        console.print(f"wrote {written}: commit it with the op")
