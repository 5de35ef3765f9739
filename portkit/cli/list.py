"""``portkit list``: every op, its kernels and twin, and which backends can run it here."""

from __future__ import annotations

import click

from portkit.cli.context import json_output, load_project, make_console, user_errors


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@user_errors
def list_ops(as_json: bool) -> None:
    """List every op with its kernels, twin and the backends that can run it here."""
    from portkit.backends import create_all
    from portkit.cli.render import op_listing

    emit = json_output(as_json)
    session = load_project()
    config, catalog = session.config, session.catalog
    backends = create_all(config)
    rows = op_listing(catalog, backends)
    if as_json:
        import json

        emit(json.dumps(rows, indent=2))
        return
    from portkit.cli.render import listing_table

    console = make_console()
    console.print(listing_table(rows, backends))
    if not catalog.names:
        console.print(f"no ops found in {config.prototypes_dir}")
