"""What every command shares: exit codes, user errors as one line, the project's session,
the console, and parsing of --shape/--block/--thread. Heavy libraries are imported inside
functions, so ``portkit --help`` stays instant."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from portkit.errors import PortkitError

if TYPE_CHECKING:
    from rich.console import Console

    from portkit.project.session import Session

EXIT_FAILED_CHECKS = 1
EXIT_USER_ERROR = 2
# Every requested check was skipped (no GPU for --backend twin, no ops, no
# compute-sanitizer): not a pass, since nothing was checked.
EXIT_NOTHING_RAN = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process ended by Ctrl-C

# What the command is doing now ("softmax float32-3x127 (3/10)"), for Ctrl-C's line.
_work: list[str] = []


def working_on(what: str) -> None:
    """Note what runs now, so that Ctrl-C can say what it interrupted."""
    _work[:] = [what]


def user_errors(command: Callable) -> Callable:
    """Turn a PortkitError into one line on stderr and exit code 2, and Ctrl-C into one
    line saying what it interrupted and exit code 130, without a traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _work.clear()
        try:
            return command(*args, **kwargs)
        except PortkitError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(EXIT_USER_ERROR)
        except KeyboardInterrupt:
            during = f" while running {_work[0]}" if _work else ""
            click.secho(f"interrupted{during}", fg="red", err=True)
            sys.exit(EXIT_INTERRUPTED)

    return wrapper


def json_output(as_json: bool) -> Callable[[str], None]:
    """Where a command writes its JSON document. With --json, stdout is that document
    only: for the rest of the command whatever else prints to stdout (a prototype's or a
    launcher's print()) goes to stderr, so the JSON stays parseable."""
    out = sys.stdout
    if as_json:
        context = click.get_current_context()
        if _real_stdout():  # a raw os.write(1, ...) in user code: the OS level too
            out = context.with_resource(_fd1_to_stderr())
        context.with_resource(contextlib.redirect_stdout(sys.stderr))
    return lambda text: click.echo(text, file=out)


def _real_stdout() -> bool:
    """Whether sys.stdout writes to file descriptor 1 (not a test runner's buffer)."""
    try:
        return sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):
        return False


@contextlib.contextmanager
def _fd1_to_stderr() -> Iterator[Any]:
    """Point file descriptor 1 at stderr until the command ends; yields a stream on the
    original stdout, where the JSON alone goes."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    stream = open(saved, "w", closefd=False)  # noqa: SIM115 (closed below)
    try:
        yield stream
    finally:
        stream.flush()
        stream.close()
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def load_project(budget: float | None = None, strict: bool = False, **settings: Any) -> Session:
    """The command's ``Session``: the project's configuration, the environment's settings
    (read here, once) and the op catalog. ``budget`` (``--budget``) replaces the
    configuration's ``sim-budget``; ``strict`` (``--strict``) makes simulator warnings
    errors; ``settings`` change switches (``--no-cache``:
    ``prototype_cache=False``) without touching ``os.environ``."""
    from portkit.project.session import Session

    session = Session.from_environment(budget=budget, strict=strict)
    if settings:
        session.configure(**settings)
    return session


budget_option = click.option(
    "--budget",
    type=click.FloatRange(min=0, max=1e9),
    metavar="SECONDS",
    help="Stop a simulated launch that runs longer than this and name the thread and "
    "line it spins at (default: [tool.portkit] sim-budget, else 300; 0: no limit).",
)


strict_option = click.option(
    "--strict",
    is_flag=True,
    help="Simulator warnings (a barrier after threads returned, an uninitialised value "
    "never used, threads storing one value, a race the outputs do not depend on) are "
    "errors, as the CUDA C++ guide's letter has it (default: [tool.portkit] strict).",
)


def make_console(stderr: bool = False, width: int = 200) -> Console:
    """A rich console; ``width`` columns when not a terminal, so logs and CI keep whole
    tables."""
    from rich.console import Console

    console = Console(highlight=False, stderr=stderr)
    if not console.is_terminal:
        # logs and CI: don't squeeze tables
        console = Console(highlight=False, width=width, stderr=stderr)
    return console


def parse_coords(text: str | None, what: str) -> tuple[int, int, int] | None:
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise click.BadParameter(
            f"{what} is X or X,Y or X,Y,Z with integers, got {text!r}"
        ) from None
    if not 1 <= len(values) <= 3 or min(values) < 0:
        raise click.BadParameter(f"{what} is 1 to 3 non-negative integers, got {text!r}")
    x, y, z = (*values, 0, 0)[:3]
    return x, y, z


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"shape is like 129 or 4x129, got {text!r}") from None
    if min(shape) < 0:
        raise click.BadParameter(f"shape dimensions must be >= 0, got {text!r}")
    if math.prod(shape) > MAX_ELEMENTS:
        raise click.BadParameter(f"shape {text} has more than 2^40 elements")
    return shape


# Inputs of more than 2^40 elements fit in no machine's memory; seeds are what a
# torch.Generator takes (case seeds get small offsets added, so not up to 2^64).
MAX_ELEMENTS = 1 << 40
SIZE = click.IntRange(0, MAX_ELEMENTS)
SEED = click.IntRange(0, (1 << 63) - 1)
