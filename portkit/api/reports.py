"""What ``portkit.check``/``sim``/``diff`` return: the rows (or case diffs) as data, the
mismatches and faults found in them, and the CLI's table when printed (``str``, rich's
``__rich_console__``) or shown in Jupyter (``_repr_html_``)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from portkit.results import CheckResult, Outcome
from portkit.watch.model import Problem, diff_problems, problem_of

if TYPE_CHECKING:
    from rich.console import Console

    from portkit.diffing.model import CaseDiff

WIDTH = 140  # columns of the text a result prints as; a notebook cell holds about this many


@dataclass(repr=False)
class Report:
    op: str
    mode: str  # "check", "sim" or "diff"
    results: list[CheckResult]
    seconds: float

    @property
    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == Outcome.FAIL]

    @property
    def problems(self) -> list[Problem]:
        return [problem_of(r) for r in self.failed]

    @property
    def mismatches(self) -> list[Problem]:
        """Values that differ: which output, how many elements, where (when known)."""
        return [p for p in self.problems if p.kind == "mismatch"]

    @property
    def faults(self) -> list[Problem]:
        """Kernels or launchers that raised: out of bounds, races..., and compile errors."""
        return [p for p in self.problems if p.kind != "mismatch"]

    @property
    def warnings(self) -> list[dict]:
        """The simulator's warnings, each once: kernel, kind, detail, block, thread,
        file, line, rule, count (simt/warning_log.py); never a failure."""
        from portkit.checking.sim_warnings import distinct_warnings

        return [w for _, w in distinct_warnings(self.results)]

    @property
    def passed(self) -> bool:
        """Something ran and nothing failed."""
        return not self.problems and any(r.status == Outcome.PASS for r in self.results)

    def __bool__(self) -> bool:
        return self.passed

    def render(self, console: Console) -> None:
        from portkit.checking.table import print_results

        print_results(self.results, console, verbose=False)

    def _text(self, **options: Any) -> Console:
        from rich.console import Console

        console = Console(file=io.StringIO(), width=WIDTH, highlight=False, **options)
        self.render(console)
        return console

    def __str__(self) -> str:
        return self._text(color_system=None).file.getvalue()  # type: ignore[attr-defined]

    def __rich_console__(self, console: Console, options: Any) -> Any:
        from rich.text import Text

        ansi = self._text(force_terminal=True, color_system="standard").file.getvalue()  # type: ignore[attr-defined]
        yield Text.from_ansi(ansi)

    def _repr_html_(self) -> str:
        console = self._text(record=True)
        return console.export_html(inline_styles=True)

    def __repr__(self) -> str:
        verdict = "passed" if self.passed else f"{len(self.problems)} problem(s)"
        return f"<portkit {self.mode} {self.op}: {verdict}, {len(self.results)} rows>"


CheckReport = Report


@dataclass(repr=False)
class DiffReport(Report):
    diffs: list[CaseDiff] = field(default_factory=list)
    note: str = ""

    @property
    def problems(self) -> list[Problem]:
        return [p for d in self.diffs for p in diff_problems(self.op, d)]

    @property
    def passed(self) -> bool:
        return bool(self.diffs) and not self.problems

    def render(self, console: Console) -> None:
        from portkit.diffing.patterns import across_cases
        from portkit.diffing.report import print_diff

        print_diff(console, self.diffs, across_cases(self.diffs), self.note)
