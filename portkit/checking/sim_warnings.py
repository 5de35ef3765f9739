"""Simulator warnings in check results (simt/warning_log.py, docs/simulator.md "One rule
for red"): taken from a simulated backend's machine into each ``CheckResult``, then
shown once each (kernel, kind, line) with the rule that applies, and counted."""

from __future__ import annotations

import linecache
from collections.abc import Sequence
from typing import TYPE_CHECKING

from portkit.results import CheckResult

if TYPE_CHECKING:
    from rich.console import Console

    from portkit.backends import Backend


def taken(backend: Backend) -> tuple[dict, ...]:
    """The simulator warnings ``backend``'s machine gave since the last call (none for a
    backend portkit does not simulate), as ``CheckResult.warnings`` holds them."""
    machine = backend.machine
    if machine is None:
        return ()
    found = tuple(w.as_dict() for w in machine.warnings)
    machine.warnings.clear()
    return found


def distinct_warnings(
    results: Sequence[CheckResult],
) -> list[tuple[tuple[str, str, str, str], dict]]:
    """Each simulator warning once (kernel, kind, file and line), with the first row
    (op, implementation, check, case) that gave it."""
    seen: dict[tuple, tuple[tuple[str, str, str, str], dict]] = {}
    for r in results:
        for w in r.warnings:
            key = (r.op, w["kernel"], w["kind"], w["file"], w["line"])
            seen.setdefault(key, ((r.op, r.backend, r.check, r.case), w))
    return list(seen.values())


def print_warning(console: Console, warning: dict, where: str = "") -> None:
    """One simulator warning: kind, kernel, detail, thread and line, and its rule."""
    times = f" ({warning['count']} times)" if warning["count"] > 1 else ""
    head = f"{where}: " if where else ""
    from rich.text import Text

    title = f" {head}[{warning['kind']}] kernel {warning['kernel']}"
    console.print(Text.assemble(("warning", "yellow"), title))
    console.print(f"  {warning['detail']}{times}", markup=False)
    if warning["file"]:
        source = linecache.getline(warning["file"], warning["line"]).strip()
        console.print(
            f"  at block {tuple(warning['block'])}, thread {tuple(warning['thread'])}, "
            f"{warning['file']}:{warning['line']}: {source}",
            markup=False,
        )
    console.print(f"  rule: {warning['rule']}; --strict makes it an error", markup=False)
