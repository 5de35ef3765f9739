"""The sanitizer tier's child process, run under compute-sanitizer once per tool::

    python -m portkit.sanitize.child --tool T --results FILE [--case NAME]... OP...

A fresh process, so a kernel that faults cannot poison the parent's CUDA context, and so
the sanitizer sees every launch from the first. It runs the GPU checks of the ops (twin
and numba, no compile checks) through the harness with ``prepare_checks``' settings,
writes the results to FILE (handoff.py), then prints the failures and the counts for the
raw log. Exit 0: nothing failed; 1: a check failed; 2: a mistake (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from portkit.errors import PortkitError
from portkit.sanitize.handoff import write_results
from portkit.sanitize.tools import TOOLS, prepare_checks

if TYPE_CHECKING:
    from portkit.results import CheckResult

MODULE = "portkit.sanitize.child"  # this module, as `python -m` names it
BACKENDS = ("twin", "numba")  # the implementations that run on a GPU
EXIT_FAILED, EXIT_MISTAKE = 1, 2


def child_command(
    tool: str, op_names: Sequence[str], case_names: Sequence[str], results: Path
) -> list[str]:
    """The command line of the child that checks ``op_names`` under ``tool``."""
    cases = [arg for name in case_names for arg in ("--case", name)]
    options = ["--tool", tool, "--results", str(results), *cases]
    return [sys.executable, "-m", MODULE, *options, *op_names]


def run_checks(tool: str, op_names: Sequence[str], case_names: Sequence[str]) -> list[CheckResult]:
    """The checks of ``op_names`` (their cases named ``case_names``, if any) on the GPU
    backends, set up for running under ``tool``."""
    from portkit.backends import create_all
    from portkit.checking.harness import plan_suite, run_suite
    from portkit.project.session import Session

    # the environment carries the parent's settings (--no-cache & co)
    session = Session.from_environment()
    config = session.config
    plan = plan_suite([session.op(name) for name in op_names], set(case_names))
    backends = create_all(config, list(BACKENDS))
    settings = prepare_checks(tool, backends)
    return run_suite(plan, backends, config, compile_first=False, settings=settings)


def print_summary(results: Sequence[CheckResult]) -> None:
    """The failures and the counts, as ``portkit check`` prints them (the parent shows
    the last line in its table; the rest stays in the kept output)."""
    from portkit.results import Outcome

    for r in results:
        if r.status == Outcome.FAIL:
            print(f"FAIL {r.op} / {r.backend} / {r.check} / {r.case}\n  {r.detail}")
    counts = {s: sum(r.status == s for r in results) for s in Outcome}
    print(
        f"{counts[Outcome.PASS]} passed, {counts[Outcome.FAIL]} failed, "
        f"{counts[Outcome.SKIP]} skipped"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portkit.sanitize.child")
    parser.add_argument("--tool", required=True, choices=TOOLS)
    parser.add_argument("--results", required=True, type=Path, help="where the results go")
    parser.add_argument("--case", dest="cases", action="append", default=[])
    parser.add_argument("ops", nargs="+", metavar="OP")
    args = parser.parse_args(argv)
    try:
        results = run_checks(args.tool, args.ops, args.cases)
    except PortkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_MISTAKE
    write_results(args.results, results)
    print_summary(results)
    return EXIT_FAILED if any(r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
