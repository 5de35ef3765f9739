"""docs/cli.md, the command-line reference, generated from the click commands.

    PYTHONPATH=$PWD python scripts/cli_reference.py            # rewrite docs/cli.md
    PYTHONPATH=$PWD python scripts/cli_reference.py --check    # exit 1 if it is stale

Every command's ``--help`` text, in the order ``portkit --help`` lists them, formatted at
a fixed width so the page does not depend on the terminal that wrote it.
tests/docs/test_cli_reference.py fails when the page and the commands disagree: after
changing a command's options or help, run this and commit docs/cli.md with the change.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "cli.md"
WIDTH = 88

HEADER = """# Command-line reference

Generated from the commands' own `--help` by `scripts/cli_reference.py`; do not edit by
hand (`tests/docs/test_cli_reference.py` fails when this page is stale). Exit codes,
common to every command: 0 all checks passed; 1 a check failed; 2 a mistake, said in
one line; 3 nothing ran, or not all that was asked for ran.
"""


def render() -> str:
    """The page: ``portkit --help``, then each command's help, at ``WIDTH`` columns."""
    from portkit.cli.app import main

    # make_context applies each command's context_settings (-h as well as --help)
    root = main.make_context(
        "portkit", [], resilient_parsing=True, terminal_width=WIDTH, max_content_width=WIDTH
    )
    parts = [HEADER, "## portkit\n", fence(main.get_help(root))]
    for name in main.list_commands(root):
        command = main.get_command(root, name)
        if command is None or command.hidden:
            continue
        context = command.make_context(name, [], parent=root, resilient_parsing=True)
        parts += [f"## portkit {name}\n", fence(command.get_help(context))]
    return "\n".join(parts)


def fence(text: str) -> str:
    return f"```text\n{text.rstrip()}\n```\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md is stale")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        if PAGE.exists() and PAGE.read_text() == page:
            return 0
        print("docs/cli.md is stale: run python scripts/cli_reference.py", file=sys.stderr)
        return 1
    from portkit.atomic_write import write_atomic

    write_atomic(PAGE, page)
    print(f"wrote {PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
