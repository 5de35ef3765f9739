"""The sanitizer tier's findings as rich tables (rich is imported inside functions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from portkit.results import Outcome
from portkit.sanitize.runner import CLEAN, ToolRun

if TYPE_CHECKING:
    from rich.console import Console

STATUS_STYLE = {CLEAN: "green", "errors": "red", "checks failed": "red", "crashed": "red"}


def print_sanitizer(runs: Sequence[ToolRun], console: Console) -> bool:
    """One row per tool, then one row per finding; returns whether any tool failed."""
    from rich.table import Table

    tools = Table(title="compute-sanitizer", title_justify="left")
    for column in ("tool", "status", "findings", "seconds", "checks (child)", "raw log"):
        tools.add_column(column)
    for run in runs:
        style = STATUS_STYLE.get(run.status, "red")
        tools.add_row(
            run.tool,
            f"[{style}]{run.status}[/]",
            str(len(run.own_findings)),
            f"{run.seconds:.1f}",
            _last_line(run.output_path.read_text(errors="replace")),
            str(run.log_path),
        )
    console.print(tools)
    findings = [f for run in runs for f in run.findings]
    if findings:
        table = Table(title="sanitizer findings", title_justify="left")
        for column in (
            "tool",
            "op",
            "implementation",
            "kernel",
            "source",
            "block",
            "thread",
            "access",
            "size",
            "other access",
        ):
            table.add_column(column)
        for f in findings:
            table.add_row(
                f.tool,
                f.op or "[dim]-[/]",
                f.implementation or "[dim]not the project's[/]",
                f.kernel or f.signature or "?",
                f.where or "[dim]no line info[/]",
                f.block,
                f.thread,
                f.kind,
                str(f.size) if f.size else "",
                f.other,
            )
        console.print(table)
    for run in runs:
        # Plain lines too: logs and CI keep them whole, and tests can read them.
        console.print(
            f"{run.tool.upper()} {run.status}: {len(run.own_findings)} finding(s); "
            f"raw log {run.log_path}",
            soft_wrap=True,
        )
        for f in run.own_findings:
            console.print(
                f"SANITIZER {f.tool} / {f.op} / {f.implementation} / {f.kernel} / {f.where} / "
                f"block {f.block or '?'} thread {f.thread or '?'} / {f.kind}",
                soft_wrap=True,
            )
        # A check that failed under the tool, with no finding to explain it, is named here:
        # the child's own output sits in a log on the machine that ran it.
        for line in failed_checks(run.results):
            console.print(f"FAIL under {run.tool}: {line}", soft_wrap=True, markup=False)
    return any(run.failed for run in runs)


def failed_checks(results: Sequence[dict]) -> list[str]:
    """'op / backend / check / case: first line of detail' for each failed child check."""
    lines = []
    for r in results:
        if r.get("status") != Outcome.FAIL:
            continue
        detail = str(r.get("detail", "")).strip().splitlines()
        first = detail[0][:200] if detail else ""
        lines.append(
            f"{r.get('op')} / {r.get('backend')} / {r.get('check')} / {r.get('case')}: {first}"
        )
    return lines


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    summary = [line for line in lines if " passed, " in line and " failed" in line]
    if summary:
        return summary[-1]
    return lines[-1][:80] if lines else "(no output)"
