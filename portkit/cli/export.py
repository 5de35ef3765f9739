"""``portkit export OP... --out DIR``: the twins as an installable package that needs
only torch and cuda-bindings at run time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from portkit.cli.context import load_project, make_console, user_errors
from portkit.errors import PortkitError

if TYPE_CHECKING:
    from portkit.project.discovery import Op

DEFAULT_ARCHS = "sm_80,sm_90,sm_100"


@click.command("export", short_help="Write an installable package of OPs' twins for torch.")
@click.argument("op_names", metavar="OP...", nargs=-1, required=True)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="New (or empty) folder to write the package project into.",
)
@click.option(
    "--arch",
    "arch",
    default=DEFAULT_ARCHS,
    show_default=True,
    help="GPU architectures to compile cubins for; PTX of the newest is added.",
)
@click.option(
    "--name", "package", default=None, help="Python package name (default: <namespace>_kernels)."
)
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@user_errors
def export_command(
    op_names: tuple[str, ...], out: Path, arch: str, package: str | None, as_json: bool
) -> None:
    """Write an installable Python package holding the twins of OP... compiled ahead of
    time (a cubin per --arch, PTX for newer GPUs), their host launchers and the
    registration of each op as torch.ops.<namespace>.<op>. Importing it needs torch and
    cuda-bindings only: no numba, no NVRTC, no portkit, no kernel compiled on a call.
    Its calls replay as portkit.load's do: its first import where a C++ compiler and
    ninja are present builds the same launch replayer once (shared with portkit's
    build); without them it replays in Python and says so in one line.

    \b
    Examples:
      portkit export sigmoid softmax --out build/my_kernels
      portkit export sigmoid --out build/k --arch sm_90 --name my_kernels
      pip install build/my_kernels/dist/*.whl      (or: pip install build/my_kernels)
      python -c "import my_kernels, torch; print(my_kernels.sigmoid(torch.randn(8).cuda()))"
    """
    from portkit.build.archs import parse_archs
    from portkit.export.names import check_package_name
    from portkit.export.package import export_package

    session = load_project()  # outside a project: one line, before any work
    config = session.config
    archs = parse_archs(arch)
    package = package or f"{config.namespace}_kernels"
    check_package_name(package)
    for name in op_names:  # what `portkit compile` fails, export refuses: before writing
        refuse_mismatched_twin(session.catalog.get(name))
    console = make_console(stderr=as_json)
    with console.status("compiling twins") as status:
        result = export_package(
            session.catalog,
            op_names,
            out,
            archs,
            package,
            on_op=lambda name: status.update(f"compiled {name}"),
        )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "out": str(result.out),
                    "package": result.package,
                    "ops": list(result.ops),
                    "archs": list(result.archs),
                    "wheel": str(result.wheel),
                }
            )
        )
        return
    console.print(
        f"wrote {result.out}: package {result.package} ({', '.join(result.ops)}) for "
        f"{', '.join(result.archs)} + PTX\n  install: pip install {result.wheel}"
    )


def refuse_mismatched_twin(op: Op) -> None:
    """A twin whose parameters do not match its launches (``portkit compile``'s signature
    check) would be packaged and fail at its first call: one line, nothing written."""
    from portkit.build.compile_checks import check_signature
    from portkit.launch.trace import traced_launches

    if not op.has_twin:
        return  # export_package says so
    try:
        traced_launches(op)  # a launcher that raises here (LauncherError) has no signature row
        result = check_signature(op)
    except Exception:  # noqa: BLE001 (launchers it cannot trace: export's own checks say why)
        return
    if result.failed:
        first = result.detail.splitlines()[0]
        raise PortkitError(
            f"op {op.name}: not exported, its twin does not match its launches: {first} "
            f"(`portkit compile {op.name}` shows every mismatch)"
        )
