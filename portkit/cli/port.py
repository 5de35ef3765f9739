"""``portkit port OP``: draft the C CUDA twin from the prototype, optionally checking it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from portkit.cli.context import EXIT_FAILED_CHECKS, load_project, make_console, user_errors

if TYPE_CHECKING:
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op
    from portkit.results import CheckResult


@click.command("port")
@click.argument("op_name", metavar="OP")
@click.option("--kernel", "kernels", multiple=True, help="Only this kernel (repeatable).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the draft (default: the op's twin, cuda_src/OP.cu).",
)
@click.option("--force", is_flag=True, help="Replace an existing file at --out.")
@click.option(
    "--check",
    "run_check",
    is_flag=True,
    help="Also run portkit check against the draft, in a temporary copy of the project "
    "(twin-cpu and the simulator on a CPU; numba and the twin on a GPU).",
)
@user_errors
def port_command(
    op_name: str, kernels: tuple[str, ...], out: Path | None, force: bool, run_check: bool
) -> None:
    """Write a readable, templated C CUDA draft of OP's kernels (the twin).

    Types come from numba, for every signature the op's cases launch: a value whose
    type follows the input dtype is a template parameter, a fixed type stays fixed.
    Each statement names its prototype line. A construct it cannot translate is an
    #error line in the draft, listed here, and the exit code is 1. An existing file is
    only replaced with --force.

    \b
    Examples:
      portkit port my_op                  # writes cuda_src/my_op.cu
      portkit port my_op --check          # ... and checks it (exit code: check's)
      portkit port softmax --out /tmp/softmax.cu --kernel softmax_fwd
    """
    from portkit.port.command import gap_report, write_draft
    from portkit.port.draft import draft_op

    session = load_project()
    config, op = session.config, session.op(op_name)
    target = out if out is not None else config.cuda_src_dir / f"{op.name}.cu"
    draft = draft_op(op, kernels)
    write_draft(draft, target, force, config.prototypes_dir)
    click.echo(f"wrote {target} ({len(draft.kernels)} kernels)")
    if draft.gaps:
        for line in gap_report(draft):
            click.echo(line, err=True)
        click.echo(f"{len(draft.gaps)} constructs not translated: see the #error lines", err=True)
        sys.exit(EXIT_FAILED_CHECKS)
    if run_check:
        sys.exit(_check(config, op, draft.text))


def _check(config: ProjectConfig, op: Op, text: str) -> int:
    """Check ``op`` with ``text`` as its twin in a temporary copy of the project."""
    from portkit.cli.render import print_results

    results = check_draft(config, op, text)
    failed = print_results(results, make_console(), verbose=False)
    verdict = "fails" if failed else "passes"
    click.echo(f"draft of {op.name} {verdict} portkit check")
    return EXIT_FAILED_CHECKS if failed else 0


def check_draft(config: ProjectConfig, op: Op, text: str) -> list[CheckResult]:
    """portkit check's results for ``op`` with ``text`` as its twin, run in a temporary
    copy of the project (prototypes and twins; the cache is shared, its keys hold the
    sources): twin-cpu and the simulator without a GPU, numba and the twin with one."""
    import dataclasses
    import shutil
    import tempfile

    import torch

    from portkit.backends import create_all
    from portkit.checking.harness import plan_suite, run_suite
    from portkit.project.config import load_config
    from portkit.project.session import Session

    gpu = torch.cuda.is_available()
    with tempfile.TemporaryDirectory(prefix="portkit-port-") as tmp:
        root = Path(tmp)
        pyproject = config.root / "pyproject.toml"
        if pyproject.is_file():
            shutil.copy2(pyproject, root / "pyproject.toml")
        else:
            (root / "pyproject.toml").write_text("[tool.portkit]\n")
        for folder in (config.prototypes_dir, config.cuda_src_dir):
            copy = root / folder.relative_to(config.root)
            if folder.is_dir():
                shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
            copy.mkdir(parents=True, exist_ok=True)
        copied = dataclasses.replace(
            load_config(root), cache_dir=config.cache_dir, settings=config.settings
        )
        (copied.cuda_src_dir / f"{op.name}.cu").write_text(text)
        drafted = Session.of(copied).op(op.name)
        backends = create_all(copied, ["numba", "twin"] if gpu else ["sim", "twin-cpu"])
        plan = plan_suite([drafted], set(), skip_large=not gpu)
        return run_suite(plan, backends, copied)
