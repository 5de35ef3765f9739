"""``portkit check``'s phases: after a GPU phase, the table of what no hardware here
could run (checking/verdicts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from portkit.project.config import ProjectConfig


def print_unreachable(config: ProjectConfig, console: Console) -> None:
    """After a GPU phase: what no hardware here could run (said, never a pass)."""
    from portkit.checking.verdicts.key import gpu_identity
    from portkit.checking.verdicts.phases import unreachable

    rows = unreachable(config, gpu_identity())
    if not rows:
        return
    from rich.table import Table

    table = Table(title="not run on this machine (no hardware for it)", title_justify="left")
    table.add_column("what")
    table.add_column("why")
    for what, why in rows:
        table.add_row(what, why)
    console.print(table)
