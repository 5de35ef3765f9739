"""What a re-run found, as data: per op a verdict, the rows or diffs behind it, and its
problems (a mismatch or a fault, with kernel, block, thread and line where its producer
knew them). ``portkit watch`` shows these; the notebook API's results expose them.

Everything here is read from fields: a row's ``stage``, ``site`` and ``mismatch``
(results.py), a diff's writer, a load error's site; never from a message's text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from portkit.results import CheckResult, FailureSite, Outcome, Stage, ValueMismatch

if TYPE_CHECKING:
    from portkit.diffing.model import CaseDiff
    from portkit.errors import PortkitError


@dataclass(frozen=True)
class Problem:
    """The first thing wrong in one case: ``kind`` is "mismatch" (values differ), "fault"
    (a kernel or launcher raised: out of bounds, race...), "compile" or "error" (the op
    does not load: a syntax error, with its line)."""

    kind: str
    op: str
    case: str
    backend: str
    check: str
    text: str  # the whole message
    kernel: str | None = None
    block: tuple[int, int, int] | None = None
    thread: tuple[int, int, int] | None = None
    where: str | None = None  # file:line
    mismatch: ValueMismatch | None = None  # which tensor, how many of its values differ

    def line(self, width: int = 160) -> str:
        """One line: where it happened, then the message's first line."""
        places = [
            f"kernel {self.kernel}" if self.kernel else "",
            f"block {self.block}" if self.block else "",
            f"thread {self.thread}" if self.thread else "",
            _short(self.where) if self.where else "",
        ]
        head = " / ".join(p for p in (self.backend, self.check, self.case) if p)
        first = self.text.splitlines()[0] if self.text else ""
        if self.kernel:  # said among the places already
            first = first.removeprefix(f"kernel {self.kernel}: ")
        text = f"{head}: " + ", ".join(p for p in places if p) + (": " if any(places) else "")
        text += first
        return text if len(text) <= width else text[: width - 1] + "…"


def _short(where: str) -> str:
    """file:line with the file's name only (the message keeps the whole path)."""
    path, _, line = where.rpartition(":")
    return f"{path.rsplit('/', 1)[-1]}:{line}"


def problem_of(result: CheckResult) -> Problem:
    """A failed row as a problem: its kind from the row's stage and mismatch, where it
    happened from the row's site."""
    if result.stage is Stage.COMPILE:
        kind = "compile"
    else:
        kind = "mismatch" if result.mismatch is not None else "fault"
    head = (kind, result.op, result.case, result.backend, result.check, result.detail)
    return Problem(*head, *_places(result.site), mismatch=result.mismatch)


def _places(
    site: FailureSite | None,
) -> tuple[str | None, tuple[int, int, int] | None, tuple[int, int, int] | None, str | None]:
    """A site as a problem's kernel, block, thread and file:line."""
    if site is None:
        return None, None, None, None
    return site.kernel, site.block, site.thread, site.where


def diff_problems(op: str, diff: CaseDiff) -> list[Problem]:
    """A diffed case's problems: the case that could not run, else each differing
    tensor's first mismatch with the thread and line that wrote it."""
    check = f"{diff.prototype} vs {diff.other}"
    if diff.error:
        head = ("fault", op, diff.case.name, diff.prototype, check, diff.error)
        return [Problem(*head, *_places(diff.error_site))]
    found = []
    for tensor in diff.tensors:
        if not tensor.mismatches:
            continue
        first = tensor.first[0] if tensor.first else None
        writer = first.writer if first else None
        text = f"{tensor.name}: {tensor.mismatches} of {tensor.total} elements differ"
        if first is not None:
            text += f"; first at {list(first.index)}: {first.prototype:.7g} vs {first.other:.7g}"
        found.append(
            Problem(
                "mismatch",
                op,
                diff.case.name,
                diff.prototype,
                check,
                text,
                writer.kernel if writer else None,
                writer.block if writer else None,
                writer.thread if writer else None,
                f"{writer.file}:{writer.line}" if writer else None,
                ValueMismatch(tensor.name, tensor.mismatches, tensor.total),
            )
        )
    return found


@dataclass
class OpVerdict:
    """One op in one re-run: its rows (check, sim) or case diffs (diff), or why it did not
    load. ``done`` is False while its cases are still running."""

    op: str
    mode: str
    results: list[CheckResult] = field(default_factory=list)
    diffs: list[CaseDiff] = field(default_factory=list)
    error: str = ""
    exception: PortkitError | None = None  # the error, for the API to raise
    error_site: FailureSite | None = None  # where the error happened (a syntax error's line)
    seconds: float = 0.0
    done: bool = False

    @property
    def problems(self) -> list[Problem]:
        if self.error:
            where = self.error_site.where if self.error_site else None
            return [Problem("error", self.op, "", "", "load", self.error, where=where)]
        found = [problem_of(r) for r in self.results if r.status == Outcome.FAIL]
        for diff in self.diffs:
            found += diff_problems(self.op, diff)
        return found

    @property
    def status(self) -> Outcome:
        """PASS, FAIL, ERROR (did not load), SKIP (nothing ran) or RUNNING."""
        if self.error:
            return Outcome.ERROR
        if self.problems:
            return Outcome.FAIL
        if not self.done:
            return Outcome.RUNNING
        ran = any(r.status == Outcome.PASS for r in self.results) or bool(self.diffs)
        return Outcome.PASS if ran else Outcome.SKIP

    def failed_cases(self) -> set[str]:
        return {p.case for p in self.problems}


@dataclass
class Rerun:
    """One run of the watch: which ops' modules were imported again and which twins
    compiled (the rebuild log), the verdicts of the ops the change touched, and times
    from the run's start (the first verdict: the first case of the first op)."""

    number: int
    reimported: list[str] = field(default_factory=list)
    recompiled: list[str] = field(default_factory=list)
    verdicts: dict[str, OpVerdict] = field(default_factory=dict)
    seconds: float = 0.0
    first_verdict: float | None = None

    @property
    def failed(self) -> bool:
        return any(v.status.bad for v in self.verdicts.values())
