"""What ``portkit mutate`` says: the mutants' table, each op's score, the JSON document
and the exit rule (the share of judged mutants that survived)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from portkit.mutate.model import KILLED, KINDS, STILLBORN, SURVIVED, MutantResult

if TYPE_CHECKING:
    from rich.console import Console


@dataclass
class OpScore:
    op: str
    results: list[MutantResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # sides not mutated here, and why
    generated: int = 0  # mutants found before --limit

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def judged(self) -> int:
        """Mutants that compiled and ran: the survivors' share is of these."""
        return self.count(KILLED) + self.count(SURVIVED)

    @property
    def survival(self) -> float:
        return self.count(SURVIVED) / self.judged if self.judged else 0.0

    def killers(self) -> Counter[str]:
        """Which check killed how many: backend and check (the case aside)."""
        return Counter(
            " ".join(r.by.split(" ")[:2]) for r in self.results if r.status == KILLED
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "op": self.op,
            "generated": self.generated,
            "run": len(self.results),
            "killed": self.count(KILLED),
            "survived": self.count(SURVIVED),
            "stillborn": self.count(STILLBORN),
            "survival": round(self.survival, 4),
            "killed_by": dict(self.killers()),
            "skipped": self.skipped,
            "mutants": [r.as_dict() for r in self.results],
        }


def too_many_survivors(scores: Sequence[OpScore], max_share: float) -> list[str]:
    """The ops whose survivors are more than ``max_share`` of their judged mutants."""
    return [s.op for s in scores if s.judged and s.survival > max_share]


def print_scores(scores: Sequence[OpScore], console: Console, verbose: bool) -> None:
    """A row per mutant (killed ones only with -v), then one summary line per op."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_lines=False)
    for column in ("op", "where", "kind", "mutant", "status", "by / hint"):
        table.add_column(column, overflow="fold")
    shown = 0
    for score in scores:
        for r in score.results:
            if r.status == KILLED and not verbose:
                continue
            m = r.mutant
            style = {KILLED: "green", SURVIVED: "red", STILLBORN: "yellow"}[r.status]
            said = r.by if r.status == KILLED else r.detail
            if r.status == KILLED and r.detail:
                said = f"{r.by}: {r.detail}"
            table.add_row(
                score.op,
                m.where,
                m.kind,
                escape(m.description),
                f"[{style}]{r.status}[/]",
                escape(said),
            )
            shown += 1
    if shown:
        console.print(table)
    for score in scores:
        for line in score.skipped:
            console.print(f"{score.op}: {line}", soft_wrap=True)
        console.print(summary_line(score), soft_wrap=True)


def summary_line(score: OpScore) -> str:
    killers = ", ".join(f"{n} by {k}" for k, n in score.killers().most_common())
    limited = f" (of {score.generated} generated)" if score.generated > len(score.results) else ""
    return (
        f"{score.op}: {len(score.results)} mutants{limited}: {score.count(KILLED)} killed"
        f"{f' ({killers})' if killers else ''}, {score.count(SURVIVED)} survived "
        f"({score.survival:.0%} of those that ran), {score.count(STILLBORN)} stillborn"
    )


def by_kind(scores: Sequence[OpScore]) -> dict[str, Counter[str]]:
    """kind -> status counts over every op (the docs' table)."""
    table: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
    for score in scores:
        for r in score.results:
            table[r.mutant.kind][r.status] += 1
    return table
