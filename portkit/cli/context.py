"""What every command shares: exit codes, user errors as one line, the project, the
console, and parsing of --shape/--block/--thread. Heavy libraries are imported inside
functions, so ``portkit --help`` stays instant."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from portkit.errors import PortkitError

EXIT_FAILED_CHECKS = 1
EXIT_USER_ERROR = 2
# Every requested check was skipped (no GPU for --backend twin, no ops, no
# compute-sanitizer): not a pass, since nothing was checked.
EXIT_NOTHING_RAN = 3


def user_errors(command: Callable) -> Callable:
    """Turn a PortkitError into one line on stderr and exit code 2, without a traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except PortkitError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(EXIT_USER_ERROR)

    return wrapper


def json_output(as_json: bool) -> Callable[[str], None]:
    """Where a command writes its JSON document. With --json, stdout is that document
    only: for the rest of the command whatever else prints to stdout (a prototype's or a
    launcher's print()) goes to stderr, so the JSON stays parseable."""
    out = sys.stdout
    if as_json:
        click.get_current_context().with_resource(contextlib.redirect_stdout(sys.stderr))
    return lambda text: click.echo(text, file=out)


def load_project():
    """The project's configuration and its op catalog, read once per command."""
    from portkit.project.config import load_config
    from portkit.project.discovery import discover, require_project

    config = load_config()
    require_project(config)
    return config, discover(config)


def make_console(stderr: bool = False):
    """A rich console; wide when not a terminal, so logs and CI keep whole tables."""
    from rich.console import Console

    console = Console(highlight=False, stderr=stderr)
    if not console.is_terminal:
        # logs and CI: don't squeeze tables
        console = Console(highlight=False, width=200, stderr=stderr)
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
    return tuple(values + [0] * (3 - len(values)))  # type: ignore[return-value]


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"shape is like 129 or 4x129, got {text!r}") from None
    if min(shape) < 0:
        raise click.BadParameter(f"shape dimensions must be >= 0, got {text!r}")
    return shape
