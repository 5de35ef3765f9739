"""What ``portkit watch`` shows: per op its verdict, its first mismatch or fault (kernel,
block, thread, line) and how long its re-run took, with the run's rebuilds underneath.
On a terminal a live table (rich ``Live``) redrawn after every case; elsewhere (a log, a
pipe, a test) one plain line per op as its verdict is known, and one per run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from portkit.results import Outcome
from portkit.watch.model import OpVerdict, Rerun

if TYPE_CHECKING:
    from rich.console import Console

_STYLE = {
    Outcome.PASS: "green",
    Outcome.FAIL: "red",
    Outcome.ERROR: "red",
    Outcome.SKIP: "dim",
    Outcome.RUNNING: "yellow",
}


def op_line(verdict: OpVerdict) -> str:
    problems = verdict.problems
    first = f": {problems[0].line()}" if problems else ""
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{verdict.op} {verdict.status.label} in {verdict.seconds:.2f} s{first}{more}"


def run_line(rerun: Rerun) -> str:
    rebuilt = []
    if rerun.reimported:
        rebuilt.append(f"re-imported {', '.join(rerun.reimported)}")
    if rerun.recompiled:
        rebuilt.append(f"compiled {', '.join(rerun.recompiled)}")
    first = f", first verdict {rerun.first_verdict:.2f} s" if rerun.first_verdict else ""
    what = "; ".join(rebuilt) or "nothing rebuilt"
    return f"run {rerun.number}: {rerun.seconds:.2f} s{first}; {what}"


class PlainView:
    """One line per op when its verdict is in, and one per run."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._said: set[str] = set()

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def progress(self, rerun: Rerun) -> None:
        for name, verdict in rerun.verdicts.items():
            key = f"{rerun.number}:{name}"
            if verdict.done and key not in self._said:
                self._said.add(key)
                self.console.print(op_line(verdict), markup=False, soft_wrap=True)

    def finished(self, rerun: Rerun) -> None:
        self.progress(rerun)
        self._said.clear()
        self.console.print(run_line(rerun), markup=False, soft_wrap=True)

    def waiting(self, paths: list[Any]) -> None:
        self.console.print("watching for changes (Ctrl-C to stop)", soft_wrap=True)


class LiveView:
    """A table that keeps every op's latest verdict, redrawn as cases finish."""

    def __init__(self, console: Console, mode: str) -> None:
        from rich.live import Live

        self.console, self.mode = console, mode
        self.latest: dict[str, OpVerdict] = {}
        self._footer = "starting"
        self._live = Live(console=console, auto_refresh=False, transient=False)

    def __enter__(self) -> LiveView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(None, None, None)

    def _table(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"portkit watch ({self.mode})", title_justify="left", expand=True)
        table.add_column("op", no_wrap=True)
        table.add_column("verdict", no_wrap=True)
        table.add_column("time", justify="right", no_wrap=True)
        table.add_column("first mismatch or fault", ratio=1)
        for name in sorted(self.latest):
            v = self.latest[name]
            problems = v.problems
            table.add_row(
                name,
                Text(v.status.label, style=_STYLE[v.status]),
                f"{v.seconds:.2f} s",
                Text(problems[0].line(400) if problems else "", overflow="fold"),
            )
        table.caption, table.caption_justify = self._footer, "left"
        return table

    def progress(self, rerun: Rerun) -> None:
        self.latest.update(rerun.verdicts)
        self._footer = f"run {rerun.number}: running"
        self._live.update(self._table(), refresh=True)

    def finished(self, rerun: Rerun) -> None:
        self.latest.update(rerun.verdicts)
        self._footer = run_line(rerun)
        self._live.update(self._table(), refresh=True)

    def waiting(self, paths: list[Any]) -> None:
        self._footer += " · watching for changes (Ctrl-C to stop)"
        self._live.update(self._table(), refresh=True)


def make_view(console: Console, mode: str) -> PlainView | LiveView:
    return LiveView(console, mode) if console.is_terminal else PlainView(console)
