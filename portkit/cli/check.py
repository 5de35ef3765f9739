"""``portkit check``: the equivalence and gradcheck suite on every backend this machine has,
and with ``--sanitize`` the same GPU checks under NVIDIA compute-sanitizer."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import click

from portkit.cli.context import (
    EXIT_FAILED_CHECKS,
    EXIT_NOTHING_RAN,
    budget_option,
    json_output,
    load_project,
    make_console,
    strict_option,
    user_errors,
)

if TYPE_CHECKING:
    from rich.console import Console

    from portkit.checking.seeds import WorstMargin
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op
    from portkit.results import CheckResult


class BackendState(Protocol):
    """What the exit rule asks of a backend: a ``Backend`` here, or a worker's account
    of one (``portkit.checking.parallel.handoff.BackendState``) under ``-j N``."""

    @property
    def name(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def unavailable_reason(self) -> str | None: ...
PHASES = ("all", "cpu", "gpu")  # checking/verdicts/phases.py (kept here: --help stays light)
# compute-sanitizer tools; kept here (not imported from portkit.sanitize) so --help
# stays free of anything but click. tests/sanitize/test_sanitize_cli.py checks they agree.
SANITIZER_CHOICES = ("memcheck", "racecheck", "initcheck", "synccheck", "all")
# `--sanitize` on a machine without compute-sanitizer or a GPU: nothing was checked.
EXIT_SANITIZER_SKIPPED = EXIT_NOTHING_RAN


@click.command(short_help="Check OPs against the reference on every backend this machine has.")
@click.argument("op_names", metavar="[OP]...", nargs=-1)
@click.option("--all", "all_ops", is_flag=True, help="Check every op of the project.")
@click.option(
    "--backend",
    "backend_names",
    multiple=True,
    help="Only these backends (repeatable or comma-separated): torch, sim, numba, twin, "
    "twin-cpu, numba-sim, or a third party's (from [tool.portkit] backends or an installed "
    "package's portkit.backends entry point; docs/add-a-backend.md). Default: all but "
    "numba-sim (numba's simulator, a cross-check) and those that ask to be named.",
)
@click.option("--case", "case_names", multiple=True, help="Only cases with this name (repeatable).")
@click.option("--no-compile", is_flag=True, help="Skip the sm_90 compile checks.")
@click.option(
    "--quick",
    is_flag=True,
    help="Skip the GPU-sized cases (2^24 elements, 4096x4096), which on a CPU run in the "
    "simulator for 5-80 s each; a --case names one anyway.",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Run every check afresh: serve no stored verdict and store none, and compile "
    "and lint the numba prototypes afresh (neither read nor write the on-disk prototype "
    "cache and lint findings; twins keep theirs). PORTKIT_PROTOTYPE_CACHE=0 and "
    "PORTKIT_VERDICT_CACHE=0 do each half.",
)
@click.option(
    "--verdicts",
    "verdicts_path",
    type=click.Path(path_type=Path),
    default=None,
    help="The verdict store to read and update (default: the cache dir's verdicts.json): "
    "a check whose key (sources, cases, tolerances, versions, GPU, seed...) is unchanged "
    "since it passed is served from it and shown as cached. CI restores and saves it "
    "as an artefact; its folder must exist.",
)
@click.option(
    "--phase",
    type=click.Choice(PHASES),
    default="all",
    show_default=True,
    help="cpu: what needs no GPU (reference gradcheck, simulator, CPU twin, compiles for "
    "every [tool.portkit] archs entry, lint); gpu: only the GPU rows (numba, twin, "
    "prototype vs twin; --sanitize), then what this machine could not run; all: both.",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="One row per case instead of per check, and where each numba kernel and the "
    "lint findings came from (the prototype cache or a compile).",
)
@click.option(
    "--sanitize",
    "sanitize",
    multiple=True,
    type=click.Choice(SANITIZER_CHOICES),
    help="Rerun the GPU checks (twin and numba) under compute-sanitizer with this tool "
    "(repeatable; all = the four). Findings are shown with op, kernel, file:line, block "
    "and thread; the raw logs are kept. Exit 3 when compute-sanitizer or a GPU is missing.",
)
@click.option(
    "--sanitize-log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where --sanitize keeps the raw logs (default: the cache dir's sanitize/<time>).",
)
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Run every case with N seeds (its own and the next N-1) and report the worst "
    "margin per check: the largest error over its bound, 1 being the bound.",
)
@click.option(
    "--first-seed",
    type=click.IntRange(min=0),
    default=0,
    metavar="K",
    help="Start at each case's K-th seed (its own + K; with --seeds N, K to K+N-1): a "
    "failing seed re-run alone, as its reproduce line says, or a long run split up.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="N",
    help="Check N ops at once, each in a worker process: workers take GPUs round robin "
    "(each sees one, as CUDA_VISIBLE_DEVICES) and share the cores. One merged table "
    "in the usual order, --json merged, the exit code the worst; a worker that crashes "
    "is a failed row for the op it was checking. With --phase and --verdicts the "
    "workers share one verdict store. Not with --sanitize.",
)
@budget_option
@strict_option
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@user_errors
def check(
    op_names: tuple[str, ...],
    all_ops: bool,
    backend_names: tuple[str, ...],
    case_names: tuple[str, ...],
    no_compile: bool,
    quick: bool,
    no_cache: bool,
    verdicts_path: Path | None,
    phase: str,
    verbose: bool,
    sanitize: tuple[str, ...],
    sanitize_log_dir: Path | None,
    as_json: bool,
    seeds: int = 1,
    first_seed: int = 0,
    jobs: int = 1,
    budget: float | None = None,
    strict: bool = False,
) -> None:
    """Run the equivalence and gradcheck suite for OPs on every backend this machine has.

    On a CPU-only machine: the reference's gradcheck, the prototype in the simulator,
    the twin compiled for the CPU (twin-cpu: needs g++ or clang++; built with
    AddressSanitizer, each launch run with threads forward and reversed) against both,
    and compile checks for sm_90. On a GPU machine also: the prototype compiled by
    numba, the twin, and prototype against twin. Every tensor a kernel sees sits between
    guard zones; a store past its end fails the check. Exits 1 if any check fails,
    3 if nothing ran (every requested check skipped, e.g. --backend twin without a GPU,
    or no ops) or a backend named with --backend did not run (sim,twin without a GPU),
    with one line saying why. Simulator warnings (what the CUDA C++ guide leaves undefined
    but GPUs run right) are shown and counted, never a failure unless --strict or
    [tool.portkit] strict = true; --json lists them per result.

    \b
    Examples:
      portkit check sigmoid
      portkit check --all --quick          # without the GPU-sized cases
      portkit check --all --backend sim
      portkit check softmax --case float64-gradcheck -v
      portkit check vector_add --sanitize memcheck
      portkit check --all --sanitize all --json
      portkit check --all --quick --seeds 20  # the worst margin of each check
      portkit check --all -j 4             # 4 ops at once, over the machine's GPUs
      portkit check --all --phase cpu --verdicts ci/verdicts.json  # hosted runner
      portkit check --all --phase gpu --verdicts ci/verdicts.json  # GPU runner

    A check that passed before and whose key is unchanged is not run again but shown as
    cached (counted apart; --no-cache runs everything); docs/verdict-cache.md.
    """
    from portkit.backends import create_all
    from portkit.checking.harness import plan_suite
    from portkit.checking.seeds import run_seeds, seeds_label
    from portkit.checking.verdicts.phases import phase_backends
    from portkit.checking.verdicts.serve import open_verdicts
    from portkit.cli.render import progress_bar

    emit = json_output(as_json)
    session = load_project(budget, strict, **({"prototype_cache": False} if no_cache else {}))
    config, catalog = session.config, session.catalog
    if all_ops == bool(op_names):
        raise click.UsageError("name one or more OPs, or pass --all")
    ops = [catalog.get(n) for n in (catalog.names if all_ops else op_names)]
    if not ops:
        click.echo(f"nothing ran: no ops in {config.prototypes_dir}", err=True)
        sys.exit(EXIT_NOTHING_RAN)
    for op in ops if op_names and case_names else ():
        # An op named with --case that has none of those cases would be skipped unseen.
        if not op.has_any_case(case_names):
            op.case(case_names[0])  # raises, naming the op and listing its cases
    plan = plan_suite(ops, set(case_names), skip_large=quick)
    console = make_console(stderr=as_json)
    if jobs > 1 and sanitize:
        raise click.UsageError("-j N runs in worker processes; drop it with --sanitize")
    if sanitize:
        if backend_names:
            raise click.UsageError("--sanitize runs the twin and numba backends; drop --backend")
        _sanitize(
            config, ops, case_names, sanitize, sanitize_log_dir, emit if as_json else None, console
        )
        return
    names = [name.strip() for item in backend_names for name in item.split(",") if name.strip()]
    if backend_names and not names:
        raise click.UsageError("--backend needs a backend name, e.g. --backend sim")
    out = emit if as_json else None
    margins: list = []
    label = seeds_label(seeds, first_seed)
    if jobs > 1:
        from portkit.cli.check_jobs import check_jobs

        results, states, lines, margins = check_jobs(
            config, plan, names, case_names, quick, no_compile, verbose, jobs, console,
            phase=phase, verdicts=verdicts_path, use_verdicts=not no_cache, seeds=seeds,
            first_seed=first_seed,
        )  # fmt: skip
        _report(results, states, lines, names, margins, label, verbose, console, out, phase, config)
    backends = phase_backends(create_all(config, names or None), phase)
    if not backends:
        raise click.UsageError(f"--phase {phase} runs none of the backends named with --backend")
    verdicts = open_verdicts(config, verdicts_path, not no_cache)
    compile_first = not no_compile and phase != "gpu"
    steps = len(plan) * seeds + (len(ops) if compile_first else 0)
    with progress_bar(console, steps, "checking") as advance:
        common: dict[str, Any] = {
            "compile_first": compile_first,
            "advance": advance,
            "reuse": verdicts,
            "op_notes": phase != "gpu",
        }
        results, margins = run_seeds(plan, backends, config, seeds, first=first_seed, **common)
    if verdicts is not None:
        verdicts.store.save()
    report: list[str] = []
    if verbose:
        for backend in backends:
            report += backend.engine_report()
            if backend.reports_cache and not backend.unavailable_reason:
                report += backend.cache_report(ops)
    _report(results, backends, report, names, margins, label, verbose, console, out, phase, config)


def _report(
    results: Sequence[CheckResult],
    backends: Sequence[BackendState],
    report: Sequence[str],
    names: Sequence[str],
    margins: Sequence[WorstMargin],
    seeds: str,  # the run's seeds, as the worst-margin heading says them
    verbose: bool,
    console: Console,
    emit: Callable[[str], None] | None,
    phase: str,
    config: ProjectConfig,
) -> NoReturn:
    """The table, the lines under it, the JSON (``emit``: where, None without --json)
    and the exit code, however the rows ran (``backends``: those that ran them)."""
    from portkit.cli.check_phases import print_unreachable
    from portkit.cli.render import print_results

    failed = print_results(results, console, verbose)
    if phase == "gpu":
        print_unreachable(config, console)
    if margins:
        console.print(f"worst margin per check over {seeds} (1 = the bound):")
        for worst in margins:
            console.print(f"  {worst.line()}", soft_wrap=True, markup=False)
    idle = None if failed else nothing_ran(results)
    if idle:
        console.print(f"nothing ran: {idle}", soft_wrap=True)
    unrun = not_run(results, [b for b in backends if names])
    if unrun and not idle:
        why = "a requested backend that did not run is not a pass"
        console.print(f"not run: {unrun}; {why}", soft_wrap=True)
    for line in report:
        console.print(line, soft_wrap=True)
    if emit:
        from dataclasses import asdict

        from portkit.checking.sim_warnings import distinct_warnings

        document: dict = {
            "results": [_finite(asdict(r)) for r in results],
            "warnings": len(distinct_warnings(results)),  # as the summary line counts them
            "cached": sum(r.cached for r in results),  # passes served from the store
            "phase": phase,
        }
        if margins:
            document["worst_margins"] = [_finite(asdict(w)) for w in margins]
        emit(json.dumps(document, indent=1))
    sys.exit(EXIT_FAILED_CHECKS if failed else EXIT_NOTHING_RAN if idle or unrun else 0)


def _finite(row: dict) -> dict:
    """Strict JSON has no Infinity: a margin past every bound (NaN/Inf where the other
    side differs) is written "inf"."""
    margin = row.get("margin")
    if isinstance(margin, float) and margin == float("inf"):
        row["margin"] = "inf"
    return row


def nothing_ran(results: Sequence[CheckResult]) -> str | None:
    """Why nothing was checked, else None: every case row skipped (the compile and lint
    rows, case "all", do not count then: they are not what was asked), or no row at all."""
    from portkit.results import Outcome

    rows = [r for r in results if r.case != "all"]
    if any(r.status in (Outcome.PASS, Outcome.FAIL) for r in rows):
        return None
    if not rows:  # no case for these backends: the compile and lint rows are the check
        ran = any(r.status in (Outcome.PASS, Outcome.FAIL) for r in results)
        return None if ran else "no case matched the ops, --case and --quick given"
    reasons: dict[str, str] = {}
    for r in rows:
        reasons.setdefault(r.backend, r.detail.splitlines()[0] if r.detail else "skipped")
    why = "; ".join(f"{backend}: {reason}" for backend, reason in reasons.items())
    return f"all {len(rows)} checks were skipped ({why})"


def not_run(results: Sequence[CheckResult], requested: Sequence[BackendState]) -> str | None:
    """The backends named with --backend that checked no case, with why, else None (the
    reference's own rows are gradchecks an op may not have: they are not asked for)."""
    from portkit.results import Outcome

    missing = []
    for backend in requested:
        rows = [r for r in results if r.base_backend == backend.name and r.case != "all"]
        if any(r.status in (Outcome.PASS, Outcome.FAIL) for r in rows):
            continue
        why = backend.unavailable_reason
        if why is None and rows and backend.role != "reference":
            why = rows[0].detail.splitlines()[0] if rows[0].detail else "skipped"
        if why is not None:
            missing.append(f"{backend.name} ({why})")
    return "; ".join(missing) or None


def _sanitize(
    config: ProjectConfig,
    ops: Sequence[Op],
    case_names: Sequence[str],
    tools: Sequence[str],
    log_dir: Path | None,
    emit: Callable[[str], None] | None,
    console: Console,
) -> None:
    """``emit``: where the JSON report goes, None without --json."""
    import time

    from portkit.cli.render import progress_bar
    from portkit.sanitize.report import print_sanitizer
    from portkit.sanitize.runner import run_tools
    from portkit.sanitize.tools import expand, skip_reason

    selected = expand(tools)
    reason = skip_reason()
    if reason:
        console.print(f"SKIP sanitizer ({', '.join(selected)}): {reason}", soft_wrap=True)
        if emit:
            emit(json.dumps({"sanitizer": [], "skipped": reason}))
        sys.exit(EXIT_SANITIZER_SKIPPED)
    log_dir = log_dir or config.cache_dir / "sanitize" / time.strftime("%Y%m%d-%H%M%S")
    if case_names:  # the child names its ops, and a named op must have the cases asked for
        ops = [op for op in ops if op.has_any_case(case_names)]
    kernels_of = {op.name: sorted(op.kernels) for op in ops}
    with progress_bar(console, len(selected)) as advance:
        runs = run_tools(
            selected,
            [op.name for op in ops],
            case_names,
            kernels_of,
            Path(log_dir),
            config.root,
            advance,
            environment=config.settings.as_environment(),  # the child's --no-cache & co
        )
    failed = print_sanitizer(runs, console)
    console.print(f"raw logs: {log_dir}", soft_wrap=True)
    if emit:
        report = {"log_dir": str(log_dir), "sanitizer": [run.as_dict() for run in runs]}
        emit(json.dumps(report, indent=1))
    sys.exit(EXIT_FAILED_CHECKS if failed else 0)
